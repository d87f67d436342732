"""Per (group, topic, partition) statistics over tumbling windows of 1 min, 5 min and 1 h.

Built from the tick buckets (commit_buckets.py), never from raw commits again. A window
[start, start + size) lists its commits, first and last committed offset, the progress since
the last commit before the window (negative after a rewind), the consumption rate that
progress means, commit-interval statistics (intervals ending in the window), and the lag and
lag in seconds at the window's end from the status timeline. Windows without any commit are
not listed; the timeline covers them.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from offsetwatch.spark_jobs.analytics.commit_buckets import KEY, floor_to


def _windows_of(buckets: DataFrame, size_ms: int) -> DataFrame:
    return (
        buckets.groupBy(*KEY, floor_to(F.col("bucket_ms"), size_ms).alias("window_start_ms"))
        .agg(
            F.sum("n").alias("commits"),
            F.min("first").alias("_first"),
            F.max("last").alias("_last"),
            F.sum("interval_sum_ms").alias("_interval_sum"),
            F.sum("interval_n").alias("_interval_n"),
            F.min("interval_min_ms").alias("interval_min_ms"),
            F.max("interval_max_ms").alias("interval_max_ms"),
        )
        .withColumn("window_ms", F.lit(size_ms).cast("long"))
    )


def window_stats(buckets: DataFrame, timeline: DataFrame, sizes_ms: tuple[int, ...]) -> DataFrame:
    """WINDOWS_SCHEMA rows for every window size."""
    windows = reduce(DataFrame.unionByName, [_windows_of(buckets, size) for size in sizes_ms])
    by_window = Window.partitionBy(*KEY, "window_ms").orderBy("window_start_ms")
    previous_last = F.lag("_last.offset").over(by_window)
    progress = F.col("_last.offset") - F.coalesce(previous_last, F.col("_first.offset"))
    at_end = timeline.select(
        *KEY,
        F.col("tick_ms").alias("_end"),
        F.col("lag"),
        F.col("lag_seconds"),
    )
    windows = windows.withColumn("_end", F.col("window_start_ms") + F.col("window_ms"))
    return (
        windows.withColumn("offset_progress", progress)
        .join(at_end, [*KEY, "_end"], "left")
        .select(
            *KEY,
            "window_ms",
            "window_start_ms",
            F.col("commits").cast("long").alias("commits"),
            F.col("_first.offset").alias("first_offset"),
            F.col("_last.offset").alias("last_offset"),
            "offset_progress",
            (
                F.greatest(F.col("offset_progress"), F.lit(0)) * F.lit(1000.0) / F.col("window_ms")
            ).alias("consumption_rate"),
            F.when(F.col("_interval_n") > 0, F.col("_interval_sum") / F.col("_interval_n")).alias(
                "interval_avg_ms"
            ),
            "interval_min_ms",
            "interval_max_ms",
            "lag",
            "lag_seconds",
        )
    )
