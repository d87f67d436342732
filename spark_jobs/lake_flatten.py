"""Canonical records -> the rows of the lake tables (spark_jobs/lake_schema.py).

Pure DataFrame -> DataFrame functions. They read fields by path and take a missing field as
null, so they work on the canonical struct of any source and on narrower schemas too (Spark's
inferred JSON schema, a history without log-end samples).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from offsetwatch.decoder import contract
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.lake_group_events import GROUP_RECORD_TYPES, GroupEvent, iter_events
from offsetwatch.spark_jobs.schema import NOT_TRANSACTIONAL, TXN_COLUMN

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import Column, DataFrame, SparkSession

LOG_END_TYPE: Final = contract.LOG_END_TYPE

#: the group-state table kept between incremental runs
GROUP_STATE_SCHEMA: Final = StructType(
    [StructField("group", StringType(), False), StructField("state", StringType(), False)]
)
_GROUP_RECORD_COLUMNS: Final = (
    "group",
    "type",
    "tombstone",
    "timestamp",
    "partition",
    "offset",
    "key_json",
    "value_json",
)


def field(schema: StructType, path: str, kind: DataType) -> Column:
    """`path` (dotted) cast to `kind`, or a null of `kind` when the schema has no such field."""
    node: DataType = schema
    for name in path.split("."):
        if not isinstance(node, StructType) or name not in node.fieldNames():
            return F.lit(None).cast(kind)
        node = node[name].dataType
    return F.col(path).cast(kind)


def utc_date(epoch_ms: Column) -> Column:
    return F.to_date(F.timestamp_millis(epoch_ms))


def _of_type(records: DataFrame, *types: str) -> DataFrame:
    return records.where(F.col("type").isin(*types))


def flatten_commits(records: DataFrame) -> DataFrame:
    """Offset commits and their tombstones (offset deletions and expiries) as `commits` rows."""
    schema = records.schema
    commits = _of_type(records, "offset_commit").where(F.col("group").isNotNull())
    deleted = F.col("tombstone")
    expire = field(schema, "value.expire_timestamp", LongType())
    # a source that knows outcomes has `txn`; one that does not says nothing of them
    txn = (
        F.col(TXN_COLUMN).cast(StringType())
        if TXN_COLUMN in records.columns
        else F.lit(NOT_TRANSACTIONAL)
    )
    return commits.select(
        F.col("group").cast(StringType()).alias("group"),
        field(schema, "key.topic", StringType()).alias("topic"),
        field(schema, "key.partition", IntegerType()).alias("partition"),
        F.when(deleted, F.lit("delete")).otherwise(F.lit("commit")).alias("kind"),
        F.when(~deleted, field(schema, "value.offset", LongType())).alias("offset"),
        F.when(~deleted, field(schema, "value.leader_epoch", IntegerType())).alias("leader_epoch"),
        F.when(~deleted, field(schema, "value.metadata", StringType())).alias("metadata"),
        F.when(~deleted, field(schema, "value.commit_timestamp", LongType())).alias("commit_ts"),
        F.when(~deleted & (expire >= 0), expire).alias("expire_ts"),
        F.col("timestamp").cast(LongType()).alias("record_ts"),
        F.coalesce(txn, F.lit(NOT_TRANSACTIONAL)).alias(TXN_COLUMN),
        F.col("partition").cast(IntegerType()).alias("source_partition"),
        F.col("offset").cast(LongType()).alias("source_offset"),
        utc_date(F.col("timestamp")).alias("date"),
    )


def flatten_log_ends(records: DataFrame) -> DataFrame:
    """Log-end samples (`type` log_end: key {topic, partition}, value {log_end_offset,
    sampled_at_ms}) as `log_ends` rows."""
    schema = records.schema
    sampled = field(schema, "value.sampled_at_ms", LongType())
    return (
        _of_type(records, LOG_END_TYPE)
        .where(~F.col("tombstone"))
        .select(
            field(schema, "key.topic", StringType()).alias("topic"),
            field(schema, "key.partition", IntegerType()).alias("partition"),
            field(schema, "value.log_end_offset", LongType()).alias("log_end_offset"),
            sampled.alias("sampled_at_ms"),
            utc_date(sampled).alias("date"),
        )
        .where(F.col("topic").isNotNull() & F.col("sampled_at_ms").isNotNull())
    )


def group_records(records: DataFrame) -> DataFrame:
    """The records group events come from, with key and value as JSON text for Python."""
    has_text = "key_json" in records.columns
    return (
        _of_type(records, *sorted(GROUP_RECORD_TYPES))
        .where(F.col("group").isNotNull())
        .select(
            "group",
            "type",
            "tombstone",
            F.col("timestamp").cast(LongType()).alias("timestamp"),
            F.col("partition").cast(IntegerType()).alias("partition"),
            F.col("offset").cast(LongType()).alias("offset"),
            F.col("key_json") if has_text else F.to_json("key").alias("key_json"),
            F.col("value_json")
            if has_text
            else F.when(~F.col("tombstone"), F.to_json("value")).alias("value_json"),
        )
    )


#: the top-level columns the lake tables read
_KEPT: Final = ("type", "tombstone", "group", "partition", "offset", "timestamp")
#: the key / value fields the lake tables read besides group records' whole JSON
_KEY_FIELDS: Final = ("topic", "partition")
_VALUE_FIELDS: Final = (
    "offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp",
    "expire_timestamp",
    "log_end_offset",
    "sampled_at_ms",
)
#: `__share_group_state` records (the `share_state` table, spark_jobs/lake_share_state.py)
SHARE_STATE_RECORD_TYPES: Final = frozenset({"share_snapshot", "share_update"})
#: records kept with their key and value as JSON text (deep values read in Python)
TEXT_RECORD_TYPES: Final = GROUP_RECORD_TYPES | SHARE_STATE_RECORD_TYPES
#: the record types the lake tables come from
LAKE_RECORD_TYPES: Final = frozenset(
    {contract.OFFSET_COMMIT_TYPE, LOG_END_TYPE, *TEXT_RECORD_TYPES}
)


def _narrow_fields(schema: StructType, name: str, names: tuple[str, ...]) -> list[StructField]:
    node = schema[name].dataType
    if not isinstance(node, StructType):
        return []
    return [node[n] for n in names if n in node.fieldNames()]


def pruned_struct(records: StructType) -> StructType:
    """The schema of `prune` of records of schema `records` (every field nullable): what
    compact caches, and what the archive source's `lake` output yields directly."""
    kept = [records[n] for n in (*_KEPT, TXN_COLUMN) if n in records.fieldNames()]
    nested = [
        StructField(name, StructType(_narrow_fields(records, name, names)), True)
        for name, names in (("key", _KEY_FIELDS), ("value", _VALUE_FIELDS))
    ]
    text = [StructField(n, StringType(), True) for n in ("key_json", "value_json")]
    return StructType([StructField(f.name, f.dataType, True) for f in kept] + nested + text)


