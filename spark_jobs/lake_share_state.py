"""`__share_group_state` records -> the lake's `share_state` table (lake_schema.SHARE_STATE_SCHEMA).

One row per record: the record as written, and the share partition's state after it, combined
as Kafka's share coordinator combines updates onto the last snapshot
(`offsetwatch.decoder.share_combine`, the one copy of that logic). The fold runs per share
partition in the executors, in `__share_group_state` order (a share partition's records all
live in one partition of that topic, so its offset orders them), continuing from the state of
the partition's last row already in the lake: an incremental run that reads only updates still
combines them onto the right snapshot.

Topic ids become names through the group records that name them (share and KIP-848 consumer
partition metadata) in this run, or the name an earlier row of the lake already carries.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from offsetwatch.decoder import share_combine as sc
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.lake_flatten import SHARE_STATE_RECORD_TYPES, utc_date

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

#: group records whose values list topic ids with their names
NAMING_TYPES: Final = ("share_group_partition_metadata", "consumer_group_partition_metadata")
#: a record older than the last one the lake applied for its partition (not combined)
LATE: Final = "late"
_ROW_SCHEMA: Final = StructType([f for f in ls.SHARE_STATE_SCHEMA.fields if f.name != "date"])
_STATE_COLUMNS: Final = (
    "state_start_offset",
    "state_snapshot_epoch",
    "state_state_epoch",
    "state_leader_epoch",
    "state_batches",
    "state_delivery_complete_count",
)
#: what a run continues from, per share partition: the lake's last row of it
PRIOR_SCHEMA: Final = StructType(
    [
        *(ls.SHARE_STATE_SCHEMA[name] for name in ("group", "topic_id", "partition", "topic")),
        StructField("kind", ls.SHARE_STATE_SCHEMA["kind"].dataType, True),
        StructField("source_offset", ls.SHARE_STATE_SCHEMA["source_offset"].dataType, True),
        *(ls.SHARE_STATE_SCHEMA[name] for name in _STATE_COLUMNS),
    ]
)

ShareKey = tuple[str, str, int]


# -- pure: one share partition's records -> rows ----------------------------------------------


def _batch_rows(batches: Iterable[sc.Batch]) -> list[tuple[int, int, int, int]]:
    """Batches as SHARE_BATCH rows (first, last, delivery state, delivery count)."""
    return [(first, last, state, count) for first, last, count, state in batches]


def _state_of(prior: Mapping[str, Any]) -> sc.ShareState | None:
    if prior.get("kind") == "delete" or prior.get("state_start_offset") is None:
        return None
    return sc.ShareState(
        start_offset=int(prior["state_start_offset"]),
        state_epoch=int(prior["state_state_epoch"]),
        leader_epoch=int(prior["state_leader_epoch"]),
        snapshot_epoch=int(prior["state_snapshot_epoch"]),
        batches=tuple(
            (int(b[0]), int(b[1]), int(b[3]), int(b[2])) for b in prior["state_batches"] or ()
        ),
        delivery_complete_count=prior.get("state_delivery_complete_count"),
    )


def share_rows(
    key: ShareKey,
    records: Iterable[Mapping[str, Any]],
    prior: Mapping[str, Any] | None,
    names: Mapping[str, str],
) -> Iterator[tuple[Any, ...]]:
    """SHARE_STATE_SCHEMA rows (without `date`) of one share partition's canonical records
    (dicts with type, tombstone, timestamp, partition, offset, value), continuing from
    `prior` (a PRIOR_SCHEMA row as a mapping, or None)."""
    group, topic_id, partition = key
    topic = names.get(topic_id) or (None if prior is None else prior.get("topic"))
    state = None if prior is None else _state_of(prior)
    applied_to = -1 if prior is None else int(prior.get("source_offset") or -1)
    for record in sorted(records, key=lambda r: (int(r["partition"]), int(r["offset"]))):
        kind = str(record["type"])
        value = None if record["tombstone"] else record.get("value")
        share = sc.from_canonical(kind, value)
        late = int(record["offset"]) <= applied_to
        problems: Mapping[str, int]
        if late:
            after, problems = None, {LATE: 1}
        else:
            applied = sc.apply(state, share)
            state, after, problems = applied.state, applied.state, applied.problems
        row_kind = "delete" if share is None else "snapshot" if share.snapshot else "update"
        yield (
            group,
            topic_id,
            topic,
            partition,
            row_kind,
            *_record_columns(share),
            int(record["timestamp"]),
            *_state_columns(after),
            json.dumps(dict(sorted(problems.items()))) if problems else None,
            int(record["partition"]),
            int(record["offset"]),
        )


def _record_columns(share: sc.ShareRecord | None) -> tuple[Any, ...]:
    if share is None:
        return (None,) * 6
    return (
        share.start_offset,
        share.snapshot_epoch,
        share.state_epoch,
        share.leader_epoch,
        _batch_rows(share.batches),
        share.delivery_complete_count,
    )


def _state_columns(state: sc.ShareState | None) -> tuple[Any, ...]:
    if state is None:
        return (None,) * 11
    tally = sc.counts(state)
    return (
        state.start_offset,
        state.snapshot_epoch,
        state.state_epoch,
        state.leader_epoch,
        _batch_rows(state.batches),
        state.delivery_complete_count,
        tally.available,
        tally.acknowledged,
        tally.archived,
        tally.unknown,
        sc.max_delivery_count(state),
    )


def topic_names_of(values: Iterable[str | None]) -> dict[str, str]:
    """topic id -> name from partition-metadata values as JSON text (their `topics` hold
    topic records, as objects or, in the Spark canonical struct, as JSON text)."""
    names: dict[str, str] = {}
    for text in values:
        if text is None:
            continue
        for topic in json.loads(text).get("topics") or ():
            entry = json.loads(topic) if isinstance(topic, str) else topic
            if isinstance(entry, dict) and entry.get("topic_id") and entry.get("topic_name"):
                names[str(entry["topic_id"])] = str(entry["topic_name"])
    return names


# -- Spark ------------------------------------------------------------------------------------


def share_state_records(records: DataFrame) -> DataFrame:
    """The `__share_group_state` records of pruned lake input (key/value as JSON text)."""
    return (
        records.where(F.col("type").isin(*sorted(SHARE_STATE_RECORD_TYPES)))
        .where(F.col("group").isNotNull())
        .select(
            "group",
            "type",
            "tombstone",
            F.col("timestamp").cast("long").alias("timestamp"),
            F.col("partition").cast("int").alias("partition"),
            F.col("offset").cast("long").alias("offset"),
            "key_json",
            "value_json",
        )
        .dropDuplicates(["partition", "offset"])
    )


def run_topic_names(records: DataFrame) -> dict[str, str]:
    """Topic names the run's group records give (a few rows per group: collected)."""
    rows = (
        records.where(F.col("type").isin(*NAMING_TYPES) & ~F.col("tombstone"))
        .select("value_json")
        .collect()
    )
    return topic_names_of(r["value_json"] for r in rows)


