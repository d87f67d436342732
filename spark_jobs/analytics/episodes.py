"""Episodes (lake_schema.EPISODES_SCHEMA) found in the status timeline and the commit buckets.

* stall / stop: a run of ticks whose status (the exporter's rules) is STALL / STOP. The
  episode starts at the first such tick - when the live exporter would have shown it - and
  ends at the first tick that is not, at the reset that ended the partition's life (offset or
  group deletion), or stays open (end_ms null) at the end of the data. size: the most
  messages waiting during it.
* lag_slo: a run of ticks with lag in seconds above `lag_slo_seconds`; size: the worst.
* rewind: a commit below the previous one (reset, replay, migration). It ends when a commit
  is back at the offset it left, at the next rewind, or at the end of the life; size: the
  offsets rewound; detail: from/to and the messages re-read so far.
* commit_rate_anomaly: a run of `rate_window_ms` windows whose commit count is below
  `rate_low_ratio` or above `rate_high_ratio` times the mean of the trailing non-empty windows,
  while the group had messages waiting at the window's end (an idle or caught-up group
  commits as it likes). Stops are episodes of their own: windows without commits are not
  anomalies.
Healthy, idle (nothing waiting), caught-up and deleted groups give none: every detector needs
messages waiting, and a deleted group has no ticks after its deletion.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from offsetwatch.core.status import Status
from offsetwatch.spark_jobs.analytics.commit_buckets import KEY, LIFE_KEY, floor_to
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.lake_schema import EPISODES_SCHEMA


def _episode(kind: str, unit: str, detail: Column) -> list[Column | str]:
    return [
        F.lit(kind).alias("kind"),
        "group",
        "topic",
        F.col("partition").cast("int").alias("partition"),
        "start_ms",
        "end_ms",
        F.col("size").cast("double").alias("size"),
        F.lit(unit).alias("unit"),
        detail.alias("detail"),
    ]


def tick_runs(
    timeline: DataFrame, conditions: Mapping[str, Column], tick_ms: int
) -> dict[str, DataFrame]:
    """For each condition, its runs of consecutive ticks within a life: start_ms, end_ms (the
    next tick, the life's end, or null when the run reaches the end of the data), size (the
    most messages waiting), max_lag_seconds and the committed offset at the start.

    Only the ticks that meet a condition are sorted: a life's ticks are contiguous, so a run
    goes on exactly while the previous such tick is the one just before (a window over
    every tick of a mostly healthy history cost more than all the rest of the detector)."""
    last_ticks = timeline.groupBy(*LIFE_KEY).agg(F.max("tick_ms").alias("_last_tick"))
    by_tick = Window.partitionBy(*LIFE_KEY).orderBy("tick_ms")
    running = by_tick.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    continues = F.lag("tick_ms").over(by_tick) == F.col("tick_ms") - F.lit(tick_ms)
    runs = {}
    for name, condition in conditions.items():
        rows = timeline.filter(F.coalesce(condition, F.lit(False)))
        rows = rows.withColumn(
            "_run", F.sum((~F.coalesce(continues, F.lit(False))).cast("int")).over(running)
        )
        run = (
            rows.groupBy(*LIFE_KEY, "_run")
            .agg(
                F.min("tick_ms").alias("start_ms"),
                F.max("tick_ms").alias("_run_last"),
                F.max("life_end_ms").alias("life_end_ms"),
                F.max("lag").alias("size"),
                F.max("lag_seconds").alias("max_lag_seconds"),
                F.min_by("committed_offset", "tick_ms").alias("committed_offset"),
                F.min_by("commit_time_ms", "tick_ms").alias("last_commit_ms"),
            )
            .join(last_ticks, list(LIFE_KEY))
        )
        end = (
            F.when(F.col("_run_last") < F.col("_last_tick"), F.col("_run_last") + F.lit(tick_ms))
            .when(F.col("life_end_ms").isNotNull(), F.col("life_end_ms"))
            .otherwise(F.lit(None).cast("long"))
        )
        runs[name] = run.withColumn("end_ms", end)
    return runs


def status_episodes(timeline: DataFrame, settings: AnalyticsSettings) -> DataFrame:
    """stall, stop and lag_slo episodes."""
    status = F.col("status")
    runs = tick_runs(
        timeline,
        {
            "stall": status == int(Status.STALL),
            "stop": status == int(Status.STOP),
            "lag_slo": F.col("lag_seconds") > F.lit(settings.lag_slo_seconds),
        },
        settings.tick_ms,
    )
    detail = F.to_json(
        F.struct(
            "committed_offset",
            "last_commit_ms",
            F.round("max_lag_seconds", 3).alias("max_lag_seconds"),
        )
    )
    stall = runs["stall"].select(*_episode("stall", "messages", detail))
    stop = runs["stop"].select(*_episode("stop", "messages", detail))
    slo = (
        runs["lag_slo"]
        .withColumn("size", F.col("max_lag_seconds"))
        .select(
            *_episode(
                "lag_slo",
                "seconds",
                F.to_json(
                    F.struct(
                        F.lit(settings.lag_slo_seconds).alias("threshold_seconds"),
                        "committed_offset",
                    )
                ),
            )
        )
    )
    return stall.unionByName(stop).unionByName(slo)


def rewind_episodes(buckets: DataFrame, lives: DataFrame) -> DataFrame:
    """One episode per rewind (a rewind segment of commit_buckets)."""
    segments = (
        buckets.groupBy(*LIFE_KEY, "rewind_seq")
        .agg(
            F.max("rewind_ms").alias("start_ms"),
            F.max("rewind_from").alias("from_offset"),
            F.max("rewind_to").alias("to_offset"),
            F.min("back_ms").alias("back_ms"),
            F.max("max_offset").alias("max_offset"),
        )
        .filter(F.col("start_ms").isNotNull())
    )
    next_rewind = F.lead("start_ms").over(Window.partitionBy(*LIFE_KEY).orderBy("start_ms"))
    rewinds = (
        segments.withColumn("_next", next_rewind)
        .join(lives.select(*LIFE_KEY, "life_end_ms"), list(LIFE_KEY), "left")
        .withColumn("end_ms", F.coalesce("back_ms", "_next", "life_end_ms"))
        .withColumn("size", F.col("from_offset") - F.col("to_offset"))
        .withColumn(
            "messages_reread",
            F.least(F.col("from_offset"), F.col("max_offset")) - F.col("to_offset"),
        )
    )
    detail = F.to_json(F.struct("from_offset", "to_offset", "messages_reread"))
    return rewinds.select(*_episode("rewind", "offsets", detail))


def commit_rate_episodes(
    buckets: DataFrame, timeline: DataFrame, end_ms: int, settings: AnalyticsSettings
) -> DataFrame:
    """Group-level commit-rate anomalies against the trailing baseline."""
    size = settings.rate_window_ms
    counts = (
        buckets.filter(F.col("n") > 0)
        .groupBy("group", floor_to(F.col("bucket_ms"), size).alias("window_ms"))
        .agg(F.sum("n").alias("commits"))
    )
    trailing = (
        Window.partitionBy("group")
        .orderBy("window_ms")
        .rangeBetween(-settings.rate_baseline_windows * size, -size)
    )
    waiting = timeline.groupBy("group", (F.col("tick_ms") - F.lit(size)).alias("window_ms")).agg(
        F.sum("lag").alias("waiting")
    )
    baseline = F.col("_baseline")
    by_window = Window.partitionBy("group").orderBy("window_ms")
    # a window cut short by a stop is the stop's business: the group must commit in the
    # next window too, unless the data ends first
    still_committing = (F.lead("window_ms").over(by_window) == F.col("window_ms") + size) | (
        F.col("window_ms") + size >= end_ms
    )
    judged = (
        counts.withColumns(
            {
                "_baseline": F.avg("commits").over(trailing),
                "_history": F.count(F.lit(1)).over(trailing),
                "_continues": still_committing,
            }
        )
        .join(waiting, ["group", "window_ms"], "left")
        .withColumn(
            "_direction",
            F.when(
                (F.col("_history") < settings.rate_min_baseline_windows)
                | (baseline < settings.rate_min_baseline_commits)
                | ~F.coalesce(F.col("waiting") > 0, F.lit(False)),
                F.lit(None),
            )
            .when(
                (F.col("commits") < baseline * settings.rate_low_ratio) & F.col("_continues"),
                F.lit("drop"),
            )
            .when(F.col("commits") > baseline * settings.rate_high_ratio, F.lit("spike")),
        )
    )
    previous = F.lag("window_ms").over(by_window)
    previous_direction = F.lag("_direction").over(by_window)
    continues = (previous == F.col("window_ms") - F.lit(size)) & (
        previous_direction == F.col("_direction")
    )
    runs = (
        judged.withColumn("_begins", ~F.coalesce(continues, F.lit(False)))
        .withColumn(
            "_run",
            F.sum(F.col("_begins").cast("int")).over(
                by_window.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            ),
        )
        .filter(F.col("_direction").isNotNull())
        .groupBy("group", "_run", "_direction")
        .agg(
            F.min("window_ms").alias("start_ms"),
            (F.max("window_ms") + F.lit(size)).alias("_until"),
            F.min("commits").alias("_min"),
            F.max("commits").alias("_max"),
            F.avg("_baseline").alias("_baseline"),
        )
    )
    per_second = 1000.0 / size
    return runs.select(
        F.lit("commit_rate_anomaly").alias("kind"),
        "group",
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        "start_ms",
        # a run reaching the end of the data may go on
        F.when(F.col("_until") < F.lit(end_ms), F.col("_until")).alias("end_ms"),
        (
            F.when(F.col("_direction") == "drop", F.col("_min")).otherwise(F.col("_max"))
            * F.lit(per_second)
        ).alias("size"),
        F.lit("commits/s").alias("unit"),
        F.to_json(
            F.struct(
                F.col("_direction").alias("direction"),
                F.round(F.col("_baseline") * F.lit(per_second), 6).alias("baseline_per_s"),
            )
        ).alias("detail"),
    )


def all_episodes(parts: list[DataFrame], since_ms: int | None) -> DataFrame:
    """The episodes of every detector in EPISODES_SCHEMA, those ending before `since_ms` left
    out."""
    episodes = reduce(DataFrame.unionByName, parts)
    if since_ms is not None:
        episodes = episodes.filter(F.col("end_ms").isNull() | (F.col("end_ms") >= since_ms))
    return episodes.select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in EPISODES_SCHEMA.fields]
    )


__all__ = ["KEY", "all_episodes", "commit_rate_episodes", "rewind_episodes", "status_episodes"]
