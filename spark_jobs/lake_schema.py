"""Schemas of the history lake's tables and of the analytics outputs: the contract between jobs.

`offsetwatch spark compact` writes `commits`, `group_events` and `log_ends` (Parquet, partitioned
by `date`); analytics read them and produce `episodes`; alerting turns episodes into `alerts`.
Every timestamp is epoch milliseconds (UTC); `date` is the UTC date of the row's event time.
`source_partition`/`source_offset` locate the `__consumer_offsets` record a row came from (the
dedupe key of the at-least-once archive); log-end samples have none.

Lake layout: `LAKE/<table>/date=YYYY-MM-DD/part-*.parquet`, plus `LAKE/_offsetwatch/` for the
incremental bookkeeping and `LAKE/quarantine/` for input that could not be read.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

COMMITS: Final = "commits"
GROUP_EVENTS: Final = "group_events"
LOG_ENDS: Final = "log_ends"
QUARANTINE: Final = "quarantine"
LAKE_TABLES: Final = (COMMITS, GROUP_EVENTS, LOG_ENDS)
#: `__share_group_state` records (KIP-932 share groups), apart from LAKE_TABLES: the jobs that
#: read only consumer-group history read exactly what they read before
SHARE_STATE: Final = "share_state"


def struct_of(*fields: tuple[str, object, bool]) -> StructType:
    """A StructType from (name, type, nullable) triples: the tables below read as tables."""
    return StructType([StructField(name, kind, nullable) for name, kind, nullable in fields])  # type: ignore[arg-type]


#: kind: "commit" (an offset commit) or "delete" (a tombstone: offset deleted or expired);
#: offset/leader_epoch/metadata/commit_ts/expire_ts are null for deletions.
#: txn: "none" (plain commit), "committed", "aborted" or "pending" where the source knows the
#: transaction's outcome (segments); "unknown" when a transactional commit's outcome was not seen.
COMMITS_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("kind", StringType(), False),
    ("offset", LongType(), True),
    ("leader_epoch", IntegerType(), True),
    ("metadata", StringType(), True),
    ("commit_ts", LongType(), True),
    ("expire_ts", LongType(), True),
    ("record_ts", LongType(), False),
    ("txn", StringType(), False),
    ("source_partition", IntegerType(), False),
    ("source_offset", LongType(), False),
    ("date", DateType(), False),
)

#: event: one of GROUP_EVENT_KINDS. group_type: classic | consumer | share | streams.
#: generation: the classic generation or the KIP-848 group epoch (member epoch for member rows).
#: detail: the event's other fields as compact JSON (assignment, protocol, reason, ...).
GROUP_EVENTS_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("group_type", StringType(), False),
    ("event", StringType(), False),
    ("ts", LongType(), False),
    ("generation", IntegerType(), True),
    ("state", StringType(), True),
    ("member_id", StringType(), True),
    ("client_id", StringType(), True),
    ("client_host", StringType(), True),
    ("detail", StringType(), True),
    ("source_partition", IntegerType(), False),
    ("source_offset", LongType(), False),
    ("date", DateType(), False),
)

GROUP_EVENT_KINDS: Final = (
    "generation",  # a new classic generation / KIP-848 group epoch: a rebalance
    "member_join",
    "member_leave",
    "assignment",  # a member's assignment (KIP-848 target or current assignment) changed
    "state",  # the group's state changed (Empty/Stable/...)
    "group_deleted",  # the group's metadata tombstone
)

LOG_ENDS_SCHEMA: Final = struct_of(
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("log_end_offset", LongType(), False),
    ("sampled_at_ms", LongType(), False),
    ("date", DateType(), False),
)

#: a share partition's in-flight batch: offsets first..last in a delivery state (0 available,
#: 2 acknowledged, 4 archived) delivered `delivery_count` times
SHARE_BATCH: Final = struct_of(
    ("first_offset", LongType(), False),
    ("last_offset", LongType(), False),
    ("delivery_state", IntegerType(), False),
    ("delivery_count", IntegerType(), False),
)

#: One row per `__share_group_state` record (spark_jobs/lake_share_state.py).
#: The record as written: kind "snapshot" (ShareSnapshot: the whole state), "update"
#: (ShareUpdate: a change; start_offset / leader_epoch -1 = unchanged, no state_epoch) or
#: "delete" (a tombstone: the share partition's state is gone; record columns null);
#: `batches` are the record's own.
#: The state after it (`state_*`, counts), combined as Kafka's share coordinator combines an
#: update onto the last snapshot (decoder/share_combine.py); null for a delete and for a record
#: older than the last one the lake applied for its partition (`problems` says "late").
#: Counts are records past the state's start offset: available (acquired ones included:
#: Kafka never persists "acquired"), acknowledged, archived, of an unknown state.
#: problems: bad input as JSON {reason: count} (update_without_snapshot, backwards_batch,
#: unknown_delivery_state, late); null when clean. topic: the name from the group records
#: (share/consumer partition metadata) seen so far; null while unknown.
SHARE_STATE_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("topic_id", StringType(), False),
    ("topic", StringType(), True),
    ("partition", IntegerType(), False),
    ("kind", StringType(), False),
    ("start_offset", LongType(), True),
    ("snapshot_epoch", IntegerType(), True),
    ("state_epoch", IntegerType(), True),
    ("leader_epoch", IntegerType(), True),
    ("batches", ArrayType(SHARE_BATCH, False), True),
    ("delivery_complete_count", IntegerType(), True),
    ("record_ts", LongType(), False),
    ("state_start_offset", LongType(), True),
    ("state_snapshot_epoch", IntegerType(), True),
    ("state_state_epoch", IntegerType(), True),
    ("state_leader_epoch", IntegerType(), True),
    ("state_batches", ArrayType(SHARE_BATCH, False), True),
    ("state_delivery_complete_count", IntegerType(), True),
    ("available", LongType(), True),
    ("acknowledged", LongType(), True),
    ("archived", LongType(), True),
    ("unknown", LongType(), True),
    ("max_delivery_count", IntegerType(), True),
    ("problems", StringType(), True),
    ("source_partition", IntegerType(), False),
    ("source_offset", LongType(), False),
    ("date", DateType(), False),
)

#: kind: stall | stop | rewind | lag_slo | commit_rate_anomaly | rebalance_storm |
#: share_backlog | share_poison (share groups: topic is the name, or the topic id while no
#: group record names it).
#: end_ms null: the episode is still open at the end of the data. size: the episode's magnitude
#: in its own unit (messages waiting, offsets rewound, lag seconds, commits, rebalances), given
#: in `unit`. topic/partition are null for group-level episodes.
EPISODES_SCHEMA: Final = struct_of(
    ("kind", StringType(), False),
    ("group", StringType(), False),
    ("topic", StringType(), True),
    ("partition", IntegerType(), True),
    ("start_ms", LongType(), False),
    ("end_ms", LongType(), True),
    ("size", DoubleType(), True),
    ("unit", StringType(), True),
    ("detail", StringType(), True),
)

EPISODE_KINDS: Final = (
    "stall",
    "stop",
    "rewind",
    "lag_slo",
    "commit_rate_anomaly",
    "rebalance_storm",
    "share_backlog",  # a share partition's backlog grew for a window, or waited with no progress
    "share_poison",  # records past a share partition's start offset archived or redelivered often
)

#: One alert per episode. `active` false once the episode ended (ends_at set).
ALERTS_SCHEMA: Final = struct_of(
    ("alert_id", StringType(), False),
    ("name", StringType(), False),
    ("severity", StringType(), False),
    ("group", StringType(), False),
    ("topic", StringType(), True),
    ("partitions", StringType(), True),
    ("starts_at", LongType(), False),
    ("ends_at", LongType(), True),
    ("active", BooleanType(), False),
    ("value", DoubleType(), True),
    ("summary", StringType(), False),
    ("description", StringType(), False),
    ("runbook_url", StringType(), True),
)

#: Input that could not be read: one row per bad line / Avro block / segment batch / message.
QUARANTINE_SCHEMA: Final = struct_of(
    ("source", StringType(), False),
    ("file", StringType(), True),
    ("position", LongType(), True),
    ("reason", StringType(), False),
    ("error", StringType(), True),
    ("raw", StringType(), True),
)
