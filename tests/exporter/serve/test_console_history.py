"""The console's lag history: one point per group and snapshot, bounded, thinned with age."""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading

from offsetwatch.exporter.judge.snapshot import Snapshot, SnapshotBuilder
from offsetwatch.exporter.serve.console_history import ConsoleHistory
from tests.exporter.serve.test_metrics import NOW, build, commit, histories, sample_state


def snapshot_at(time_ms: int, ready: bool = True) -> Snapshot:
    return build(sample_state(), ready=ready, now=time_ms)


def test_a_point_per_group_and_snapshot() -> None:
    history = ConsoleHistory(min_step_ms=1_000)
    assert history.record(snapshot_at(NOW))
    assert history.record(snapshot_at(NOW + 1_000))
    series = history.series("live")
    assert series is not None
    assert series.times_ms == (NOW, NOW + 1_000)
    # live: orders 0-2 (ends 100, 100, 50) and payments-0 (end 10)
    assert series.log_end == (260, 260)
    assert series.lag == (10 + 0 + 30 + 7,) * 2
    assert all(s >= 0 for s in series.lag_seconds)
    assert history.series("nope") is None


def test_unknown_log_ends_do_not_count() -> None:
    history = ConsoleHistory()
    history.record(snapshot_at(NOW))
    series = history.series("stopped")
    assert series is not None
    # orders-0 (end 100) is known, unsampled-0 is not: -1 must not be added
    assert series.log_end == (100,)


def test_not_ready_and_too_soon_are_skipped() -> None:
    history = ConsoleHistory(min_step_ms=1_000)
    assert not history.record(snapshot_at(NOW, ready=False))
    assert history.record(snapshot_at(NOW))
    assert not history.record(snapshot_at(NOW + 999))
    assert len(history) == 1


def test_an_hour_in_bounded_points_whatever_the_snapshot_interval() -> None:
    snapshot = snapshot_at(NOW)
    for step_ms in (1_000, 5_000, 30_000):
        history = ConsoleHistory()
        for i in range(2 * 3_600_000 // step_ms):
            history.record(dataclasses.replace(snapshot, time_ms=NOW + i * step_ms))
        series = history.series("live")
        assert series is not None
        times = series.times_ms
        assert list(times) == sorted(set(times))
        span = times[-1] - times[0]
        assert 3_540_000 <= span <= 3_600_000, (step_ms, span)
        assert len(times) <= 60 + 15 + 61 + 15
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps[-1] == step_ms  # the newest points stay as recorded
        assert max(gaps) <= max(step_ms, 60_000) + step_ms  # the older ones a minute apart


def test_groups_come_and_go_aligned_to_the_time_axis() -> None:
    history = ConsoleHistory(recent=4, buckets=4, span_ms=8_000, min_step_ms=1)
    state = sample_state()
    history.record(build(state, now=NOW))
    state.apply(commit("late", "orders", 0, 100))
    for i in range(1, 12):
        history.record(build(state, now=NOW + i * 1_000))
    late, live = history.series("late"), history.series("live")
    assert late is not None and live is not None
    assert late.times_ms == live.times_ms[len(live.times_ms) - len(late.times_ms) :]
    assert len(late.times_ms) == len(late.lag) == len(late.log_end) == len(late.lag_seconds)
    times, all_groups = history.lag_seconds_all()
    for group, values in all_groups.items():  # the sparklines are the series' lag seconds
        series = history.series(group)
        assert series is not None
        assert list(series.lag_seconds) == values
        assert series.times_ms == times[len(times) - len(values) :]
    assert set(all_groups) == {"live", "stopped", "late", 'odd "group" \\ with\nnewline ✓'}
    assert all(len(v) <= len(times) for v in all_groups.values())


def test_deleted_groups_leave_the_history() -> None:
    history = ConsoleHistory(min_step_ms=1)
    state = sample_state()
    history.record(build(state, now=NOW))
    state.groups.pop("stopped")
    history.record(build(state, now=NOW + 1_000))
    assert history.series("stopped") is None
    assert "stopped" not in history.lag_seconds_all()[1]


def test_readers_never_see_a_torn_series_while_the_writer_appends() -> None:
    history = ConsoleHistory(recent=8, buckets=4, span_ms=40_000, min_step_ms=1)
    stop = threading.Event()
    torn: list[str] = []

    def read() -> None:
        while not stop.is_set():
            series = history.series("live")
            if series is not None and not (
                len(series.times_ms) == len(series.lag) == len(series.lag_seconds)
            ):
                torn.append(repr(series))
            times, groups = history.lag_seconds_all()
            if any(len(v) > len(times) for v in groups.values()):
                torn.append("sparklines longer than the time axis")

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    snapshots = [snapshot_at(NOW + i * 1_000) for i in range(300)]
    for snapshot in snapshots:
        history.record(snapshot)
    stop.set()
    for reader in readers:
        reader.join()
    assert torn == []
    series = history.series("live")
    assert series is not None and not any(math.isnan(s) for s in series.lag_seconds)


def test_thinning_keeps_each_group_aligned_with_the_axis() -> None:
    """Groups born at different times are cut like the axis they end on: every kept value
    is the one recorded at its kept time (the lag encodes the time it was recorded at)."""
    history = ConsoleHistory(recent=6, buckets=6, span_ms=30_000, min_step_ms=1)
    state = sample_state()
    for i in range(57):
        if i in (3, 8, 21):
            state.apply(commit(f"born-{i}", "orders", 0, 0))
        # the lag of every group of "orders" moves with i: orders-0's log end is i + 100
        snapshot = SnapshotBuilder().build(state, histories({("orders", 0): 100 + i}), NOW, True)
        history.record(dataclasses.replace(snapshot, time_ms=NOW + i * 1_000))
    for group in ("born-3", "born-8", "born-21", "stopped"):
        series = history.series(group)
        assert series is not None
        for time_ms, lag in zip(series.times_ms, series.lag, strict=True):
            i = (time_ms - NOW) // 1_000
            expected = 100 + i - (40 if group == "stopped" else 0)
            assert lag == expected, (group, time_ms, lag)
