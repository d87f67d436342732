"""The `__consumer_offsets` workload the Kafka-reading benchmarks share, and their ceiling.

`fill` writes offset commits of 40 groups with a classic group record every 1,000 (as a real
coordinator writes a few group records among many commits), encoded by the decoder's own
encoder; `bare_consume` reads them back with one confluent-kafka consumer and no decoding,
the ceiling each benchmark prints its figures beside.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from offsetwatch.record_factory import Member, RecordFactory


def fill(
    bootstrap: str,
    topic: str,
    records: int,
    partitions: int,
    producer_config: Mapping[str, object],
    now_ms: int = 1_700_000_000_000,
) -> None:
    """`records` records round-robin over `partitions` partitions of `topic`."""
    factory = RecordFactory()
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3, **producer_config})
    members = [Member(f"member-{i}", "client", "/10.0.0.1", (("orders", (i,)),)) for i in range(3)]
    for n in range(records):
        group = f"group-{n % 40}"
        if n % 1000 == 0:
            key, value = factory.classic_group(group, n // 1000, members, now_ms + n)
        else:
            key, value = factory.commit(group, "orders", n % 12, n, now_ms + n)
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("records not delivered")


def bare_consume(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Every record of `topic` by one consumer, no decoding (read_committed, as the readers)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, ended = 0, 0
    while ended < partitions:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            error = message.error()
            if error is None:
                count += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                ended += 1
    consumer.close()
    if count != records:
        raise RuntimeError(f"bare consumer read {count} of {records}")
