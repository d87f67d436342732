"""The reference history gives exactly its known episodes, and none for the healthy, idle,
caught-up and deleted groups (datasets.known_episodes describes each group)."""

from __future__ import annotations

import json

import pytest

from offsetwatch.spark_jobs.analytics import AnalyticsResult
from offsetwatch.spark_jobs.lake_schema import EPISODES_SCHEMA
from tests.spark_jobs.datasets import at

pytestmark = pytest.mark.spark

OPEN = None


def _minutes(ms: int | None) -> float | None:
    return None if ms is None else (ms - at(0)) / 60_000


def test_exactly_the_known_episodes(known_result: AnalyticsResult) -> None:
    episodes = known_result.episodes
    assert [(f.name, f.dataType) for f in episodes.schema] == [
        (f.name, f.dataType) for f in EPISODES_SCHEMA
    ]
    got = sorted(
        (
            e.group,
            e.kind,
            e.topic,
            e.partition,
            _minutes(e.start_ms),
            _minutes(e.end_ms),
            e.size,
            e.unit,
        )
        for e in episodes.collect()
    )
    assert got == sorted(
        [
            # stuck at 60 min: STALL once a whole window has no progress (70), until the
            # consumer moves again (90); the stuck message waits 1741.981 s at most
            ("staller", "stall", "payments", 0, 70.0, 90.0, 17420.0, "messages"),
            ("staller", "lag_slo", "payments", 0, 65.0, 90.0, 1741.981, "seconds"),
            # last commit at 100: STOP from the first tick with it before the window (111),
            # still stopped when the data ends
            ("stopper", "stop", "shipments", 0, 111.0, OPEN, 48020.0, "messages"),
            ("stopper", "lag_slo", "shipments", 0, 105.0, OPEN, 4801.981, "seconds"),
            # rewound 1950 offsets at 120, back where it was at 121:05 reading 30/s
            ("rewinder", "rewind", "clicks", 0, 120.0, 121 + 5 / 60, 1950.0, "offsets"),
            # rebalances at 30:00, 30:30 ... 33:00: five of them by 32:00; the storm ends one
            # storm window after 31:00, the first of the last five
            ("stormy", "rebalance_storm", None, None, 32.0, 41.0, 7.0, "rebalances in 600 s"),
            # stuck from 20, deleted at 50: its episodes end with the group
            ("doomed", "stall", "payments", 0, 30.0, 50.0, 17420.0, "messages"),
            ("doomed", "lag_slo", "payments", 0, 25.0, 50.0, 1741.981, "seconds"),
            # 5 commits per 5 min instead of 60 from 150 on, with messages waiting
            ("slowpoke", "commit_rate_anomaly", None, None, 150.0, OPEN, 1 / 60, "commits/s"),
        ]
    )


def test_rewind_detail(known_result: AnalyticsResult) -> None:
    (rewind,) = known_result.episodes.filter("kind = 'rewind'").collect()
    assert json.loads(rewind.detail) == {
        "from_offset": 71930,
        "to_offset": 69980,
        "messages_reread": 1950,
    }


def test_no_ticks_after_a_group_is_deleted(known_result: AnalyticsResult) -> None:
    last = {
        row.group: _minutes(row.last)
        for row in known_result.timeline.groupBy("group")
        .agg({"tick_ms": "max"})
        .toDF("group", "last")
        .collect()
    }
    assert last["gone"] == 44.0 and last["doomed"] == 49.0
    assert last["healthy"] == 180.0


def test_group_stats(known_result: AnalyticsResult) -> None:
    stats = {row.group: row for row in known_result.group_stats.collect()}
    assert stats["stormy"].rebalances == 8 and stats["stormy"].rebalance_storms == 1
    assert stats["healthy"].rebalances == 1 and stats["healthy"].rebalance_storms == 0
    assert stats["gone"].deleted_ms == at(45)
    # 181 ticks of a minute from 0 to 180, all OK for the healthy and the idle group
    for group in ("healthy", "idle"):
        assert stats[group].ok_ms == 181 * 60_000
        assert stats[group].stall_ms == stats[group].stop_ms == stats[group].warn_ms == 0
    assert stats["staller"].stall_ms == 20 * 60_000
    assert stats["stopper"].stop_ms == 70 * 60_000


def test_windows(known_result: AnalyticsResult) -> None:
    hours = {
        row.window_start_ms: row
        for row in known_result.windows.filter(
            "group = 'healthy' AND window_ms = 3600000"
        ).collect()
    }
    second = hours[at(60)]
    # commits every 5 s of the log end 2 s earlier, 10 messages/s
    assert second.commits == 720
    assert (second.first_offset, second.last_offset) == (35_980, 71_930)
    assert second.offset_progress == 36_000
    assert second.consumption_rate == 10.0
    assert second.interval_avg_ms == second.interval_max_ms == 5_000.0
    assert (second.lag, second.lag_seconds) == (20, 1.981)
    minutes = known_result.windows.filter("group = 'slowpoke' AND window_ms = 60000")
    late = minutes.filter(f"window_start_ms >= {at(150)}").collect()
    assert {row.commits for row in late} == {1}
