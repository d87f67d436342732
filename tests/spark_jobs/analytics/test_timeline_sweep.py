"""timeline_sweep.sweep on one partition (no Spark needed): the commit state over the status
window, and the log end and lag in seconds equal to exporter/lag.py's at every tick."""

from __future__ import annotations

import pyarrow as pa
import pytest

from offsetwatch.exporter.lag import LogEndHistory, lag_seconds
from offsetwatch.spark_jobs.analytics.timeline_sweep import BUCKET_INPUT, sweep

S = 1_000
TICK = 10 * S
WINDOW_TICKS = 3
#: (time s, log end): grows, stays flat 40..100 s, grows, then falls (recreated topic)
SAMPLES = [(10, 100), (20, 150), (40, 200), (60, 200), (100, 200), (110, 260), (120, 300),
           (130, 20), (140, 50), (150, 80)]  # fmt: skip
#: one commit exactly at each tick 10..150 s: the committed offset from then on
COMMITTED = [100, 90, 120, 150, 199, 199, 199, 200, 230, 250, 400, 10, 30, 80, 60]
#: five ticks past the last commit: the last two have no commit in their window
END_TICK = 200 * S
TICKS = END_TICK // TICK


def _buckets() -> pa.Table:
    ticks = [(i + 1) * TICK for i in range(len(COMMITTED))]
    count = len(ticks)
    nulls = pa.nulls(count, pa.int64())
    columns = {
        "group": ["g"] * count,
        "topic": ["t"] * count,
        "partition": pa.array([0] * count, pa.int32()),
        "life": [0] * count,
        "bucket_ms": ticks,
        "on_tick": [True] * count,
        "n": [1] * count,
        "first_ts": ticks,
        "first_so": list(range(count)),
        "first_offset": COMMITTED,
        "last_ts": ticks,
        "last_so": list(range(count)),
        "last_offset": COMMITTED,
        "rewind_ms": nulls,
        "reset_ms": nulls,
    }
    return pa.table(columns).select(["group", "topic", "partition", *BUCKET_INPUT[1:]])


def _samples() -> pa.Table:
    return pa.table({"ts": [ts * S for ts, _ in SAMPLES], "log_end": [o for _, o in SAMPLES]})


def test_commit_state_and_lag_like_the_exporter() -> None:
    rows = sweep(_buckets(), _samples(), TICK, END_TICK, WINDOW_TICKS).to_pylist()
    assert [r["tick_ms"] for r in rows] == [t * TICK for t in range(1, TICKS + 1)]
    assert sum(r["commits_in_window"] == 0 for r in rows) == 2
    for i, row in enumerate(rows):
        tick = row["tick_ms"]
        committed = COMMITTED[min(i, len(COMMITTED) - 1)]
        assert row["committed_offset"] == committed
        assert row["commits_in_tick"] == (1 if i < len(COMMITTED) else 0)
        in_window = [j for j in range(len(COMMITTED)) if tick - 3 * TICK <= (j + 1) * TICK <= tick]
        assert row["commits_in_window"] == len(in_window)
        first_in_window = COMMITTED[in_window[0]] if in_window else committed
        assert row["window_first_offset"] == first_in_window, (tick, in_window)
        history = LogEndHistory(max_samples=1_000)
        for sample_ts, offset in SAMPLES:
            if sample_ts * S <= tick:
                history.record(sample_ts * S, offset)
        latest = history.latest()
        assert latest is not None
        expected = lag_seconds(history, committed, tick)
        assert row["log_end_offset"] == latest[1]
        assert row["lag"] == max(0, latest[1] - committed)
        assert row["lag_seconds"] == pytest.approx(expected.seconds), (tick, committed)
        assert row["lag_seconds_lower_bound"] == (
            expected.is_lower_bound and committed < latest[1]
        ), (tick, committed)
        assert row["log_end_unchanged_since_ms"] == history.unchanged_since_ms()
        if i >= WINDOW_TICKS:
            back = rows[i - WINDOW_TICKS]
            assert row["lag_at_window_start"] == max(
                0, back["log_end_offset"] - back["committed_offset"]
            )
        else:
            assert row["lag_at_window_start"] is None


def test_no_samples_no_log_end() -> None:
    rows = sweep(_buckets(), _samples().slice(0, 0), TICK, END_TICK, WINDOW_TICKS).to_pylist()
    assert len(rows) == TICKS
    assert all(r["log_end_offset"] is None and r["lag_seconds"] is None for r in rows)
    assert all(r["lag"] is None and r["lag_seconds_lower_bound"] is False for r in rows)
