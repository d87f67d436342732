"""The stream's input: the exporter's archive directory (Spark's file stream over the
JSON-lines files, with the canonical schema) or a Kafka topic (the `offsetwatch` data source's
stream reader, whose Kafka offsets are the stream's offsets), with an event-time column and a
watermark."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from pyspark.sql import functions as F

from offsetwatch.decoder import contract
from offsetwatch.spark_jobs.schema import canonical_struct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the archive's JSON-lines files (gzipped too); hidden in-progress files never match
ARCHIVE_GLOB: Final = "date=*/hour=*/*.jsonl*"
EVENT_TIME: Final = "event_time"


def archive_stream(spark: SparkSession, directory: str) -> DataFrame:
    """The archive's canonical records as a stream (new files as they are published)."""
    frame: DataFrame = (
        spark.readStream.schema(canonical_struct())
        .option("mode", "DROPMALFORMED")
        .json(f"{directory.rstrip('/')}/{ARCHIVE_GLOB}")
    )
    return frame


def kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The canonical records of a Kafka topic as a stream (the `kafka` source's options;
    `reader=connector` reads through Spark's own connector, its offsets in the checkpoint)."""
    from offsetwatch.spark_jobs.sources.kafka_connector import (
        READER_CONNECTOR,
        read_connector,
        reader_of,
    )

    if reader_of(options) == READER_CONNECTOR:
        return read_connector(spark, options, stream=True)
    frame: DataFrame = (
        spark.readStream.format("offsetwatch").option("source", "kafka").options(**options).load()
    )
    return frame


def with_watermark(records: DataFrame, delay: str) -> DataFrame:
    """Adds the event time (the record's timestamp) and a watermark `delay` behind it."""
    event_time = F.timestamp_millis(F.col(contract.TIMESTAMP))
    return records.withColumn(EVENT_TIME, event_time).withWatermark(EVENT_TIME, delay)
