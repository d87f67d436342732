"""Lag in seconds at ticks equals exporter/lag.py's on awkward histories: a flat run, a
truncated topic (falling log end), a consumer older than the history, one ahead of the samples."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from offsetwatch.exporter.lag import LogEndHistory, lag_seconds
from offsetwatch.spark_jobs.analytics.log_end_asof import prepare_samples, with_log_end
from offsetwatch.spark_jobs.lake_schema import LOG_ENDS_SCHEMA
from tests.spark_jobs.datasets import day_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

S = 1_000
#: (time s, log end): grows, stays flat 40..100 s, grows, then falls (recreated topic)
SAMPLES = [(10, 100), (20, 150), (40, 200), (60, 200), (100, 200), (110, 260), (120, 300),
           (130, 20), (140, 50), (150, 80)]  # fmt: skip
#: (tick s, committed offset)
TICKS = [(5, 0), (10, 100), (15, 90), (25, 120), (50, 199), (105, 199), (105, 200), (115, 230),
         (125, 50), (125, 400), (135, 10), (145, 30), (155, 80), (155, 60)]  # fmt: skip


def test_lag_seconds_like_the_exporter(spark: SparkSession) -> None:
    log_ends = spark.createDataFrame(
        [("t", 0, offset, ts * S, day_of(ts * S)) for ts, offset in SAMPLES], LOG_ENDS_SCHEMA
    )
    ticks = spark.createDataFrame(
        [(i, "t", 0, ts * S, committed) for i, (ts, committed) in enumerate(TICKS)],
        "i int, topic string, partition int, tick_ms long, committed_offset long",
    )
    got = {row.i: row for row in with_log_end(ticks, prepare_samples(log_ends, None)).collect()}
    for i, (ts, committed) in enumerate(TICKS):
        history = LogEndHistory(max_samples=1_000)
        for sample_ts, offset in SAMPLES:
            if sample_ts <= ts:
                history.record(sample_ts * S, offset)
        latest = history.latest()
        row = got[i]
        if latest is None:
            assert row.log_end_offset is None and row.lag_seconds is None, (ts, committed)
            continue
        expected = lag_seconds(history, committed, ts * S)
        assert row.log_end_offset == latest[1], (ts, committed)
        assert row.lag == max(0, latest[1] - committed)
        assert row.lag_seconds == pytest.approx(expected.seconds), (ts, committed)
        assert row.lag_seconds_lower_bound == (expected.is_lower_bound and committed < latest[1]), (
            ts,
            committed,
        )
        assert row.log_end_unchanged_since_ms == history.unchanged_since_ms(), (ts, committed)
