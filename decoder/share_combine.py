"""Share-partition state as Kafka's share coordinator keeps it: snapshots, updates combined.

Pure (no I/O, no third-party imports): the one place where `__share_group_state` records are
folded into a share partition's state, for every reader of that topic (the Spark lake's
`share_state` table and the exporter's `ShareStateStore`, exporter/state/share_state.py).

Kafka 4.0's share coordinator (`ShareCoordinatorShard.replay`, checked against apache/kafka):

* a ShareSnapshot replaces the state (`ShareGroupOffset.fromRecord`: its batches as they are,
  no pruning);
* a ShareUpdate with no state yet becomes the state the same way;
* a ShareUpdate on a state is merged (`ShareCoordinatorShard.merge`): snapshot and state
  epochs are kept, a start offset or leader epoch of -1 means "unchanged", and the batches are
  `PersisterStateBatchCombiner(old, new, start offset).combineStateBatches()` (`combine`);
* a tombstone removes the state.

The combiner (a port of `PersisterStateBatchCombiner`):

1. every batch ending before the start offset is dropped, a batch straddling it is cut at it
   (a start offset of -1 prunes nothing);
2. the rest is sorted as Kafka's `PersisterStateBatch.compareTo` sorts (first offset, last
   offset, delivery count, delivery state: the tuple order of `Batch`) without duplicates,
   as Kafka's TreeSet;
3. the first overlapping pair (or contiguous pair with the same delivery info) is merged, and
   repeated until none is left. Where two batches overlap, the one with the higher
   (delivery count, delivery state) wins the shared offsets.

Batches are tuples `(first_offset, last_offset, delivery_count, delivery_state)`: cheap to
sort, compare and keep (a share partition keeps up to a few hundred).

Bad input is reported, never fatal (`Applied.problems`), with the exporter's reasons:
`update_without_snapshot` (applied as Kafka applies it), `backwards_batch` (left out: it
describes no offsets), `unknown_delivery_state` (kept, counted as `unknown`).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

#: (first_offset, last_offset, delivery_count, delivery_state), in Kafka's sort order
Batch = tuple[int, int, int, int]

#: delivery states of a state batch (Kafka's RecordState ids; acquired (1) is never persisted)
AVAILABLE: Final = 0
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4
KNOWN_STATES: Final = frozenset({AVAILABLE, ACKNOWLEDGED, ARCHIVED})
#: Kafka's default `group.share.delivery.count.limit`: a record delivered this often is
#: archived by the broker, so one at or above it (or archived) is a poison record
DEFAULT_POISON_LIMIT: Final = 5

UPDATE_WITHOUT_SNAPSHOT: Final = "update_without_snapshot"
BACKWARDS_BATCH: Final = "backwards_batch"
UNKNOWN_DELIVERY_STATE: Final = "unknown_delivery_state"
#: `delivery_complete_count` when the writer did not count (KIP-1226's default)
_UNCOUNTED: Final = -1


# -- PersisterStateBatchCombiner --------------------------------------------------------------


def _info(batch: Batch) -> tuple[int, int]:
    """Kafka's compareBatchDeliveryInfo key: delivery count, then delivery state."""
    return batch[2], batch[3]


def _cut(batch: Batch, first: int, last: int) -> Batch:
    return first, last, batch[2], batch[3]


def prune(batches: Iterable[Batch], start_offset: int) -> list[Batch]:
    """Drop what ends before `start_offset`, cut what straddles it (-1: keep all)."""
    if start_offset == -1:
        return list(batches)
    return [
        b if b[0] >= start_offset else _cut(b, start_offset, b[1])
        for b in batches
        if b[1] >= start_offset
    ]


def combine(so_far: Iterable[Batch], new: Iterable[Batch], start_offset: int) -> list[Batch]:
    """`PersisterStateBatchCombiner(so_far, new, start_offset).combineStateBatches()`."""
    combined = prune([*so_far, *new], start_offset)
    if len(combined) < 2:
        return combined
    pending = sorted(set(combined))
    final: list[Batch] = []
    while True:
        pair = _candidate_pair(pending, final)
        if pair is None:
            break
        prev, candidate = pair
        # the pair is at the head of `pending` once the prefix went to `final`
        del pending[:2]
        for batch in _merge(prev, candidate):
            _add(pending, batch)
    final.extend(pending)
    return final