def prior_state(spark: SparkSession, table_path: str) -> DataFrame:
    """PRIOR_SCHEMA: each share partition's last row in the lake's `share_state` table."""
    rows = spark.read.parquet(table_path)
    last = F.max_by(F.struct(*[F.col(f.name) for f in PRIOR_SCHEMA.fields[3:]]), "source_offset")
    return (
        rows.groupBy("group", "topic_id", "partition")
        .agg(last.alias("last"))
        .select("group", "topic_id", "partition", "last.*")
    )


def _keyed_record(row: Any) -> tuple[ShareKey, dict[str, Any]]:
    key = json.loads(row["key_json"])
    record = {
        "type": row["type"],
        "tombstone": row["tombstone"],
        "timestamp": row["timestamp"],
        "partition": row["partition"],
        "offset": row["offset"],
        "value": None if row["value_json"] is None else json.loads(row["value_json"]),
    }
    return (row["group"], str(key["topic_id"]), int(key["partition"])), record


def _keyed_prior(row: Any) -> tuple[ShareKey, dict[str, Any]]:
    return (row["group"], row["topic_id"], int(row["partition"])), row.asDict()


def derive_share_state(
    spark: SparkSession,
    records: DataFrame,
    prior: DataFrame | None,
    names: Mapping[str, str],
) -> DataFrame:
    """SHARE_STATE_SCHEMA rows of `share_state_records(...)`, continuing from `prior`
    (PRIOR_SCHEMA rows); only share partitions with records in `records` give rows."""
    keyed: RDD[tuple[ShareKey, Any]] = records.rdd.map(_keyed_record)
    priors: RDD[tuple[ShareKey, Any]] = (
        prior.rdd.map(_keyed_prior) if prior is not None else spark.sparkContext.emptyRDD()
    )
    known = dict(names)

    def rows(item: tuple[ShareKey, tuple[Iterable[Any], Iterable[Any]]]) -> Iterator[Any]:
        key, (found, before) = item
        found = list(found)
        if not found:
            return iter(())
        return share_rows(key, found, next(iter(before), None), known)

    out = spark.createDataFrame(keyed.cogroup(priors).flatMap(rows), _ROW_SCHEMA)
    return out.select(*_ROW_SCHEMA.fieldNames(), utc_date(F.col("record_ts")).alias("date"))


__all__ = [
    "LATE",
    "NAMING_TYPES",
    "PRIOR_SCHEMA",
    "derive_share_state",
    "prior_state",
    "run_topic_names",
    "share_rows",
    "share_state_records",
    "topic_names_of",
]
