"""Two exporter limits the operator kit's end-to-end run found, fixed, kept as regression tests.

They made alerts of grafana/prometheus/offsetwatch-rules.yml misbehave with the default
settings: lag in seconds levelled off at the length of the log-end history, so the critical
OffsetwatchGroupLagHigh could not fire on a busy partition (exporter/state/lag.py now thins the
history geometrically), and a tumbling status window made a STALL read OK for a moment at
every roll, restarting OffsetwatchGroupStatus's `for` (exporter/state/offset_state.py now slides the
window in half-window buckets). See docs/status-rules.md.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from offsetwatch.dashboards.live import DemoStack, wait_until
from offsetwatch.exporter.state.lag import LogEndHistory, lag_seconds

SAMPLE_INTERVAL_MS = 10_000  # the exporter's default --sample-interval-s


def test_lag_seconds_of_a_stopped_consumer_reaches_the_critical_threshold() -> None:
    history = LogEndHistory()  # as exporter/daemon.py creates them
    for i in range(200):  # 2000 s of a partition receiving 10 messages per second
        history.record(i * SAMPLE_INTERVAL_MS, 100 * i)
    # the consumer stopped after reading the messages appended in the first 10 s
    result = lag_seconds(history, committed_offset=100, now_ms=199 * SAMPLE_INTERVAL_MS)
    assert result.seconds >= 1800, result


def _group(target: str, group: str) -> tuple[str, int, int, int]:
    """(status, commits_total, snapshot_time_ms, partitions) of one answer of the API."""
    url = f"http://{target}/api/v1/groups/{group}"
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    return (
        str(body["status"]),
        int(body["commits_total"]),
        int(body["snapshot_time_ms"]),
        len(body["partitions"]),
    )


@pytest.mark.kafka
def test_a_stalled_group_stays_stall_across_window_rolls() -> None:
    """STALL means "at least 2 commits in the window, offset not moved": it must hold at every
    snapshot whose window really held 2 commits, across the window's rolls. The demo commits
    once a second; on a loaded machine its ticks can come late, and a window that then held
    fewer than 2 commits is rightly not STALL: such snapshots are left out, and the test
    needs enough that are not. The demo's stalled group is stuck from its first commit, made
    caught up before the exporter sampled its topic: with its lag at that commit unknown it
    read STALL at once, then OK when the window start reached its first sample (caught up
    there), then STALL (exporter/state/lag.py `lag_at` bounds that lag by the first sample now)."""
    window_s = 4.0
    window_ms = int(window_s * 1000)
    with DemoStack(status_window_s=window_s) as stack:
        wait_until(lambda: _group(stack.target, "etl-stalled")[0] == "STALL", "STALL", 90)
        answers: dict[int, tuple[str, int]] = {}  # snapshot time -> (status, commits_total)
        partitions = 1
        deadline = time.monotonic() + 4 * window_s
        while time.monotonic() < deadline:
            status, commits, snapshot_ms, partitions = _group(stack.target, "etl-stalled")
            answers[snapshot_ms] = (status, commits)
            time.sleep(0.2)
    times = sorted(answers)
    judged = []
    for t in times:
        if t - window_ms < times[0]:
            continue  # the window began before the first answer: its commits are unknown
        # commits since the oldest answer inside the window: a lower bound of what it holds
        since = min(u for u in times if u >= t - window_ms)
        in_window = answers[t][1] - answers[since][1]
        if in_window >= 2 * partitions:  # every partition is committed at each tick
            judged.append((t, answers[t][0], in_window))
    assert len(judged) >= 5, f"too few snapshots with 2 commits in their window: {answers}"
    assert {status for _t, status, _n in judged} == {"STALL"}, judged
