"""windows_sweep.sweep on one partition (no Spark needed): counts, first and last offsets,
progress across windows, intervals and the lag at each window's end."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from offsetwatch.spark_jobs.analytics.windows_sweep import BUCKET_INPUT, sweep

M = 60_000
#: (bucket start, commits, (first ts, offset), (last ts, offset), interval sum, n, min, max)
BUCKETS = [
    (0, 2, (1_000, 10), (30_000, 20), 29_000, 1, 29_000, 29_000),
    (M, 1, (M + 5_000, 30), (M + 5_000, 30), 35_000, 1, 35_000, 35_000),
    (M, 1, (M + 9_000, 5), (M + 9_000, 5), 4_000, 1, 4_000, 4_000),  # a rewind, same minute
    (3 * M, 0, None, None, None, 0, None, None),  # a reset alone
    (5 * M, 1, (5 * M, 8), (5 * M, 8), None, 0, None, None),
]
#: tick -> (lag, lag seconds)
TICKS = {M: (5, 1.5), 2 * M: (40, 3.0), 4 * M: (None, None), 6 * M: (2, 0.5)}


def _buckets() -> pa.Table:
    def point(b: tuple[Any, ...], i: int, j: int) -> int | None:
        return None if b[i] is None else int(b[i][j])

    count = len(BUCKETS)
    columns: dict[str, Any] = {
        "group": ["g"] * count,
        "topic": ["t"] * count,
        "partition": pa.array([3] * count, pa.int32()),
        "bucket_ms": [b[0] for b in BUCKETS],
        "n": [b[1] for b in BUCKETS],
        "first_ts": [point(b, 2, 0) for b in BUCKETS],
        "first_so": [None if b[2] is None else k for k, b in enumerate(BUCKETS)],
        "first_offset": [point(b, 2, 1) for b in BUCKETS],
        "last_ts": [point(b, 3, 0) for b in BUCKETS],
        "last_so": [None if b[3] is None else k for k, b in enumerate(BUCKETS)],
        "last_offset": [point(b, 3, 1) for b in BUCKETS],
        "interval_sum_ms": [b[4] for b in BUCKETS],
        "interval_n": [b[5] for b in BUCKETS],
        "interval_min_ms": [b[6] for b in BUCKETS],
        "interval_max_ms": [b[7] for b in BUCKETS],
    }
    return pa.table({name: columns[name] for name in BUCKET_INPUT})


def _ticks() -> pa.Table:
    return pa.table(
        {
            "group": ["g"] * len(TICKS),
            "tick_ms": list(TICKS),
            "lag": [v[0] for v in TICKS.values()],
            "lag_seconds": pa.array([v[1] for v in TICKS.values()], pa.float64()),
        }
    )


def test_minute_windows() -> None:
    rows = sweep(_buckets(), _ticks(), (M,)).to_pylist()
    got = {row["window_start_ms"]: row for row in rows}
    assert sorted(got) == [0, M, 3 * M, 5 * M]
    assert {(r["group"], r["topic"], r["partition"], r["window_ms"]) for r in rows} == {
        ("g", "t", 3, M)
    }
    first = got[0]
    assert (first["commits"], first["first_offset"], first["last_offset"]) == (2, 10, 20)
    assert (first["offset_progress"], first["consumption_rate"]) == (10, 10 * 1000.0 / M)
    assert (first["lag"], first["lag_seconds"]) == (5, 1.5)
    second = got[M]
    # the last commit of the minute is the rewind's: progress from 20 is negative, rate 0
    assert (second["commits"], second["first_offset"], second["last_offset"]) == (2, 30, 5)
    assert (second["offset_progress"], second["consumption_rate"]) == (-15, 0.0)
    assert second["interval_avg_ms"] == pytest.approx(19_500.0)
    assert (second["interval_min_ms"], second["interval_max_ms"]) == (4_000, 35_000)
    assert (second["lag"], second["lag_seconds"]) == (40, 3.0)
    reset = got[3 * M]
    assert (reset["commits"], reset["first_offset"], reset["offset_progress"]) == (0, None, None)
    assert (reset["consumption_rate"], reset["interval_avg_ms"]) == (0.0, None)
    assert (reset["lag"], reset["lag_seconds"]) == (None, None)
    after = got[5 * M]
    # the window before had no commit: progress counts from this window's first offset
    assert (after["offset_progress"], after["lag"]) == (0, 2)


def test_hour_window_spans_them_all() -> None:
    (row,) = sweep(_buckets(), _ticks(), (3_600_000,)).to_pylist()
    assert (row["commits"], row["first_offset"], row["last_offset"]) == (5, 10, 8)
    assert (row["interval_min_ms"], row["interval_max_ms"], row["lag"]) == (4_000, 35_000, None)
