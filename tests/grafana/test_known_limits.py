"""Two exporter limits the operator kit's end-to-end run found, fixed, kept as regression tests.

They made alerts of grafana/prometheus/offsetwatch-rules.yml misbehave with the default
settings: lag in seconds levelled off at the length of the log-end history, so the critical
OffsetwatchGroupLagHigh could not fire on a busy partition (exporter/lag.py now thins the
history geometrically), and a tumbling status window made a STALL read OK for a moment at
every roll, restarting OffsetwatchGroupStatus's `for` (exporter/state.py now slides the window
in half-window buckets). See docs/status-rules.md.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from offsetwatch.dashboards.live import DemoStack, wait_until
from offsetwatch.exporter.lag import LogEndHistory, lag_seconds

SAMPLE_INTERVAL_MS = 10_000  # the exporter's default --sample-interval-s


def test_lag_seconds_of_a_stopped_consumer_reaches_the_critical_threshold() -> None:
    history = LogEndHistory()  # as exporter/daemon.py creates them
    for i in range(200):  # 2000 s of a partition receiving 10 messages per second
        history.record(i * SAMPLE_INTERVAL_MS, 100 * i)
    # the consumer stopped after reading the messages appended in the first 10 s
    result = lag_seconds(history, committed_offset=100, now_ms=199 * SAMPLE_INTERVAL_MS)
    assert result.seconds >= 1800, result


def _status(target: str, group: str) -> str:
    url = f"http://{target}/api/v1/groups/{group}"
    with urllib.request.urlopen(url, timeout=5) as response:
        status: str = json.loads(response.read())["status"]
        return status


@pytest.mark.kafka
def test_a_stalled_group_stays_stall_across_window_rolls() -> None:
    window_s = 4.0
    with DemoStack(status_window_s=window_s) as stack:
        wait_until(lambda: _status(stack.target, "etl-stalled") == "STALL", "STALL", 90)
        seen = []
        deadline = time.monotonic() + 3 * window_s
        while time.monotonic() < deadline:
            seen.append(_status(stack.target, "etl-stalled"))
            time.sleep(0.2)
    assert set(seen) == {"STALL"}, seen
