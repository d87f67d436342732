"""Taking partitions at chosen offsets from inside an `on_assign` callback, whatever the
group's rebalance protocol."""

from __future__ import annotations

from collections.abc import Iterable

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
