"""Offset commits reduced to one row per partition and tick: the only pass over raw commits.

Every analytic reads commits through `commit_buckets`: one sort of the raw rows per
(group, topic, partition) in `__consumer_offsets` order finds rewinds, commit intervals and
"lives", then one aggregation folds them into tick-sized buckets. Everything after works on
buckets (at most one row per partition and tick), so 10M commits cost one sort and one
aggregation, not one per analytic.

A *life* of a (group, topic, partition) is a stretch of commits between resets: an offset
deletion or expiry (a `delete` row) or the group's deletion (`group_deleted`) ends it; the
next commit starts a new life with no memory of the old one, exactly as the exporter drops
the partition (a rewind needs a previous offset in the same life).
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

#: transactional commits that never became visible to the group
INVISIBLE_TXN: Final = ("aborted", "pending")
KEY: Final = ("group", "topic", "partition")
LIFE_KEY: Final = (*KEY, "life")


def floor_to(ts: Column, step: int) -> Column:
    """`ts` rounded down to a multiple of `step` (epoch ms are never negative)."""
    return ts - ts % F.lit(step)


def ceil_to(ts: Column, step: int) -> Column:
    return floor_to(ts + F.lit(step - 1), step)


def commit_events(commits: DataFrame, group_events: DataFrame) -> DataFrame:
    """Commits, offset deletions and group deletions per (group, topic, partition), with
    `life`, rewinds (`is_rewind`, `prev_offset`), `interval_ms` and `rewind_seq`."""
    visible = commits.filter(~F.col("txn").isin(*INVISIBLE_TXN)).select(
        *KEY,
        F.coalesce("commit_ts", "record_ts").alias("ts"),
        F.when(F.col("kind") == "commit", F.col("offset")).alias("offset"),
        (F.col("kind") != "commit").alias("is_reset"),
        "source_offset",
    )
    # A group's deletion resets each of its partitions; its tombstone sits in the same
    # __consumer_offsets partition as the group's commits, so source offsets order them.
    deletions = group_events.filter(F.col("event") == "group_deleted").select(
        "group", "ts", "source_offset"
    )
    partitions = visible.select(*KEY).distinct()
    resets = partitions.join(deletions, "group").select(
        *KEY,
        "ts",
        F.lit(None).cast("long").alias("offset"),
        F.lit(True).alias("is_reset"),
        "source_offset",
    )
    by_key = Window.partitionBy(*KEY).orderBy("source_offset")
    running = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # The row before a life's first commit is the reset (null offset): no rewind, no interval.
    rows = visible.unionByName(resets).withColumns(
        {
            "prev_offset": F.lag("offset").over(by_key),
            "prev_ts": F.lag("ts").over(by_key),
            "life": F.sum(F.col("is_reset").cast("int")).over(running),
        }
    )
    rows = rows.withColumns(
        {
            "is_rewind": F.coalesce(F.col("offset") < F.col("prev_offset"), F.lit(False)),
            "interval_ms": F.when(F.col("prev_offset").isNotNull(), F.col("ts") - F.col("prev_ts")),
        }
    )
    return rows.withColumns(
        {
            "rewind_seq": F.sum(F.col("is_rewind").cast("int")).over(running),
            "rewind_from": F.last(
                F.when(F.col("is_rewind"), F.col("prev_offset")), ignorenulls=True
            ).over(running),
        }
    )


def life_spans(buckets: DataFrame) -> DataFrame:
    """(group, topic, partition, life) -> first_commit_ms and life_end_ms (the reset that
    starts the next life; null for the current one) for lives with at least one commit."""
    lives = buckets.groupBy(*LIFE_KEY).agg(
        F.min("reset_ms").alias("reset_ms"), F.min("first.ts").alias("first_commit_ms")
    )
    next_reset = F.lead("reset_ms").over(Window.partitionBy(*KEY).orderBy("life"))
    return (
        lives.withColumn("life_end_ms", next_reset)
        .filter(F.col("first_commit_ms").isNotNull())
        .select(*LIFE_KEY, "first_commit_ms", "life_end_ms")
    )


def commit_buckets(events: DataFrame, tick_ms: int) -> DataFrame:
    """Events folded per life, rewind segment and tick (`bucket_ms`: the start of the tick
    interval [bucket_ms, bucket_ms + tick_ms)), split by whether the commit fell exactly on
    the tick (`on_tick`): a commit at exactly a window start counts inside that window.
    Resets only leave their time (`reset_ms`) in the bucket of the life they start."""
    commit = ~F.col("is_reset")
    order = F.when(commit, F.struct("ts", "source_offset", "offset"))
    back = commit & ~F.col("is_rewind") & (F.col("offset") >= F.col("rewind_from"))
    rewind = F.col("is_rewind")
    return events.groupBy(
        *LIFE_KEY,
        "rewind_seq",
        floor_to(F.col("ts"), tick_ms).alias("bucket_ms"),
        (F.col("ts") % F.lit(tick_ms) == 0).alias("on_tick"),
    ).agg(
        F.sum(commit.cast("long")).alias("n"),
        F.min(order).alias("first"),
        F.max(order).alias("last"),
        F.sum("interval_ms").alias("interval_sum_ms"),
        F.count("interval_ms").alias("interval_n"),
        F.min("interval_ms").alias("interval_min_ms"),
        F.max("interval_ms").alias("interval_max_ms"),
        F.max("offset").alias("max_offset"),
        F.max(F.when(rewind, F.col("ts"))).alias("rewind_ms"),
        F.max(F.when(rewind, F.col("prev_offset"))).alias("rewind_from"),
        F.max(F.when(rewind, F.col("offset"))).alias("rewind_to"),
        F.min(F.when(back, F.col("ts"))).alias("back_ms"),
        F.min(F.when(F.col("is_reset"), F.col("ts"))).alias("reset_ms"),
    )
