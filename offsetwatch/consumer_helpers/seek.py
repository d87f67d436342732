"""Starting dynamically assigned partitions at a point in time.

A consumer that subscribes cannot know its partitions before the group assigns them, so the
seek has to happen inside `on_assign`: look up, for every partition newly handed to this
consumer, the first offset whose timestamp is at or after T, and take the partition there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final, Protocol

from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition

from offsetwatch.consumer_helpers.assignment import PartitionKey, assign_at, key_of, paused_on_error
from offsetwatch.consumer_helpers.commits import commit_or_warn
from offsetwatch.consumer_helpers.errors import ConsumerHelperError
from offsetwatch.consumer_helpers.log_bounds import log_ends
from offsetwatch.instants import datetime_epoch_ms

NOT_FOUND: Final = -1
"""Kafka's ListOffsets answer when no message has a timestamp at or after the one asked."""


class OffsetsForTimes(Protocol):
    """The broker I/O of a timestamp lookup (injectable: tests replay recorded answers).

    Returns, for every partition asked, the first offset whose timestamp is >= timestamp_ms,
    or NOT_FOUND (-1) when the partition has no such message.
    """

    def __call__(
        self,
        consumer: Consumer,
        partitions: Sequence[PartitionKey],
        timestamp_ms: int,
        timeout_s: float,
    ) -> Mapping[PartitionKey, int]: ...


def broker_offsets_for_times(
    consumer: Consumer,
    partitions: Sequence[PartitionKey],
    timestamp_ms: int,
    timeout_s: float,
) -> dict[PartitionKey, int]:
    """One ListOffsets round (per leader) through the consumer's own connection."""
    if not partitions:
        return {}
    asked = [TopicPartition(topic, partition, timestamp_ms) for topic, partition in partitions]
    answer = consumer.offsets_for_times(asked, timeout=timeout_s)
    found: dict[PartitionKey, int] = {}
    for item in answer:
        if item.error is not None:
            raise ConsumerHelperError(
                f"offsets for time {timestamp_ms} of {item.topic}[{item.partition}]: {item.error}"
            )
        found[key_of(item)] = item.offset
    return found


def epoch_ms(moment: datetime | int) -> int:
    """Milliseconds since the epoch; a naive datetime is refused (its zone would be a guess).
    Converted like every other time offsetwatch reads (offsetwatch.instants), exactly."""
    if isinstance(moment, int):
        return moment
    return datetime_epoch_ms(moment)


def start_offset(found: int, log_end: int) -> int:
    """Where to start for a lookup answer: NOT_FOUND means every message is older than T, so
    the partition starts at its log end, read *before* the lookup: a message written between
    the two answers is read, not skipped (the symbolic OFFSET_END would be resolved later,
    when fetching starts, and skip it)."""
    return log_end if found == NOT_FOUND else found


class SeekToTimestamp:
    """An `on_assign` callback that starts each newly assigned partition at a time.

    The start offsets are committed at once, then the partitions are assigned there.
    "Newly" means the first time this consumer object is given the partition: eager groups
    hand the whole assignment over again at every rebalance, and a partition this consumer
    already had goes on from its committed offset instead of jumping back to T.

    With `only_uncommitted=True` only partitions without a committed offset are moved: a new
    group begins at T (instead of auto.offset.reset's earliest/latest), exactly once for the
    whole group since the start is committed. Without it, a partition that moves to another
    member is new to that member and is moved to T again: to rewind a running group once
    across all its members, use `ReplayController` with `FromTimestamp`.
    """

    __slots__ = ("_lookup", "_only_uncommitted", "_seen", "_timeout_s", "timestamp_ms")

    def __init__(
        self,
        timestamp: datetime | int,
        *,
        only_uncommitted: bool = False,
        lookup: OffsetsForTimes = broker_offsets_for_times,
        timeout_s: float = 10.0,
    ) -> None:
        self.timestamp_ms = epoch_ms(timestamp)
        self._only_uncommitted = only_uncommitted
        self._lookup = lookup
        self._timeout_s = timeout_s
        self._seen: set[PartitionKey] = set()

    def __call__(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with paused_on_error(consumer, partitions):
            starts = self._starts(
                consumer, [key_of(p) for p in partitions if key_of(p) not in self._seen]
            )
            # Committed at once: a partition given back later (eager groups hand everything over
            # at every rebalance) or to another member goes on from here even if no message was
            # read meanwhile, instead of falling back to auto.offset.reset.
            commit_or_warn(
                consumer,
                [TopicPartition(*key, offset) for key, offset in starts.items()],
                "a partition reassigned before its first commit starts from auto.offset.reset",
            )
            # OFFSET_INVALID: from the committed offset (auto.offset.reset when there is none).
            assign_at(
                consumer,
                [
                    TopicPartition(p.topic, p.partition, starts.get(key_of(p), OFFSET_INVALID))
                    for p in partitions
                ],
            )
            self._seen.update(key_of(p) for p in partitions)

    def _starts(self, consumer: Consumer, keys: list[PartitionKey]) -> dict[PartitionKey, int]:
        if keys and self._only_uncommitted:
            committed = consumer.committed(
                [TopicPartition(*key) for key in keys], timeout=self._timeout_s
            )
            for item in committed:
                if item.error is not None:
                    raise ConsumerHelperError(
                        f"committed offset of {item.topic}[{item.partition}]: {item.error}"
                    )
            keys = [key_of(item) for item in committed if item.offset < 0]
        if not keys:
            return {}
        ends = log_ends(consumer, keys, self._timeout_s)
        found = self._lookup(consumer, keys, self.timestamp_ms, self._timeout_s)
        missing = [key for key in keys if key not in found]
        if missing:
            raise ConsumerHelperError(
                f"offsets for time {self.timestamp_ms}: no answer for {missing}"
            )
        return {key: start_offset(found[key], ends[key]) for key in keys}


def seek_to_timestamp(
    timestamp: datetime | int,
    *,
    only_uncommitted: bool = False,
    lookup: OffsetsForTimes = broker_offsets_for_times,
    timeout_s: float = 10.0,
) -> SeekToTimestamp:
    """`consumer.subscribe(topics, on_assign=seek_to_timestamp(T))`: see SeekToTimestamp."""
    return SeekToTimestamp(
        timestamp, only_uncommitted=only_uncommitted, lookup=lookup, timeout_s=timeout_s
    )
