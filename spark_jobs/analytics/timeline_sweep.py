"""The status timeline of one topic-partition in numpy: its commit buckets and log-end samples
in, one row per (group, life, tick) out, everything but liveness and the status.

Spark groups buckets and samples by (topic, partition) and hands each pair over as Arrow
tables (`applyInArrow`); here the tick grid of every life, the commit state at each tick
(running values, the status window as a k-row frame), the as-of log end and the lag in
seconds (binary searches in the samples) are array operations over all the partition's
lives at once.

Same definitions as the exporter (exporter/lag.py, docs/status-rules.md "Lag in seconds"):
the log end at a tick is the last sample at or before it; lag in seconds is the tick minus
the append time of the message at the committed offset, interpolated between the last sample
with log end <= committed and the first with log end > committed (the k-th of n messages in
a gap lands at k/(n+1) of it), never extrapolated, 0.0 when caught up, and a lower bound when
the message predates the first sample. A falling log end (recreated or truncated topic) starts
a new *epoch*: offsets before and after are unrelated, as when the exporter clears its history.
tests/spark_jobs/analytics/test_timeline_sweep.py checks every tick against exporter/lag.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

_MIN: Final = np.iinfo(np.int64).min
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
class Nullable:
    """An int64 column as values (anything where not valid) and its validity."""

    values: Ints
    valid: Bools

    def arrow(self) -> pa.Array:
        return pa.array(self.values, mask=~self.valid)


def column_of(table: pa.Table, name: str) -> Nullable:
    column = table.column(name)
    return Nullable(
        np.asarray(column.fill_null(0).to_numpy(), dtype=np.int64),
        np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool),
    )


def _ffill_index(valid: Bools, seg_start: Ints) -> tuple[Ints, Bools]:
    """Per row: the index of the latest valid row at or before it in its segment."""
    idx = np.maximum.accumulate(np.where(valid, np.arange(len(valid)), -1))
    return np.maximum(idx, 0), idx >= seg_start


def _first_per(group: Ints, size: int, order_keys: tuple[Ints, ...], mask: Bools) -> Ints:
    """For each of `size` groups, the row (of those in `mask`) with the smallest order keys
    (lexicographic, first key most significant); -1 for none."""
    rows = np.flatnonzero(mask)
    out = np.full(size, -1, dtype=np.int64)
    if len(rows) == 0:
        return out
    order = np.lexsort((*(k[rows] for k in reversed(order_keys)), group[rows]))
    ranked = rows[order]
    g = group[ranked]
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    out[g[first]] = ranked[first]
    return out


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
    group = np.asarray(
        buckets.column("group").combine_chunks().dictionary_encode().indices, dtype=np.int64
    )
    life = np.asarray(buckets.column("life").to_numpy(), dtype=np.int64)
    order = np.lexsort((life, group))
    g, li = group[order], life[order]
    new = np.ones(len(g), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (li[1:] != li[:-1])
    starts = np.flatnonzero(new)
    life_of_row = np.empty(len(g), dtype=np.int64)
    life_of_row[order] = np.cumsum(new) - 1
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
    ts = np.asarray(table.column("ts").to_numpy(), dtype=np.int64)
    log_end = np.asarray(table.column("log_end").to_numpy(), dtype=np.int64)
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


def sweep(
    buckets: pa.Table, samples_table: pa.Table, tick_ms: int, end_tick_ms: int, window_ticks: int
) -> pa.Table:
    """TIMELINE_SWEEP_SCHEMA rows of one topic-partition."""
    lives, life_of_bucket = _lives(buckets, tick_ms, end_tick_ms)
    count = lives.count
    offsets = np.concatenate(([0], np.cumsum(count)))
    rows = int(offsets[-1])
    life_idx = np.repeat(np.arange(len(count)), count)
    start = offsets[:-1][life_idx]
    tick = lives.first_tick[life_idx] + (np.arange(rows) - start) * tick_ms

    # each bucket seen at the first tick >= its commits (timeline.tick_buckets)
    on_tick = np.asarray(buckets.column("on_tick").to_numpy(zero_copy_only=False), dtype=bool)
    bucket_tick = np.asarray(buckets.column("bucket_ms").to_numpy(), dtype=np.int64) + np.where(
        on_tick, 0, tick_ms
    )
    life_ok = life_of_bucket >= 0
    safe_life = np.maximum(life_of_bucket, 0)
    pos = (bucket_tick - lives.first_tick[safe_life]) // tick_ms
    inside = life_ok & (pos >= 0) & (pos < count[safe_life])
    grid_row = np.where(inside, offsets[:-1][safe_life] + pos, 0)
    n_b = np.asarray(buckets.column("n").to_numpy(), dtype=np.int64)
    n = np.zeros(rows, dtype=np.int64)
    n_at = np.zeros(rows, dtype=np.int64)
    np.add.at(n, grid_row[inside], n_b[inside])
    np.add.at(n_at, grid_row[inside & on_tick], n_b[inside & on_tick])
    rewind = column_of(buckets, "rewind_ms")
    rewind_ms = np.full(rows, _MIN)
    has_rewind = inside & rewind.valid
    np.maximum.at(rewind_ms, grid_row[has_rewind], rewind.values[has_rewind])

    first_ts, first_so = column_of(buckets, "first_ts"), column_of(buckets, "first_so")
    last_ts, last_so = column_of(buckets, "last_ts"), column_of(buckets, "last_so")
    first_offset, last_offset = (
        column_of(buckets, "first_offset"),
        column_of(buckets, "last_offset"),
    )
    has_first = inside & first_ts.valid
    earliest = (first_ts.values, first_so.values)
    first_row = _first_per(grid_row, rows, earliest, has_first)
    first_at_row = _first_per(grid_row, rows, earliest, has_first & on_tick)
    latest = (-last_ts.values, -last_so.values)
    last_row = _first_per(grid_row, rows, latest, inside & last_ts.valid)

    def at(source: Nullable, row: Ints) -> Nullable:
        ok = row >= 0
        return Nullable(source.values[np.maximum(row, 0)], ok & source.valid[np.maximum(row, 0)])

    tick_last_offset = at(last_offset, last_row)
    tick_last_ts = at(last_ts, last_row)
    tick_first = at(first_offset, first_row)
    tick_first_at = at(first_offset, first_at_row)

    # running values within the life
    idx, ok = _ffill_index(tick_last_offset.valid, start)
    committed = Nullable(tick_last_offset.values[idx], ok)
    idx, ok = _ffill_index(tick_last_ts.valid, start)
    commit_time = Nullable(tick_last_ts.values[idx], ok)
    last_rewind = rewind_ms.copy()
    for life in np.unique(life_idx[rewind_ms != _MIN]):
        span = slice(offsets[life], offsets[life + 1])
        last_rewind[span] = np.maximum.accumulate(rewind_ms[span])
    last_rewind_time = Nullable(last_rewind, last_rewind != _MIN)

    # the status window: the k-th tick back and the k-1 ticks before this one
    k = window_ticks
    back = np.arange(rows) - k
    has_back = back >= start
    safe_back = np.maximum(back, 0)
    n_at_start = np.where(has_back, n_at[safe_back], 0)
    first_at_start = Nullable(
        tick_first_at.values[safe_back], has_back & tick_first_at.valid[safe_back]
    )
    cumulative = np.concatenate(([0], np.cumsum(n)))
    low = np.maximum(back + 1, start)
    n_recent = cumulative[np.arange(rows) + 1] - cumulative[low]
    next_first = np.minimum.accumulate(np.where(first_row >= 0, np.arange(rows), rows)[::-1])[::-1]
    recent_row = next_first[low]
    in_frame = recent_row <= np.arange(rows)
    safe_recent = np.minimum(recent_row, rows - 1)
    window_first = Nullable(
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

    # the log end as of each tick and the lag in seconds (module doc)
    samples = _samples(samples_table)
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
    epoch = samples.epoch[s]
    probe = has_sample & committed.valid & (committed.values < log_end.values)
    before = _before(samples, epoch, committed.values, probe)
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
    produced_ok = after_ok
    # greatest() skips a null: an unknown append time gives age 0
    age_s = np.where(produced_ok, np.maximum(tick - produced, 0), 0) / 1000.0
    caught_up = committed.valid & (committed.values >= log_end.values)
    lag_seconds = np.where(caught_up, 0.0, age_s)
    lag = np.where(committed.valid, np.maximum(log_end.values - committed.values, 0), 0)

    lag_start = np.maximum(log_end.values[safe_back] - committed.values[safe_back], 0)
    lag_start_ok = has_back & log_end.valid[safe_back] & committed.valid[safe_back]

    group_rows = lives.group_row[life_idx]
    names = buckets.select(["group", "topic", "partition"]).take(pa.array(group_rows))
    return pa.table(
        {
            "group": names.column("group"),
            "topic": names.column("topic"),
            "partition": names.column("partition"),
            "life": pa.array(lives.life[life_idx]),
            "life_end_ms": Nullable(
                lives.life_end.values[life_idx], lives.life_end.valid[life_idx]
            ).arrow(),
            "tick_ms": pa.array(tick),
            "committed_offset": committed.arrow(),
            "commit_time_ms": commit_time.arrow(),
            "last_rewind_time_ms": last_rewind_time.arrow(),
            "commits_in_window": pa.array((n_at_start + n_recent).astype(np.int32)),
            "commits_in_tick": pa.array(n.astype(np.int32)),
            "window_first_offset": window_first.arrow(),
            "log_end_offset": log_end.arrow(),
            "log_end_time_ms": log_end_time.arrow(),
            "log_end_unchanged_since_ms": unchanged_since.arrow(),
            "lag": Nullable(lag, has_sample).arrow(),
            "lag_seconds": pa.array(lag_seconds, mask=~has_sample),
            # null where Spark's three-valued logic has it: no committed offset to compare
            "lag_seconds_lower_bound": pa.array(
                has_sample & ~caught_up & ~has_before, mask=has_sample & ~committed.valid
            ),
            "lag_at_window_start": Nullable(lag_start, lag_start_ok).arrow(),
        }
    )
