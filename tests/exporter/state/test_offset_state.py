"""The state's sliding status window: bucket boundaries, rolls and commit counts."""

from __future__ import annotations

from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.judge.snapshot import SnapshotBuilder
from offsetwatch.exporter.judge.status import Status, StatusConfig
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import OffsetState, PartitionTable, WindowClock

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
    # the first roll starts the clock a window back: a replayed history is judged at once
    assert clock == WindowClock(T0 - W, T0 - W // 2, T0)
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


COLUMNS = (
    "present", "committed", "commit_ts", "window_offset", "window_commits", "next_offset",
    "next_commits", "bucket_offset", "bucket_commits", "first_commit_ts", "rewind_ts", "move_ts",
)  # fmt: skip


def columns(state: OffsetState) -> dict[str, list[int]]:
    table = table_of(state)
    return {name: list(getattr(table, name)) for name in COLUMNS}


def _spread_commits() -> list[tuple[int, int, int]]:
    """(partition, offset, commit time): three partitions over nine half-window buckets,
    moving, stuck, rewound, one first committed late."""
    commits = []
    for k in range(90):
        ts = T0 + 1 + k * (W // 20)
        commits.append((0, 10 * k, ts))  # always moving
        commits.append((1, min(k, 30), ts))  # moved, then stuck from the 30th on
        if k >= 60:
            commits.append((2, 500 - k, ts + 3))  # first late, then going backwards
    return commits


def test_commits_replayed_into_a_running_exporter_leave_the_columns_of_live_ingestion() -> None:
    """A fleet replica taking the partitions over applies their history at once: every
    commit counts in the bucket its own time is in and sets the boundaries it precedes."""
    commits = _spread_commits()
    rolls = [T0 + k * (W // 2) for k in range(10)]
    live, replayed = OffsetState(), OffsetState()
    pending = list(commits)
    for now in rolls:
        while pending and pending[0][2] < now:
            p, offset, ts = pending.pop(0)
            live.apply(commit(offset, ts, p))
        live.roll_windows(now, W)
        replayed.roll_windows(now, W)  # running, owning nothing of it yet
    for p, offset, ts in pending:
        live.apply(commit(offset, ts, p))
    for p, offset, ts in commits:
        replayed.apply(commit(offset, ts, p))
    assert replayed.window_clock == live.window_clock
    assert columns(replayed) == columns(live)
    table = table_of(replayed)
    assert table.window_offset[1] == table.committed[1] == 30  # stuck since the window start


def test_an_out_of_order_or_future_commit_breaks_nothing() -> None:
    state = OffsetState()
    state.roll_windows(T0, W)  # window T0 - W, next T0 - W/2, bucket T0
    state.apply(commit(50, T0 + 10 * W))  # a client clock far ahead: the current bucket
    table = table_of(state)
    assert (table.window_commits[0], table.next_commits[0], table.bucket_commits[0]) == (0, 0, 1)
    state.apply(commit(40, T0 - W // 4))  # a skewed client behind: the bucket before
    assert (table.window_commits[0], table.next_commits[0], table.bucket_commits[0]) == (0, 1, 1)
    # the boundary after it is at its offset (the last commit in log order made before it)
    assert (table.window_offset[0], table.next_offset[0], table.bucket_offset[0]) == (50, 50, 40)
    assert table.committed[0] == 40 and table.rewind_ts[0] == T0 - W // 4
    state.apply(commit(41, -1))  # no commit time: the current bucket, as always
    assert table.bucket_commits[0] == 2
    state.roll_windows(T0 + W // 2, W)  # the window starts at the old next boundary
    assert (table.window_offset[0], table.next_offset[0], table.bucket_offset[0]) == (50, 40, 41)
    assert commits_in_window(table, 0) == 3


STEP = 1_000
TAKE = 40  # seconds of history when the new owner takes over


def _moved_then_stuck() -> tuple[list[Record], LogEndHistory]:
    """The repro of issue 32 item 3: moved in its first two seconds, stuck at 2 since while
    the log end grows, committing every second."""
    history = LogEndHistory()
    records = []
    for s in range(TAKE + 1):
        now = T0 + s * STEP
        history.record(now, 10 + s)
        records.append(commit({0: 0, 1: 1}.get(s, 2), now))
    return records, history


def _status(state: OffsetState, history: LogEndHistory, now: int, window: int) -> Status:
    builder = SnapshotBuilder(status_config=StatusConfig(window_ms=window))
    snapshot = builder.build(state, {("t", 0): history}, now, True)
    group = snapshot.group("g")
    assert group is not None
    return group.status


def test_a_replayed_stuck_consumer_is_stall_at_once_in_a_running_or_starting_exporter() -> None:
    window = 10 * STEP
    records, history = _moved_then_stuck()
    now = T0 + TAKE * STEP
    old = OffsetState()
    for record in records:
        old.roll_windows(record.timestamp, window)
        old.apply(record)
    assert _status(old, history, now, window) is Status.STALL
    running = OffsetState()
    for s in range(TAKE + 1):
        running.roll_windows(T0 + s * STEP, window)
    starting_rolled, starting = OffsetState(), OffsetState()
    starting_rolled.roll_windows(now, window)  # the clock started before the replay
    for record in records:
        running.apply(record)
        starting_rolled.apply(record)
        starting.apply(record)
    starting.roll_windows(now, window)  # the clock started after it
    for state in (running, starting_rolled, starting):
        assert _status(state, history, now, window) is Status.STALL
        assert table_of(state).window_offset[0] == 2


def test_a_replay_without_log_end_history_is_judged_neither_stall_nor_ok() -> None:
    """Started a window back, the clock gives no verdict the log end does not support."""
    window = 10 * STEP
    records, _ = _moved_then_stuck()
    now = T0 + TAKE * STEP
    state = OffsetState()
    for record in records:
        state.apply(record)
    state.roll_windows(now, window)
    assert _status(state, LogEndHistory(), now, window) not in (Status.STALL, Status.OK)
