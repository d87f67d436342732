"""The exporter's state of share partitions (KIP-932): what `__share_group_state` says now.

Pure: fed decoded `ShareStateRecord`s in topic order, no I/O. Per (group, topic id, partition)
it keeps what the share coordinator keeps: the start offset, the epochs and the in-flight
batches (offset ranges with a delivery state and count) past the start offset. A ShareSnapshot
replaces the state; a ShareUpdate is combined with it exactly as the coordinator does
(`ShareCoordinatorShard.merge` + `PersisterStateBatchCombiner`, decoder/share_combine.py):
a start offset or leader epoch of -1 means "unchanged", batches before the new start offset
are pruned and overlapping batches are resolved by delivery count, then state.

Bad input is counted by reason (`errors`) and on the partition (`problems`), never dropped
silently and never fatal:

* `update_without_snapshot`: a ShareUpdate for a partition with no snapshot yet; applied as
  Kafka applies it (the update becomes the state, `ShareGroupOffset.fromRecord`);
* `backwards_batch`: a batch whose last offset is below its first; it describes no offsets,
  so it is left out (the coordinator never writes one);
* `unknown_delivery_state`: a delivery state other than 0 (available), 2 (acknowledged) or
  4 (archived); kept, and counted as records of an unknown state.

The persisted state never says which records are acquired (Kafka persists state 1 never):
records acquired by a consumer show as available until acknowledged, released or archived.

The status window works like the consumer groups' (`WindowClock`, exporter/state/offset_state.py):
each partition keeps its start offset at the last three bucket boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from offsetwatch.decoder.records import ShareStateRecord
from offsetwatch.decoder.share_combine import Batch, combine, prune
from offsetwatch.decoder.share_state import share_partition_state
from offsetwatch.exporter.state.offset_state import NEVER, RollFrom, WindowClock

AVAILABLE: Final = 0
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4
KNOWN_STATES: Final = frozenset({AVAILABLE, ACKNOWLEDGED, ARCHIVED})
DONE_STATES: Final = frozenset({ACKNOWLEDGED, ARCHIVED})

UPDATE_WITHOUT_SNAPSHOT: Final = "update_without_snapshot"
BACKWARDS_BATCH: Final = "backwards_batch"
UNKNOWN_DELIVERY_STATE: Final = "unknown_delivery_state"
ERROR_REASONS: Final = (UPDATE_WITHOUT_SNAPSHOT, BACKWARDS_BATCH, UNKNOWN_DELIVERY_STATE)

#: (group id, topic id, partition), as `__share_group_state` keys them
ShareKey = tuple[str, str, int]


@dataclass(slots=True)
class SharePartition:
    """One share partition's state as the coordinator holds it, plus the status window."""

    start_offset: int
    state_epoch: int
    leader_epoch: int
    snapshot_epoch: int
    #: non-overlapping, in Kafka's order: (first, last, delivery count, delivery state)
    batches: list[Batch]
    #: timestamp of the last record that changed it
    updated_ms: int
    #: timestamp of the first record seen (the window evidence starts there at the latest)
    first_seen_ms: int
    #: start offset at the window start, the next boundary and the current bucket's start
    window_start: int
    next_start: int
    bucket_start: int
    #: KIP-1226 (4.2+): the coordinator's own count of done records past the start offset
    delivery_complete_count: int | None = None
    #: bad input seen for this partition, by reason (None: none)
    problems: dict[str, int] | None = None

    def counts(self) -> tuple[int, int, int, int]:
        """Records (available, acknowledged, archived, of an unknown state) in the batches."""
        available = acknowledged = archived = unknown = 0
        start = self.start_offset
        for first, last, _count, state in self.batches:
            size = last - max(first, start) + 1
            if size <= 0:
                continue
            if state == AVAILABLE:
                available += size
            elif state == ACKNOWLEDGED:
                acknowledged += size
            elif state == ARCHIVED:
                archived += size
            else:
                unknown += size
        return available, acknowledged, archived, unknown

    def max_delivery_count(self) -> int:
        return max((b[2] for b in self.batches), default=0)

    def oldest_pending(self) -> int:
        """The first offset at or past the start offset that is neither acknowledged nor
        archived (the record whose age is the queue's lag in seconds)."""
        offset = self.start_offset
        for first, last, _count, state in sorted(self.batches):
            if last < offset:
                continue
            if first > offset or state not in DONE_STATES:
                break
            offset = last + 1
        return offset

    def to_json(self) -> list[Any]:
        return [
            self.start_offset,
            self.state_epoch,
            self.leader_epoch,
            self.snapshot_epoch,
            [list(b) for b in self.batches],
            self.updated_ms,
            self.first_seen_ms,
            self.window_start,
            self.next_start,
            self.bucket_start,
            self.delivery_complete_count,
            self.problems,
        ]

    @classmethod
    def from_json(cls, data: list[Any]) -> SharePartition:
        batches = [(int(a), int(b), int(c), int(d)) for a, b, c, d in data[4]]
        problems = data[11]
        return cls(
            int(data[0]),
            int(data[1]),
            int(data[2]),
            int(data[3]),
            batches,
            int(data[5]),
            int(data[6]),
            int(data[7]),
            int(data[8]),
            int(data[9]),
            None if data[10] is None else int(data[10]),
            None if problems is None else {str(k): int(v) for k, v in problems.items()},
        )


