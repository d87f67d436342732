"""The offsets source on the real broker: a client replaced mid-read reads on exactly once.

A client left without a broker address (exporter/kafka_clients.py) cannot be made on
demand: on a hung broker it takes a metadata request landing in the few milliseconds its
controller fences it after SIGCONT (seen in 2 of 3 loaded runs of the hang test, never on an
idle machine), and librdkafka 2.16's mock cluster crashes serving a fetch once its only
broker is left out of its metadata. So librdkafka's report of such a client is handed to the
source as its statistics callback would be, and everything else is real: the broker, the
commits, the old client closed and the new one reading on from the positions reached.
"""

from __future__ import annotations

import json
import logging
import struct
import time
from collections import Counter

import pytest
from confluent_kafka import TopicPartition

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.sources.kafka_source import OffsetsTopicSource, RawRecord
from tests.real_broker import Broker, retry, unique

pytestmark = pytest.mark.kafka

#: the statistics report of a consumer whose only broker handle is the group coordinator's
#: stand-in with no coordinator to point at (the hang test's log, e229493)
ADDRESSLESS = json.dumps(
    {"brokers": {"GroupCoordinator": {"nodename": "", "source": "logical", "state": "TRY_CONNECT"}}}
)


def _read_through(source: OffsetsTopicSource, partition: int, end: int) -> list[RawRecord]:
    """Poll until the source's position in `partition` reaches `end`."""
    records: list[RawRecord] = []
    deadline = time.monotonic() + 60
    while source.positions().get(partition, -1) < end:
        assert time.monotonic() < deadline, f"position {source.positions().get(partition)} < {end}"
        records += source.poll_batch(5000, 0.2).records()
    return records


def test_a_replaced_client_reads_on_from_its_positions_exactly_once(
    kafka_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = unique("replaced-topic"), unique("replaced-group")
    kafka_broker.create_topic(topic)
    partition = partition_for(group)
    committer = kafka_broker.consumer(group)

    def commit(offsets: range) -> int:
        for offset in offsets:
            tp = TopicPartition(topic, 0, offset)
            retry(lambda tp=tp: committer.commit(offsets=[tp], asynchronous=False))
        return kafka_broker.log_ends(OFFSETS_TOPIC, partition + 1)[partition]

    source = OffsetsTopicSource({"bootstrap.servers": kafka_broker.bootstrap})
    try:
        records = _read_through(source, partition, commit(range(1, 6)))
        for _ in range(2):
            source._on_stats(ADDRESSLESS)
        with caplog.at_level(logging.WARNING):
            records += _read_through(source, partition, commit(range(6, 11)))
        assert source.clients_replaced_total == 1
        assert "opening a new client" in caplog.text
    finally:
        committer.close()
        source.close()
    assert [p for p, n in Counter((r.partition, r.offset) for r in records).items() if n > 1] == []
    # an offset commit's value starts with its version (int16) and the offset (int64)
    ours = [r for r in records if r.key is not None and group.encode() in r.key and r.value]
    assert [struct.unpack_from(">q", r.value or b"", 2)[0] for r in ours] == list(range(1, 11))
