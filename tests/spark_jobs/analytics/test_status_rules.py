"""The Spark status expression gives evaluate_partition's answer for every window."""

from __future__ import annotations

import random
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

import pytest

from offsetwatch.exporter.judge.status import (
    DEFAULT_STATUS_CONFIG,
    PartitionWindow,
    Status,
    StatusConfig,
    evaluate_partition,
)
from offsetwatch.spark_jobs.analytics.status_rules import WINDOW_COLUMNS, status_column

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

NOW = 10_000_000


def _maybe(rng: random.Random, value: int) -> int | None:
    return None if rng.random() < 0.15 else value


def random_window(rng: random.Random, cfg: StatusConfig) -> PartitionWindow:
    """Values drawn near the rules' edges: offsets within a few of each other, times around
    the window start and the last commit, so every rule and tie is exercised."""
    start = NOW - cfg.window_ms
    committed = rng.randint(100, 106)
    commit_time = rng.choice([start - 1, start, start + 1, NOW - 5, NOW])
    log_end = _maybe(rng, committed + rng.choice([-2, -1, 0, 0, 1, 1, 2, 3, 50]))
    return PartitionWindow(
        committed_offset=committed,
        commit_time_ms=commit_time,
        window_first_offset=committed - rng.choice([-1, 0, 0, 1, 5, 40]),
        window_first_commit_time_ms=start,
        commits_in_window=rng.choice([0, 1, 2, 3]),
        last_rewind_time_ms=None if rng.random() < 0.6 else rng.choice([start - 1, start, NOW]),
        log_end_offset=log_end,
        lag_at_window_start=_maybe(rng, rng.choice([0, 1, 2, 3, 30, 60])),
        log_end_unchanged_since_ms=_maybe(rng, rng.choice([start - 1, start, commit_time, NOW])),
        group_is_live=rng.random() < 0.7,
        log_end_time_ms=_maybe(rng, rng.choice([commit_time - 1, commit_time, commit_time + 1])),
    )


def _spark_statuses(
    spark: SparkSession, windows: list[PartitionWindow], cfg: StatusConfig
) -> list[int]:
    rows = [(i, *asdict(w).values(), NOW) for i, w in enumerate(windows)]
    names = ["i", *asdict(windows[0]).keys(), "now_ms"]
    frame = spark.createDataFrame(rows, names)
    assert set(WINDOW_COLUMNS) <= set(frame.columns)
    got: dict[int, int] = dict(frame.select("i", status_column(cfg).alias("s")).collect())
    return [got[i] for i in range(len(windows))]


@pytest.mark.parametrize(
    "cfg",
    [DEFAULT_STATUS_CONFIG, StatusConfig(marker_tolerance=0, warn_min_growth_ratio=0.0)],
    ids=["defaults", "no-tolerance"],
)
def test_same_status_as_the_exporter(spark: SparkSession, cfg: StatusConfig) -> None:
    rng = random.Random(6)
    windows = [random_window(rng, cfg) for _ in range(3000)]
    expected = [int(evaluate_partition(w, NOW, cfg)) for w in windows]
    assert set(expected) == {int(s) for s in Status}, "the sample must reach every status"
    got = _spark_statuses(spark, windows, cfg)
    mismatches = [
        (windows[i], expected[i], got[i]) for i in range(len(windows)) if got[i] != expected[i]
    ]
    assert mismatches == []


def test_a_lag_at_window_start_bounded_to_0_is_not_behind(spark: SparkSession) -> None:
    # A consumer stuck since its first commit on a partition sampled only after it: its lag
    # at window start is 0 there when the first sample shows it caught up (LogEndHistory.lag_at;
    # timeline_sweep gives the same), not unknown. Unknown reads "behind at window start" and
    # made it STALL, then OK a window later (caught up at the first sample), then STALL again.
    cfg = DEFAULT_STATUS_CONFIG
    stuck = PartitionWindow(
        committed_offset=100,
        commit_time_ms=NOW - 5,
        window_first_offset=100,
        window_first_commit_time_ms=NOW - cfg.window_ms,
        commits_in_window=3,
        last_rewind_time_ms=NOW - cfg.window_ms - 1,  # before the window: no REWIND
        log_end_offset=110,
        lag_at_window_start=0,
        log_end_unchanged_since_ms=NOW - 1,  # moved inside the window
        group_is_live=True,
        log_end_time_ms=NOW - 1,
    )
    windows = [replace(stuck, lag_at_window_start=lag) for lag in (0, None, 10)]
    expected = [int(Status.OK), int(Status.STALL), int(Status.STALL)]
    assert [int(evaluate_partition(w, NOW, cfg)) for w in windows] == expected
    assert _spark_statuses(spark, windows, cfg) == expected
