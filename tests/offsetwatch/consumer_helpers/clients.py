"""Consumers on librdkafka's mock cluster for the consumer-helper tests, one per group protocol.

The mock (librdkafka 2.16) serves classic groups (eager and cooperative assignors) and KIP-848
groups (`group.protocol=consumer`, ConsumerGroupHeartbeat), so every helper runs on all three.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message, TopicPartition

from offsetwatch.consumer_helpers import NOT_FOUND, PartitionKey
from tests.kafka_fixtures import fast_producer

PROTOCOLS = ("eager", "cooperative", "consumer")

_PROTOCOL_CONFIG: dict[str, dict[str, object]] = {
    "eager": {"partition.assignment.strategy": "range"},
    "cooperative": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer"},
}


def make_consumer(bootstrap: str, group: str, protocol: str, **extra: object) -> Consumer:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 50,
        "log_level": 3,
        **_PROTOCOL_CONFIG[protocol],
    }
    if protocol != "consumer":
        # Classic groups only: KIP-848 takes its timeouts from the broker.
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    config.update(extra)
    return Consumer(config)


def produce_timed(bootstrap: str, topic: str, timestamps: Mapping[int, Sequence[int]]) -> None:
    """Write one message per timestamp (CreateTime, ms) to each partition, in order."""
    producer = fast_producer(bootstrap)
    producer.list_topics(topic, timeout=10)
    for partition, times in timestamps.items():
        for i, ts in enumerate(times):
            producer.produce(
                topic, value=f"{partition}:{i}".encode(), partition=partition, timestamp=ts
            )
    assert producer.flush(30) == 0


@dataclass
class KafkaTimeAnswers:
    """Timestamp lookups answered as a Kafka broker answers ListOffsets by timestamp: the first
    offset whose timestamp is >= T, -1 when there is none. Computed from the timestamps the
    test wrote, because librdkafka's mock answers -1 for every partition."""

    timestamps: Mapping[int, Sequence[int]]
    topic: str
    calls: list[list[PartitionKey]] = field(default_factory=list)

    def __call__(
        self,
        consumer: Consumer,
        partitions: Sequence[PartitionKey],
        timestamp_ms: int,
        timeout_s: float,
    ) -> dict[PartitionKey, int]:
        self.calls.append(list(partitions))
        answer: dict[PartitionKey, int] = {}
        for topic, partition in partitions:
            assert topic == self.topic
            times = self.timestamps[partition]
            answer[(topic, partition)] = next(
                (offset for offset, ts in enumerate(times) if ts >= timestamp_ms), NOT_FOUND
            )
        return answer


@dataclass
class Reader:
    """A consumer driven by the test's own loop, recording what it read.

    `pause_each_after`: pause a partition once this many of its messages are read, so that a
    test can catch the reader with every partition begun and none finished. Without it the
    order is the client's: a KIP-848 member may get half its partitions a heartbeat later
    and finish the first half before the rest begin."""

    consumer: Consumer
    on_message: Callable[[Message], object] | None = None
    read: list[tuple[int, int]] = field(default_factory=list)
    pause_each_after: int | None = None

    def poll(self, timeout_s: float = 0.05) -> None:
        message = self.consumer.poll(timeout_s)
        if message is None or message.error() is not None:
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        self.read.append((partition, offset))
        if self.on_message is not None:
            self.on_message(message)
        cap = self.pause_each_after
        if cap is not None and sum(1 for p, _ in self.read if p == partition) >= cap:
            self.consumer.pause([TopicPartition(message.topic(), partition)])

    def assigned(self) -> set[int]:
        return {p.partition for p in self.consumer.assignment()}


def hold(reader: Reader) -> list[TopicPartition]:
    """Pause everything `reader` has now, and end its `pause_each_after`; give the result
    to `release`, which resumes every partition held, the ones paused one by one as well."""
    reader.pause_each_after = None
    held = reader.consumer.assignment()
    reader.consumer.pause(held)
    return held


def release(reader: Reader, held: list[TopicPartition]) -> None:
    """Resume what `hold` paused, not what is assigned now: librdkafka keeps a partition's
    pause in the client across rebalances, so a held partition that moved to another member
    and comes back later would otherwise stay paused for good (librdkafka issue #1849)."""
    reader.consumer.resume(held)


def poll_until(
    readers: Iterable[Reader], done: Callable[[], bool], timeout_s: float = 60.0
) -> None:
    """Poll every reader in turn (callbacks run inside poll) until `done()`; fail on timeout."""
    group = list(readers)
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out waiting for the consumers"
        for reader in group:
            reader.poll()


def positions(consumer: Consumer, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    return {
        p.partition: p.offset
        for p in consumer.position([TopicPartition(topic, partition) for partition in partitions])
    }


def produce_in_small_batches(
    bootstrap: str, topic: str, partitions: int, per_partition: int, batch: int = 5
) -> None:
    """`per_partition` messages in each partition, stored as message sets of `batch`.

    The mock answers a fetch with one stored message set per partition, so small sets make a
    consumer read every partition a little at a time (as from a real broker with small
    fetch sizes) instead of one whole partition first.
    """
    producer = fast_producer(bootstrap)
    producer.list_topics(topic, timeout=10)
    for start in range(0, per_partition, batch):
        for partition in range(partitions):
            for offset in range(start, min(start + batch, per_partition)):
                producer.produce(topic, value=f"{partition}:{offset}".encode(), partition=partition)
        assert producer.flush(30) == 0
