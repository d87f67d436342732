"""Per-group analytics from group_events: liveness over time, rebalance storms, group stats.

Liveness is the exporter's `group_is_live` (exporter/judge/snapshot.py: a group with members): the
last `state` event decides when the group has any (Empty and Dead are not live), otherwise the
members that joined and did not leave; a group deletion ends it. A group without any event
(a "simple" group committing through assign()) is never live.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from offsetwatch.core.status import Status
from offsetwatch.spark_jobs.analytics.commit_buckets import ceil_to
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings

NOT_LIVE_STATES: Final = ("EMPTY", "DEAD")


def group_liveness(group_events: DataFrame, tick_ms: int) -> DataFrame:
    """(group, from_ms, to_ms, live): whether the group is live at ticks in [from, to)."""
    by_order = Window.partitionBy("group").orderBy("source_offset")
    running = by_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    events = group_events.withColumn(
        "_g_life", F.sum((F.col("event") == "group_deleted").cast("int")).over(running)
    )
    in_life = (
        Window.partitionBy("group", "_g_life")
        .orderBy("source_offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    step = (
        F.when(F.col("event") == "member_join", F.lit(1))
        .when(F.col("event") == "member_leave", F.lit(-1))
        .otherwise(F.lit(0))
    )
    state_live = F.when(F.col("event") == "state", ~F.upper(F.col("state")).isin(*NOT_LIVE_STATES))
    live = F.when(F.col("event") == "group_deleted", F.lit(False)).otherwise(
        F.coalesce(
            F.last(state_live, ignorenulls=True).over(in_life),
            F.sum(step).over(in_life) > 0,
        )
    )
    per_tick = (
        events.withColumn("_live", live)
        .groupBy("group", ceil_to(F.col("ts"), tick_ms).alias("from_ms"))
        .agg(F.max_by("_live", F.struct("ts", "source_offset")).alias("live"))
    )
    return per_tick.withColumn(
        "to_ms", F.lead("from_ms").over(Window.partitionBy("group").orderBy("from_ms"))
    )


def rebalance_storms(
    group_events: DataFrame, end_ms: int, settings: AnalyticsSettings
) -> DataFrame:
    """Episodes (EPISODES_SCHEMA) of `storm_rebalances` or more rebalances (new generations)
    within `storm_window_ms`. A storm holds from the rebalance that completes such a run to
    one storm window after the first rebalance of the last such run; overlapping runs are one
    storm. size: the most rebalances seen within one storm window."""
    n, span = settings.storm_rebalances, settings.storm_window_ms
    rebalances = group_events.filter(F.col("event") == "generation").select(
        "group", "ts", "source_offset"
    )
    by_time = Window.partitionBy("group").orderBy("ts", "source_offset")
    in_span = Window.partitionBy("group").orderBy("ts").rangeBetween(-span, 0)
    stormy = (
        rebalances.withColumn("_first", F.lag("ts", n - 1).over(by_time))
        .withColumn("_peak", F.count(F.lit(1)).over(in_span))
        .filter(F.col("_first").isNotNull() & (F.col("ts") - F.col("_first") <= span))
        .withColumn("_until", F.col("_first") + F.lit(span))
    )
    ordered = Window.partitionBy("group").orderBy("ts")
    earlier_until = F.max("_until").over(ordered.rowsBetween(Window.unboundedPreceding, -1))
    merged = stormy.withColumn(
        "_new", F.coalesce(F.col("ts") > earlier_until, F.lit(True)).cast("int")
    ).withColumn("_storm", F.sum("_new").over(ordered.rowsBetween(Window.unboundedPreceding, 0)))
    storms = merged.groupBy("group", "_storm").agg(
        F.min("ts").alias("start_ms"),
        F.max("_until").alias("_until"),
        F.max("_peak").alias("size"),
        F.min("_first").alias("_first_rebalance"),
    )
    return storms.select(
        F.lit("rebalance_storm").alias("kind"),
        "group",
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        "start_ms",
        F.when(F.col("_until") <= F.lit(end_ms), F.col("_until")).alias("end_ms"),
        F.col("size").cast("double").alias("size"),
        F.lit(f"rebalances in {span // 1000} s").alias("unit"),
        F.to_json(
            F.struct(
                F.col("_first_rebalance").alias("first_rebalance_ms"),
                F.lit(n).alias("threshold"),
            )
        ).alias("detail"),
    )


def group_stats(
    group_events: DataFrame, timeline: DataFrame, storms: DataFrame, tick_ms: int
) -> DataFrame:
    """GROUP_STATS_SCHEMA: rebalances, storms, member churn and time spent in each status
    (ticks in the status x tick length; a group is its worst partition, as in the exporter)."""
    events = group_events.groupBy("group").agg(
        F.sum((F.col("event") == "generation").cast("int")).alias("rebalances"),
        F.sum((F.col("event") == "member_join").cast("int")).alias("member_joins"),
        F.sum((F.col("event") == "member_leave").cast("int")).alias("member_leaves"),
        F.max(F.when(F.col("event") == "group_deleted", F.col("ts"))).alias("deleted_ms"),
    )
    worst = timeline.groupBy("group", "tick_ms").agg(F.max("status").alias("status"))
    per_status = [
        (F.sum((F.col("status") == int(s)).cast("long")) * F.lit(tick_ms)).alias(
            f"{s.name.lower()}_ms"
        )
        for s in Status
    ]
    time_in = worst.groupBy("group").agg(
        F.min("tick_ms").alias("first_tick_ms"), F.max("tick_ms").alias("last_tick_ms"), *per_status
    )
    storm_count = storms.groupBy("group").agg(F.count(F.lit(1)).alias("rebalance_storms"))
    stats = time_in.join(events, "group", "full").join(storm_count, "group", "left")
    zero = F.lit(0).cast("long")
    return stats.select(
        "group",
        "first_tick_ms",
        "last_tick_ms",
        F.coalesce(F.col("rebalances").cast("long"), zero).alias("rebalances"),
        F.coalesce(F.col("rebalance_storms"), zero).alias("rebalance_storms"),
        F.coalesce(F.col("member_joins").cast("long"), zero).alias("member_joins"),
        F.coalesce(F.col("member_leaves").cast("long"), zero).alias("member_leaves"),
        (
            F.coalesce(F.col("member_joins").cast("long"), zero)
            + F.coalesce(F.col("member_leaves").cast("long"), zero)
        ).alias("member_churn"),
        "deleted_ms",
        *[
            F.coalesce(F.col(f"{s.name.lower()}_ms"), zero).alias(f"{s.name.lower()}_ms")
            for s in Status
        ],
    )
