"""The status timeline: every (group, topic, partition) evaluated at every tick of its lives.

A tick row holds what `exporter.status.PartitionWindow` holds at that instant, computed from
the whole history with the definitions of docs/status-rules.md (a sliding window of
`status.window_ms` ending at the tick), then the status from the exporter's rules. Ticks run
from a life's first commit to the end of the data, or to just before the reset (offset
deletion, group deletion) that ends the life: a deleted group is not evaluated any more.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from offsetwatch.spark_jobs.analytics.commit_buckets import KEY, LIFE_KEY, ceil_to, floor_to
from offsetwatch.spark_jobs.analytics.log_end_asof import with_log_end
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.analytics.status_rules import status_column


def tick_buckets(buckets: DataFrame, tick_ms: int) -> DataFrame:
    """Commit buckets re-keyed by the tick they are seen at: a commit at ts counts from the
    first tick >= ts, i.e. ticks in (bucket, bucket + tick] plus the exact-tick ones."""
    tick = F.col("bucket_ms") + F.when(F.col("on_tick"), F.lit(0)).otherwise(F.lit(tick_ms))
    exact = F.col("on_tick")
    return buckets.groupBy(*LIFE_KEY, tick.alias("tick_ms")).agg(
        F.sum("n").alias("n"),
        F.sum(F.when(exact, F.col("n")).otherwise(F.lit(0))).alias("n_at"),
        F.min(F.when(exact, F.col("first"))).alias("_first_at"),
        F.min("first").alias("_first"),
        F.max("last").alias("_last"),
        F.max("rewind_ms").alias("rewind_ms"),
    )


def tick_grid(lives: DataFrame, end_tick_ms: int, tick_ms: int) -> DataFrame:
    """One row per life and tick: from the tick at or after the first commit to the last
    tick before the life's end (or `end_tick_ms`)."""
    last = F.when(
        F.col("life_end_ms").isNotNull(), floor_to(F.col("life_end_ms") - 1, tick_ms)
    ).otherwise(F.lit(end_tick_ms))
    first = ceil_to(F.col("first_commit_ms"), tick_ms)
    return (
        lives.withColumns({"_first": first, "_last": F.least(last, F.lit(end_tick_ms))})
        .filter(F.col("_first") <= F.col("_last"))
        .select(
            *LIFE_KEY,
            "life_end_ms",
            F.explode(F.sequence("_first", "_last", F.lit(tick_ms).cast("long"))).alias("tick_ms"),
        )
    )


def with_commit_state(grid: DataFrame, ticks: DataFrame, settings: AnalyticsSettings) -> DataFrame:
    """committed_offset, commit_time_ms, commits_in_window, window_first_offset and
    last_rewind_time_ms at each tick, plus the committed offset at the window start."""
    k = settings.window_ticks
    rows = grid.join(ticks, [*LIFE_KEY, "tick_ms"], "left")
    by_tick = Window.partitionBy(*LIFE_KEY).orderBy("tick_ms")
    running = by_tick.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # ticks are contiguous within a life, so "the last k-1 ticks" is a row frame
    recent = by_tick.rowsBetween(-(k - 1), Window.currentRow)
    n_at_start = F.coalesce(F.lag("n_at", k).over(by_tick), F.lit(0))
    first_at_start = F.lag("_first_at", k).over(by_tick)
    n_recent = F.coalesce(F.sum("n").over(recent), F.lit(0))
    first_recent = F.first("_first", ignorenulls=True).over(recent)
    rows = rows.withColumns(
        {
            "committed_offset": F.last("_last.offset", ignorenulls=True).over(running),
            "commit_time_ms": F.last("_last.ts", ignorenulls=True).over(running),
            "last_rewind_time_ms": F.max("rewind_ms").over(running),
            "_n_at_start": n_at_start,
            "_n_recent": n_recent,
            "_first_at_start": first_at_start,
            "_first_recent": first_recent,
        }
    )
    # the oldest commit in [tick - window, tick]; with none, the last one before the window
    window_first = (
        F.when(F.col("_n_at_start") > 0, F.col("_first_at_start.offset"))
        .when(F.col("_n_recent") > 0, F.col("_first_recent.offset"))
        .otherwise(F.col("committed_offset"))
    )
    return rows.select(
        *LIFE_KEY,
        "life_end_ms",
        "tick_ms",
        "committed_offset",
        "commit_time_ms",
        "last_rewind_time_ms",
        (F.col("_n_at_start") + F.col("_n_recent")).cast("int").alias("commits_in_window"),
        F.coalesce(F.col("n"), F.lit(0)).cast("int").alias("commits_in_tick"),
        window_first.alias("window_first_offset"),
    )


def with_window_start(ticks: DataFrame, settings: AnalyticsSettings) -> DataFrame:
    """lag_at_window_start: the log end minus the committed offset at tick - window, both
    as of then (ticks are contiguous, so that is the tick k rows back); unknown before the
    life's history reaches back a window."""
    k = settings.window_ticks
    by_tick = Window.partitionBy(*LIFE_KEY).orderBy("tick_ms")
    start_end = F.lag("log_end_offset", k).over(by_tick)
    start_committed = F.lag("committed_offset", k).over(by_tick)
    return ticks.withColumn(
        "lag_at_window_start",
        F.when(
            start_end.isNotNull() & start_committed.isNotNull(),
            F.greatest(start_end - start_committed, F.lit(0)),
        ),
    )


def with_liveness(ticks: DataFrame, liveness: DataFrame) -> DataFrame:
    """group_is_live at each tick from the group's liveness intervals (not live without any)."""
    live = ticks.alias("t").join(
        liveness.alias("l"),
        (F.col("t.group") == F.col("l.group"))
        & (F.col("t.tick_ms") >= F.col("l.from_ms"))
        & (F.col("l.to_ms").isNull() | (F.col("t.tick_ms") < F.col("l.to_ms"))),
        "left",
    )
    return live.select("t.*", F.coalesce(F.col("l.live"), F.lit(False)).alias("group_is_live"))


def timeline(
    lives: DataFrame,
    buckets: DataFrame,
    samples: DataFrame,
    liveness: DataFrame,
    end_tick_ms: int,
    settings: AnalyticsSettings,
) -> DataFrame:
    """The status timeline (TIMELINE_SCHEMA plus `life` and `life_end_ms`)."""
    grid = tick_grid(lives, end_tick_ms, settings.tick_ms)
    ticks = with_commit_state(grid, tick_buckets(buckets, settings.tick_ms), settings)
    ticks = with_window_start(with_log_end(ticks, samples), settings)
    ticks = with_liveness(ticks, liveness)
    return (
        ticks.withColumn("now_ms", F.col("tick_ms"))
        .select("*", status_column(settings.status).alias("status"))
        .drop("now_ms")
    )


__all__ = ["KEY", "timeline"]