def _add(pending: list[Batch], batch: Batch) -> None:
    """TreeSet.add: sorted, no duplicates."""
    at = bisect_left(pending, batch)
    if at == len(pending) or pending[at] != batch:
        insort(pending, batch)


def _candidate_pair(pending: list[Batch], final: list[Batch]) -> tuple[Batch, Batch] | None:
    """The first overlapping (or contiguous, same-info) pair; every batch before it can no
    longer merge with anything and moves to `final` (getMergeCandidatePair)."""
    if not pending:
        return None
    prev = pending[0]
    for index in range(1, len(pending)):
        candidate = pending[index]
        if candidate[0] <= prev[1] or (
            prev[1] + 1 == candidate[0] and _info(prev) == _info(candidate)
        ):
            final.extend(pending[: index - 1])
            del pending[: index - 1]
            return prev, candidate
        prev = candidate
    final.extend(pending[:-1])
    del pending[:-1]
    return None


def _merge(prev: Batch, candidate: Batch) -> list[Batch]:
    """What replaces an overlapping pair (prev sorts first: prev.first <= candidate.first)."""
    p_first, p_last = prev[0], prev[1]
    c_first, c_last = candidate[0], candidate[1]
    p_info, c_info = _info(prev), _info(candidate)
    if c_info == p_info:
        return [(p_first, max(p_last, c_last), prev[2], prev[3])]
    candidate_lower = c_info < p_info
    if c_first == p_first:
        if c_last == p_last:
            # the TreeSet order puts the higher priority second
            return [candidate]
        if candidate_lower:
            return [prev, _cut(candidate, p_last + 1, c_last)]
        return [candidate]
    if c_last < p_last:  # prev swallows candidate
        if candidate_lower:
            return [prev]
        return [_cut(prev, p_first, c_first - 1), candidate, _cut(prev, c_last + 1, p_last)]
    if c_last == p_last:
        if candidate_lower:
            return [prev]
        return [_cut(prev, p_first, c_first - 1), candidate]
    if candidate_lower:
        return [prev, _cut(candidate, p_last + 1, c_last)]
    return [_cut(prev, p_first, c_first - 1), candidate]


# -- the state of one share partition ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareRecord:
    """What one `__share_group_state` record says, from a typed record
    (`decoder.share_state.share_partition_state`) or a canonical dict (`from_canonical`).
    `snapshot` False: an update (`state_epoch` None, -1 start offset / leader epoch:
    unchanged)."""

    snapshot: bool
    snapshot_epoch: int
    state_epoch: int | None
    leader_epoch: int
    start_offset: int
    batches: tuple[Batch, ...]
    #: KIP-1226 (4.2+): the writer's count of done records past the start offset; None: none
    delivery_complete_count: int | None = None


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share partition's state as the coordinator holds it after a record."""

    start_offset: int
    state_epoch: int
    leader_epoch: int
    snapshot_epoch: int
    #: in Kafka's order: (first, last, delivery count, delivery state)
    batches: tuple[Batch, ...]
    delivery_complete_count: int | None = None


@dataclass(frozen=True, slots=True)
class Applied:
    """`apply`'s answer: the state after the record (None: deleted) and the bad input seen."""

    state: ShareState | None
    #: reason -> count (see the module docs); empty when the record was clean
    problems: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Counts:
    """Records past the start offset, by delivery state (acquired ones show as available:
    Kafka never persists the acquired state)."""

    available: int
    acknowledged: int
    archived: int
    unknown: int

    @property
    def done(self) -> int:
        """Acknowledged or archived: what KIP-1226's share lag subtracts."""
        return self.acknowledged + self.archived


def _clean(batches: Iterable[Batch], problems: dict[str, int]) -> list[Batch]:
    kept = []
    for batch in batches:
        if batch[1] < batch[0]:
            problems[BACKWARDS_BATCH] = problems.get(BACKWARDS_BATCH, 0) + 1
            continue
        if batch[3] not in KNOWN_STATES:
            problems[UNKNOWN_DELIVERY_STATE] = problems.get(UNKNOWN_DELIVERY_STATE, 0) + 1
        kept.append(batch)
    return kept


