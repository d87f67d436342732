"""The exporter's status rules (offsetwatch/core/status.py) as one Spark column expression.

`evaluate_partition` decides one partition at a time in Python; over a history of millions
of evaluation ticks that would be a Python UDF, so the same rules are written here with
Spark's built-in functions, rule by rule in the same order, with the exporter's `Status`
values and `StatusConfig` thresholds. tests/spark_jobs/analytics/test_status_rules.py feeds
thousands of random windows through both and requires the same answer for each.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F

from offsetwatch.core.status import Status, StatusConfig

#: the columns `status_column` reads, named like `PartitionWindow`'s fields, plus `now_ms`
WINDOW_COLUMNS: Final = (
    "committed_offset",
    "commit_time_ms",
    "window_first_offset",
    "commits_in_window",
    "last_rewind_time_ms",
    "log_end_offset",
    "lag_at_window_start",
    "log_end_unchanged_since_ms",
    "group_is_live",
    "log_end_time_ms",
    "now_ms",
)


def status_column(cfg: StatusConfig) -> Column:
    """`evaluate_partition` over the WINDOW_COLUMNS of each row, as an int column."""
    committed = F.col("committed_offset")
    commit_time = F.col("commit_time_ms")
    log_end = F.col("log_end_offset")
    log_end_time = F.col("log_end_time_ms")
    unchanged_since = F.col("log_end_unchanged_since_ms")
    start_lag = F.col("lag_at_window_start")
    window_first = F.col("window_first_offset")
    rewind = F.col("last_rewind_time_ms")
    tolerance = F.lit(cfg.marker_tolerance)

    lag = log_end - committed
    window_start = F.col("now_ms") - F.lit(cfg.window_ms)
    behind = (
        start_lag.isNull()
        | (start_lag > tolerance)
        | ((start_lag > 0) & unchanged_since.isNotNull() & (unchanged_since <= window_start))
    )
    consumed = committed - window_first
    growth = lag - start_lag

    def value(status: Status) -> Column:
        return F.lit(int(status))

    return (
        F.when(log_end.isNull(), value(Status.ERR))
        .when(
            committed > log_end,
            F.when(
                log_end_time.isNull() | (log_end_time >= commit_time), value(Status.ERR)
            ).otherwise(value(Status.OK)),
        )
        .when(lag == 0, value(Status.OK))
        .when(
            (lag <= tolerance) & unchanged_since.isNotNull() & (unchanged_since <= commit_time),
            value(Status.OK),
        )
        .when(rewind.isNotNull() & (rewind >= window_start), value(Status.REWIND))
        .when(
            commit_time < window_start,
            F.when(behind | ~F.col("group_is_live"), value(Status.STOP)).otherwise(
                value(Status.OK)
            ),
        )
        .when(
            (F.col("commits_in_window") >= cfg.stall_min_commits)
            & (committed <= window_first)
            & behind,
            value(Status.STALL),
        )
        .when(
            (consumed > 0)
            & start_lag.isNotNull()
            & behind
            & (growth > 0)
            & (growth > F.lit(cfg.warn_min_growth_ratio) * consumed),
            value(Status.WARN),
        )
        .otherwise(value(Status.OK))
    )
