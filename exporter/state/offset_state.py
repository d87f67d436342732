"""The exporter's state: what `__consumer_offsets` says right now, per group.

Pure: fed decoded records in topic order, no I/O. Two kinds of state:

* Committed offsets, the bulk (millions of (group, topic, partition) on big clusters), live in
  per-(group, topic) columnar arrays indexed by partition number: ~60 bytes per tracked
  partition instead of several hundred for an object per partition.
* Everything else (classic group metadata, KIP-848 consumer/share/streams group records) is
  kept as the latest decoded record per key - exactly what log compaction keeps - and views
  (members, state, epochs) are derived from those records when a snapshot is built.

Every tombstone removes what it deletes; a group with neither offsets nor records left is
gone, and so are its metric series.

The status window slides in half-window steps (`WindowClock`): every partition keeps its
offset at the last three bucket boundaries and its commit count per bucket, and the status is
judged from the newest boundary at least one window old. The evidence thus always covers one
to one and a half windows and never restarts from nothing at a boundary, which a tumbling
window did (a STALL read OK for a commit interval after every roll).
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from itertools import compress, repeat
from typing import Final

from offsetwatch.decoder.canonical import group_of
from offsetwatch.decoder.records import (
    GroupMemberKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RegularExpressionKey,
)
from offsetwatch.exporter.state.diagnosis_history import (
    EPOCH_TYPES,
    HISTORY_TYPES,
    GroupHistory,
    observe,
)

#: sentinel for "no rewind seen" / "never"
NEVER: Final = -1

_OFFSET_COMMIT_TYPES: Final = (0, 1)
_CLASSIC_TYPE: Final = 2
_CONSUMER_TYPES: Final = frozenset({3, 4, 5, 6, 7, 8, 16})
_SHARE_TYPES: Final = frozenset(range(9, 16))
_STREAMS_TYPES: Final = frozenset(range(17, 25))
#: one NEVER as the raw bytes of an array("q") item
_NEVER_Q: Final = array("q", [NEVER]).tobytes()


class RollFrom(Enum):
    """Which boundary becomes the window start when a bucket rolls (`roll_windows`)."""

    BUCKET = "bucket"
    NEXT = "next"
    WINDOW = "window"


@dataclass(slots=True)
class WindowClock:
    """When the status-window buckets of every partition last started (NEVER: not yet).

    Buckets are half a window long and roll for all partitions at once, so these three times
    are shared; a partition first committed after a boundary takes its first commit time
    instead (`PartitionTable.first_commit_ts`).
    """

    #: the boundary the status is judged from (at least one window ago once two rolls passed)
    window_ms: int = NEVER
    #: the boundary after it: the next window start
    next_ms: int = NEVER
    #: the start of the current bucket
    bucket_ms: int = NEVER

    def roll(self, now_ms: int, window_ms: int) -> RollFrom | None:
        """Move the boundaries when the current bucket is half a window old (see
        `OffsetState.roll_windows`); None when it is not. The share-state store rolls its
        own clock with the same rule (exporter/state/share_state.py)."""
        if self.bucket_ms != NEVER and now_ms - self.bucket_ms < max(1, window_ms // 2):
            return None
        horizon = now_ms - window_ms
        if self.bucket_ms <= horizon:
            new_window = RollFrom.BUCKET
            self.window_ms = self.next_ms = self.bucket_ms
        elif self.next_ms <= horizon:
            new_window = RollFrom.NEXT
            self.window_ms, self.next_ms = self.next_ms, self.bucket_ms
        else:
            new_window = RollFrom.WINDOW
            self.next_ms = self.bucket_ms
        self.bucket_ms = now_ms
        return new_window


class PartitionTable:
    """Committed offsets of one (group, topic), one array slot per partition number."""

    __slots__ = (
        "bucket_commits",
        "bucket_offset",
        "commit_ts",
        "committed",
        "first_commit_ts",
        "leader_epoch",
        "metadata",
        "move_ts",
        "next_commits",
        "next_offset",
        "present",
        "rewind_ts",
        "window_commits",
        "window_offset",
    )

    def __init__(self) -> None:
        self.present = bytearray()
        self.committed = array("q")
        self.commit_ts = array("q")
        self.leader_epoch = array("i")
        # The status window (see WindowClock): the offset committed at each of the three
        # bucket boundaries, and the commits from each boundary to the next (the last bucket
        # up to now); a commit counts in the bucket its commit time is in (`commit`).
        self.window_offset = array("q")
        self.window_commits = array("i")
        self.next_offset = array("q")
        self.next_commits = array("i")
        self.bucket_offset = array("q")
        self.bucket_commits = array("i")
        self.first_commit_ts = array("q")
        # last time a commit went backwards / moved the offset forward
        self.rewind_ts = array("q")
        self.move_ts = array("q")
        # commit metadata strings; allocated only once a non-empty one shows up
        self.metadata: list[str] | None = None

    def _grow(self, size: int) -> None:
        # Amortised past 64 slots: 1/8 more than asked, so a table filled partition by
        # partition grows ~90 times for 1,000 partitions, not 1,000 times (each growth
        # appends to 14 columns). Spare slots stay absent (present 0); small tables, the
        # common case, grow exactly as asked: spare slots there cost more than the growth
        # saves (1M tracked as 25-partition tables: 270 -> 301 B per partition with them).
        have = len(self.present)
        extra = (size if have < 64 else max(size, have + (have >> 3))) - have
        self.present.extend(bytes(extra))
        # appended as raw bytes: one allocation per column instead of a list of ints
        zeros8, never8 = bytes(8 * extra), _NEVER_Q * extra
        for column in (
            self.committed,
            self.commit_ts,
            self.window_offset,
            self.next_offset,
            self.bucket_offset,
            self.first_commit_ts,
        ):
            column.frombytes(zeros8)
        zeros4 = bytes(4 * extra)
        for column32 in (
            self.leader_epoch,
            self.window_commits,
            self.next_commits,
            self.bucket_commits,
        ):
            column32.frombytes(zeros4)
        for column_ts in (self.rewind_ts, self.move_ts):
            column_ts.frombytes(never8)
        if self.metadata is not None:
            self.metadata.extend([""] * extra)

    def commit(
        self, partition: int, value: OffsetCommitValue, clock: WindowClock | None = None
    ) -> None:
        """Apply one commit, counted in the bucket of `clock` its own commit time falls in.

        A replayed history (an exporter starting, a fleet replica taking a partition over)
        applies commits made long before the current bucket: counted there, a consumer that
        moved an hour ago and is stuck since read as moving within the window (WARN, not
        STALL) for a whole window. So a commit sets every boundary offset it precedes and
        counts in the bucket it is in: before the window start, in none (the judge counts
        commits from the window start on). The offset at a boundary is that of the last
        commit in log order made before it, as `committed` is the last in log order: a
        commit out of time order (clock skew between clients) overwrites the boundaries it
        precedes, and one dated after the current bucket start (or in the future) counts in
        the current bucket, as every commit did before. A negative (unknown) commit time
        counts there too. Must match apply_commits in _ingest_speedups.c.
        """
        present = self.present
        if partition >= len(present):
            self._grow(partition + 1)
        offset = value.offset
        ts = value.commit_timestamp
        # 3: the current bucket, 2: the one before it, 1: the window's first, 0: before it
        which = 3
        if clock is not None and ts >= 0 and ts < clock.bucket_ms:
            which = 2 if ts >= clock.next_ms else 1 if ts >= clock.window_ms else 0
        if present[partition]:
            previous = self.committed[partition]
            if offset < previous:
                self.rewind_ts[partition] = ts
            elif offset > previous:
                self.move_ts[partition] = ts
            if which == 3:
                self.bucket_commits[partition] += 1
            else:
                # the count first: an overflow raises before any boundary changes (as in C)
                if which == 2:
                    self.next_commits[partition] += 1
                elif which == 1:
                    self.window_commits[partition] += 1
                self.bucket_offset[partition] = offset
                if which < 2:
                    self.next_offset[partition] = offset
                    if which == 0:
                        self.window_offset[partition] = offset
        else:
            # every boundary before the first commit is taken as the first commit itself
            present[partition] = 1
            self.window_offset[partition] = offset
            self.next_offset[partition] = offset
            self.bucket_offset[partition] = offset
            self.window_commits[partition] = 1 if which == 1 else 0
            self.next_commits[partition] = 1 if which == 2 else 0
            self.bucket_commits[partition] = 1 if which == 3 else 0
            self.first_commit_ts[partition] = ts
            self.move_ts[partition] = ts
            self.rewind_ts[partition] = NEVER
        self.committed[partition] = offset
        self.commit_ts[partition] = ts
        self.leader_epoch[partition] = value.leader_epoch
        metadata = value.metadata
        if metadata or self.metadata is not None:
            if self.metadata is None:
                self.metadata = [""] * len(present)
            self.metadata[partition] = metadata

    def delete(self, partition: int) -> None:
        if partition < len(self.present):
            self.present[partition] = 0

    def __len__(self) -> int:
        return self.present.count(1)

    def partitions(self) -> Iterator[int]:
        present = self.present
        return compress(range(len(present)), present)

    def metadata_of(self, partition: int) -> str:
        return self.metadata[partition] if self.metadata is not None else ""

    def roll_window(self, new_window: RollFrom) -> None:
        """Start a new bucket at the offsets committed now (see `OffsetState.roll_windows`).

        Whole columns are swapped or copied, never walked in Python: a roll of a million
        partitions is a few array copies. Slots of absent partitions roll along with the
        rest; their values are reset by their next first commit.
        """
        if new_window is RollFrom.BUCKET:
            # the window and the next boundary are both the old bucket start: nothing between
            self.window_offset = self.bucket_offset
            self.window_commits = array("i", bytes(4 * len(self.present)))
            self.next_offset = array("q", self.bucket_offset)
            self.next_commits = self.bucket_commits
        elif new_window is RollFrom.NEXT:
            self.window_offset = self.next_offset
            self.window_commits = self.next_commits
            self.next_offset = self.bucket_offset
            self.next_commits = self.bucket_commits
        else:
            # the next boundary is not a window old yet (a shorter window than before a
            # restart): the window start stays, absorbing the bucket it ended
            window, ended = self.window_commits, self.next_commits
            self.window_commits = array("i", map(operator.add, window, ended))
            self.next_offset = self.bucket_offset
            self.next_commits = self.bucket_commits
        self.bucket_offset = array("q", self.committed)
        self.bucket_commits = array("i", bytes(4 * len(self.present)))

    def start_window(self, window_ms: int, next_ms: int) -> None:
        """The first roll of a clock that never rolled (see `OffsetState.roll_windows`).

        Everything applied before it sits in the current bucket, its boundaries at the first
        offsets: rebuilt here from what each partition keeps. The offset at a boundary is
        the committed one when it has not changed since (no move nor rewind after it), else
        unknown and left at the first offset (moved within the window, as before); the
        commits go to the bucket the newest one is in (none before the window start: a
        consumer silent for a window has no commits in it).
        """
        committed = self.committed
        commit_ts = self.commit_ts
        move_ts = self.move_ts
        rewind_ts = self.rewind_ts
        window_offset = self.window_offset
        next_offset = self.next_offset
        window_commits = self.window_commits
        next_commits = self.next_commits
        bucket_commits = self.bucket_commits
        for p in self.partitions():
            changed = max(move_ts[p], rewind_ts[p])
            if changed < window_ms:
                window_offset[p] = committed[p]
            if changed < next_ms:
                next_offset[p] = committed[p]
            ts = commit_ts[p]
            # a live roll moves the current bucket's commits to the one before, whatever
            # their times: a commit dated after now counts there as well
            if ts >= next_ms:
                next_commits[p] += bucket_commits[p]
            elif ts >= window_ms:
                window_commits[p] += bucket_commits[p]
        self.bucket_offset = array("q", committed)
        self.bucket_commits = array("i", bytes(4 * len(self.present)))

    def nbytes(self) -> int:
        size = len(self.present)
        return size * (1 + 8 * 8 + 4 * 4) + (8 * size if self.metadata is not None else 0)


@dataclass(slots=True)
class GroupState:
    group_id: str
    topics: dict[str, PartitionTable] = field(default_factory=dict)
    #: latest non-commit record per (key type, member id / regex / "")
    records: dict[tuple[int, str], Record] = field(default_factory=dict)
    commits_total: int = 0
    last_record_ts: int = NEVER
    #: rebalances, joins and leaves (exporter/state/diagnosis_history.py); None until the first
    #: group record, so commit-only groups carry nothing
    history: GroupHistory | None = None

    def is_empty(self) -> bool:
        return not self.topics and not self.records

    @property
    def kind(self) -> str:
        """CLASSIC / CONSUMER / SHARE / STREAMS, as Kafka's ListGroups types them."""
        types = {key_type for key_type, _ in self.records}
        if types & _CONSUMER_TYPES:
            return "CONSUMER"
        if types & _SHARE_TYPES:
            return "SHARE"
        if types & _STREAMS_TYPES:
            return "STREAMS"
        return "CLASSIC"

    def record(self, key_type: int, sub_key: str = "") -> Record | None:
        return self.records.get((key_type, sub_key))

    def records_of(self, key_type: int) -> Iterator[tuple[str, Record]]:
        return ((sub, rec) for (kt, sub), rec in self.records.items() if kt == key_type)


