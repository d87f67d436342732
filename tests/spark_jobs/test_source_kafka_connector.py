"""decode_kafka_dataframe: the path for clusters with Spark's own spark-sql-kafka connector.

The connector is a Maven jar pip's pyspark does not ship, so the input here is a DataFrame
built with the connector's columns and types (key/value binary, topic string, partition int,
offset long, timestamp, timestampType int), holding the main conformance run.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.spark_jobs.sources import InputError
from offsetwatch.spark_jobs.sources.kafka_connector import decode_kafka_dataframe
from tests.spark_jobs.kafka_source_data import (
    REPUBLISHED,
    RawRecord,
    canonicals,
    conformance_records,
    expected_rows,
    republished_values,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

CONNECTOR_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


def connector_frame(
    spark: SparkSession, topic: str, rows: list[tuple[int, int, int, bytes | None, bytes | None]]
) -> DataFrame:
    """(partition, offset, timestamp ms, key, value) as the connector would load them."""
    data = [
        (key, value, topic, p, o, dt.datetime.fromtimestamp(ts / 1000, dt.UTC), 0)
        for p, o, ts, key, value in rows
    ]
    return spark.createDataFrame(data, CONNECTOR_SCHEMA)


def sorted_rows(df: DataFrame) -> list[Any]:
    return df.orderBy("partition", "offset").collect()


@pytest.fixture(scope="module")
def records(conformance_dir: Path) -> list[RawRecord]:
    return conformance_records(conformance_dir)


def test_raw_consumer_offsets(spark: SparkSession, records: list[RawRecord]) -> None:
    raw = connector_frame(
        spark,
        "__consumer_offsets",
        [(r.partition, r.offset, r.timestamp, r.key, r.value) for r in records],
    )
    decoded = decode_kafka_dataframe(raw)
    assert sorted_rows(decoded) == expected_rows(canonicals(records))


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_republished_topic(spark: SparkSession, records: list[RawRecord], fmt: str) -> None:
    expected = canonicals(records)
    raw = connector_frame(
        spark,
        REPUBLISHED,
        [(0, i, 0, None, v) for i, v in enumerate(republished_values(expected, fmt))],
    )
    decoded = decode_kafka_dataframe(raw, format=fmt)  # type: ignore[arg-type]
    assert sorted_rows(decoded) == expected_rows(expected)


def test_bad_records_skipped_and_given_as_quarantine_rows(
    spark: SparkSession, records: list[RawRecord]
) -> None:
    good = records[0]
    raw = connector_frame(
        spark,
        "__consumer_offsets",
        [
            (3, 10, good.timestamp, good.key, good.value),
            (3, 11, good.timestamp, b"\x00\x01\xff", b"\x00"),
        ],
    )
    assert decode_kafka_dataframe(raw).count() == 1
    bad = decode_kafka_dataframe(raw, output="quarantine").collect()
    assert [(b.source, b.file, b.position) for b in bad] == [("kafka", "__consumer_offsets-3", 11)]
    assert json.loads(bad[0].raw) == {"key": "0001ff", "value": "00"}


def test_not_a_connector_frame(spark: SparkSession) -> None:
    with pytest.raises(InputError, match="no column key, value"):
        decode_kafka_dataframe(spark.range(1))
