"""`spark.read.format("offsetwatch")`: one PySpark Python data source for every input.

`.option("source", ...)` picks the input: `archive` (the exporter's JSON-lines / Avro files),
`segments` (raw `__consumer_offsets` log segment files) or `kafka` (a live topic, batch and
streaming). Every source yields `schema.records_struct()`: the canonical record generated from
the Avro schema, plus `txn`.

`.option("output", "quarantine")` reads the same input but yields its bad input instead, one
row of `lake_schema.QUARANTINE_SCHEMA` each (spark_jobs/sources/__init__.py says why a second
scan rather than a side channel). `.option("output", "lake")` (archive only) is compact's
single scan: the lake's columns and the bad input together (spark_jobs/sources/lake_input.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from offsetwatch.spark_jobs.lake_schema import QUARANTINE_SCHEMA
from offsetwatch.spark_jobs.schema import records_struct
from offsetwatch.spark_jobs.sources import OUTPUT_QUARANTINE, InputError, output_of
from offsetwatch.spark_jobs.sources.lake_input import OUTPUT_LAKE, lake_input_struct

SOURCES: Final = ("archive", "segments", "kafka")


def source_of(options: Mapping[str, str]) -> str:
    source = options.get("source")
    if source not in SOURCES:
        given = "no option source" if source is None else f"option source={source!r}"
        raise InputError(f"{given}: use .option('source', X) with X one of {', '.join(SOURCES)}")
    return source


class OffsetwatchDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "offsetwatch"

    def schema(self) -> StructType:
        if self.options.get("output") == OUTPUT_LAKE:
            if source_of(self.options) != "archive":
                raise InputError(f"option output={OUTPUT_LAKE!r} is only for source archive")
            return lake_input_struct()
        if output_of(self.options) == OUTPUT_QUARANTINE:
            return QUARANTINE_SCHEMA
        return records_struct()

    def reader(self, schema: StructType) -> Any:
        source = source_of(self.options)
        if source == "archive":
            from offsetwatch.spark_jobs.sources.archive import ArchiveReader

            return ArchiveReader(schema, self.options)
        if source == "segments":
            from offsetwatch.spark_jobs.sources.segments import SegmentReader

            return SegmentReader(schema, self.options)
        from offsetwatch.spark_jobs.sources.kafka import KafkaBatchReader

        return KafkaBatchReader(schema, self.options)

    def streamReader(self, schema: StructType) -> Any:
        source = source_of(self.options)
        if source != "kafka":
            raise InputError(
                f"source {source} has no streaming reader: stream an archive directory with "
                "spark.readStream.schema(canonical_struct()).json(DIR) (offsetwatch spark "
                "stream does), or use source kafka"
            )
        from offsetwatch.spark_jobs.sources.kafka import KafkaStreamReader

        return KafkaStreamReader(schema, self.options)
