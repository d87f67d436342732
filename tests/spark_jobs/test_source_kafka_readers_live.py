"""The two Kafka readers on the real broker: Spark's own connector and the Python data source.

Both read one private topic of `__consumer_offsets` records (offset commits and tombstones,
classic, consumer and streams group records, undecodable bytes), written by a transactional
producer with one transaction aborted: what a real broker filters (read_committed), which the
mock cluster cannot show. The references are each other and the records written:

* `spark compact --source kafka` builds the same lake, table by table, with either reader, and
  neither has the aborted records;
* a stream over the topic (Trigger.AvailableNow) stopped and started again from its checkpoint
  with more records in between reads each record exactly once with either reader.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer

from offsetwatch import cli
from offsetwatch.record_factory import Member, RecordFactory
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.compact import compact
from offsetwatch.spark_jobs.reader import read_records
from offsetwatch.spark_jobs.streaming.sources import kafka_stream
from tests.real_broker import Broker, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

READERS = ("connector", "python")
PARTITIONS = 3
#: not a record of any kind: both readers quarantine it
BAD = (b"\x00\x01\x00\x09trunc", b"\x00\x01garbage")


def records(round_: int) -> list[tuple[bytes, bytes | None]]:
    """Every kind of record the lake keeps, different in each round."""
    factory, group = RecordFactory(), f"billing-{round_}"
    now = 1_780_000_000_000 + round_ * 60_000
    member = Member(f"m-{round_}", "client-1", "/10.0.0.1", (("orders", (0, 1)),))
    out = [
        factory.commit(group, "orders", p, 100 * round_ + i, now + i)
        for i, p in enumerate((0, 1) * 20)
    ]
    out.append(factory.commit_tombstone(group, "orders", 1))
    out.append(factory.classic_group(f"classic-{round_}", 3, [member], now))
    out.extend(factory.consumer_group(f"kip848-{round_}", 5, [member], {"orders": 2}))
    out.extend(factory.streams_group(f"streams-{round_}", 2, [member], "orders"))
    out.append(factory.classic_group_tombstone(f"classic-{round_}"))
    return [(key, value) for key, value in out]


def write(broker: Broker, topic: str, round_: int) -> None:
    """One round: a committed transaction of good and bad records, then an aborted one of
    commits nobody may see."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": unique("readers-txn")}
    )
    producer.init_transactions(30)
    committed = [*records(round_), BAD]
    producer.begin_transaction()
    for i, (key, value) in enumerate(committed):
        producer.produce(topic, key=key, value=value, partition=i % PARTITIONS)
    producer.commit_transaction(30)
    producer.begin_transaction()
    factory = RecordFactory()
    for p in range(PARTITIONS):
        key, value = factory.commit("aborted", "orders", p, 999, 1_780_000_000_000)
        producer.produce(topic, key=key, value=value, partition=p)
    # Aborting while the records are still queued races librdkafka's AddPartitionsToTxn
    # against its EndTxn, and the broker may answer a fatal INVALID_TXN_STATE
    # (librdkafka issue 4849); the aborted records must be in the log anyway.
    assert producer.flush(30) == 0
    producer.abort_transaction(30)


@pytest.fixture
def topic(kafka_broker: Broker) -> Iterator[str]:
    name = unique("ow-readers")
    kafka_broker.create_topic(name, PARTITIONS)
    yield name


def options(broker: Broker, topic: str, reader: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.bootstrap,
        "topic": topic,
        "format": "raw",
        "reader": reader,
    }


def table_rows(spark: SparkSession, lake: Path, table: str) -> list[Any]:
    directory = lake / table
    if not any(directory.rglob("*.parquet")):
        return []
    frame = spark.read.parquet(str(directory))
    return sorted(frame.collect(), key=repr)


def test_both_readers_build_the_same_lake(
    connector_spark: SparkSession, kafka_broker: Broker, topic: str, tmp_path: Path
) -> None:
    """`spark compact --source kafka --kafka-reader connector` (the command, in this process:
    it takes the shared session) and the library's compact with the Python reader."""
    spark = connector_spark
    write(kafka_broker, topic, 1)
    python = compact(
        spark,
        "kafka",
        tmp_path / "python",
        options=options(kafka_broker, topic, "python"),
        progress=lambda _line: None,
    )
    code = cli.main(
        ["spark", "compact", "--source", "kafka", "--kafka-reader", "connector",
         "--lake", str(tmp_path / "connector"), "--bootstrap-server", kafka_broker.bootstrap,
         "--option", f"topic={topic}", "--option", "format=raw"]
    )  # fmt: skip
    assert code in (0, None)
    assert sum(python.quarantined.values()) == 1  # the bad record
    for table in (*ls.LAKE_TABLES, ls.SHARE_STATE, ls.QUARANTINE):
        assert table_rows(spark, tmp_path / "connector", table) == table_rows(
            spark, tmp_path / "python", table
        ), table
    commits = table_rows(spark, tmp_path / "python", ls.COMMITS)
    assert len(commits) == python.rows[ls.COMMITS] > 0
    assert not [c for c in commits if c["group"] == "aborted"]


def test_both_readers_read_the_real_consumer_offsets(
    connector_spark: SparkSession, kafka_broker: Broker
) -> None:
    """Kafka's own internal topic, which Spark's default (Admin-based) offset reader skips:
    a group's records, written by the broker's coordinator, the same through both."""
    topic, group = unique("orders"), unique("readers-group")
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(topic, [5, 5])
    kafka_broker.commit(group, {(topic, 0): 3, (topic, 1): 4})
    seen = {}
    for reader in READERS:
        frame = read_records(
            connector_spark,
            "kafka",
            **{"kafka.bootstrap.servers": kafka_broker.bootstrap, "reader": reader},
        )
        rows = frame.where(frame["group"] == group).collect()
        seen[reader] = sorted(rows, key=lambda r: (r["partition"], r["offset"]))
    assert seen["connector"] == seen["python"]
    commits = {(r["key"]["topic"], r["key"]["partition"]) for r in seen["python"]}
    assert commits == {(topic, 0), (topic, 1)}


def run_stream(spark: SparkSession, source: dict[str, str], checkpoint: Path, out: Path) -> None:
    """One run to the end of what is there (Trigger.AvailableNow), then stop."""
    query = (
        kafka_stream(spark, {**source, "startingOffsets": "earliest"})
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    finally:
        query.stop()
    assert query.exception() is None


def test_both_readers_resume_exactly_from_their_checkpoints(
    connector_spark: SparkSession, kafka_broker: Broker, topic: str, tmp_path: Path
) -> None:
    spark = connector_spark
    write(kafka_broker, topic, 1)
    for reader in READERS:
        source = options(kafka_broker, topic, reader)
        run_stream(spark, source, tmp_path / reader / "checkpoint", tmp_path / reader / "out")
    write(kafka_broker, topic, 2)
    seen = {}
    for reader in READERS:
        source = options(kafka_broker, topic, reader)
        run_stream(spark, source, tmp_path / reader / "checkpoint", tmp_path / reader / "out")
        rows = spark.read.parquet(str(tmp_path / reader / "out")).collect()
        positions = [(r["partition"], r["offset"]) for r in rows]
        assert len(positions) == len(set(positions)), f"{reader}: a record read twice"
        seen[reader] = sorted(rows, key=lambda r: (r["partition"], r["offset"]))
    assert seen["connector"] == seen["python"]
    # every good record of both rounds, none aborted, the bad ones only in the quarantine
    assert len(seen["python"]) == len(records(1)) + len(records(2))
    assert not [r for r in seen["python"] if r["group"] == "aborted"]
