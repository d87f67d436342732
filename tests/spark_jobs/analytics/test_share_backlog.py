"""share_backlog.partition_episodes (no Spark needed): the backlog a window before a tick that
predates the first log-end sample is bounded by that sample, as the exporter's
`LogEndHistory.lag_at` bounds a share queue's backlog at its window start."""

from __future__ import annotations

import pytest

from offsetwatch.decoder import share_combine as sc
from offsetwatch.spark_jobs.analytics.share_backlog import BACKLOG, StatePoint, partition_episodes

S = 1_000
TICK = 10 * S
WINDOW = 60 * S
#: the topic is first sampled at 30 s; the queue's state is written from 1 s on
FIRST_SAMPLE_S = 30


def _state(start: int, batches: tuple[sc.Batch, ...] = ()) -> sc.ShareState:
    return sc.ShareState(
        start_offset=start, state_epoch=1, leader_epoch=0, snapshot_epoch=0, batches=batches
    )


def _backlog(state: sc.ShareState, first_log_end: int) -> list[tuple[int, int | None, str]]:
    """(start, end, causes) of the backlog episodes of a queue stuck in `state` from 1 s, its
    topic sampled from 30 s (log end `first_log_end`), then 10 more records a second."""
    log_ends = [(s * S, first_log_end + 10 * (s - FIRST_SAMPLE_S)) for s in range(30, 301, 10)]
    found = partition_episodes([StatePoint(S, state)], log_ends, 300 * S, TICK, WINDOW)
    return [(e.start_ms, e.end_ms, e.detail) for e in found if e.kind == BACKLOG]


@pytest.mark.parametrize(
    ("state", "first_log_end"),
    [
        (_state(100), 100),  # caught up at the first sample
        # 5 acknowledged past the start: the share lag at the first sample is 0 too
        (_state(100, ((100, 104, 1, sc.ACKNOWLEDGED),)), 105),
    ],
    ids=["start", "acknowledged"],
)
def test_a_window_start_before_the_first_sample_is_bounded_by_it(
    state: sc.ShareState, first_log_end: int
) -> None:
    # Nothing waited at the first sample, so nothing waited before it (a log end never goes
    # down): from the first tick with a window behind it (70 s, its window start 10 s), the
    # records that arrived since grew the backlog. Unknown there, the episode began only once
    # the window start reached the first sample (90 s).
    assert _backlog(state, first_log_end) == [
        (70 * S, None, '{"causes":["growing"],"start_offset":100}')
    ]


def test_a_first_sample_with_records_waiting_bounds_nothing() -> None:
    # 50 waited at the first sample: the backlog before it is unknown (somewhere in 0..50),
    # so the window start must reach a sample (90 s)
    assert _backlog(_state(100), 150) == [
        (90 * S, None, '{"causes":["growing"],"start_offset":100}')
    ]


def test_an_uninitialised_start_bounds_nothing() -> None:
    # start -1 (Kafka 4.0 before it persists the state): no share lag, nothing to bound
    assert _backlog(_state(-1), 0) == []
