"""Spark and the live exporter agree: the reference history replayed through the exporter's
own pure code (status.evaluate_partition, lag.LogEndHistory, lag.lag_seconds) at every tick
gives the status and lag in seconds of the Spark timeline.

The exporter judges over half-window buckets and keeps a bounded sample history to save
memory; the replay uses the sliding-window definitions of docs/status-rules.md and an
unbounded history, which is what those approximate and what the analytics compute. The lag at
window start is the exporter's own `LogEndHistory.lag_at`, taken at the evidence start.

A consumer stuck since its first commit, on a partition sampled only after it, is also run
through the live exporter's `SnapshotBuilder`: the Spark timeline, like the exporter, reads it
OK, then STALL for good, never STALL, OK, STALL.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections import defaultdict
from typing import TYPE_CHECKING

import pytest

from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.judge.snapshot import SnapshotBuilder
from offsetwatch.exporter.judge.status import (
    DEFAULT_STATUS_CONFIG,
    PartitionWindow,
    Status,
    evaluate_partition,
)
from offsetwatch.exporter.state.lag import LogEndHistory, lag_seconds
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.spark_jobs.analytics import AnalyticsResult, analyze
from tests.spark_jobs.datasets import Commit, Scenario, ScenarioBuilder, at, frames

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

W = DEFAULT_STATUS_CONFIG.window_ms


def _replay(
    commits: list[Commit], samples: list[tuple[int, int]], live: bool, now: int
) -> tuple[Status, float | None]:
    """The exporter's status and lag in seconds (None without a log-end sample, as the
    timeline's null) at `now`."""
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
    # the evidence starts a window back, or at the first commit when that is later, as the
    # exporter's does; the lag then is lag_at's (0, not unknown, before the first sample when
    # that sample is no higher than the offset)
    start_ms, start = (now - W, before_start[-1]) if before_start else (seen[0].ts, seen[0])
    assert start.offset is not None
    start_lag = history.lag_at(start_ms, start.offset)
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
        None if latest is None else lag_seconds(history, last.offset, now).seconds,
    )


def _agree(result: AnalyticsResult, scenario: Scenario) -> tuple[int, set[Status]]:
    """Every tick of the Spark timeline equals the replay; (ticks, statuses seen)."""
    commits: dict[tuple[str, str, int], list[Commit]] = defaultdict(list)
    for c in scenario.commits:
        commits[(c.group, c.topic, c.partition)].append(c)
    samples: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for s in scenario.log_ends:
        samples[(s.topic, s.partition)].append((s.ts, s.offset))
    ticks = result.timeline.select(
        "group", "topic", "partition", "tick_ms", "status", "lag_seconds", "group_is_live"
    ).collect()
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
        expected_s = None if lag_s is None else pytest.approx(lag_s)
        assert (tick.status, tick.lag_seconds) == (int(status), expected_s), tick
        seen_statuses.add(status)
    return len(ticks), seen_statuses


def test_every_tick_agrees_with_the_exporter(
    known_result: AnalyticsResult, known_scenario: Scenario
) -> None:
    count, seen_statuses = _agree(known_result, known_scenario)
    assert count > 1000
    assert seen_statuses == {Status.OK, Status.WARN, Status.REWIND, Status.STALL, Status.STOP}


# -- stuck since its first commit, sampled after it -------------------------------------------

SAMPLED_FROM = at(10 / 60)


def stuck_since_first_commit() -> Scenario:
    """Two groups commit one offset every 5 s from T0 on a topic the sampler first sees 10 s
    later (tests/exporter/judge/test_snapshot.py's case, on the analytics' minute grid):

    * `stuck` on late/0, caught up at its first commit: the log end is 100 until 90 s (so a
      minute tick a window back can see it caught up after the first sample), then 10 more
      a second, and it stays at 100;
    * `behind` on late/1, 50 behind the first sample's 200 at once: nothing bounds its lag at
      its first commit, which stays unknown, so it is STALL from its second tick on.
    """
    b = ScenarioBuilder(end_ms=at(40))
    start, end = b.start_ms, b.end_ms
    b.produce("late", 0, [(start, 0.0), (start + 90_000, 10.0)], offset0=100)
    b.produce("late", 1, [(start, 10.0)], offset0=100)
    b.join("stuck", start).hold("stuck", "late", 0, 100, start, end)
    b.join("behind", start).hold("behind", "late", 1, 50, start, end)
    built = b.build()
    late = tuple(s for s in built.log_ends if s.ts >= SAMPLED_FROM)
    return dataclasses.replace(built, log_ends=late)


