"""`read_records`: the one way every Spark job gets canonical records, whatever the input.

    records = read_records(spark, "archive", "/data/offsetwatch/archive")
    records = read_records(spark, "segments", "/var/kafka-logs")
    records = read_records(spark, "kafka", **{"kafka.bootstrap.servers": "broker:9092"})

All give `schema.records_struct()` (the canonical record plus `txn`). For the archive, JSON
lines go through Spark's native JSON reader with the explicit schema (several times faster
than parsing in Python) and Avro files through the `offsetwatch` data source; the two are
unioned. `read_quarantine` gives the bad input of the same read (QUARANTINE_SCHEMA).
`read_lake_input` is what compact reads: the lake's columns of the records and the bad input
in one frame (one scan of an archive). Records are NOT deduplicated: the archive is
at-least-once, so jobs drop duplicates on `(partition, offset)` where it matters (`dedupe`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from offsetwatch.decoder import contract
from offsetwatch.spark_jobs.datasource import SOURCES
from offsetwatch.spark_jobs.lake_flatten import field, prune
from offsetwatch.spark_jobs.lake_schema import QUARANTINE_SCHEMA
from offsetwatch.spark_jobs.schema import TXN_COLUMN, canonical_struct, records_struct
from offsetwatch.spark_jobs.sources import (
    OUTPUT_QUARANTINE,
    PATHS_OPTION,
    InputError,
)
from offsetwatch.spark_jobs.sources.archive import archive_files, is_avro, is_jsonl
from offsetwatch.spark_jobs.sources.kafka_connector import (
    READER_CONNECTOR,
    read_connector,
    reader_of,
)
from offsetwatch.spark_jobs.sources.lake_input import BAD_COLUMN, OUTPUT_LAKE, lake_input_struct
from offsetwatch.spark_jobs.sources.segments import segment_partitions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "InputError",
    "dedupe",
    "lake_input",
    "read_json_lines",
    "read_lake_input",
    "read_quarantine",
    "read_records",
]

_CORRUPT: Final = "_corrupt_record"


def read_records(
    spark: SparkSession,
    source: str,
    path: str | Sequence[str] | None = None,
    **options: str,
) -> DataFrame:
    """The canonical records of `source` ("archive", "segments", "kafka") at `path` (one
    path or several: files or directories).

    `options` go to the data source (`splitBytes` for segments, the `kafka.*` and offset
    options for kafka). Raises InputError (a clear one-line message) for a missing path,
    an input without any file of the source's kind, or an unknown source.
    """
    _check_source(source)
    if source == "archive":
        return _read_archive(spark, _paths(source, path), options)
    if source == "kafka" and reader_of(options) == READER_CONNECTOR:
        return read_connector(spark, options)
    if source == "segments":
        paths = _paths(source, path)
        segment_partitions(paths)  # InputError here, on the driver (see _source_reader)
        options = {**options, PATHS_OPTION: json.dumps(paths)}
    frame: DataFrame = _source_reader(spark, source, options).load()
    return frame


def read_quarantine(
    spark: SparkSession,
    source: str,
    path: str | Sequence[str] | None = None,
    **options: str,
) -> DataFrame:
    """The bad input of the same read as `read_records` (QUARANTINE_SCHEMA), a second scan;
    count per reason with `.groupBy("reason").count()`."""
    _check_source(source)
    options = {**options, "output": OUTPUT_QUARANTINE}
    if source == "kafka" and reader_of(options) == READER_CONNECTOR:
        return read_connector(spark, options)
    if source == "archive":
        files = [str(f) for f in archive_files(_paths(source, path))]
        options[PATHS_OPTION] = json.dumps(files)
    elif source == "segments":
        paths = _paths(source, path)
        segment_partitions(paths)
        options[PATHS_OPTION] = json.dumps(paths)
    frame: DataFrame = _source_reader(spark, source, options).load()
    return frame


def read_lake_input(
    spark: SparkSession,
    source: str,
    path: str | Sequence[str] | None = None,
    **options: str,
) -> DataFrame:
    """The input of compact (`lake_input_struct()` rows: the lake's columns of each record,
    and bad input with `bad` set): one scan of an archive; records and quarantine (two
    scans) of segments and of a topic."""
    _check_source(source)
    if source == "archive":
        files = [str(f) for f in archive_files(_paths(source, path))]
        lake_options = {**options, "output": OUTPUT_LAKE, PATHS_OPTION: json.dumps(files)}
        frame: DataFrame = _source_reader(spark, source, lake_options).load()
        return frame
    records = read_records(spark, source, path, **options)
    return lake_input(records, read_quarantine(spark, source, path, **options))


def lake_input(records: DataFrame, quarantine: DataFrame | None = None) -> DataFrame:
    """Canonical records (any narrower schema too) and their bad input (QUARANTINE_SCHEMA
    rows) as one frame of `lake_input_struct()`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    pruned = prune(records)
    schema = pruned.schema
    columns = []
    for top in lake_input_struct().fields:
        if top.name == BAD_COLUMN:
            continue
        if isinstance(top.dataType, StructType):
            inner = [
                field(schema, f"{top.name}.{f.name}", f.dataType).alias(f.name)
                for f in top.dataType.fields
            ]
            columns.append(F.struct(*inner).alias(top.name))
        else:
            columns.append(field(schema, top.name, top.dataType).alias(top.name))
    bad_type = lake_input_struct()[BAD_COLUMN].dataType
    out = pruned.select(*columns, F.lit(None).cast(bad_type).alias(BAD_COLUMN))
    if quarantine is None:
        return out
    bad = quarantine.select(
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in out.schema.fields[:-1]],
        F.struct(*QUARANTINE_SCHEMA.fieldNames()).cast(bad_type).alias(BAD_COLUMN),
    )
    return out.unionByName(bad)


