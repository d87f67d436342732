"""Consumers for the consumer-helper tests, one per group protocol, on the real broker or on
librdkafka's mock cluster.

Both serve classic groups (eager and cooperative assignors) and KIP-848 groups
(`group.protocol=consumer`, ConsumerGroupHeartbeat), so every helper runs on all three.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message, TopicPartition

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
    """Poll every reader until `done()` (callbacks run inside poll); fail on timeout.

    Each reader is drained without blocking: waiting on every idle reader for each message
    another one returns made a test with ten members side by side wait half a second per
    record."""
    group = list(readers)
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out waiting for the consumers"
        progressed = False
        for reader in group:
            for _ in range(100):
                before = len(reader.read)
                reader.poll(0)
                if len(reader.read) == before:
                    break
                progressed = True
        if not progressed:
            time.sleep(0.01)
