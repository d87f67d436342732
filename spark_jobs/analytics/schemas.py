"""Schemas of the analytics outputs besides episodes (lake_schema.EPISODES_SCHEMA)."""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
)

from offsetwatch.core.status import Status
from offsetwatch.spark_jobs.lake_schema import struct_of

#: One row per (group, topic, partition) and tick: what the exporter's status evaluation sees
#: at that instant and its verdict (status: offsetwatch.core.status.Status value).
TIMELINE_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("tick_ms", LongType(), False),
    ("committed_offset", LongType(), True),
    ("commit_time_ms", LongType(), True),
    ("commits_in_window", IntegerType(), True),
    ("commits_in_tick", IntegerType(), True),
    ("window_first_offset", LongType(), True),
    ("last_rewind_time_ms", LongType(), True),
    ("log_end_offset", LongType(), True),
    ("log_end_time_ms", LongType(), True),
    ("log_end_unchanged_since_ms", LongType(), True),
    ("lag_at_window_start", LongType(), True),
    ("group_is_live", BooleanType(), True),
    ("lag", LongType(), True),
    ("lag_seconds", DoubleType(), True),
    ("lag_seconds_lower_bound", BooleanType(), True),
    ("status", IntegerType(), True),
)

#: Per (group, topic, partition) and tumbling window (window_ms: 60000, 300000, 3600000).
#: offset_progress: last offset minus the last offset before the window (negative after a
#: rewind); consumption_rate: offsets per second; lag / lag_seconds at the window's end.
WINDOWS_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("window_ms", LongType(), False),
    ("window_start_ms", LongType(), False),
    ("commits", LongType(), False),
    ("first_offset", LongType(), True),
    ("last_offset", LongType(), True),
    ("offset_progress", LongType(), True),
    ("consumption_rate", DoubleType(), True),
    ("interval_avg_ms", DoubleType(), True),
    ("interval_min_ms", LongType(), True),
    ("interval_max_ms", LongType(), True),
    ("lag", LongType(), True),
    ("lag_seconds", DoubleType(), True),
)

#: Per group: rebalances (new generations / group epochs), storms, member churn, deletion,
#: and time spent in each status (<status>_ms; a group is its worst partition).
GROUP_STATS_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("first_tick_ms", LongType(), True),
    ("last_tick_ms", LongType(), True),
    ("rebalances", LongType(), False),
    ("rebalance_storms", LongType(), False),
    ("member_joins", LongType(), False),
    ("member_leaves", LongType(), False),
    ("member_churn", LongType(), False),
    ("deleted_ms", LongType(), True),
    *((f"{status.name.lower()}_ms", LongType(), False) for status in Status),
)