def dedupe(records: DataFrame) -> DataFrame:
    """One row per `(partition, offset)`: the archive is at-least-once."""
    return records.dropDuplicates(["partition", "offset"])


def _check_source(source: str) -> None:
    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}: use one of {', '.join(SOURCES)}")


def _paths(source: str, path: str | Sequence[str] | None) -> list[str]:
    paths = [path] if isinstance(path, str) else list(path or ())
    if not any(paths):
        raise InputError(f"source {source} needs an input path")
    return [str(p) for p in paths if p]


def _source_reader(spark: SparkSession, source: str, options: dict[str, Any]) -> Any:
    """The `offsetwatch` data source's reader. Inputs are checked before this: the source
    plans in a Python worker, whose exceptions reach the driver wrapped in Spark's."""
    reader = spark.read.format("offsetwatch").option("source", source)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader


def _read_archive(spark: SparkSession, paths: list[str], options: dict[str, Any]) -> DataFrame:

    files = archive_files(paths)
    jsonl = [str(f) for f in files if is_jsonl(f)]
    avro = [str(f) for f in files if is_avro(f)]
    frames = []
    if jsonl:
        frames.append(read_json_lines(spark, jsonl))
    if avro:
        frames.append(
            _source_reader(spark, "archive", {**options, PATHS_OPTION: json.dumps(avro)})
            .schema(records_struct())
            .load()
        )
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def read_json_lines(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """Canonical JSON lines (archive files, `decode --format json` output under any name)
    through Spark's native JSON reader: `records_struct()` rows, the line's `transaction` as
    `txn`. Lines that are no record, or that `contract.problem` refuses, are left to the
    quarantine (`read_quarantine` parses them in Python and says why)."""
    from pyspark.sql import functions as F

    raw = (
        spark.read.schema(
            canonical_struct().add(contract.TRANSACTION, "string").add(_CORRUPT, "string")
        )
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .json(list(files))
    )
    good = F.col(_CORRUPT).isNull()
    for name in contract.REQUIRED:
        good = good & F.col(name).isNotNull()
    version = F.coalesce(F.col(contract.SCHEMA), F.lit(contract.FIRST_SCHEMA_VERSION))
    outcome = F.col(contract.TRANSACTION)
    good = (
        good
        & version.between(contract.FIRST_SCHEMA_VERSION, contract.SCHEMA_VERSION)
        & (outcome.isNull() | outcome.isin(*contract.OUTCOMES))
    )
    frame: DataFrame = (
        raw.where(good).drop(_CORRUPT).withColumnRenamed(contract.TRANSACTION, TXN_COLUMN)
    )
    return frame
