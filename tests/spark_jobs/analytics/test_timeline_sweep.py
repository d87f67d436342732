"""timeline_sweep.sweep on one partition (no Spark needed): the commit state over the status
window, and the log end, lag in seconds and lag at window start equal to exporter/state/lag.py's at
every tick."""

from __future__ import annotations

import pyarrow as pa
import pytest

from offsetwatch.core.status import PartitionWindow, Status, StatusConfig, evaluate_partition
from offsetwatch.exporter.state.lag import LogEndHistory, lag_seconds
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


def _buckets(committed: list[int] = COMMITTED, tick_ms: int = TICK) -> pa.Table:
    """One commit exactly at each tick from the first: `committed[i]` at tick i + 1."""
    ticks = [(i + 1) * tick_ms for i in range(len(committed))]
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
        "first_offset": committed,
        "last_ts": ticks,
        "last_so": list(range(count)),
        "last_offset": committed,
        "rewind_ms": nulls,
        "reset_ms": nulls,
    }
    return pa.table(columns).select(["group", "topic", "partition", *BUCKET_INPUT[1:]])


def _samples(samples: list[tuple[int, int]] = SAMPLES, unit_ms: int = S) -> pa.Table:
    return pa.table({"ts": [ts * unit_ms for ts, _ in samples], "log_end": [o for _, o in samples]})


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
            # the first window is judged from the first commit (10 s, on the first sample)
            assert row["lag_at_window_start"] == max(0, SAMPLES[0][1] - COMMITTED[0])


#: sampling starts at 35 s, after the commits of 10..30 s (no drop: one history throughout)
LATE_SAMPLES = [(35, 200), (45, 260), (55, 300), (65, 300), (75, 330), (85, 420)]
LATE_COMMITTED = [150, 200, 210, 240, 250, 260, 260, 300]


def test_lag_at_window_start_before_the_first_sample_is_lag_at() -> None:
    # The evidence start is the tick a window back, or the first commit (10 s, offset 150)
    # within the first window; before the first sample (35 s, log end 200) the lag then is 0
    # where the committed offset is at least 200 (200 and 210 at 20 and 30 s), unknown where
    # it is below (150 at 10 s), exactly as LogEndHistory.lag_at has it.
    rows = sweep(_buckets(LATE_COMMITTED), _samples(LATE_SAMPLES), TICK, 100 * S, WINDOW_TICKS)
    got = rows.to_pylist()
    history = LogEndHistory(max_samples=1_000)
    for ts, offset in LATE_SAMPLES:
        history.record(ts * S, offset)
    seen = []
    for i, row in enumerate(got):
        tick = row["tick_ms"]
        if i >= WINDOW_TICKS:
            start_ms = tick - WINDOW_TICKS * TICK
            start_offset = LATE_COMMITTED[min(i - WINDOW_TICKS, len(LATE_COMMITTED) - 1)]
        else:
            start_ms, start_offset = TICK, LATE_COMMITTED[0]
        # a sample the exporter had not taken yet bounds nothing
        expected = (
            history.lag_at(start_ms, start_offset) if tick >= LATE_SAMPLES[0][0] * S else None
        )
        assert row["lag_at_window_start"] == expected, (tick, start_ms, start_offset)
        seen.append(expected)
    assert seen == [None, None, None, None, 0, 0, 0, 10, 40, 40]


