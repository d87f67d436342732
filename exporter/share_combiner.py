"""Kafka's share coordinator's way of applying a ShareUpdate's batches to a share partition.

A port of Kafka 4.0's `PersisterStateBatchCombiner` (share-coordinator module; checked against
the 4.0.0 jar in ../shared/kafka): the state the exporter keeps must be the one the coordinator
keeps, or counts and lag drift from what `kafka-share-groups.sh` shows.

1. every batch ending before the start offset is dropped, a batch straddling it is cut at it
   (a start offset of -1 prunes nothing);
2. the rest is sorted as Kafka's `PersisterStateBatch.compareTo` sorts (first offset, last
   offset, delivery count, delivery state: the tuple order of `Batch`) without duplicates,
   as Kafka's TreeSet;
3. the first overlapping pair (or contiguous pair with the same delivery info) is merged, and
   repeated until none is left. Where two batches overlap, the one with the higher
   (delivery count, delivery state) wins the shared offsets: a newer state always has a higher
   count or a later state, so "newer wins" falls out of the ordering.

Batches are tuples `(first_offset, last_offset, delivery_count, delivery_state)`: cheap to
sort, compare and keep (a share partition keeps up to a few hundred).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

#: (first_offset, last_offset, delivery_count, delivery_state), in Kafka's sort order
Batch = tuple[int, int, int, int]


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
