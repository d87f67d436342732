"""Log end, lag and lag in seconds at each evaluation tick: as-of joins with the samples.

Same definitions as the exporter (exporter/lag.py, docs/status-rules.md "Lag in seconds"):
the log end at a tick is the last sample at or before it; lag in seconds is the tick minus
the append time of the message at the committed offset, interpolated between the last sample
with log end <= committed and the first with log end > committed (the k-th of n messages in
a gap lands at k/(n+1) of it), never extrapolated, 0.0 when caught up, and a lower bound when
the message predates the first sample. A falling log end (recreated or truncated topic) starts
a new *epoch*: offsets before and after are unrelated, as when the exporter clears its history.

Both as-of joins are window functions over a union of samples with narrow probe rows (one
per topic-partition and tick; one per distinct committed offset), joined back to the ticks
afterwards: no row is compared with more than its neighbours, and the sorts stay narrow. By
time for the log end; by offset for the append time (log ends only grow within an epoch, so
offset order is time order, and a sample's successor in time is the first one above it).
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

TP: Final = ("topic", "partition")
_SAMPLE, _TICK = 0, 1


def prepare_samples(log_ends: DataFrame, until_ms: int | None) -> DataFrame:
    """Samples with their `epoch`, `run_start_ms` (first time their log end was seen), the
    next sample of the epoch (`next`: the first with a higher log end after this one, as log
    ends only grow within an epoch) and the epoch's first sample (`epoch_first`)."""
    samples = log_ends.select(
        *TP, F.col("sampled_at_ms").alias("ts"), F.col("log_end_offset").alias("log_end")
    )
    if until_ms is not None:
        samples = samples.filter(F.col("ts") <= until_ms)
    samples = samples.dropDuplicates([*TP, "ts"])
    by_time = Window.partitionBy(*TP).orderBy("ts")
    running = by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    this = F.struct(F.col("ts").alias("t"), F.col("log_end").alias("o"))
    rows = samples.withColumns(
        {
            "prev": F.lag("log_end").over(by_time),
            "_next": F.lead(this).over(by_time),
        }
    ).withColumns(
        {
            "dropped": F.coalesce(F.col("log_end") < F.col("prev"), F.lit(False)),
            "new_run": F.col("prev").isNull() | (F.col("log_end") != F.col("prev")),
        }
    )
    starts_epoch = F.col("prev").isNull() | F.col("dropped")
    return rows.withColumns(
        {
            "epoch": F.sum(F.col("dropped").cast("int")).over(running),
            "run_start_ms": F.last(F.when(F.col("new_run"), F.col("ts")), ignorenulls=True).over(
                running
            ),
            "epoch_first": F.last(F.when(starts_epoch, this), ignorenulls=True).over(running),
            # a lower next log end is the next epoch's first sample: no bracket across it
            "next": F.when(F.col("_next.o") >= F.col("log_end"), F.col("_next")),
        }
    ).select(*TP, "ts", "log_end", "epoch", "run_start_ms", "epoch_first", "next")


