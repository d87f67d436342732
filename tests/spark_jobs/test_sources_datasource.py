"""The `offsetwatch` data source's own errors: they reach the driver wrapped by Spark, so the
tests look for the message, which must say what to do."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from offsetwatch.spark_jobs.lake_schema import QUARANTINE_SCHEMA
from offsetwatch.spark_jobs.schema import records_struct

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_missing_or_unknown_source_says_which_exist(spark: SparkSession) -> None:
    with pytest.raises(Exception, match=r"no option source.*archive, segments, kafka"):
        spark.read.format("offsetwatch").load().collect()
    with pytest.raises(Exception, match=r"option source='hdfs'"):
        spark.read.format("offsetwatch").option("source", "hdfs").load().collect()


def test_schema_follows_the_output_option(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("")
    reader = spark.read.format("offsetwatch").option("source", "archive")
    assert reader.load(str(tmp_path)).schema == records_struct()
    quarantine = reader.option("output", "quarantine").load(str(tmp_path))
    assert quarantine.schema == QUARANTINE_SCHEMA
    with pytest.raises(Exception, match=r"option output='nope'"):
        reader.option("output", "nope").load(str(tmp_path)).collect()


def test_file_sources_do_not_stream(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no streaming reader"):
        stream = (
            spark.readStream.format("offsetwatch").option("source", "segments").load(str(tmp_path))
        )
        stream.writeStream.format("noop").start().awaitTermination(30)