def apply(prior: ShareState | None, record: ShareRecord | None) -> Applied:
    """The state after `record` (None: a tombstone) is replayed onto `prior`, as
    `ShareCoordinatorShard` replays it."""
    if record is None:
        return Applied(None, {})
    problems: dict[str, int] = {}
    batches = _clean(record.batches, problems)
    if record.snapshot or prior is None:
        if not record.snapshot:
            problems[UPDATE_WITHOUT_SNAPSHOT] = 1
        state = ShareState(
            start_offset=record.start_offset,
            state_epoch=record.state_epoch or 0,
            leader_epoch=record.leader_epoch,
            snapshot_epoch=record.snapshot_epoch,
            batches=tuple(batches),
            delivery_complete_count=record.delivery_complete_count,
        )
        return Applied(state, problems)
    start = prior.start_offset if record.start_offset == -1 else record.start_offset
    complete = record.delivery_complete_count
    state = ShareState(
        start_offset=start,
        state_epoch=prior.state_epoch,
        leader_epoch=prior.leader_epoch if record.leader_epoch == -1 else record.leader_epoch,
        snapshot_epoch=prior.snapshot_epoch,
        batches=tuple(combine(prior.batches, batches, start)),
        delivery_complete_count=prior.delivery_complete_count if complete is None else complete,
    )
    return Applied(state, problems)


def counts(state: ShareState) -> Counts:
    """Records past the start offset by state (all of them while the start is -1)."""
    tally = {AVAILABLE: 0, ACKNOWLEDGED: 0, ARCHIVED: 0}
    unknown = 0
    for first, last, _count, delivery_state in state.batches:
        size = last - max(first, state.start_offset) + 1
        if size <= 0:
            continue
        if delivery_state in tally:
            tally[delivery_state] += size
        else:
            unknown += size
    return Counts(tally[AVAILABLE], tally[ACKNOWLEDGED], tally[ARCHIVED], unknown)


def live_batches(state: ShareState) -> list[Batch]:
    """The batches past the start offset, cut at it (a snapshot keeps them uncut)."""
    return prune(state.batches, state.start_offset)


def max_delivery_count(state: ShareState) -> int:
    """The highest delivery count of a record past the start offset (0: none in flight)."""
    return max((b[2] for b in live_batches(state)), default=0)


def poison_batches(state: ShareState, limit: int = DEFAULT_POISON_LIMIT) -> list[Batch]:
    """Batches past the start offset that are poison: archived (given up, by a consumer's
    reject or at the broker's delivery limit), or not done and delivered `limit` times or
    more."""
    return [
        b
        for b in live_batches(state)
        if b[3] == ARCHIVED or (b[3] != ACKNOWLEDGED and b[2] >= limit)
    ]


def share_lag(state: ShareState, log_end_offset: int) -> int | None:
    """KIP-1226's share-partition lag: log end - start offset - records acknowledged or
    archived past it (never below 0); None while the start offset is not initialised."""
    if state.start_offset < 0:
        return None
    return max(0, log_end_offset - state.start_offset - counts(state).done)


# -- canonical dicts (docs/canonical-schema.md) ------------------------------------------------


def from_canonical(kind: str, value: Mapping[str, Any] | None) -> ShareRecord | None:
    """The record of a canonical `share_snapshot` / `share_update` value dict (None: a
    tombstone). Missing fields read as Kafka's defaults, as Spark's `to_json` leaves nulls out."""
    if value is None:
        return None
    complete = value.get("delivery_complete_count")
    state_epoch = value.get("state_epoch")
    return ShareRecord(
        snapshot=kind == "share_snapshot",
        snapshot_epoch=int(value.get("snapshot_epoch") or 0),
        state_epoch=None if state_epoch is None else int(state_epoch),
        leader_epoch=int(value.get("leader_epoch", -1)),
        start_offset=int(value.get("start_offset", -1)),
        batches=tuple(
            (
                int(b["first_offset"]),
                int(b["last_offset"]),
                int(b["delivery_count"]),
                int(b["delivery_state"]),
            )
            for b in value.get("state_batches") or ()
        ),
        delivery_complete_count=None
        if complete is None or int(complete) == _UNCOUNTED
        else int(complete),
    )


__all__ = [
    "ACKNOWLEDGED",
    "ARCHIVED",
    "AVAILABLE",
    "BACKWARDS_BATCH",
    "DEFAULT_POISON_LIMIT",
    "UNKNOWN_DELIVERY_STATE",
    "UPDATE_WITHOUT_SNAPSHOT",
    "Applied",
    "Batch",
    "Counts",
    "ShareRecord",
    "ShareState",
    "apply",
    "combine",
    "counts",
    "from_canonical",
    "live_batches",
    "max_delivery_count",
    "poison_batches",
    "prune",
    "share_lag",
]
