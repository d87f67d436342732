"""Snapshots judged over the sliding status window: no gap at the bucket boundaries.

A minute-long window, a log-end sample every second and a snapshot (with its roll) every
second, as the daemon does with shorter intervals; every status and commit rate is checked
at every snapshot for several windows, so each check spans many rolls.
"""

from __future__ import annotations

from collections.abc import Callable

from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.judge.snapshot import GroupSnapshot, SnapshotBuilder
from offsetwatch.exporter.judge.status import Status, StatusConfig
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import OffsetState

T0 = 1_800_000_000_000
W = 60_000
SECOND = 1_000


def commit(offset: int, ts: int, partition: int = 0) -> Record:
    return Record(
        1,
        OffsetCommitKey("g", "t", partition),
        3,
        OffsetCommitValue(offset, 5, "", ts, -1, ZERO_UUID),
        timestamp=ts,
    )


def run(
    produced_per_s: int,
    committed_at: Callable[[int], int | None],
    windows: int = 6,
    partitions: int = 1,
) -> list[tuple[int, GroupSnapshot]]:
    """Every second: sample, maybe commit (committed_at(second) -> offset), roll, snapshot."""
    state = OffsetState()
    histories = {("t", p): LogEndHistory() for p in range(partitions)}
    builder = SnapshotBuilder(status_config=StatusConfig(window_ms=W))
    out = []
    for second in range(windows * W // SECOND):
        now = T0 + second * SECOND
        for history in histories.values():
            history.record(now, produced_per_s * second)
        offset = committed_at(second)
        if offset is not None:
            for p in range(partitions):
                state.apply(commit(offset, now, p))
        state.roll_windows(now, W)
        group = builder.build(state, histories, now, ready=True).group("g")
        assert group is not None
        out.append((second, group))
    return out


def after_warm_up(snapshots: list[tuple[int, GroupSnapshot]]) -> list[GroupSnapshot]:
    """From 1.5 windows in: the judged span has been a full window since then."""
    return [group for second, group in snapshots if second * SECOND >= 3 * W // 2 + 2 * SECOND]


def test_a_stalled_consumer_is_stall_at_every_snapshot_across_rolls() -> None:
    # stuck on offset 50 after its first commits, still committing it every 2 s
    snapshots = run(10, lambda s: (0 if s < 5 else 50) if s % 2 == 0 else None)
    statuses = {group.status for group in after_warm_up(snapshots)}
    assert statuses == {Status.STALL}


def test_a_consumer_falling_behind_is_warn_at_every_snapshot_across_rolls() -> None:
    # 20 messages/s produced, 10/s consumed, a commit every 2 s
    snapshots = run(20, lambda s: 10 * s if s % 2 == 0 else None)
    statuses = {group.status for group in after_warm_up(snapshots)}
    assert statuses == {Status.WARN}


def test_a_healthy_consumer_is_ok_throughout() -> None:
    snapshots = run(20, lambda s: max(0, 20 * s - 15) if s % 2 == 0 else None)
    assert {group.status for _, group in snapshots[5:]} == {Status.OK}


def test_commit_rate_is_steady_across_rolls() -> None:
    # two partitions, each committed every 2 s: 1 commit per second for the group
    snapshots = run(10, lambda s: 10 * s if s % 2 == 0 else None, partitions=2)
    rates = [group.commit_rate for group in after_warm_up(snapshots)]
    assert min(rates) >= 0.95
    assert max(rates) <= 1.05


def test_a_partition_younger_than_a_window_is_averaged_over_a_whole_window() -> None:
    snapshots = run(10, lambda s: 10 * s if s % 2 == 0 else None, windows=1)
    second, group = snapshots[20]
    assert second == 20
    # 11 commits in 20 s, spread over the whole minute
    assert abs(group.commit_rate - 11 / 60) < 1e-9


def stalled_since_first_commit(pause_at_s: int | None = None) -> list[tuple[int, Status]]:
    """A consumer committed first when it was caught up and has been stuck there since.

    As in the demo: its topic was not tracked before that first commit, so its first log-end
    sample (half a second later, showing no lag yet) comes after it; then 10 messages a second
    arrive and it commits the same offset every second. The exporter rolls and snapshots
    half a second after each commit; `pause_at_s`: its main loop is away from then for one
    and a half windows (no roll, no snapshot) while the consumer goes on committing and the
    sampler sampling.
    """
    state = OffsetState()
    history = LogEndHistory()
    histories = {("t", 0): history}
    builder = SnapshotBuilder(status_config=StatusConfig(window_ms=W))
    out = []
    resume_s = -1 if pause_at_s is None else pause_at_s + 3 * W // 2 // SECOND
    for second in range(5 * W // SECOND):
        now = T0 + second * SECOND
        state.apply(commit(100, now))
        history.record(now + SECOND // 2, 100 + 10 * second)
        if pause_at_s is not None and pause_at_s <= second < resume_s:
            continue
        state.roll_windows(now + SECOND // 2, W)
        group = builder.build(state, histories, now + SECOND // 2, ready=True).group("g")
        assert group is not None
        out.append((second, group.status))
    return out


def test_a_consumer_stalled_since_its_first_commit_is_ok_then_stall_and_never_flips_back() -> None:
    # Its lag at its first commit predates the log-end history, but the first sample bounds it
    # (a log end never goes down): nothing waited then. Judged from that unknown, it read STALL
    # at its second commit, OK once the window start reached the first sample (no lag yet at
    # that boundary) and STALL again a roll later: an alert on it fired, resolved and fired.
    statuses = [status for _, status in stalled_since_first_commit()]
    first_stall = statuses.index(Status.STALL)
    assert set(statuses[:first_stall]) == {Status.OK}
    assert set(statuses[first_stall:]) == {Status.STALL}
    # one to one and a half windows after it stopped advancing (docs/status-rules.md)
    assert W // SECOND <= first_stall <= 3 * W // 2 // SECOND + 1


def test_a_stalled_consumer_stays_stall_after_a_main_loop_pause_longer_than_a_window() -> None:
    # The roll after the pause starts the window at the last bucket start before it: the
    # commits made during the pause are all in it (they are ingested before the roll).
    snapshots = stalled_since_first_commit(pause_at_s=2 * W // SECOND)
    resumed = [status for second, status in snapshots if second >= 2 * W // SECOND]
    assert len(resumed) == 3 * W // 2 // SECOND
    assert set(resumed) == {Status.STALL}
