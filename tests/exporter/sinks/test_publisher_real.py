"""The publisher on the real broker: a producer replaced mid-run publishes on, each record once.

As in test_kafka_source_real.py, librdkafka's report of a producer without a broker address
is handed to the publisher as its statistics callback would be; the broker, both producers
and the output topic read back are real.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from confluent_kafka import TopicPartition

from offsetwatch.exporter.sinks.publisher import RecordPublisher
from tests.real_broker import Broker, unique

pytestmark = pytest.mark.kafka

#: the statistics report of a producer that forgot every broker
ADDRESSLESS = json.dumps({"brokers": {}})


def _read_values(broker: Broker, topic: str, partitions: int) -> list[bytes]:
    consumer = broker.consumer(unique("publisher-reader"), **{"enable.partition.eof": True})
    ends = broker.log_ends(topic, partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = {p for p, end in ends.items() if end == 0}
    try:
        while len(at_end) < partitions:
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    values.append(message.value())
                elif message.partition() is not None:
                    at_end.add(message.partition())
    finally:
        consumer.close()
    return values


def test_a_replaced_producer_publishes_on_each_record_once(kafka_broker: Broker) -> None:
    output = unique("replaced-producer-out")
    kafka_broker.create_topic(output, 3)
    publisher = RecordPublisher({"bootstrap.servers": kafka_broker.bootstrap}, output_topic=output)
    try:
        for offset in range(5):
            publisher.publish(0, offset, b"g%d" % offset, b"v%d" % offset)
        assert publisher.flush(30) == 0
        publisher._on_stats(ADDRESSLESS)
        publisher._on_stats(ADDRESSLESS)
        publisher.poll(0)
        assert publisher.producers_replaced == 1
        for offset in range(5, 10):
            publisher.publish(0, offset, b"g%d" % offset, b"v%d" % offset)
        assert publisher.flush(30) == 0
        assert publisher.stats().failed == 0
        assert publisher.confirmed_positions() == {0: 10}
    finally:
        publisher.close()
    values = _read_values(kafka_broker, output, 3)
    assert Counter(values) == Counter(b"v%d" % i for i in range(10))


def test_a_quota_that_throttles_the_publisher_fails_its_writes_with_the_reason(
    kafka_broker: Broker,
) -> None:
    """A produce quota on the publisher's client id (Kafka's own kafka-configs): the local
    queue fills, and a write fails after QUEUE_FULL_WAIT_S naming the throttle and the quota
    to look at, instead of holding the main loop as long as the quota likes; nothing that was
    not delivered counts as out."""
    output = unique("quota-out")
    kafka_broker.create_topic(output, 1)
    client = unique("quota-client")
    kafka_broker.tool(
        "kafka-configs.sh", "--alter", "--add-config", "producer_byte_rate=2048",
        "--entity-type", "clients", "--entity-name", client,
    )  # fmt: skip
    publisher = RecordPublisher(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "client.id": client,
            "queue.buffering.max.messages": 50,
            "linger.ms": 0,
        },
        output_topic=output,
        queue_full_timeout_s=2.0,
    )
    try:
        with pytest.raises(BufferError, match="throttles this client") as raised:
            for offset in range(20_000):
                publisher.publish(0, offset, b"k", b"x" * 1000)
                publisher.poll(0)
        assert f"--entity-name {client}" in str(raised.value)
        assert "takes records slower than they come" in str(raised.value)
        publisher.poll(0)
        delivered = publisher.stats().delivered
        assert publisher.confirmed_positions().get(0, 0) <= delivered
    finally:
        publisher.close(0)