def exporter_statuses(scenario: Scenario, group: str) -> list[tuple[int, Status]]:
    """The live exporter's status of `group` every 10 s, sampled, ingested, rolled and built
    as the daemon does (tests/spark_jobs/analytics/test_diagnosis_agreement.py's replay)."""
    state = OffsetState()
    histories: dict[tuple[str, int], LogEndHistory] = defaultdict(LogEndHistory)
    builder = SnapshotBuilder()
    samples = sorted(scenario.log_ends, key=lambda s: s.ts)
    commits = list(scenario.commits)
    out = []
    for now in range(scenario.start_ms, scenario.end_ms + 1, 10_000):
        while samples and samples[0].ts <= now:
            s = samples.pop(0)
            histories[(s.topic, s.partition)].record(s.ts, s.offset)
        while commits and commits[0].ts <= now:
            c = commits.pop(0)
            assert c.offset is not None
            value = OffsetCommitValue(c.offset, 5, "", c.ts, -1, ZERO_UUID)
            key = OffsetCommitKey(c.group, c.topic, c.partition)
            state.apply(Record(1, key, 3, value, timestamp=c.ts))
        state.roll_windows(now, builder.status_config.window_ms)
        snapshot = builder.build(state, dict(histories), now, ready=True).group(group)
        assert snapshot is not None
        out.append((now, snapshot.status))
    return out


def _ok_then_stall_for_good(statuses: list[tuple[int, Status]]) -> int:
    """The time of the first STALL, after only OK and before only STALL."""
    first = next(i for i, (_, status) in enumerate(statuses) if status is Status.STALL)
    assert {status for _, status in statuses[:first]} <= {Status.OK}, statuses[:first]
    assert {status for _, status in statuses[first:]} == {Status.STALL}, statuses
    return statuses[first][0]


def test_a_consumer_stuck_since_its_first_commit_stays_stall(spark: SparkSession) -> None:
    # Left unknown before the first sample, its lag at window start read "behind": STALL
    # from 2 min (messages since 90 s) to 10 min (the window start at its first commit), OK
    # at 11 min (the window start at 1 min, caught up on the samples), STALL from 12 min.
    # Bounded by the first sample (LogEndHistory.lag_at), it is OK until the messages that
    # arrived after it have waited a window, then STALL for good, as the exporter says.
    scenario = stuck_since_first_commit()
    tables = frames(spark, scenario)
    result = analyze(tables.commits, tables.log_ends, tables.group_events)
    count, _ = _agree(result, scenario)
    assert count == 2 * 41
    timeline = {
        group: sorted(
            (r.tick_ms, Status(r.status))
            for r in result.timeline.filter(f"`group` = '{group}'").collect()
        )
        for group in ("stuck", "behind")
    }
    # no log end before the first sample (ERR), then judged
    stuck = [(t, st) for t, st in timeline["stuck"] if t >= SAMPLED_FROM]
    stalled_at = _ok_then_stall_for_good(stuck)
    # a window after the first sample with messages waiting (100 s), on the minute grid
    assert stalled_at == at(12)
    exported = [(t, st) for t, st in exporter_statuses(scenario, "stuck") if t >= SAMPLED_FROM]
    # the exporter's evidence is one to one and a half windows: as late as half a window more
    exported_at = _ok_then_stall_for_good(exported)
    assert stalled_at <= exported_at <= stalled_at + W // 2 + 60_000
    # nothing bounds a first sample with messages waiting: STALL from the second minute
    behind = [(t, st) for t, st in timeline["behind"] if t >= SAMPLED_FROM]
    assert _ok_then_stall_for_good(behind) == at(1)
    exported_behind = exporter_statuses(scenario, "behind")
    assert _ok_then_stall_for_good(
        [(t, st) for t, st in exported_behind if t >= SAMPLED_FROM]
    ) <= at(1)