def _observe(group: GroupState, record: Record, slot: tuple[int, str]) -> None:
    """Rebalance history: a group record is compared with the one it replaces."""
    history = group.history
    if history is None:
        history = group.history = GroupHistory()
    member_type = EPOCH_TYPES.get(record.key_type)
    members = 0
    if member_type is not None:
        members = sum(1 for key_type, _ in group.records if key_type == member_type)
    observe(history, record, group.records.get(slot), members)


@dataclass(slots=True)
class ApplyCounters:
    records: int = 0
    commits: int = 0
    tombstones: int = 0
    groups_deleted: int = 0


@dataclass(slots=True)
class OffsetState:
    """All groups of a cluster as `__consumer_offsets` describes them."""

    groups: dict[str, GroupState] = field(default_factory=dict)
    counters: ApplyCounters = field(default_factory=ApplyCounters)
    window_clock: WindowClock = field(default_factory=WindowClock)

    def apply(self, record: Record) -> None:
        counters = self.counters
        counters.records += 1
        key = record.key
        if record.key_type in _OFFSET_COMMIT_TYPES:
            assert isinstance(key, OffsetCommitKey)
            self._apply_commit(key, record)
            return
        group_id = group_of(record)
        assert group_id is not None
        sub_key = ""
        if isinstance(key, GroupMemberKey):
            sub_key = key.member_id
        elif isinstance(key, RegularExpressionKey):
            sub_key = key.regular_expression
        slot = (record.key_type, sub_key)
        group = self.groups.get(group_id)
        if record.value is None:
            counters.tombstones += 1
            if group is not None:
                if record.key_type in HISTORY_TYPES:
                    _observe(group, record, slot)
                group.records.pop(slot, None)
                self._drop_if_empty(group)
            return
        if group is None:
            group = self.groups[group_id] = GroupState(group_id)
        if record.key_type in HISTORY_TYPES:
            _observe(group, record, slot)
        group.records[slot] = record
        group.last_record_ts = max(group.last_record_ts, record.timestamp)

    def apply_many(self, records: Iterable[Record]) -> None:
        """`apply` every record in order: the same state and counters, faster for commits.

        Offset commits come in runs: a group's commit request is written as consecutive
        records, one per partition, topic by topic. While only commits are applied, the
        group and table of the previous commit are kept, so a run costs one comparison of
        (group, topic) per record instead of two dict lookups, and the commit counters are
        added once at the end. Anything else (tombstones, group records) goes through
        `apply` and forgets the cached table, since it may delete tables and groups.
        `records` may be a generator that does more work between two records: nothing may
        change the state meanwhile except through this call.
        """
        groups = self.groups
        apply = self.apply
        commit_types = _OFFSET_COMMIT_TYPES
        new_group = GroupState
        new_table = PartitionTable
        clock = self.window_clock
        last_group_id = last_topic = ""
        group: GroupState | None = None
        table: PartitionTable | None = None
        commits = 0
        try:
            for record in records:
                value = record.value
                if value is None or record.key_type not in commit_types:
                    table = None
                    apply(record)
                    continue
                key: OffsetCommitKey = record.key  # type: ignore[assignment]
                group_id = key.group
                topic = key.topic
                if table is None or topic != last_topic or group_id != last_group_id:
                    group = groups.get(group_id)
                    if group is None:
                        group = groups[group_id] = new_group(group_id)
                    table = group.topics.get(topic)
                    if table is None:
                        table = group.topics[topic] = new_table()
                    last_group_id = group_id
                    last_topic = topic
                table.commit(key.partition, value, clock)  # type: ignore[arg-type]
                assert group is not None
                group.commits_total += 1
                timestamp = record.timestamp
                if timestamp > group.last_record_ts:
                    group.last_record_ts = timestamp
                commits += 1
        finally:
            counters = self.counters
            counters.records += commits
            counters.commits += commits

    def _apply_commit(self, key: OffsetCommitKey, record: Record) -> None:
        group = self.groups.get(key.group)
        value = record.value
        if value is None:
            self.counters.tombstones += 1
            if group is None:
                return
            table = group.topics.get(key.topic)
            if table is not None:
                table.delete(key.partition)
                if not len(table):
                    del group.topics[key.topic]
            self._drop_if_empty(group)
            return
        assert isinstance(value, OffsetCommitValue)
        if group is None:
            group = self.groups[key.group] = GroupState(key.group)
        table = group.topics.get(key.topic)
        if table is None:
            table = group.topics[key.topic] = PartitionTable()
        table.commit(key.partition, value, self.window_clock)
        group.commits_total += 1
        self.counters.commits += 1
        if record.timestamp > group.last_record_ts:
            group.last_record_ts = record.timestamp

    def _drop_if_empty(self, group: GroupState) -> None:
        if group.is_empty():
            del self.groups[group.group_id]
            self.counters.groups_deleted += 1

    # -- queries ---------------------------------------------------------------------------

    def tracked_partitions(self) -> set[tuple[str, int]]:
        """Every data topic-partition some group has committed to (what the sampler reads)."""
        tracked: set[tuple[str, int]] = set()
        add_all = tracked.update
        for group in self.groups.values():
            for topic, table in group.topics.items():
                add_all(zip(repeat(topic), table.partitions()))
        return tracked

    def tracked_count(self) -> int:
        return sum(len(t) for g in self.groups.values() for t in g.topics.values())

    def roll_windows(self, now_ms: int, window_ms: int) -> None:
        """Start a new half-window bucket once the current one is half a window old.

        The window the status is judged from becomes the newest boundary that is at least
        `window_ms` old. Rolled every half window, that is the boundary after the old window
        start, so the judged span stays between one and one and a half windows; after a pause
        longer than a window (the first roll, a stalled main loop) it is the old bucket start.
        """
        clock = self.window_clock
        if clock.bucket_ms == NEVER:
            # The first roll starts the clock a window and half a window back, not at now:
            # a replayed history (this exporter starting) is judged at once, from the
            # boundaries it would have had running all along, instead of a window later
            # (a stuck consumer read WARN, not STALL, for that window). Commits applied
            # from now on count in the bucket of their time (`PartitionTable.commit`);
            # those applied before are rebuilt into it (`PartitionTable.start_window`).
            clock.window_ms = now_ms - window_ms
            clock.next_ms = now_ms - max(1, window_ms // 2)
            clock.bucket_ms = now_ms
            for group in self.groups.values():
                for table in group.topics.values():
                    table.start_window(clock.window_ms, clock.next_ms)
            return
        new_window = clock.roll(now_ms, window_ms)
        if new_window is None:
            return
        for group in self.groups.values():
            for table in group.topics.values():
                table.roll_window(new_window)
