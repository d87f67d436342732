"""`offsetwatch spark report`: one group's recent history as a short text and a PNG chart.

The numbers come from the analytics (spark_jobs/analytics: the exporter's status rules); this
module only selects the group, summarises (episodes, rebalances, rewinds, lag percentiles)
and draws committed offset vs log end and lag seconds over time (matplotlib, Agg backend:
no display needed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import functions as F

from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.offsets_at import UnknownGroupError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PERCENTILES: Final = (0.5, 0.9, 0.99)
#: episodes listed one per line; the rest are only counted
MAX_LISTED: Final = 20


@dataclass(frozen=True, slots=True)
class Report:
    group: str
    summary: str
    chart: Path | None
    #: (kind, start_ms, end_ms or None, size, unit, topic, partition)
    episodes: list[tuple[Any, ...]]


def _when(ms: int | None) -> str:
    if ms is None:
        return "ongoing"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table(spark: SparkSession, lake: Path, name: str, schema: Any) -> DataFrame:
    where = lake / name
    return spark.read.parquet(str(where)) if where.is_dir() else spark.createDataFrame([], schema)


def lake_frames(
    spark: SparkSession, lake: Path, group: str
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(commits, log_ends, group_events) of `group` (log ends of the topics it committed to)."""
    commits = _table(spark, lake, ls.COMMITS, ls.COMMITS_SCHEMA).where(F.col("group") == group)
    events = _table(spark, lake, ls.GROUP_EVENTS, ls.GROUP_EVENTS_SCHEMA).where(
        F.col("group") == group
    )
    if commits.limit(1).count() == 0 and events.limit(1).count() == 0:
        raise UnknownGroupError(group, f"the lake {lake}")
    topics = [r["topic"] for r in commits.select("topic").distinct().collect()]
    log_ends = _table(spark, lake, ls.LOG_ENDS, ls.LOG_ENDS_SCHEMA).where(
        F.col("topic").isin(topics)
    )
    return commits, log_ends, events


def build_report(
    spark: SparkSession, lake: Path, group: str, since_ms: int, out_dir: Path | None = None
) -> Report:
    """Analyse `group` from `since_ms` on (earlier history still builds the state); write the
    chart to `out_dir/<group>.png` when `out_dir` is given."""
    from offsetwatch.spark_jobs.analytics.analyze import analyze
    from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings

    commits, log_ends, events = lake_frames(spark, lake, group)
    result = analyze(commits, log_ends, events, AnalyticsSettings(since_ms=since_ms))
    episodes = [
        tuple(r)
        for r in result.episodes.orderBy("start_ms")
        .select("kind", "start_ms", "end_ms", "size", "unit", "topic", "partition")
        .collect()
    ]
    stats = result.group_stats.where(F.col("group") == group).first()
    lag = (
        result.timeline.where(F.col("lag").isNotNull())
        .agg(
            *[F.percentile_approx("lag", p).alias(f"lag_{p}") for p in PERCENTILES],
            *[F.percentile_approx("lag_seconds", p).alias(f"lag_s_{p}") for p in PERCENTILES],
        )
        .first()
    )
    lines = [
        f"group {group}: {_when(since_ms)} .. {_when(result.end_ms)} UTC",
        f"rebalances: {stats['rebalances'] if stats else 0}"
        f" (storms: {stats['rebalance_storms'] if stats else 0}),"
        f" members joined {stats['member_joins'] if stats else 0},"
        f" left {stats['member_leaves'] if stats else 0}",
    ]
    if lag is not None and lag[0] is not None:
        lines.append(
            "lag (messages) p50/p90/p99: "
            + " / ".join(f"{lag[f'lag_{p}']:,}" for p in PERCENTILES)
            + "; lag seconds p50/p90/p99: "
            + " / ".join(f"{lag[f'lag_s_{p}'] or 0:.0f}" for p in PERCENTILES)
        )
    counts: dict[str, int] = {}
    for episode in episodes:
        counts[episode[0]] = counts.get(episode[0], 0) + 1
    lines.append(
        "episodes: " + (", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none")
    )
    for kind, start, end, size, unit, topic, partition in episodes[:MAX_LISTED]:
        where = "" if topic is None else f" {topic}-{partition}"
        amount = "" if size is None else f", {size:,.0f} {unit}"
        lines.append(f"  {kind}{where}: {_when(start)} .. {_when(end)}{amount}")
    if len(episodes) > MAX_LISTED:
        lines.append(f"  ... and {len(episodes) - MAX_LISTED} more")
    chart = None
    if out_dir is not None:
        chart = draw_chart(result.timeline, group, out_dir / f"{_safe(group)}.png")
    return Report(group, "\n".join(lines), chart, episodes)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def draw_chart(timeline: DataFrame, group: str, target: Path) -> Path:
    """Committed offset vs log end (summed over the group's partitions) and the worst
    partition's lag seconds, per tick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = (
        timeline.groupBy("tick_ms")
        .agg(
            F.sum("committed_offset").alias("committed"),
            F.sum("log_end_offset").alias("log_end"),
            F.max("lag_seconds").alias("lag_seconds"),
        )
        .orderBy("tick_ms")
        .collect()
    )
    times = [datetime.fromtimestamp(r["tick_ms"] / 1000, UTC) for r in rows]
    figure, (offsets, lag) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    offsets.plot(times, [r["log_end"] for r in rows], label="log end")
    offsets.plot(times, [r["committed"] for r in rows], label="committed offset")
    offsets.set_ylabel("offset (sum of partitions)")
    offsets.legend(loc="upper left")
    offsets.set_title(f"consumer group {group}")
    lag.plot(times, [r["lag_seconds"] for r in rows], color="tab:red")
    lag.set_ylabel("lag seconds (worst partition)")
    lag.set_xlabel("time (UTC)")
    figure.autofmt_xdate()
    target.parent.mkdir(parents=True, exist_ok=True)
    from offsetwatch.core.atomic import atomic_write

    try:
        # a temporary name, then renamed: a failure never leaves a cut picture
        with atomic_write(target) as out:
            figure.savefig(out, dpi=100, format=target.suffix.lstrip(".") or "png")
    finally:
        plt.close(figure)
    return target
