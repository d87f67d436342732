"""A failing on_assign leaves its partitions assigned but paused, for every protocol: without
that, confluent-kafka assigns them itself at their committed offsets and the application,
if it polls on, reads from a position no helper chose."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

import pytest
from confluent_kafka import Consumer, TopicPartition

from offsetwatch.consumer_helpers import ConsumerHelperError, PartitionKey, seek_to_timestamp
from offsetwatch.consumer_helpers.assignment import paused_on_error
from offsetwatch.mock_cluster import MockCluster
from tests.kafka_fixtures import create_data_topic, kafka_cluster  # noqa: F401
from tests.offsetwatch.consumer_helpers.clients import PROTOCOLS, Reader, make_consumer

TOPIC = "orders"


def failing_lookup(
    consumer: Consumer, partitions: Sequence[PartitionKey], timestamp_ms: int, timeout_s: float
) -> Mapping[PartitionKey, int]:
    raise ConsumerHelperError("offsets for time: broker unavailable")


@pytest.mark.kafka
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_failed_on_assign_takes_the_partitions_paused(
    kafka_cluster: MockCluster,  # noqa: F811
    protocol: str,
) -> None:
    create_data_topic(kafka_cluster, TOPIC, [10, 10])
    reader = Reader(
        make_consumer(kafka_cluster.bootstrap_servers, f"g-{uuid.uuid4().hex}", protocol)
    )
    reader.consumer.subscribe([TOPIC], on_assign=seek_to_timestamp(0, lookup=failing_lookup))
    try:
        deadline = time.monotonic() + 30
        with pytest.raises(ConsumerHelperError, match="broker unavailable"):
            while time.monotonic() < deadline:
                reader.poll(0.1)
        assert reader.assigned() == {0, 1}
        # Paused: polling on reads nothing. (A bounded look, not a timing figure: the mock
        # would deliver both partitions' 20 messages in one fetch within milliseconds.)
        for _ in range(20):
            reader.poll(0.05)
        assert reader.read == []
        reader.consumer.resume([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        for _ in range(100):
            reader.poll(0.05)
            if len(reader.read) == 20:
                break
        # Resumed by the application's own decision: from auto.offset.reset (no commits).
        assert sorted(reader.read) == [(p, o) for p in (0, 1) for o in range(10)]
    finally:
        reader.consumer.close()


class _RecordingConsumer:
    """The calls paused_on_error makes, in order (no broker: the order is the point)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[PartitionKey]]] = []

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assign", [(p.topic, p.partition) for p in partitions]))

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("pause", [(p.topic, p.partition) for p in partitions]))


def test_the_pause_after_a_failed_on_assign_is_sent_twice() -> None:
    """librdkafka may drop the first pause when the partition's start overtakes it (see
    pause_assigned); the mock cluster hit that once in a loaded full run, and it takes a
    widened thread window to show it on demand, so the order of the calls is pinned here."""
    consumer = _RecordingConsumer()
    given = [TopicPartition(TOPIC, 1, 42), TopicPartition(TOPIC, 0, 7)]
    with pytest.raises(ConsumerHelperError), paused_on_error(consumer, given):  # type: ignore[arg-type]
        raise ConsumerHelperError("lookup failed")
    keys = [(TOPIC, 1), (TOPIC, 0)]
    assert consumer.calls == [("assign", keys), ("pause", keys), ("pause", keys)]
