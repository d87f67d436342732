"""Spark and the live exporter agree: the reference history replayed through the exporter's
own pure code (status.evaluate_partition, lag.LogEndHistory, lag.lag_seconds) at every tick
gives the status and lag in seconds of the Spark timeline.

The exporter keeps a tumbling window and a bounded sample history to save memory; the
replay uses the sliding-window definitions of docs/status-rules.md and an unbounded history,
which is what those approximate and what the analytics compute.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict

import pytest

from offsetwatch.exporter.lag import LogEndHistory, lag_seconds
from offsetwatch.exporter.status import (
    DEFAULT_STATUS_CONFIG,
    PartitionWindow,
    Status,
    evaluate_partition,
)
from offsetwatch.spark_jobs.analytics import AnalyticsResult
from tests.spark_jobs.datasets import Commit, Scenario

pytestmark = pytest.mark.spark

W = DEFAULT_STATUS_CONFIG.window_ms


def _replay(
    commits: list[Commit], samples: list[tuple[int, int]], live: bool, now: int
) -> tuple[Status, float]:
    seen = [c for c in commits if c.ts <= now]
    last = seen[-1]
    assert last.offset is not None
    in_window = [c for c in seen if c.ts >= now - W]
    before_start = [c for c in seen if c.ts <= now - W]
    rewinds = [
        b.ts
        for a, b in itertools.pairwise(seen)
        if a.offset is not None and b.offset is not None and b.offset < a.offset
    ]
    history = LogEndHistory(max_samples=100_000)
    for ts, offset in samples[: bisect.bisect_right(samples, (now, 1 << 62))]:
        history.record(ts, offset)
    latest = history.latest()
    start_end = history.log_end_at(now - W)
    start_lag = None
    if start_end is not None and before_start:
        start_offset = before_start[-1].offset
        assert start_offset is not None
        start_lag = max(0, start_end - start_offset)
    first = in_window[0] if in_window else last
    assert first.offset is not None
    window = PartitionWindow(
        committed_offset=last.offset,
        commit_time_ms=last.ts,
        window_first_offset=first.offset,
        window_first_commit_time_ms=first.ts,
        commits_in_window=len(in_window),
        last_rewind_time_ms=rewinds[-1] if rewinds else None,
        log_end_offset=None if latest is None else latest[1],
        lag_at_window_start=start_lag,
        log_end_unchanged_since_ms=history.unchanged_since_ms(),
        group_is_live=live,
        log_end_time_ms=None if latest is None else latest[0],
    )
    return (
        evaluate_partition(window, now, DEFAULT_STATUS_CONFIG),
        lag_seconds(history, last.offset, now).seconds,
    )


def test_every_tick_agrees_with_the_exporter(
    known_result: AnalyticsResult, known_scenario: Scenario
) -> None:
    commits: dict[tuple[str, str, int], list[Commit]] = defaultdict(list)
    for c in known_scenario.commits:
        commits[(c.group, c.topic, c.partition)].append(c)
    samples: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for s in known_scenario.log_ends:
        samples[(s.topic, s.partition)].append((s.ts, s.offset))
    ticks = known_result.timeline.select(
        "group", "topic", "partition", "tick_ms", "status", "lag_seconds", "group_is_live"
    ).collect()
    assert len(ticks) > 1000
    seen_statuses = set()
    for tick in ticks:
        # every group of the scenario is a live classic group until it is deleted
        assert tick.group_is_live
        status, lag_s = _replay(
            commits[(tick.group, tick.topic, tick.partition)],
            samples[(tick.topic, tick.partition)],
            True,
            tick.tick_ms,
        )
        assert (tick.status, tick.lag_seconds) == (int(status), pytest.approx(lag_s)), tick
        seen_statuses.add(status)
    assert seen_statuses == {Status.OK, Status.WARN, Status.REWIND, Status.STALL, Status.STOP}
