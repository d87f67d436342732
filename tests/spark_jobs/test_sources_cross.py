"""Every source gives the same DataFrame for the same records (issue 6 §2).

For each conformance run captured from Kafka 4.0: the records (records.jsonl, decoded by our
decoder) are written through the exporter's ArchiveWriter as JSON lines and as Avro, then
read back as archive-jsonl, archive-avro and, from the run's raw segment files, segments. After
dedupe on (partition, offset) the three frames hold identical rows. `txn` is left out of the
comparison: only segments know transaction outcomes (checked on its own below).

kafka: the main run's records republished (JSON, as the exporter publishes them) on
librdkafka's mock cluster and read by the kafka source give the same rows too. Raw
`__consumer_offsets` through the mock cannot join this comparison: the mock numbers each
partition's offsets densely where Kafka's log had gaps (markers, compaction), so
test_source_kafka.py compares those rows with the decoder at the mock's offsets instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.spark_jobs.reader import dedupe, read_records
from offsetwatch.spark_jobs.schema import TXN_COLUMN, canonical_struct
from tests.conformance_data import decode_run, run_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

_RUNS = ["main", "expiry", "codec-gzip", "codec-lz4", "codec-snappy", "codec-zstd"]


def _archive(conformance_dir: Path, run: str, target: Path, fmt: str) -> Path:
    canonical = Canonical()
    with ArchiveWriter(target, fmt, roll_bytes=64 * 1024) as writer:  # type: ignore[arg-type]
        for record in decode_run(conformance_dir, run):
            writer.write(canonical.to_dict(record))
    return target


def _rows(frame: DataFrame) -> list[Any]:
    columns = [f.name for f in canonical_struct().fields]
    return sorted(dedupe(frame).select(*columns).collect(), key=lambda r: (r.partition, r.offset))


@pytest.mark.parametrize("run", _RUNS)
def test_archive_jsonl_avro_and_segments_agree(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path, run: str
) -> None:
    assert run in run_names(conformance_dir)
    jsonl = _archive(conformance_dir, run, tmp_path / "jsonl", "jsonl")
    avro = _archive(conformance_dir, run, tmp_path / "avro", "avro")
    segments = conformance_dir / "runs" / run / "segments"

    from_jsonl = _rows(read_records(spark, "archive", str(jsonl)))
    from_avro = _rows(read_records(spark, "archive", str(avro)))
    from_segments = _rows(read_records(spark, "segments", str(segments)))

    assert len(from_jsonl) == len(decode_run(conformance_dir, run))
    assert from_jsonl == from_avro
    assert from_segments == from_jsonl


def test_segments_know_transaction_outcomes(spark: SparkSession, conformance_dir: Path) -> None:
    """The main run holds committed, aborted and still-open transactional offset commits;
    plain records say "none" and the archive cannot know (null)."""
    segments = conformance_dir / "runs" / "main" / "segments"
    outcomes = {
        row[TXN_COLUMN]
        for row in read_records(spark, "segments", str(segments)).select(TXN_COLUMN).collect()
    }
    assert outcomes == {"none", "committed", "aborted", "pending"}


def test_kafka_republished_topic_agrees_with_the_archive(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path
) -> None:
    from offsetwatch.decoder.canonical import dumps
    from offsetwatch.mock_cluster import MockCluster
    from tests.spark_jobs.kafka_source_data import produce

    canonical = Canonical()
    records = [canonical.to_dict(r) for r in decode_run(conformance_dir, "main")]
    jsonl = _archive(conformance_dir, "main", tmp_path / "jsonl", "jsonl")
    with MockCluster() as mock:
        mock.create_topic("offsetwatch.records", 3)
        produce(
            mock.bootstrap_servers,
            "offsetwatch.records",
            ((r["partition"] % 3, None, dumps(r).encode(), None) for r in records),
        )
        options = {
            "kafka.bootstrap.servers": mock.bootstrap_servers,
            "topic": "offsetwatch.records",
            "format": "json",
            "startingOffsets": "earliest",
        }
        from_kafka = _rows(read_records(spark, "kafka", **options))
    assert from_kafka == _rows(read_records(spark, "archive", str(jsonl)))