def _every_second(offset: int, seconds: int, tick_ms: int) -> pa.Table:
    """The buckets of a commit of `offset` every second from 1 s: one per tick interval, and
    one for the commit exactly on a tick (commit_buckets' layout)."""
    buckets: dict[tuple[int, bool], list[int]] = {}
    for second in range(1, seconds + 1):
        ts = second * S
        buckets.setdefault((ts // tick_ms * tick_ms, ts % tick_ms == 0), []).append(ts)
    keys = sorted(buckets, key=lambda k: buckets[k][0])
    count = len(keys)
    columns = {
        "group": ["g"] * count,
        "topic": ["t"] * count,
        "partition": pa.array([0] * count, pa.int32()),
        "life": [0] * count,
        "bucket_ms": [k[0] for k in keys],
        "on_tick": [k[1] for k in keys],
        "n": [len(buckets[k]) for k in keys],
        "first_ts": [buckets[k][0] for k in keys],
        "first_so": [buckets[k][0] // S for k in keys],
        "first_offset": [offset] * count,
        "last_ts": [buckets[k][-1] for k in keys],
        "last_so": [buckets[k][-1] // S for k in keys],
        "last_offset": [offset] * count,
        "rewind_ms": pa.nulls(count, pa.int64()),
        "reset_ms": pa.nulls(count, pa.int64()),
    }
    return pa.table(columns).select(["group", "topic", "partition", *BUCKET_INPUT[1:]])


def stuck_since_first_commit(tick_ms: int) -> list[Status]:
    """tests/exporter/judge/test_snapshot.py's stalled consumer on the sweep: it commits 100 every
    second from 1 s, caught up at first; the log end is sampled half a second after each
    commit, 100 at first, then 10 more a second. A one-minute window; the status at every
    tick by the shared rules (status_rules.py gives the same, test_status_rules.py)."""
    window_ms, seconds = 60 * S, 300
    samples = [(2 * s + 3, 100 + 10 * s) for s in range(seconds)]  # in half seconds
    rows = sweep(
        _every_second(100, seconds, tick_ms),
        _samples(samples, S // 2),
        tick_ms,
        seconds * S,
        window_ms // tick_ms,
    )
    cfg = StatusConfig(window_ms=window_ms)
    out = []
    for row in rows.to_pylist():
        window = PartitionWindow(
            committed_offset=row["committed_offset"],
            commit_time_ms=row["commit_time_ms"],
            window_first_offset=row["window_first_offset"],
            window_first_commit_time_ms=row["tick_ms"] - window_ms,
            commits_in_window=row["commits_in_window"],
            last_rewind_time_ms=row["last_rewind_time_ms"],
            log_end_offset=row["log_end_offset"],
            lag_at_window_start=row["lag_at_window_start"],
            log_end_unchanged_since_ms=row["log_end_unchanged_since_ms"],
            group_is_live=True,
            log_end_time_ms=row["log_end_time_ms"],
        )
        out.append(evaluate_partition(window, row["tick_ms"], cfg))
    return out


@pytest.mark.parametrize("tick_ms", [S, 10 * S], ids=["1s", "10s"])
def test_a_consumer_stuck_since_its_first_commit_never_flips_back_to_ok(tick_ms: int) -> None:
    # Its first commit predates the first sample, which shows it caught up. Unknown there,
    # the lag at window start read "behind" in the first window (STALL from its second
    # commit) and a window later, then OK at the tick a window after the first sample
    # (caught up then), then STALL again, as the exporter did.
    statuses = stuck_since_first_commit(tick_ms)
    ticks = [(i + 1) * tick_ms for i in range(len(statuses))]
    # ERR (no log end) at the ticks before the first sample (1.5 s): the first 1 s tick
    assert [st for t, st in zip(ticks, statuses, strict=True) if t < 1_500] in ([], [Status.ERR])
    judged = [(t, st) for t, st in zip(ticks, statuses, strict=True) if t >= 1_500]
    first_stall = [st for _, st in judged].index(Status.STALL)
    assert {st for _, st in judged[:first_stall]} == {Status.OK}
    assert {st for _, st in judged[first_stall:]} == {Status.STALL}
    # at the first tick whose window start saw messages waiting (the sample at 2.5 s)
    assert 62_500 <= judged[first_stall][0] < 62_500 + tick_ms


def test_no_samples_no_log_end() -> None:
    rows = sweep(_buckets(), _samples().slice(0, 0), TICK, END_TICK, WINDOW_TICKS).to_pylist()
    assert len(rows) == TICKS
    assert all(r["log_end_offset"] is None and r["lag_seconds"] is None for r in rows)
    assert all(r["lag"] is None and r["lag_seconds_lower_bound"] is False for r in rows)
