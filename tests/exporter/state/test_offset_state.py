"""The state's sliding status window: bucket boundaries, rolls and commit counts."""

from __future__ import annotations

from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.state.offset_state import NEVER, OffsetState, PartitionTable, WindowClock

T0 = 1_800_000_000_000
W = 600_000  # the default status window


def commit(offset: int, ts: int, partition: int = 0) -> Record:
    return Record(
        1,
        OffsetCommitKey("g", "t", partition),
        3,
        OffsetCommitValue(offset, 5, "", ts, -1, ZERO_UUID),
        timestamp=ts,
    )


def table_of(state: OffsetState) -> PartitionTable:
    return state.groups["g"].topics["t"]


def commits_in_window(table: PartitionTable, partition: int) -> int:
    """What the snapshot judges from: the commits since the window boundary."""
    return (
        table.window_commits[partition]
        + table.next_commits[partition]
        + table.bucket_commits[partition]
    )


def test_a_first_commit_is_every_boundary_of_its_partition() -> None:
    state = OffsetState()
    state.apply(commit(40, T0))
    table = table_of(state)
    assert (table.window_offset[0], table.next_offset[0], table.bucket_offset[0]) == (40, 40, 40)
    assert (table.window_commits[0], table.next_commits[0], table.bucket_commits[0]) == (0, 0, 1)
    assert table.first_commit_ts[0] == T0
    state.apply(commit(45, T0 + 1_000))
    assert commits_in_window(table, 0) == 2
    assert table.window_offset[0] == 40


def test_buckets_roll_every_half_window_and_the_judged_span_stays_one_to_one_and_a_half() -> None:
    state = OffsetState()
    state.apply(commit(0, T0))
    clock = state.window_clock
    state.roll_windows(T0, W)
    assert clock == WindowClock(NEVER, NEVER, T0)
    state.roll_windows(T0 + W // 2 - 1, W)  # not half a window yet: nothing moves
    assert clock.bucket_ms == T0
    spans = []
    offset = 0
    for now in range(T0 + 5_000, T0 + 10 * W, 5_000):  # a snapshot every 5 s
        if now % 10_000 == 0:  # a commit every 10 s, advancing
            offset += 10
            state.apply(commit(offset, now))
        state.roll_windows(now, W)
        if now >= T0 + W:
            spans.append(now - clock.window_ms)
            # never down to nothing at a roll: a whole window of commits is always in
            assert commits_in_window(table_of(state), 0) >= W // 10_000, now
    assert min(spans) >= W
    assert max(spans) < 3 * W // 2
    assert clock.next_ms - clock.window_ms == W // 2
    assert clock.bucket_ms - clock.next_ms == W // 2


def test_the_window_offset_is_the_offset_committed_at_the_judged_boundary() -> None:
    state = OffsetState()
    state.apply(commit(100, T0))
    state.roll_windows(T0, W)  # bucket T0 at 100
    state.apply(commit(200, T0 + 1_000))
    state.roll_windows(T0 + W // 2, W)  # bucket at 200; the window is still the first commit
    state.apply(commit(300, T0 + W // 2 + 1_000))
    state.roll_windows(T0 + W, W)  # the window is now T0 (offset 100 then)
    table = table_of(state)
    assert state.window_clock.window_ms == T0
    assert table.window_offset[0] == 100
    assert commits_in_window(table, 0) == 2  # the commits after T0
    state.roll_windows(T0 + 3 * W // 2, W)
    assert state.window_clock.window_ms == T0 + W // 2
    assert table.window_offset[0] == 200
    assert commits_in_window(table, 0) == 1


def test_after_a_pause_longer_than_a_window_the_old_bucket_start_is_the_window() -> None:
    state = OffsetState()
    state.apply(commit(1, T0))
    state.roll_windows(T0, W)
    state.apply(commit(2, T0 + 1_000))
    state.roll_windows(T0 + 3 * W, W)  # the main loop was away for three windows
    clock = state.window_clock
    assert clock == WindowClock(T0, T0, T0 + 3 * W)
    table = table_of(state)
    assert table.window_offset[0] == 1
    assert commits_in_window(table, 0) == 1
    state.roll_windows(T0 + 7 * W // 2, W)
    assert clock.window_ms == T0  # still the newest boundary a window old
    state.roll_windows(T0 + 4 * W, W)
    assert clock.window_ms == T0 + 3 * W


def test_a_longer_window_after_a_restart_keeps_the_window_start_and_its_commits() -> None:
    state = OffsetState()
    state.apply(commit(1, T0))
    for now in (T0, T0 + W // 2, T0 + W):
        state.roll_windows(now, W)
        state.apply(commit(2, now + 1))
    table = table_of(state)
    before = commits_in_window(table, 0)
    start = state.window_clock.window_ms
    state.roll_windows(T0 + 3 * W, 4 * W)  # the next boundary is not 4 windows old
    assert state.window_clock.window_ms == start
    assert state.window_clock.next_ms == T0 + W
    assert commits_in_window(table, 0) == before


def test_absent_slots_roll_along_and_a_new_first_commit_resets_them() -> None:
    state = OffsetState()
    state.apply(commit(10, T0, partition=3))  # slots 0..2 exist but are absent
    state.roll_windows(T0, W)
    state.roll_windows(T0 + W, W)
    table = table_of(state)
    assert len(table.window_offset) == len(table.bucket_commits) == 4
    state.apply(commit(7, T0 + W + 5, partition=1))
    assert commits_in_window(table, 1) == 1
    assert table.window_offset[1] == 7
    assert table.first_commit_ts[1] == T0 + W + 5


def test_nbytes_counts_every_column() -> None:
    state = OffsetState()
    state.apply(commit(1, T0, partition=9))
    table = table_of(state)
    assert table.nbytes() == 10 * (1 + 8 * 8 + 4 * 4)