def prune(records: DataFrame) -> DataFrame:
    """Only what the lake tables need, narrow enough to cache: the wide canonical key and
    value structs become small structs, group and share-state records keep their key and
    value as JSON text (`group_records` and `share_state_records` use it). Every flatten
    function accepts the result."""
    schema = records.schema
    is_group = F.col("type").isin(*sorted(TEXT_RECORD_TYPES))

    def narrowed(name: str, names: tuple[str, ...]) -> Column:
        fields = _narrow_fields(schema, name, names)
        return F.struct(*[F.col(f"{name}.{f.name}") for f in fields]).alias(name)

    kept = [n for n in (*_KEPT, TXN_COLUMN) if n in records.columns]
    return records.where(F.col("type").isin(*sorted(LAKE_RECORD_TYPES))).select(
        *kept,
        narrowed("key", _KEY_FIELDS),
        narrowed("value", _VALUE_FIELDS),
        F.when(is_group, F.to_json("key")).alias("key_json"),
        F.when(is_group & ~F.col("tombstone"), F.to_json("value")).alias("value_json"),
    )


# -- group events in the executors: top-level functions, so that they pickle by reference ---


def _keyed_record(row: Any) -> tuple[str, dict[str, Any]]:
    record = {
        "type": row["type"],
        "tombstone": row["tombstone"],
        "timestamp": row["timestamp"],
        "partition": row["partition"],
        "offset": row["offset"],
        "key": json.loads(row["key_json"]),
        "value": None if row["value_json"] is None else json.loads(row["value_json"]),
    }
    return row["group"], record


def _keyed_state(row: Any) -> tuple[str, str]:
    return row["group"], row["state"]


#: a row of `_EVENTS_OR_STATE`: an event (state null) or a group's new state (event null)
_EVENTS_OR_STATE: Final = StructType(
    [
        StructField(f.name, f.dataType, True)
        for f in ls.GROUP_EVENTS_SCHEMA.fields
        if f.name != "date"
    ]
    + [StructField("new_state", StringType(), True)]
)


def _events_and_state(
    item: tuple[str, tuple[Iterable[dict[str, Any]], Iterable[str]]],
) -> Iterator[tuple[Any, ...]]:
    group, (records, states) = item
    prior = next(iter(states), None)
    width = len(_EVENTS_OR_STATE.fields) - 1
    for out in iter_events(group, prior, records):
        if isinstance(out, GroupEvent):
            yield (
                out.group,
                out.group_type,
                out.event,
                out.ts,
                out.generation,
                out.state,
                out.member_id,
                out.client_id,
                out.client_host,
                out.detail,
                out.source_partition,
                out.source_offset,
                None,
            )
        else:
            yield (group, *([None] * (width - 1)), out)


def derive_group_events(
    spark: SparkSession, records: DataFrame, prior_states: DataFrame | None
) -> DataFrame:
    """Group events of `group_records(...)` rows, continuing from `prior_states` (rows of
    GROUP_STATE_SCHEMA). Returns event rows and new-state rows in one frame (`new_state` set
    on state rows); `split_events` separates them."""
    keyed: RDD[tuple[str, Any]] = records.rdd.map(_keyed_record)
    states: RDD[tuple[str, Any]] = (
        prior_states.rdd.map(_keyed_state)
        if prior_states is not None
        else spark.sparkContext.emptyRDD()
    )
    out = keyed.cogroup(states).flatMap(_events_and_state)
    return spark.createDataFrame(out, _EVENTS_OR_STATE)


def split_events(combined: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(group_events rows, group-state rows) of `derive_group_events`' output."""
    events = combined.where(F.col("new_state").isNull()).select(
        *[
            F.col(f.name).cast(f.dataType)
            for f in ls.GROUP_EVENTS_SCHEMA.fields
            if f.name != "date"
        ],
        utc_date(F.col("ts")).alias("date"),
    )
    states = combined.where(F.col("new_state").isNotNull()).select(
        "group", F.col("new_state").alias("state")
    )
    return events, states
