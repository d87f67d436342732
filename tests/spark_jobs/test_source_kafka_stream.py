"""The kafka source, streaming: Kafka offsets are the stream's offsets, so restarts are exact.

A real Structured Streaming query (Parquet sink, checkpoint on disk) reads the mock cluster
in two rounds of produced records with a stop in between, and once more after a crash is
simulated between a batch's planning and its commit. The mock's limits (no last stable
offset below the high watermark) are in tests/spark_jobs/test_source_kafka.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.errors import StreamingQueryException

from offsetwatch.mock_cluster import MockCluster
from tests.spark_jobs.kafka_source_data import (
    OFFSETS_PARTITIONS,
    RawRecord,
    conformance_records,
    expected_rows,
    mock_positions,
    on_mock,
    produce_raw_records,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        mock.create_topic("__consumer_offsets", OFFSETS_PARTITIONS)
        yield mock


def run_stream(
    spark: SparkSession, cluster: MockCluster, checkpoint: Path, out: Path, **options: str
) -> None:
    """One run of the query to the end of what is there (Trigger.AvailableNow), then stop."""
    reader = (
        spark.readStream.format("offsetwatch")
        .option("source", "kafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    for attempt in (1, 2):
        query = (
            reader.load()
            .writeStream.foreachBatch(BatchWriter(str(out)))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(180)
            return
        except StreamingQueryException as error:
            # Spark gives the Python stream-reader process 10 s to connect back; on a loaded
            # shared machine that can expire before the query ran anything. Starting again
            # from the same checkpoint is itself the restart under test.
            if attempt == 2 or "failed to connect back" not in str(error):
                raise
        finally:
            query.stop()


class BatchWriter:
    """A sink with no deduplication of its own: batch N (over)writes out/batch=N, so a
    replayed batch that read other ranges than planned would show as duplicates or gaps."""

    def __init__(self, out: str) -> None:
        self.out = out

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(f"{self.out}/batch={batch_id}")


def sink_rows(spark: SparkSession, out: Path) -> list[Any]:
    df = spark.read.parquet(str(out)).drop("batch")
    return df.orderBy("partition", "offset").collect()


def batch_files(directory: Path) -> list[Path]:
    """A checkpoint log's files, one per batch id, in order (checksum files left out)."""
    return sorted((p for p in directory.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def last_offsets(checkpoint: Path) -> dict[str, Any]:
    """The source offsets Spark recorded for its last planned batch."""
    newest = batch_files(checkpoint / "offsets")[-1]
    offsets: dict[str, Any] = json.loads(newest.read_text().splitlines()[-1])
    return offsets


def test_restart_from_checkpoint_reads_each_record_once(
    spark: SparkSession, cluster: MockCluster, conformance_dir: Path, tmp_path: Path
) -> None:
    records = conformance_records(conformance_dir)
    half = len(records) // 2
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

    produce_raw_records(cluster.bootstrap_servers, records[:half])
    run_stream(spark, cluster, checkpoint, out, maxOffsetsPerTrigger="500")
    first = sink_rows(spark, out)
    assert len(first) == half
    batches_after_first = len(batch_files(checkpoint / "commits"))
    assert batches_after_first >= half // 500  # maxOffsetsPerTrigger made several batches

    produce_raw_records(cluster.bootstrap_servers, records[half:])
    run_stream(spark, cluster, checkpoint, out, maxOffsetsPerTrigger="500")

    assert sink_rows(spark, out) == expected_rows(on_mock(records))
    # the stream's offsets are the Kafka offsets: the log ends of every partition
    ends: dict[int, int] = {}
    for record, offset in mock_positions(records):
        ends[record.partition] = offset + 1
    recorded = last_offsets(checkpoint)
    assert {int(p): o for p, o in recorded["__consumer_offsets"].items() if o} == ends


def test_a_batch_planned_but_not_committed_is_replayed_with_the_same_ranges(
    spark: SparkSession, cluster: MockCluster, conformance_dir: Path, tmp_path: Path
) -> None:
    records: list[RawRecord] = conformance_records(conformance_dir)[:600]
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    produce_raw_records(cluster.bootstrap_servers, records)
    run_stream(spark, cluster, checkpoint, out, maxOffsetsPerTrigger="200")
    # a crash after the sink wrote the last batch but before Spark committed it
    commits = batch_files(checkpoint / "commits")
    assert len(commits) >= 3
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    produce_raw_records(cluster.bootstrap_servers, records[:50])  # more data meanwhile

    run_stream(spark, cluster, checkpoint, out, maxOffsetsPerTrigger="200")
    assert (checkpoint / "commits" / commits[-1].name).exists()  # replayed and committed
    assert sink_rows(spark, out) == expected_rows(on_mock(records + records[:50]))
