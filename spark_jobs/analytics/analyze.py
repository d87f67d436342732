"""`analyze`: every analytic over the lake tables, the one entry point jobs and benchmarks call."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from offsetwatch.spark_jobs.analytics.commit_buckets import (
    INVISIBLE_TXN,
    commit_buckets,
    life_spans,
)
from offsetwatch.spark_jobs.analytics.diagnosis import episode_diagnoses, with_diagnoses
from offsetwatch.spark_jobs.analytics.episodes import (
    all_episodes,
    commit_rate_episodes,
    rewind_episodes,
    status_episodes,
)
from offsetwatch.spark_jobs.analytics.groups import group_liveness, group_stats, rebalance_storms
from offsetwatch.spark_jobs.analytics.schemas import (
    GROUP_STATS_SCHEMA,
    TIMELINE_SCHEMA,
    WINDOWS_SCHEMA,
)
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.analytics.share_backlog import share_episodes
from offsetwatch.spark_jobs.analytics.timeline import timeline as build_timeline
from offsetwatch.spark_jobs.analytics.windows import window_stats


@dataclass(frozen=True, slots=True)
class AnalyticsResult:
    """Lazy frames: TIMELINE_SCHEMA, WINDOWS_SCHEMA, GROUP_STATS_SCHEMA, EPISODES_SCHEMA,
    DIAGNOSES_SCHEMA (analytics/diagnosis.py)."""

    timeline: DataFrame
    windows: DataFrame
    group_stats: DataFrame
    episodes: DataFrame
    #: the last instant the history covers (epoch ms); episodes open there have no end
    end_ms: int
    #: cause and suspects of every episode, by the exporter's diagnosis rules
    diagnoses: DataFrame

    @property
    def diagnosed_episodes(self) -> DataFrame:
        """The episodes with `cause` and `suspects` (JSON) appended."""
        return with_diagnoses(self.episodes, self.diagnoses)


def _conform(frame: DataFrame, schema: StructType) -> DataFrame:
    return frame.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def data_end_ms(
    buckets: DataFrame, commits: DataFrame, log_ends: DataFrame, group_events: DataFrame
) -> int | None:
    """The latest event time in the three tables (None when all are empty). The commit
    buckets hold every visible commit and reset; of the raw commits only the invisible
    transactional ones are read again (Parquet statistics skip nearly all of them)."""
    latest = (
        buckets.select(F.greatest(F.max("last.ts"), F.max("reset_ms")).alias("t"))
        .unionByName(
            commits.filter(F.col("txn").isin(*INVISIBLE_TXN)).select(
                F.max(F.coalesce("commit_ts", "record_ts")).alias("t")
            )
        )
        .unionByName(log_ends.select(F.max("sampled_at_ms").alias("t")))
        .unionByName(group_events.select(F.max("ts").alias("t")))
        .agg(F.max("t"))
        .first()
    )
    return None if latest is None or latest[0] is None else int(latest[0])


def analyze(
    commits: DataFrame,
    log_ends: DataFrame,
    group_events: DataFrame,
    settings: AnalyticsSettings | None = None,
    share_state: DataFrame | None = None,
) -> AnalyticsResult:
    """Windows, group statistics, episodes and the status timeline of the lake tables
    (lake_schema COMMITS/LOG_ENDS/GROUP_EVENTS schemas); with `share_state` (SHARE_STATE_SCHEMA)
    also share groups' backlog and poison episodes (analytics/share_backlog.py).

    Eager: raw commits are read once into the commit buckets, which every analytic shares,
    and the buckets and the status timeline are computed now and kept (local checkpoints,
    executor storage) for the session; the returned frames are cheap to plan and to run.
    """
    settings = settings or AnalyticsSettings()
    until = settings.until_ms
    if until is not None:
        if share_state is not None:
            share_state = share_state.filter(F.col("record_ts") <= until)
        commits = commits.filter(F.coalesce("commit_ts", "record_ts") <= until)
        group_events = group_events.filter(F.col("ts") <= until)
        log_ends = log_ends.filter(F.col("sampled_at_ms") <= until)
    tick = settings.tick_ms
    # Materialized once: every analytic reads them, and the short lineage keeps the plans of
    # everything downstream small (planning the whole chain again costs seconds per action).
    buckets = commit_buckets(commits, group_events, tick).localCheckpoint(eager=True)
    end_ms = until if until is not None else data_end_ms(buckets, commits, log_ends, group_events)
    if until is None and share_state is not None:
        share_end = share_state.agg(F.max("record_ts")).first()
        if share_end is not None and share_end[0] is not None:
            end_ms = max(end_ms or 0, int(share_end[0]))
    if end_ms is None:
        end_ms = 0
    end_tick = int(end_ms + tick - 1) // tick * tick
    lives = life_spans(buckets)
    liveness = group_liveness(group_events, tick)

    timeline = build_timeline(buckets, log_ends, liveness, end_tick, settings)
    timeline = timeline.localCheckpoint(eager=True)
    storms = rebalance_storms(group_events, end_ms, settings)
    episodes = all_episodes(
        [
            status_episodes(timeline, settings),
            rewind_episodes(buckets, lives),
            commit_rate_episodes(buckets, timeline, end_ms, settings),
            storms,
        ],
        settings.since_ms,
    )
    diagnoses = episode_diagnoses(episodes, group_events, settings)
    if share_state is not None:
        # share episodes have no diagnosis (its rules are the consumer groups'): cause null
        share = share_episodes(share_state, log_ends, end_ms, settings, settings.poison_limit)
        episodes = all_episodes([episodes, share], settings.since_ms)
    windows = window_stats(buckets, timeline, settings.window_sizes_ms)
    stats = group_stats(group_events, timeline, storms, tick)
    if settings.since_ms is not None:
        since = settings.since_ms
        timeline = timeline.filter(F.col("tick_ms") >= since)
        windows = windows.filter(F.col("window_start_ms") + F.col("window_ms") > since)
    return AnalyticsResult(
        timeline=_conform(timeline, TIMELINE_SCHEMA),
        windows=_conform(windows, WINDOWS_SCHEMA),
        group_stats=_conform(stats, GROUP_STATS_SCHEMA),
        episodes=episodes,
        end_ms=end_ms,
        diagnoses=diagnoses,
    )


__all__ = ["AnalyticsResult", "analyze"]
