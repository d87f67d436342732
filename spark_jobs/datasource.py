"""`spark.read.format("offsetwatch")`: one PySpark Python data source for every input.

`.option("source", ...)` picks the input: `archive` (the exporter's JSON-lines / Avro files),
`segments` (raw `__consumer_offsets` log segment files) or `kafka` (a live topic). Every source
yields the canonical record schema (spark_jobs/schema.py).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

SOURCES = ("archive", "segments", "kafka")


class OffsetwatchDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "offsetwatch"