def _log_end_at_ticks(ticks: DataFrame, samples: DataFrame) -> DataFrame:
    """Per (topic, partition, tick): the last sample at or before it (a sample at exactly the
    tick counts), its epoch, run start and the epoch's first sample."""
    tick_rows = (
        ticks.select(*TP, "tick_ms")
        .distinct()
        .select(*TP, F.col("tick_ms").alias("_ts"), F.lit(_TICK).alias("_kind"))
    )
    sample_rows = samples.select(
        *TP,
        F.col("ts").alias("_ts"),
        F.lit(_SAMPLE).alias("_kind"),
        "log_end",
        "epoch",
        "run_start_ms",
        "epoch_first",
    )
    by_time = (
        Window.partitionBy(*TP)
        .orderBy("_ts", "_kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    sample_time = F.when(F.col("_kind") == _SAMPLE, F.col("_ts"))
    return (
        tick_rows.unionByName(sample_rows, allowMissingColumns=True)
        .withColumns(
            {
                "log_end_offset": F.last("log_end", ignorenulls=True).over(by_time),
                "log_end_time_ms": F.last(sample_time, ignorenulls=True).over(by_time),
                "_epoch": F.last("epoch", ignorenulls=True).over(by_time),
                "_run_start": F.last("run_start_ms", ignorenulls=True).over(by_time),
                "_epoch_first": F.last("epoch_first", ignorenulls=True).over(by_time),
            }
        )
        .filter(F.col("_kind") == _TICK)
        .select(
            *TP,
            F.col("_ts").alias("tick_ms"),
            "log_end_offset",
            "log_end_time_ms",
            "_epoch",
            "_run_start",
            "_epoch_first",
        )
    )


def _brackets(ticks: DataFrame, samples: DataFrame) -> DataFrame:
    """Per (topic, partition, epoch, committed offset) behind the log end: the last sample
    with log end <= committed (`_before`, carrying its `next`: the first sample above)."""
    probes = (
        ticks.filter(F.col("committed_offset") < F.col("log_end_offset"))
        .select(*TP, "_epoch", F.col("committed_offset").alias("_key"))
        .distinct()
        .withColumn("_kind", F.lit(_TICK))
    )
    sample_rows = samples.select(
        *TP,
        F.col("epoch").alias("_epoch"),
        F.col("log_end").alias("_key"),
        F.lit(_SAMPLE).alias("_kind"),
        F.struct(F.col("ts").alias("t"), F.col("log_end").alias("o"), F.col("next")).alias(
            "_sample"
        ),
        F.col("ts").alias("_ts"),
    )
    # samples before probes at an equal offset; of equal log ends, the latest (when the
    # partition was last seen there)
    up = (
        Window.partitionBy(*TP, "_epoch")
        .orderBy("_key", "_kind", "_ts")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        probes.unionByName(sample_rows, allowMissingColumns=True)
        .withColumn("_before", F.last("_sample", ignorenulls=True).over(up))
        .filter(F.col("_kind") == _TICK)
        .select(*TP, "_epoch", F.col("_key").alias("committed_offset"), "_before")
    )


def with_log_end(ticks: DataFrame, samples: DataFrame) -> DataFrame:
    """Adds log_end_offset, log_end_time_ms, log_end_unchanged_since_ms, lag, lag_seconds and
    lag_seconds_lower_bound to `ticks` (which have tick_ms and committed_offset)."""
    ticks = ticks.join(_log_end_at_ticks(ticks, samples), [*TP, "tick_ms"], "left")
    ticks = ticks.join(_brackets(ticks, samples), [*TP, "_epoch", "committed_offset"], "left")
    before = F.col("_before")
    # no sample at or below the committed offset: the message predates the history, and the
    # epoch's first sample is the only time known (a lower bound of its age)
    after = F.when(before.isNull(), F.col("_epoch_first")).otherwise(F.col("_before.next"))
    ticks = ticks.withColumns(
        {
            "_gap_ms": after.t - F.col("_before.t"),
            "_k": F.col("committed_offset") - F.col("_before.o") + 1,
            "_n1": after.o - F.col("_before.o") + 1,
            "_after_t": after.t,
        }
    )
    produced = F.when(before.isNull(), F.col("_after_t")).otherwise(
        F.col("_before.t") + F.expr("_gap_ms * _k div _n1")
    )
    log_end = F.col("log_end_offset")
    caught_up = F.col("committed_offset") >= log_end
    age_s = F.greatest(F.col("tick_ms") - produced, F.lit(0)) / F.lit(1000.0)
    return ticks.withColumns(
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
            "lag_seconds_lower_bound": log_end.isNotNull() & ~caught_up & before.isNull(),
        }
    ).drop("_epoch", "_run_start", "_epoch_first", "_before", "_gap_ms", "_k", "_n1", "_after_t")
