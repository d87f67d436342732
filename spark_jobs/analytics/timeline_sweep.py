"""The status timeline of one topic-partition in numpy: its commit buckets and log-end samples
in, one row per (group, life, tick) out, everything but liveness and the status.

Spark groups buckets and samples by (topic, partition) and hands each pair over as Arrow
tables (`applyInArrow`); here the tick grid of every life, the commit state at each tick
(running values, the status window as a k-row frame), the as-of log end and the lag in
seconds (binary searches in the samples) are array operations over all the partition's
lives at once.

Same definitions as the exporter (exporter/state/lag.py, docs/status-rules.md "Lag in seconds"):
the log end at a tick is the last sample at or before it; lag in seconds is the tick minus
the append time of the message at the committed offset, interpolated between the last sample
with log end <= committed and the first with log end > committed (the k-th of n messages in
a gap lands at k/(n+1) of it), never extrapolated, 0.0 when caught up, and a lower bound when
the message predates the first sample. A falling log end (recreated or truncated topic) starts
a new *epoch*: offsets before and after are unrelated, as when the exporter clears its history.
The lag at window start is `LogEndHistory.lag_at`'s, taken at the evidence start (the tick a
window back, or the life's first commit within its first window): 0, not unknown, before the
first sample when that sample's log end is no higher than the offset committed then.
tests/spark_jobs/analytics/test_timeline_sweep.py checks every tick against exporter/state/lag.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from offsetwatch.spark_jobs.analytics.kernels import (
    MIN,
    Bools,
    Ints,
    Nullable,
    bools,
    codes,
    column_of,
    ffill_index,
    first_per,
    ints,
    runs,
)

#: bucket columns the sweep reads (commit_buckets.BUCKETS_SCHEMA, `first`/`last` flattened)
BUCKET_INPUT: Final = (
    "group",
    "life",
    "bucket_ms",
    "on_tick",
    "n",
    "first_ts",
    "first_so",
    "first_offset",
    "last_ts",
    "last_so",
    "last_offset",
    "rewind_ms",
    "reset_ms",
)


@dataclass(frozen=True, slots=True)
class _Lives:
    """The lives with a commit, in (group, life) order, and their tick ranges."""

    group_row: Ints  # a bucket row of the life (for its group name)
    life: Ints
    life_end: Nullable
    first_tick: Ints
    count: Ints


def _lives(buckets: pa.Table, tick_ms: int, end_tick_ms: int) -> tuple[_Lives, Ints]:
    """The lives (commit_buckets.life_spans) and each bucket row's life index (-1: none)."""
    _, group = codes(buckets.column("group"))
    life = ints(buckets.column("life"))
    order = np.lexsort((life, group))
    g, li = group[order], life[order]
    spans = runs(g, li)
    starts = spans.starts
    life_of_row = spans.of_rows(order)
    n_lives = len(starts)
    first_ts = column_of(buckets, "first_ts")
    reset = column_of(buckets, "reset_ms")
    first_commit = np.full(n_lives, np.iinfo(np.int64).max)
    np.minimum.at(first_commit, life_of_row[first_ts.valid], first_ts.values[first_ts.valid])
    has_commit = np.zeros(n_lives, dtype=bool)
    has_commit[life_of_row[first_ts.valid]] = True
    reset_ms = np.full(n_lives, np.iinfo(np.int64).max)
    np.minimum.at(reset_ms, life_of_row[reset.valid], reset.values[reset.valid])
    has_reset = np.zeros(n_lives, dtype=bool)
    has_reset[life_of_row[reset.valid]] = True
    # the reset that starts the group's next life ends this one
    life_g = g[starts]
    same_next = np.zeros(n_lives, dtype=bool)
    same_next[:-1] = life_g[1:] == life_g[:-1]
    end_values = np.zeros(n_lives, dtype=np.int64)
    end_values[:-1] = reset_ms[1:]
    end_valid = np.zeros(n_lives, dtype=bool)
    end_valid[:-1] = has_reset[1:]
    end_valid &= same_next
    first_tick = (first_commit + tick_ms - 1) // tick_ms * tick_ms
    last_tick = np.where(end_valid, (end_values - 1) // tick_ms * tick_ms, end_tick_ms)
    last_tick = np.minimum(last_tick, end_tick_ms)
    keep = has_commit & (first_tick <= last_tick)
    index = np.full(n_lives, -1, dtype=np.int64)
    index[keep] = np.arange(int(keep.sum()))
    lives = _Lives(
        group_row=order[starts][keep],
        life=li[starts][keep],
        life_end=Nullable(end_values[keep], end_valid[keep]),
        first_tick=first_tick[keep],
        count=(last_tick[keep] - first_tick[keep]) // tick_ms + 1,
    )
    return lives, index[life_of_row]


@dataclass(frozen=True, slots=True)
class _Samples:
    """One partition's samples by time, with the epoch each belongs to."""

    ts: Ints
    log_end: Ints
    epoch: Ints
    run_start: Ints
    epoch_first: Ints  # index of the epoch's first sample
    next_valid: Bools  # the next sample (index + 1) brackets this one


def _samples(table: pa.Table) -> _Samples:
    ts = ints(table.column("ts"))
    log_end = ints(table.column("log_end"))
    order = np.argsort(ts, kind="stable")
    ts, log_end = ts[order], log_end[order]
    unique = np.ones(len(ts), dtype=bool)
    unique[1:] = ts[1:] != ts[:-1]
    ts, log_end = ts[unique], log_end[unique]
    count = len(ts)
    has_prev = np.arange(count) > 0
    prev = np.roll(log_end, 1)
    dropped = has_prev & (log_end < prev)
    new_run = ~has_prev | (log_end != prev)
    starts_epoch = ~has_prev | dropped
    run_start = ts[np.maximum.accumulate(np.where(new_run, np.arange(count), 0))]
    epoch_first = np.maximum.accumulate(np.where(starts_epoch, np.arange(count), 0))
    next_valid = np.zeros(count, dtype=bool)
    next_valid[:-1] = log_end[1:] >= log_end[:-1]
    return _Samples(ts, log_end, np.cumsum(dropped), run_start, epoch_first, next_valid)


def _before(samples: _Samples, epoch: Ints, committed: Ints, probe: Bools) -> Ints:
    """Per tick: the sample of its epoch with the highest (log end, time) whose log end is
    at or below the committed offset (-1: none, or not a probe)."""
    out = np.full(len(epoch), -1, dtype=np.int64)
    by_offset = np.lexsort((samples.ts, samples.log_end, samples.epoch))
    for e in np.unique(epoch[probe]):
        rows = np.flatnonzero(probe & (epoch == e))
        in_epoch = by_offset[samples.epoch[by_offset] == e]
        pos = np.searchsorted(samples.log_end[in_epoch], committed[rows], side="right") - 1
        out[rows] = np.where(pos >= 0, in_epoch[np.maximum(pos, 0)], -1)
    return out


@dataclass(frozen=True, slots=True)
class _Grid:
    """The ticks of every life, one row each, lives one after another."""

    #: ticks per life, and where each life's rows start (one more entry: the total)
    count: Ints
    offsets: Ints
    #: per row: its life, its life's first row, its tick
    life_idx: Ints
    start: Ints
    tick: Ints

    @classmethod
    def of(cls, lives: _Lives, tick_ms: int) -> _Grid:
        count = lives.count
        offsets = np.concatenate(([0], np.cumsum(count)))
        rows = int(offsets[-1])
        life_idx = np.repeat(np.arange(len(count)), count)
        start = offsets[:-1][life_idx]
        tick = lives.first_tick[life_idx] + (np.arange(rows) - start) * tick_ms
        return cls(count, offsets, life_idx, start, tick)

    @property
    def rows(self) -> int:
        return int(self.offsets[-1])


@dataclass(frozen=True, slots=True)
class _Placed:
    """The buckets on the grid: each seen at the first tick at or after its commits
    (timeline.tick_buckets)."""

    #: per bucket: on the grid at all, and its row there
    inside: Bools
    grid_row: Ints
    #: per tick: commits seen at it, commits exactly on it, the latest rewind time (MIN: none)
    n: Ints
    n_at: Ints
    rewind_ms: Ints
    #: per tick: the bucket row with its earliest commit, the same among buckets exactly on
    #: it, and the bucket with its latest commit (-1: none)
    first_row: Ints
    first_at_row: Ints
    last_row: Ints


def _place_buckets(
    buckets: pa.Table, lives: _Lives, life_of_bucket: Ints, grid: _Grid, tick_ms: int
) -> _Placed:
    on_tick = bools(buckets.column("on_tick"))
    bucket_tick = ints(buckets.column("bucket_ms")) + np.where(on_tick, 0, tick_ms)
    life_ok = life_of_bucket >= 0
    safe_life = np.maximum(life_of_bucket, 0)
    pos = (bucket_tick - lives.first_tick[safe_life]) // tick_ms
    inside = life_ok & (pos >= 0) & (pos < grid.count[safe_life])
    grid_row = np.where(inside, grid.offsets[:-1][safe_life] + pos, 0)
    rows = grid.rows
    n_b = ints(buckets.column("n"))
    n = np.zeros(rows, dtype=np.int64)
    n_at = np.zeros(rows, dtype=np.int64)
    np.add.at(n, grid_row[inside], n_b[inside])
    np.add.at(n_at, grid_row[inside & on_tick], n_b[inside & on_tick])
    rewind = column_of(buckets, "rewind_ms")
    rewind_ms = np.full(rows, MIN)
    has_rewind = inside & rewind.valid
    np.maximum.at(rewind_ms, grid_row[has_rewind], rewind.values[has_rewind])
    first_ts, first_so = column_of(buckets, "first_ts"), column_of(buckets, "first_so")
    last_ts, last_so = column_of(buckets, "last_ts"), column_of(buckets, "last_so")
    has_first = inside & first_ts.valid
    earliest = (first_ts.values, first_so.values)
    latest = (-last_ts.values, -last_so.values)
    return _Placed(
        inside,
        grid_row,
        n,
        n_at,
        rewind_ms,
        first_row=first_per(grid_row, rows, earliest, has_first),
        first_at_row=first_per(grid_row, rows, earliest, has_first & on_tick),
        last_row=first_per(grid_row, rows, latest, inside & last_ts.valid),
    )


@dataclass(frozen=True, slots=True)
class _Commits:
    """Per tick, the commit state running within the life."""

    committed: Nullable
    commit_time: Nullable
    last_rewind_time: Nullable
    #: the first commit's offset of the tick, and of the buckets exactly on it
    tick_first: Nullable
    tick_first_at: Nullable


def _commit_state(buckets: pa.Table, grid: _Grid, placed: _Placed) -> _Commits:
    tick_last_offset = column_of(buckets, "last_offset").at(placed.last_row)
    tick_last_ts = column_of(buckets, "last_ts").at(placed.last_row)
    first_offset = column_of(buckets, "first_offset")
    idx, ok = ffill_index(tick_last_offset.valid, grid.start)
    committed = Nullable(tick_last_offset.values[idx], ok)
    idx, ok = ffill_index(tick_last_ts.valid, grid.start)
    commit_time = Nullable(tick_last_ts.values[idx], ok)
    rewind_ms = placed.rewind_ms
    last_rewind = rewind_ms.copy()
    for life in np.unique(grid.life_idx[rewind_ms != MIN]):
        span = slice(grid.offsets[life], grid.offsets[life + 1])
        last_rewind[span] = np.maximum.accumulate(rewind_ms[span])
    return _Commits(
        committed,
        commit_time,
        Nullable(last_rewind, last_rewind != MIN),
        tick_first=first_offset.at(placed.first_row),
        tick_first_at=first_offset.at(placed.first_at_row),
    )


@dataclass(frozen=True, slots=True)
class _Window:
    """The status window of each tick: the k-th tick back and the k-1 ticks before it."""

    #: the tick k back (clamped to 0) and whether it is in the life
    safe_back: Ints
    has_back: Bools
    commits: Ints
    first_offset: Nullable


def _status_window(grid: _Grid, placed: _Placed, state: _Commits, k: int) -> _Window:
    rows = grid.rows
    here = np.arange(rows)
    back = here - k
    has_back = back >= grid.start
    safe_back = np.maximum(back, 0)
    n_at_start = np.where(has_back, placed.n_at[safe_back], 0)
    first_at_start = Nullable(
        state.tick_first_at.values[safe_back], has_back & state.tick_first_at.valid[safe_back]
    )
    cumulative = np.concatenate(([0], np.cumsum(placed.n)))
    low = np.maximum(back + 1, grid.start)
    n_recent = cumulative[here + 1] - cumulative[low]
    with_first = np.where(placed.first_row >= 0, here, rows)
    next_first = np.minimum.accumulate(with_first[::-1])[::-1]
    recent_row = next_first[low]
    in_frame = recent_row <= here
    safe_recent = np.minimum(recent_row, rows - 1)
    tick_first, committed = state.tick_first, state.committed
    first_offset = Nullable(
        np.where(
            n_at_start > 0,
            first_at_start.values,
            np.where(n_recent > 0, tick_first.values[safe_recent], committed.values),
        ),
        np.where(
            n_at_start > 0,
            first_at_start.valid,
            np.where(n_recent > 0, in_frame & tick_first.valid[safe_recent], committed.valid),
        ),
    )
    return _Window(safe_back, has_back, n_at_start + n_recent, first_offset)


@dataclass(frozen=True, slots=True)
class _Lag:
    """Per tick: the log end as of it and the lag in offsets and seconds."""

    has_sample: Bools
    log_end: Nullable
    log_end_time: Nullable
    unchanged_since: Nullable
    lag: Ints
    lag_seconds: npt.NDArray[np.float64]
    caught_up: Bools
    #: a sample brackets the committed offset from below (else the age is a lower bound)
    has_before: Bools


def _log_end_and_lag(samples: _Samples, tick: Ints, committed: Nullable) -> _Lag:
    sample = np.searchsorted(samples.ts, tick, side="right") - 1
    has_sample = sample >= 0
    s = np.maximum(sample, 0)
    if len(samples.ts) == 0:  # no tick has a log end; any index will do
        zero = np.zeros(1, dtype=np.int64)
        samples = _Samples(zero, zero, zero, zero, zero, np.zeros(1, dtype=bool))
    log_end = Nullable(samples.log_end[s], has_sample)
    log_end_time = Nullable(samples.ts[s], has_sample)
    run_start = samples.run_start[s]
    unchanged_since = Nullable(run_start, has_sample & (log_end_time.values > run_start))
    probe = has_sample & committed.valid & (committed.values < log_end.values)
    before = _before(samples, samples.epoch[s], committed.values, probe)
    has_before = before >= 0
    b = np.maximum(before, 0)
    after = np.where(has_before, b + 1, samples.epoch_first[s])
    after_ok = np.where(has_before, samples.next_valid[b], True)
    after = np.minimum(after, len(samples.ts) - 1)
    gap = samples.ts[after] - samples.ts[b]
    kth = committed.values - samples.log_end[b] + 1
    n1 = samples.log_end[after] - samples.log_end[b] + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        interpolated = samples.ts[b] + np.where(n1 != 0, gap * kth // np.where(n1 != 0, n1, 1), 0)
    produced = np.where(has_before, interpolated, samples.ts[after])
    # greatest() skips a null: an unknown append time gives age 0
    age_s = np.where(after_ok, np.maximum(tick - produced, 0), 0) / 1000.0
    caught_up = committed.valid & (committed.values >= log_end.values)
    return _Lag(
        has_sample,
        log_end,
        log_end_time,
        unchanged_since,
        lag=np.where(committed.valid, np.maximum(log_end.values - committed.values, 0), 0),
        lag_seconds=np.where(caught_up, 0.0, age_s),
        caught_up=caught_up,
        has_before=has_before,
    )


def _evidence_start(
    buckets: pa.Table, grid: _Grid, placed: _Placed, state: _Commits, window: _Window
) -> tuple[Ints, Nullable]:
    """Per tick: when its evidence starts (docs/status-rules.md `evidence start`) and the
    offset committed then.

    A window back when the life reaches that far: that tick and the offset committed at it.
    Before, the life's first commit, its time and offset: the exporter judges a partition
    first committed after its window boundary from that commit (`first_commit_ts`), and its
    lag there is known or bounded (`_lag_at`). Left unknown, the first window read "behind
    at window start", so a consumer stuck since its first commit read STALL, then OK once
    the tick a window back showed it caught up, then STALL again.
    """
    first_row = placed.first_row[grid.start]  # the life's earliest commit (at its first tick)
    first_ts = column_of(buckets, "first_ts").at(first_row)
    first_offset = column_of(buckets, "first_offset").at(first_row)
    back, has_back, committed = window.safe_back, window.has_back, state.committed
    time = np.where(has_back, grid.tick[back], first_ts.values)
    offset = Nullable(
        np.where(has_back, committed.values[back], first_offset.values),
        np.where(has_back, committed.valid[back], first_ts.valid & first_offset.valid),
    )
    return time, offset


def _lag_at(samples: _Samples, tick: Ints, time: Ints, offset: Nullable) -> Nullable:
    """`LogEndHistory.lag_at` per tick, with the samples up to the tick: the log end as of
    `time` (the last sample at or before it) minus `offset`, clamped at 0; null when unknown.

    Before the first sample the log end is unknown but bounded: a log end never goes down, so
    it was at most the first sample's, and with that no higher than `offset` the lag was 0.
    The archive's first sample starts its first epoch, so no reset lies between (the
    exporter's history, cleared at a reset, bounds nothing before it: the archive keeps the
    first epoch). A first sample after the tick bounds nothing yet: it was not taken then.
    """
    if len(samples.ts) == 0:
        return Nullable(np.zeros(len(time), dtype=np.int64), np.zeros(len(time), dtype=bool))
    sample = np.searchsorted(samples.ts, time, side="right") - 1
    known = sample >= 0
    end = samples.log_end[np.maximum(sample, 0)]
    bounded = ~known & (samples.ts[0] <= tick) & (samples.log_end[0] <= offset.values)
    lag = np.where(known, np.maximum(end - offset.values, 0), 0)
    return Nullable(lag, offset.valid & (known | bounded))


def sweep(
    buckets: pa.Table, samples_table: pa.Table, tick_ms: int, end_tick_ms: int, window_ticks: int
) -> pa.Table:
    """TIMELINE_SWEEP_SCHEMA rows of one topic-partition."""
    lives, life_of_bucket = _lives(buckets, tick_ms, end_tick_ms)
    grid = _Grid.of(lives, tick_ms)
    placed = _place_buckets(buckets, lives, life_of_bucket, grid, tick_ms)
    state = _commit_state(buckets, grid, placed)
    window = _status_window(grid, placed, state, window_ticks)
    samples = _samples(samples_table)
    lag = _log_end_and_lag(samples, grid.tick, state.committed)
    committed, log_end = state.committed, lag.log_end
    lag_start = _lag_at(samples, grid.tick, *_evidence_start(buckets, grid, placed, state, window))
    life_idx = grid.life_idx
    names = buckets.select(["group", "topic", "partition"]).take(
        pa.array(lives.group_row[life_idx])
    )
    has_sample = lag.has_sample
    return pa.table(
        {
            "group": names.column("group"),
            "topic": names.column("topic"),
            "partition": names.column("partition"),
            "life": pa.array(lives.life[life_idx]),
            "life_end_ms": Nullable(
                lives.life_end.values[life_idx], lives.life_end.valid[life_idx]
            ).arrow(),
            "tick_ms": pa.array(grid.tick),
            "committed_offset": committed.arrow(),
            "commit_time_ms": state.commit_time.arrow(),
            "last_rewind_time_ms": state.last_rewind_time.arrow(),
            "commits_in_window": pa.array(window.commits.astype(np.int32)),
            "commits_in_tick": pa.array(placed.n.astype(np.int32)),
            "window_first_offset": window.first_offset.arrow(),
            "log_end_offset": log_end.arrow(),
            "log_end_time_ms": lag.log_end_time.arrow(),
            "log_end_unchanged_since_ms": lag.unchanged_since.arrow(),
            "lag": Nullable(lag.lag, has_sample).arrow(),
            "lag_seconds": pa.array(lag.lag_seconds, mask=~has_sample),
            # null where Spark's three-valued logic has it: no committed offset to compare
            "lag_seconds_lower_bound": pa.array(
                has_sample & ~lag.caught_up & ~lag.has_before,
                mask=has_sample & ~committed.valid,
            ),
            "lag_at_window_start": lag_start.arrow(),
        }
    )