@dataclass(slots=True)
class ShareStateStore:
    """Every share partition `__share_group_state` describes."""

    partitions: dict[ShareKey, SharePartition] = field(default_factory=dict)
    #: bad input by reason (see the module docs)
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_REASONS, 0))
    #: records applied, by kind: share_snapshot, share_update, tombstone
    applied: dict[str, int] = field(default_factory=dict)
    window_clock: WindowClock = field(default_factory=WindowClock)

    def apply(self, record: ShareStateRecord) -> None:
        key = record.key
        slot = (key.group_id, key.topic_id, key.partition)
        state = share_partition_state(record)
        if state is None:
            self._count("tombstone")
            self.partitions.pop(slot, None)
            return
        self._count("share_snapshot" if state.snapshot else "share_update")
        problems: dict[str, int] = {}
        batches: list[Batch] = []
        for b in state.batches:
            if b.last_offset < b.first_offset:
                problems[BACKWARDS_BATCH] = problems.get(BACKWARDS_BATCH, 0) + 1
                continue
            if b.delivery_state not in KNOWN_STATES:
                problems[UNKNOWN_DELIVERY_STATE] = problems.get(UNKNOWN_DELIVERY_STATE, 0) + 1
            batches.append((b.first_offset, b.last_offset, b.delivery_count, b.delivery_state))
        current = self.partitions.get(slot)
        timestamp = record.timestamp
        if state.snapshot or current is None:
            if not state.snapshot:
                problems[UPDATE_WITHOUT_SNAPSHOT] = 1
            start = state.start_offset
            # ShareGroupOffset.fromRecord: the record's batches as they are (no pruning)
            partition = SharePartition(
                start_offset=start,
                state_epoch=state.state_epoch or 0,
                leader_epoch=state.leader_epoch,
                snapshot_epoch=state.snapshot_epoch,
                batches=batches,
                updated_ms=timestamp,
                first_seen_ms=timestamp,
                window_start=start,
                next_start=start,
                bucket_start=start,
                delivery_complete_count=state.delivery_complete_count,
            )
            if current is not None:
                # a new snapshot of a known partition: its window evidence goes on
                partition.first_seen_ms = current.first_seen_ms
                partition.window_start = current.window_start
                partition.next_start = current.next_start
                partition.bucket_start = current.bucket_start
                partition.problems = current.problems
            self.partitions[slot] = partition
        else:
            partition = current
            if state.start_offset != -1:
                partition.start_offset = state.start_offset
            if state.leader_epoch != -1:
                partition.leader_epoch = state.leader_epoch
            partition.batches = combine(partition.batches, batches, partition.start_offset)
            partition.updated_ms = timestamp
            if state.delivery_complete_count is not None:
                partition.delivery_complete_count = state.delivery_complete_count
        if problems:
            own = partition.problems
            if own is None:
                own = partition.problems = {}
            for reason, n in problems.items():
                self.errors[reason] = self.errors.get(reason, 0) + n
                own[reason] = own.get(reason, 0) + n

    def _count(self, kind: str) -> None:
        self.applied[kind] = self.applied.get(kind, 0) + 1

    def clear(self) -> None:
        self.partitions.clear()

    def groups(self) -> dict[str, list[tuple[str, int, SharePartition]]]:
        """group id -> [(topic id, partition, state)], sorted."""
        out: dict[str, list[tuple[str, int, SharePartition]]] = {}
        for (group_id, topic_id, partition), state in sorted(self.partitions.items()):
            out.setdefault(group_id, []).append((topic_id, partition, state))
        return out

    def roll_windows(self, now_ms: int, window_ms: int) -> None:
        """Start a new half-window bucket at the start offsets of now (`WindowClock.roll`)."""
        new_window = self.window_clock.roll(now_ms, window_ms)
        if new_window is None:
            return
        for p in self.partitions.values():
            if new_window is RollFrom.BUCKET:
                p.window_start = p.next_start = p.bucket_start
            elif new_window is RollFrom.NEXT:
                p.window_start, p.next_start = p.next_start, p.bucket_start
            else:
                p.next_start = p.bucket_start
            p.bucket_start = p.start_offset

    # -- checkpoints ---------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        clock = self.window_clock
        return {
            "partitions": [[g, t, p, s.to_json()] for (g, t, p), s in self.partitions.items()],
            "errors": dict(self.errors),
            "applied": dict(self.applied),
            "window_clock": [clock.window_ms, clock.next_ms, clock.bucket_ms],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShareStateStore:
        store = cls()
        for group_id, topic_id, partition, state in data["partitions"]:
            store.partitions[(str(group_id), str(topic_id), int(partition))] = (
                SharePartition.from_json(state)
            )
        store.errors.update({str(k): int(v) for k, v in data["errors"].items()})
        store.applied.update({str(k): int(v) for k, v in data["applied"].items()})
        window_ms, next_ms, bucket_ms = (int(x) for x in data["window_clock"])
        store.window_clock = WindowClock(window_ms, next_ms, bucket_ms)
        return store


__all__ = [
    "ACKNOWLEDGED",
    "ARCHIVED",
    "AVAILABLE",
    "DONE_STATES",
    "ERROR_REASONS",
    "NEVER",
    "SharePartition",
    "ShareStateStore",
    "prune",
]
