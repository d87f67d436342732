"""Log end, lag and lag in seconds at each evaluation tick: as-of joins with the samples.

Same definitions as the exporter (exporter/lag.py, docs/status-rules.md "Lag in seconds"):
the log end at a tick is the last sample at or before it; lag in seconds is the tick minus
the append time of the message at the committed offset, interpolated between the last sample
with log end <= committed and the first with log end > committed (the k-th of n messages in
a gap lands at k/(n+1) of it), never extrapolated, 0.0 when caught up, and a lower bound when
the message predates the first sample. A falling log end (recreated or truncated topic) starts
a new *epoch*: offsets before and after are unrelated, as when the exporter clears its history.

Both joins are window functions over one union of ticks and samples per topic-partition, so
no row is ever compared with more than its neighbours: by time for the log end, by offset for
the append time (log ends only grow within an epoch, so offset order is time order).
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

TP: Final = ("topic", "partition")
_SAMPLE, _TICK = 0, 1


def prepare_samples(log_ends: DataFrame, until_ms: int | None) -> DataFrame:
    """Samples with their `epoch` and `run_start_ms` (first time their log end was seen)."""
    samples = log_ends.select(
        *TP, F.col("sampled_at_ms").alias("ts"), F.col("log_end_offset").alias("log_end")
    )
    if until_ms is not None:
        samples = samples.filter(F.col("ts") <= until_ms)
    samples = samples.dropDuplicates([*TP, "ts"])
    by_time = Window.partitionBy(*TP).orderBy("ts")
    running = by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prev = F.lag("log_end").over(by_time)
    rows = samples.withColumn("prev", prev).withColumns(
        {
            "dropped": F.coalesce(F.col("log_end") < F.col("prev"), F.lit(False)),
            "new_run": F.col("prev").isNull() | (F.col("log_end") != F.col("prev")),
        }
    )
    return rows.withColumns(
        {
            "epoch": F.sum(F.col("dropped").cast("int")).over(running),
            "run_start_ms": F.last(F.when(F.col("new_run"), F.col("ts")), ignorenulls=True).over(
                running
            ),
        }
    ).select(*TP, "ts", "log_end", "epoch", "run_start_ms")


def with_log_end(ticks: DataFrame, samples: DataFrame) -> DataFrame:
    """Adds log_end_offset, log_end_time_ms, log_end_unchanged_since_ms, lag, lag_seconds and
    lag_seconds_lower_bound to `ticks` (which have tick_ms and committed_offset)."""
    tick_rows = ticks.withColumn("_kind", F.lit(_TICK)).withColumn("_ts", F.col("tick_ms"))
    sample_rows = samples.select(
        *TP,
        F.lit(_SAMPLE).alias("_kind"),
        F.col("ts").alias("_ts"),
        F.col("log_end").alias("_s_log_end"),
        F.col("epoch").alias("_s_epoch"),
        F.col("run_start_ms").alias("_s_run_start"),
    )
    rows = tick_rows.unionByName(sample_rows, allowMissingColumns=True)

    # by time: a sample at exactly the tick counts (samples sort first)
    by_time = (
        Window.partitionBy(*TP)
        .orderBy("_ts", "_kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    sample_time = F.when(F.col("_kind") == _SAMPLE, F.col("_ts"))
    rows = rows.withColumns(
        {
            "log_end_offset": F.last("_s_log_end", ignorenulls=True).over(by_time),
            "log_end_time_ms": F.last(sample_time, ignorenulls=True).over(by_time),
            "_epoch": F.last("_s_epoch", ignorenulls=True).over(by_time),
            "_run_start": F.last("_s_run_start", ignorenulls=True).over(by_time),
            "_key": F.coalesce(F.col("_s_log_end"), F.col("committed_offset")),
        }
    )

    # by offset within an epoch: the samples bracketing each tick's committed offset
    sample = F.when(
        F.col("_kind") == _SAMPLE, F.struct(F.col("_ts").alias("t"), F.col("_s_log_end").alias("o"))
    )
    # last sample with log end <= committed: samples before ticks at an equal offset, and the
    # latest of equal log ends (when the partition was last seen there)
    up = (
        Window.partitionBy(*TP, "_epoch")
        .orderBy("_key", "_kind", "_ts")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    # first sample with log end > committed: walking down, ticks before samples at an equal
    # offset, and the earliest of equal log ends (when it first got there)
    down = (
        Window.partitionBy(*TP, "_epoch")
        .orderBy(F.col("_key").desc(), F.col("_kind").desc(), F.col("_ts").desc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    rows = rows.withColumns(
        {
            "_before": F.last(sample, ignorenulls=True).over(up),
            "_after": F.last(sample, ignorenulls=True).over(down),
        }
    )

    ticks_out = rows.filter(F.col("_kind") == _TICK)
    before_t, before_o = F.col("_before.t"), F.col("_before.o")
    after_t, after_o = F.col("_after.t"), F.col("_after.o")
    ticks_out = ticks_out.withColumns(
        {
            "_gap_ms": after_t - before_t,
            "_k": F.col("committed_offset") - before_o + 1,
            "_n1": after_o - before_o + 1,
        }
    )
    produced = F.when(F.col("_before").isNull(), after_t).otherwise(
        before_t + F.expr("_gap_ms * _k div _n1")
    )
    log_end = F.col("log_end_offset")
    caught_up = F.col("committed_offset") >= log_end
    age_s = F.greatest(F.col("tick_ms") - produced, F.lit(0)) / F.lit(1000.0)
    return ticks_out.withColumns(
        {
            "log_end_unchanged_since_ms": F.when(
                F.col("log_end_time_ms") > F.col("_run_start"), F.col("_run_start")
            ),
            "lag": F.when(
                log_end.isNotNull(), F.greatest(log_end - F.col("committed_offset"), F.lit(0))
            ),
            "lag_seconds": F.when(log_end.isNull(), F.lit(None).cast("double"))
            .when(caught_up, F.lit(0.0))
            .otherwise(age_s),
            "lag_seconds_lower_bound": log_end.isNotNull() & ~caught_up & F.col("_before").isNull(),
        }
    ).drop(
        "_kind",
        "_ts",
        "_s_log_end",
        "_s_epoch",
        "_s_run_start",
        "_epoch",
        "_run_start",
        "_key",
        "_before",
        "_after",
        "_gap_ms",
        "_k",
        "_n1",
    )
