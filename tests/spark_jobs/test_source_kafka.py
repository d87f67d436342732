"""The kafka source, batch: real Spark reading librdkafka's mock cluster with real consumers.

What the mock cannot show (librdkafka 2.16, see tests/kafka_fixtures.py): it answers every
timestamp lookup with -1 (so a timestamp means "the end" here), and it neither reports a last
stable offset below the high watermark nor filters aborted transactions, so `read_committed`
planning and filtering are not exercised; the control records of committed transactions are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer

from offsetwatch.mock_cluster import MockCluster
from offsetwatch.spark_jobs.schema import records_struct
from tests.spark_jobs.kafka_source_data import (
    OFFSETS_PARTITIONS,
    REPUBLISHED,
    RawRecord,
    canonicals,
    conformance_records,
    expected_rows,
    on_mock,
    produce,
    produce_raw_records,
    republished_values,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def records(conformance_dir: Path) -> list[RawRecord]:
    return conformance_records(conformance_dir)


@pytest.fixture(scope="module")
def cluster(records: list[RawRecord]) -> Iterator[MockCluster]:
    """One mock cluster for the module: the main conformance run in `__consumer_offsets`
    (its real partitions and timestamps), and its canonical records republished in JSON,
    bare Avro and Confluent-framed Avro topics."""
    with MockCluster() as mock:
        mock.create_topic("__consumer_offsets", OFFSETS_PARTITIONS)
        produce_raw_records(mock.bootstrap_servers, records)
        for name, fmt, schema_id in (
            (REPUBLISHED, "json", None),
            (f"{REPUBLISHED}.avro", "avro", None),
            (f"{REPUBLISHED}.framed", "avro", 42),
        ):
            mock.create_topic(name, 3)
            values = republished_values(canonicals(records), fmt, schema_id)
            partitions = (r.partition % 3 for r in records)
            produce(
                mock.bootstrap_servers,
                name,
                ((p, None, v, None) for p, v in zip(partitions, values, strict=True)),
            )
        yield mock


def kafka(spark: SparkSession, cluster: MockCluster, **options: str) -> DataFrame:
    reader = (
        spark.read.format("offsetwatch")
        .option("source", "kafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def sorted_rows(df: DataFrame) -> list[Any]:
    return df.orderBy("partition", "offset").collect()


def test_raw_consumer_offsets_decode_like_the_decoder(
    spark: SparkSession, cluster: MockCluster, records: list[RawRecord]
) -> None:
    df = kafka(spark, cluster)
    assert df.schema == records_struct()
    # the mock numbers each partition densely; Kafka's log had gaps (markers, compaction)
    assert sorted_rows(df) == expected_rows(on_mock(records))
    # one Spark partition per non-empty Kafka partition
    assert df.rdd.getNumPartitions() == len({r.partition for r in records})


@pytest.mark.parametrize("topic", [REPUBLISHED, f"{REPUBLISHED}.avro", f"{REPUBLISHED}.framed"])
def test_republished_topic_gives_the_archive_rows(
    spark: SparkSession, cluster: MockCluster, records: list[RawRecord], topic: str
) -> None:
    fmt = "json" if topic == REPUBLISHED else "avro"
    df = kafka(spark, cluster, topic=topic, format=fmt)
    # canonical records carry their __consumer_offsets position: the real Kafka offsets
    assert sorted_rows(df) == expected_rows(canonicals(records))


def test_offset_ranges_per_partition(
    spark: SparkSession, cluster: MockCluster, records: list[RawRecord]
) -> None:
    sizes: dict[int, int] = {}
    for r in records:
        sizes[r.partition] = sizes.get(r.partition, 0) + 1
    busy = sorted(sizes, key=lambda p: -sizes[p])[:2]
    a, b = busy
    df = kafka(
        spark,
        cluster,
        startingOffsets=json.dumps({"__consumer_offsets": {str(a): 5, str(b): -2}}),
        endingOffsets=json.dumps({"__consumer_offsets": {str(a): 9, str(b): 3}}),
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    expected = {(a, o) for o in range(5, 9)} | {(b, o) for o in range(3)}
    # partitions the JSON does not name: from the earliest offset to the latest
    expected |= {(p, o) for p, n in sizes.items() if p not in busy for o in range(n)}
    assert got == sorted(expected)


def test_timestamps_resolve_through_the_lookup(spark: SparkSession, cluster: MockCluster) -> None:
    # the mock answers -1 ("no record that recent") to every timestamp lookup, which Kafka
    # means as "the end": nothing starts before it, everything ends at it
    assert kafka(spark, cluster, startingTimestamp="0").count() == 0
    whole = kafka(spark, cluster).count()
    assert kafka(spark, cluster, endingTimestamp="0").count() == whole


def test_min_partitions_cuts_ranges_without_changing_rows(
    spark: SparkSession, cluster: MockCluster
) -> None:
    # the topic's 6 non-empty partitions become at least 14 ranges: the big ones are cut
    whole = kafka(spark, cluster)
    cut = kafka(spark, cluster, minPartitions="14")
    assert cut.rdd.getNumPartitions() >= 14
    assert sorted_rows(cut) == sorted_rows(whole)


def test_missing_topic_is_a_clear_error(spark: SparkSession, cluster: MockCluster) -> None:
    with pytest.raises(Exception, match="topic 'no-such-topic' does not exist"):
        kafka(spark, cluster, topic="no-such-topic").count()


def test_undecodable_records_are_skipped_and_quarantined(spark: SparkSession) -> None:
    good = RawRecord(0, 0, 1_700_000_000_000, bytes.fromhex("000100016700017400000000"), None)
    good_value = bytes.fromhex("0003" + "0000000000000007" + "ffffffff" + "0000" + "0" * 16)
    with MockCluster() as mock:
        mock.create_topic("__consumer_offsets", 1)
        produce(
            mock.bootstrap_servers,
            "__consumer_offsets",
            [
                (0, good.key, good_value, good.timestamp),
                (0, b"\x00\x01\xff", b"\x00", good.timestamp),  # truncated key
                (0, good.key, None, good.timestamp),  # a tombstone: fine
            ],
        )
        records = kafka(spark, mock).orderBy("offset").collect()
        quarantine = kafka(spark, mock, output="quarantine").collect()
    assert [(r.offset, r.tombstone, r.value and r.value.offset) for r in records] == [
        (0, False, 7),
        (2, True, None),
    ]
    assert len(quarantine) == 1
    bad = quarantine[0]
    assert (bad.source, bad.file, bad.position) == ("kafka", "__consumer_offsets-0", 1)
    assert bad.reason and bad.error
    assert json.loads(bad.raw) == {"key": "0001ff", "value": "00"}


def test_transaction_markers_at_the_end_of_a_range(spark: SparkSession) -> None:
    """A committed transaction ends the log with a marker the client never delivers: the
    reader must see the range's end through the EOF event instead of waiting for it.

    (The mock delivers aborted records too under read_committed; not shown here.)"""
    with MockCluster() as mock:
        mock.create_topic(REPUBLISHED, 1)
        producer = Producer({"bootstrap.servers": mock.bootstrap_servers, "transactional.id": "t1"})
        producer.init_transactions(30)
        producer.begin_transaction()
        key = bytes.fromhex("000100016700017400000000")
        rows = canonicals([RawRecord(0, i, 1, key, None) for i in range(3)])
        values = republished_values(rows, "json")
        produce(
            mock.bootstrap_servers,
            REPUBLISHED,
            ((0, None, v, None) for v in values),
            producer=producer,
        )
        producer.commit_transaction(30)
        # a reader that missed the end would wait for records that never come: fail fast
        df = kafka(spark, mock, topic=REPUBLISHED, **{"kafkaConsumer.pollTimeoutMs": "20000"})
        assert df.count() == 3
