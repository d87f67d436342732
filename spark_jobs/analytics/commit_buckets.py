"""Offset commits reduced to one row per partition and tick: the only pass over raw commits.

Every analytic reads commits through `commit_buckets`: one shuffle of the raw rows by group,
then a numpy sweep per Spark partition (commit_sweep.py) orders them per (group, topic,
partition) in `__consumer_offsets` order, finds rewinds, commit intervals and "lives" and
folds them into tick-sized buckets. Everything after works on
buckets (at most one row per partition and tick), so 10M commits cost one shuffle and one
sweep, not one per analytic.

A *life* of a (group, topic, partition) is a stretch of commits between resets: an offset
deletion or expiry (a `delete` row) or the group's deletion (`group_deleted`) ends it; the
next commit starts a new life with no memory of the old one, exactly as the exporter drops
the partition (a rewind needs a previous offset in the same life).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType

from offsetwatch.decoder import contract
from offsetwatch.spark_jobs.analytics.commit_sweep import sweep
from offsetwatch.spark_jobs.lake_schema import struct_of

#: transactional commits that never became visible to the group (the contract's rule)
INVISIBLE_TXN: Final = contract.NOT_COUNTED
KEY: Final = ("group", "topic", "partition")
#: a topic-partition: what log-end samples are keyed by
TP: Final = ("topic", "partition")
LIFE_KEY: Final = (*KEY, "life")

_POINT: Final = struct_of(
    ("ts", LongType(), False), ("source_offset", LongType(), False), ("offset", LongType(), True)
)
_LONGS: Final = (
    "interval_sum_ms",
    "interval_n",
    "interval_min_ms",
    "interval_max_ms",
    "max_offset",
    "rewind_ms",
    "rewind_from",
    "rewind_to",
    "back_ms",
    "reset_ms",
)
BUCKETS_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("life", LongType(), False),
    ("rewind_seq", LongType(), False),
    ("bucket_ms", LongType(), False),
    ("on_tick", BooleanType(), False),
    ("n", LongType(), False),
    ("first", _POINT, True),
    ("last", _POINT, True),
    *((name, LongType(), name != "interval_n") for name in _LONGS),
)


def floor_to(ts: Column, step: int) -> Column:
    """`ts` rounded down to a multiple of `step` (epoch ms are never negative)."""
    return ts - ts % F.lit(step)


def ceil_to(ts: Column, step: int) -> Column:
    return floor_to(ts + F.lit(step - 1), step)


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


def commit_buckets(commits: DataFrame, group_events: DataFrame, tick_ms: int) -> DataFrame:
    """BUCKETS_SCHEMA: commits, offset deletions and group deletions per (group, topic,
    partition) in `__consumer_offsets` order, folded per life, rewind segment and tick
    (`bucket_ms`: the start of the tick interval [bucket_ms, bucket_ms + tick_ms)), split by
    whether the commit fell exactly on the tick (`on_tick`): a commit at exactly a window
    start counts inside that window.

    A rewind is a commit below the previous offset of the same life (`rewind_ms`,
    `rewind_from`, `rewind_to`); `back_ms`: the first commit of the segment back at the
    offset the latest rewind left. Intervals run between consecutive events of a life, the
    first one after a reset has none. `first`/`last`: the bucket's earliest and latest
    commits by (ts, source_offset). Resets only leave their time (`reset_ms`) in the bucket
    of the life they start. One shuffle by group, then commit_sweep.sweep per Spark
    partition.
    """
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
        "group",
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        "ts",
        F.lit(None).cast("long").alias("offset"),
        F.lit(True).alias("is_reset"),
        "source_offset",
    )

    def buckets_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = list(batches)
        # An empty Spark partition (more shuffle partitions than groups, and no AQE to
        # coalesce them) sends no batch at all, and pyarrow needs one to know the schema.
        if not received:
            return
        table = pa.Table.from_batches(received)
        if table.num_rows:
            result = sweep(table, tick_ms)
            if result is not None:
                yield result

    return (
        visible.unionByName(deletions).repartition("group").mapInArrow(buckets_of, BUCKETS_SCHEMA)
    )
