"""The status timeline: every (group, topic, partition) evaluated at every tick of its lives.

A tick row holds what `offsetwatch.core.status.PartitionWindow` holds at that instant, computed from
the whole history with the definitions of docs/status-rules.md (a sliding window of
`status.window_ms` ending at the tick), then the status from the exporter's rules. Ticks run
from a life's first commit to the end of the data, or to just before the reset (offset
deletion, group deletion) that ends the life: a deleted group is not evaluated any more.

The commit state, the log end and the lag are numpy sweeps per topic-partition
(timeline_sweep.py: a per-tick grid of window functions and as-of joins in Spark SQL spent
minutes on what is a few array passes); liveness and the status rules stay SQL.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BooleanType, DoubleType, IntegerType, LongType, StringType

from offsetwatch.spark_jobs.analytics.commit_buckets import KEY, TP
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.analytics.status_rules import status_column
from offsetwatch.spark_jobs.analytics.timeline_sweep import sweep
from offsetwatch.spark_jobs.lake_schema import struct_of

#: timeline_sweep.sweep's rows: TIMELINE_SCHEMA but liveness and status, with the life
TIMELINE_SWEEP_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("life", LongType(), False),
    ("life_end_ms", LongType(), True),
    ("tick_ms", LongType(), False),
    ("committed_offset", LongType(), True),
    ("commit_time_ms", LongType(), True),
    ("last_rewind_time_ms", LongType(), True),
    ("commits_in_window", IntegerType(), False),
    ("commits_in_tick", IntegerType(), False),
    ("window_first_offset", LongType(), True),
    ("log_end_offset", LongType(), True),
    ("log_end_time_ms", LongType(), True),
    ("log_end_unchanged_since_ms", LongType(), True),
    ("lag", LongType(), True),
    ("lag_seconds", DoubleType(), True),
    ("lag_seconds_lower_bound", BooleanType(), True),
    ("lag_at_window_start", LongType(), True),
)
TIMELINE_SWEEP_ARROW: Final = to_arrow_schema(TIMELINE_SWEEP_SCHEMA)


def _sweep_input(buckets: DataFrame) -> DataFrame:
    return buckets.select(
        *KEY,
        "life",
        "bucket_ms",
        "on_tick",
        "n",
        F.col("first.ts").alias("first_ts"),
        F.col("first.source_offset").alias("first_so"),
        F.col("first.offset").alias("first_offset"),
        F.col("last.ts").alias("last_ts"),
        F.col("last.source_offset").alias("last_so"),
        F.col("last.offset").alias("last_offset"),
        "rewind_ms",
        "reset_ms",
    )


def commit_and_lag(
    buckets: DataFrame, log_ends: DataFrame, end_tick_ms: int, settings: AnalyticsSettings
) -> DataFrame:
    """TIMELINE_SWEEP_SCHEMA: every tick of every life with the commit state, the log end as
    of the tick and the lag, from the commit buckets and the (lake) log-end samples; one
    timeline_sweep.sweep per topic-partition."""
    tick_ms, window_ticks = settings.tick_ms, settings.window_ticks
    samples = log_ends.select(
        *TP, F.col("sampled_at_ms").alias("ts"), F.col("log_end_offset").alias("log_end")
    )

    def per_partition(partition_buckets: pa.Table, partition_samples: pa.Table) -> pa.Table:
        if partition_buckets.num_rows == 0:
            return TIMELINE_SWEEP_ARROW.empty_table()
        return sweep(partition_buckets, partition_samples, tick_ms, end_tick_ms, window_ticks)

    return (
        _sweep_input(buckets)
        .groupBy(*TP)
        .cogroup(samples.groupBy(*TP))
        .applyInArrow(per_partition, TIMELINE_SWEEP_SCHEMA)
    )


def with_liveness(ticks: DataFrame, liveness: DataFrame) -> DataFrame:
    """group_is_live at each tick from the group's liveness intervals (not live without any)."""
    # broadcast: a row per group and tick with events is small beside the ticks, and the
    # ticks keep their partitioning by topic-partition for the episode detectors
    live = ticks.alias("t").join(
        F.broadcast(liveness).alias("l"),
        (F.col("t.group") == F.col("l.group"))
        & (F.col("t.tick_ms") >= F.col("l.from_ms"))
        & (F.col("l.to_ms").isNull() | (F.col("t.tick_ms") < F.col("l.to_ms"))),
        "left",
    )
    return live.select("t.*", F.coalesce(F.col("l.live"), F.lit(False)).alias("group_is_live"))


def timeline(
    buckets: DataFrame,
    log_ends: DataFrame,
    liveness: DataFrame,
    end_tick_ms: int,
    settings: AnalyticsSettings,
) -> DataFrame:
    """The status timeline (TIMELINE_SCHEMA plus `life` and `life_end_ms`)."""
    ticks = with_liveness(commit_and_lag(buckets, log_ends, end_tick_ms, settings), liveness)
    return (
        ticks.withColumn("now_ms", F.col("tick_ms"))
        .select("*", status_column(settings.status).alias("status"))
        .drop("now_ms")
    )


__all__ = ["KEY", "timeline"]
