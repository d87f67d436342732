"""Taking partitions at chosen offsets from inside an `on_assign` callback, whatever the
group's rebalance protocol."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

PartitionKey = tuple[str, int]
"""(topic, partition)"""


def key_of(partition: TopicPartition) -> PartitionKey:
    return (partition.topic, partition.partition)


def assign_at(consumer: Consumer, partitions: Iterable[TopicPartition]) -> None:
    """Assign `partitions`, each starting at its `offset`, from an `on_assign` callback.

    Cooperative groups (cooperative-sticky, and KIP-848 `group.protocol=consumer`) hand out
    increments that must be added with incremental_assign(); eager groups hand out the whole
    assignment, which must go through assign(). confluent-kafka does not expose which protocol
    the group uses, but librdkafka refuses the wrong call with _STATE before changing anything,
    so trying the incremental call first is exact.
    """
    chosen = list(partitions)
    try:
        consumer.incremental_assign(chosen)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not isinstance(error, KafkaError) or error.code() != KafkaError._STATE:
            raise
        consumer.assign(chosen)


@contextlib.contextmanager
def paused_on_error(consumer: Consumer, partitions: list[TopicPartition]) -> Iterator[None]:
    """Around the work of an `on_assign`: if it fails, take the partitions *paused* before the
    error propagates (confluent-kafka re-raises it from the next poll()).

    Without this, confluent-kafka assigns the partitions itself after a failed callback, at
    their committed offsets: a replay would silently not happen, and an application that
    catches the error and polls on would read from a position no helper chose.
    """
    try:
        yield
    except Exception:
        keys = [TopicPartition(p.topic, p.partition) for p in partitions]
        with contextlib.suppress(KafkaException):
            assign_at(consumer, keys)
            pause_assigned(consumer, keys)
        raise


def pause_assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    """Pause partitions just assigned at their committed offsets, so that the pause holds.

    librdkafka applies pause() later, as an operation stamped with the next number of the
    partition's version counter, and drops an operation older than one it already applied.
    Starting an assigned partition is such an operation too, sent by librdkafka's own thread
    when the committed offsets arrive, a moment after assign(): if that thread takes its
    number after our pause took one but queues its operation first, the pause is dropped and
    the partition is fetched (librdkafka issues #2190 and #5591; seen as a paused partition's
    messages delivered, under load). The start is sent once per assignment and is queued
    before a pause it overtakes, so a second pause, which takes its number after the first
    was queued, is newer than the start: one of the two holds, and messages fetched in
    between are older than it, so they are never delivered.
    """
    consumer.pause(partitions)
    consumer.pause(partitions)
