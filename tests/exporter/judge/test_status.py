"""Status rules: one table row per rule of docs/status-rules.md and per false positive fixed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsetwatch.exporter.judge.status import (
    DEFAULT_STATUS_CONFIG,
    PartitionWindow,
    Status,
    StatusConfig,
    commit_rate_per_second,
    evaluate_group,
    evaluate_partition,
    seconds_since_last_commit,
)

NOW = 1_700_000_000_000
WINDOW = DEFAULT_STATUS_CONFIG.window_ms
WINDOW_START = NOW - WINDOW
DAY = 86_400_000

# A healthy consumer: committing every 5 s, 10 messages behind, lag shrinking over the window.
HEALTHY = PartitionWindow(
    committed_offset=100_000,
    commit_time_ms=NOW - 5_000,
    window_first_offset=40_000,
    window_first_commit_time_ms=WINDOW_START + 3_000,
    commits_in_window=120,
    last_rewind_time_ms=None,
    log_end_offset=100_010,
    lag_at_window_start=12,
    log_end_unchanged_since_ms=None,
    group_is_live=True,
    log_end_time_ms=NOW - 2_000,
)

# An idle consumer that stopped committing long ago (it commits only after consuming).
IDLE_OLD_COMMIT: dict[str, Any] = {
    "commit_time_ms": NOW - 3 * DAY,
    "window_first_offset": 100_000,
    "window_first_commit_time_ms": NOW - 3 * DAY,
    "commits_in_window": 0,
}

# A live consumer committing the same offset over and over (auto-commit while idle / stuck).
SAME_OFFSET_COMMITS: dict[str, Any] = {
    "window_first_offset": 100_000,
    "commits_in_window": 120,
}

ROWS = [
    # ---- Rule 1: ERR
    pytest.param({"log_end_offset": None}, None, Status.ERR, id="ERR-log-end-unknown"),
    pytest.param(
        {"log_end_offset": 10, "log_end_time_ms": NOW - 1_000},
        None,
        Status.ERR,
        id="ERR-committed-past-log-end-sampled-after-commit",
    ),
    pytest.param(
        {"log_end_offset": 10, "log_end_time_ms": None},
        None,
        Status.ERR,
        id="ERR-committed-past-log-end-sample-time-unknown",
    ),
    pytest.param(
        {"log_end_offset": 99_950, "log_end_time_ms": NOW - 9_000},
        None,
        Status.OK,
        id="FP-committed-past-stale-log-end-sample-is-not-ERR",
    ),
    # ---- Rule 2: lag 0 is OK
    pytest.param({"log_end_offset": 100_000}, None, Status.OK, id="OK-caught-up"),
    pytest.param(
        {**IDLE_OLD_COMMIT, "log_end_offset": 100_000, "lag_at_window_start": 0},
        None,
        Status.OK,
        id="FP-burrow-STOP-with-lag-0-on-idle-topic",
    ),
    pytest.param(
        {
            **IDLE_OLD_COMMIT,
            "log_end_offset": 100_000,
            "lag_at_window_start": 0,
            "group_is_live": False,
        },
        None,
        Status.OK,
        id="FP-caught-up-empty-group-is-OK",
    ),
    pytest.param(
        {"log_end_offset": 100_000, "last_rewind_time_ms": NOW - 60_000},
        None,
        Status.OK,
        id="OK-rewound-then-caught-up",
    ),
    # ---- Rule 3: transaction marker allowance
    pytest.param(
        {
            **IDLE_OLD_COMMIT,
            "log_end_offset": 100_001,
            "lag_at_window_start": 1,
            "log_end_unchanged_since_ms": NOW - 3 * DAY - 1_000,
        },
        None,
        Status.OK,
        id="FP-burrow-lag-1-on-transactional-input",
    ),
    pytest.param(
        {
            **SAME_OFFSET_COMMITS,
            "log_end_offset": 100_001,
            "lag_at_window_start": 1,
            "log_end_unchanged_since_ms": NOW - 3 * DAY,
        },
        None,
        Status.OK,
        id="FP-lag-1-transactional-input-with-auto-commit-is-not-STALL",
    ),
    pytest.param(
        {
            **IDLE_OLD_COMMIT,
            "log_end_offset": 100_001,
            "lag_at_window_start": 1,
            "log_end_unchanged_since_ms": NOW - 3 * DAY - 1_000,
        },
        StatusConfig(marker_tolerance=0),
        Status.STOP,
        id="marker-allowance-disabled",
    ),
    pytest.param(
        {
            **IDLE_OLD_COMMIT,
            "log_end_offset": 100_001,
            "lag_at_window_start": 1,
            "log_end_unchanged_since_ms": NOW - 2 * DAY,
        },
        None,
        Status.STOP,
        id="STOP-one-message-appended-after-last-commit-waiting-all-window",
    ),
    # ---- Rule 4: REWIND
    pytest.param(
        {"last_rewind_time_ms": NOW - 60_000, "lag_at_window_start": 0},
        None,
        Status.REWIND,
        id="REWIND-commit-went-backwards-in-window",
    ),
    pytest.param(
        {"last_rewind_time_ms": WINDOW_START},
        None,
        Status.REWIND,
        id="REWIND-at-window-start-is-inside",
    ),
    pytest.param(
        {"last_rewind_time_ms": WINDOW_START - 1},
        None,
        Status.OK,
        id="REWIND-older-than-window-is-forgotten",
    ),
    # ---- Rule 5: STOP
    pytest.param(
        {**IDLE_OLD_COMMIT, "log_end_offset": 105_000, "lag_at_window_start": 3_000},
        None,
        Status.STOP,
        id="STOP-no-commit-in-window-with-work-waiting",
    ),
    pytest.param(
        {
            **IDLE_OLD_COMMIT,
            "commit_time_ms": WINDOW_START - 1,
            "log_end_offset": 105_000,
            "lag_at_window_start": 3_000,
        },
        None,
        Status.STOP,
        id="STOP-last-commit-just-before-window",
    ),
    pytest.param(
        {
            "commit_time_ms": WINDOW_START,
            "window_first_offset": 100_000,
            "commits_in_window": 1,
            "log_end_offset": 105_000,
            "lag_at_window_start": 3_000,
        },
        None,
        Status.OK,
        id="commit-exactly-at-window-start-is-inside",
    ),
    pytest.param(
        {**IDLE_OLD_COMMIT, "log_end_offset": 100_005, "lag_at_window_start": 0},
        None,
        Status.OK,
        id="FP-STOP-when-messages-just-reached-idle-topic-of-live-group",
    ),
    pytest.param(
        {
            **IDLE_OLD_COMMIT,
            "log_end_offset": 100_101,
            "lag_at_window_start": 1,
            "log_end_unchanged_since_ms": None,
        },
        None,
        Status.OK,
        id="FP-STOP-when-new-transaction-reaches-idle-transactional-topic",
    ),
    pytest.param(
        {
            **IDLE_OLD_COMMIT,
            "log_end_offset": 100_005,
            "lag_at_window_start": 0,
            "group_is_live": False,
        },
        None,
        Status.STOP,
        id="STOP-at-once-for-empty-group-nobody-will-commit",
    ),
    pytest.param(
        {**IDLE_OLD_COMMIT, "log_end_offset": 100_005, "lag_at_window_start": None},
        None,
        Status.STOP,
        id="STOP-in-first-window-after-start-up",
    ),
    # ---- Rule 6: STALL
    pytest.param(
        {**SAME_OFFSET_COMMITS, "log_end_offset": 100_500, "lag_at_window_start": 200},
        None,
        Status.STALL,
        id="STALL-committing-but-not-moving-with-work-waiting",
    ),
    pytest.param(
        {
            **SAME_OFFSET_COMMITS,
            "commits_in_window": 1,
            "log_end_offset": 100_500,
            "lag_at_window_start": 200,
        },
        None,
        Status.OK,
        id="STALL-needs-stall-min-commits",
    ),
    pytest.param(
        {**SAME_OFFSET_COMMITS, "log_end_offset": 100_003, "lag_at_window_start": 0},
        None,
        Status.OK,
        id="FP-STALL-auto-commit-of-idle-consumer-when-message-just-arrived",
    ),
    pytest.param(
        {**SAME_OFFSET_COMMITS, "log_end_offset": 100_003, "lag_at_window_start": None},
        None,
        Status.STALL,
        id="STALL-in-first-window-after-start-up",
    ),
    # ---- Rule 7: WARN
    pytest.param(
        {"log_end_offset": 100_300, "window_first_offset": 99_500, "lag_at_window_start": 100},
        None,
        Status.WARN,
        id="WARN-moving-but-lag-grew-over-window",
    ),
    pytest.param(
        {"log_end_offset": 104_000, "window_first_offset": 0, "lag_at_window_start": 2_000},
        None,
        Status.OK,
        id="FP-WARN-from-commit-and-sampling-noise",
    ),
    pytest.param(
        {"log_end_offset": 104_000, "window_first_offset": 0, "lag_at_window_start": 2_000},
        StatusConfig(warn_min_growth_ratio=0.0),
        Status.WARN,
        id="WARN-noise-allowance-disabled",
    ),
    pytest.param(
        {"log_end_offset": 105_000, "window_first_offset": 99_900, "lag_at_window_start": 0},
        None,
        Status.OK,
        id="FP-WARN-on-a-burst-after-a-caught-up-window-start",
    ),
    pytest.param(
        {"log_end_offset": 100_300, "window_first_offset": 99_500, "lag_at_window_start": None},
        None,
        Status.OK,
        id="WARN-needs-lag-at-window-start",
    ),
    # ---- Rule 8: otherwise OK
    pytest.param({}, None, Status.OK, id="OK-healthy-consumer"),
]


@pytest.mark.parametrize(("changes", "cfg", "expected"), ROWS)
def test_rules(changes: dict[str, Any], cfg: StatusConfig | None, expected: Status) -> None:
    window = replace(HEALTHY, **changes)
    assert evaluate_partition(window, NOW, cfg or DEFAULT_STATUS_CONFIG) is expected


def test_window_is_configurable() -> None:
    # Last commit 15 min ago: STOP with the default 10 min window, still inside a 20 min one.
    window = replace(
        HEALTHY,
        commit_time_ms=NOW - 900_000,
        window_first_offset=100_000,
        commits_in_window=0,
        log_end_offset=101_000,
        lag_at_window_start=500,
    )
    assert evaluate_partition(window, NOW) is Status.STOP
    assert evaluate_partition(window, NOW, StatusConfig(window_ms=1_200_000)) is Status.OK


def test_status_values_are_the_exported_gauge_values() -> None:
    assert [(s.name, int(s)) for s in Status] == [
        ("OK", 0),
        ("WARN", 1),
        ("REWIND", 2),
        ("STALL", 3),
        ("STOP", 4),
        ("ERR", 5),
    ]


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], Status.OK),
        ([Status.OK, Status.OK], Status.OK),
        ([Status.OK, Status.WARN, Status.STALL, Status.REWIND], Status.STALL),
        ([Status.STOP, Status.ERR, Status.OK], Status.ERR),
        (iter([Status.WARN]), Status.WARN),
    ],
)
def test_group_is_its_worst_partition(statuses: list[Status], expected: Status) -> None:
    assert evaluate_group(statuses) is expected


def test_partition_lag_property() -> None:
    assert HEALTHY.lag == 10
    assert replace(HEALTHY, log_end_offset=None).lag is None
    assert replace(HEALTHY, log_end_offset=5).lag == 0


def test_commit_rate_and_age_helpers() -> None:
    assert commit_rate_per_second(120, 600_000) == pytest.approx(0.2)
    assert commit_rate_per_second(0, 600_000) == 0.0
    assert commit_rate_per_second(5, 0) == 0.0
    assert seconds_since_last_commit(NOW - 1_500, NOW) == 1.5
    assert seconds_since_last_commit(NOW + 1_000, NOW) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_ms": 0},
        {"stall_min_commits": 0},
        {"marker_tolerance": -1},
        {"warn_min_growth_ratio": -0.1},
    ],
)
def test_config_rejects_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        StatusConfig(**kwargs)


optional_time = st.none() | st.integers(NOW - 10 * DAY, NOW + DAY)


@given(
    committed=st.integers(0, 10**6),
    commit_age=st.integers(-DAY, 10 * DAY),
    first_offset=st.integers(0, 10**6),
    commits=st.integers(0, 1_000),
    rewind=optional_time,
    log_end=st.none() | st.integers(0, 2 * 10**6),
    start_lag=st.none() | st.integers(0, 10**6),
    unchanged=optional_time,
    live=st.booleans(),
    sampled=optional_time,
)
def test_invariants(
    committed: int,
    commit_age: int,
    first_offset: int,
    commits: int,
    rewind: int | None,
    log_end: int | None,
    start_lag: int | None,
    unchanged: int | None,
    live: bool,
    sampled: int | None,
) -> None:
    window = PartitionWindow(
        committed_offset=committed,
        commit_time_ms=NOW - commit_age,
        window_first_offset=first_offset,
        window_first_commit_time_ms=NOW - commit_age,
        commits_in_window=commits,
        last_rewind_time_ms=rewind,
        log_end_offset=log_end,
        lag_at_window_start=start_lag,
        log_end_unchanged_since_ms=unchanged,
        group_is_live=live,
        log_end_time_ms=sampled,
    )
    status = evaluate_partition(window, NOW)
    if log_end is None:
        assert status is Status.ERR
    elif committed > log_end:
        # Past the end is either a stale sample (OK) or a truncated/recreated log (ERR).
        assert status in (Status.OK, Status.ERR)
    elif committed == log_end:
        assert status is Status.OK
    else:
        # With messages waiting, ERR is impossible: it is only about the log end itself.
        assert status is not Status.ERR
