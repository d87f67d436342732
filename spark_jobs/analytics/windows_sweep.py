"""The tumbling-window statistics of one topic-partition in numpy (windows.py has the
definitions): its commit buckets and its timeline's lag at each tick in, window rows out."""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa

from offsetwatch.spark_jobs.analytics.kernels import (
    Ints,
    Nullable,
    codes,
    column_of,
    first_per,
    ints,
    masked_extreme,
    masked_sum,
    runs,
)

#: bucket columns the sweep reads (commit_buckets.BUCKETS_SCHEMA, `first`/`last` flattened)
BUCKET_INPUT: Final = (
    "group",
    "topic",
    "partition",
    "bucket_ms",
    "n",
    "first_ts",
    "first_so",
    "first_offset",
    "last_ts",
    "last_so",
    "last_offset",
    "interval_sum_ms",
    "interval_n",
    "interval_min_ms",
    "interval_max_ms",
)
#: timeline columns the sweep reads
TICK_INPUT: Final = ("group", "tick_ms", "lag", "lag_seconds")


def _group_codes(buckets: pa.Table, ticks: pa.Table) -> tuple[pa.Array, Ints, Ints]:
    """One dictionary of group names for both tables and each row's code in it."""
    both = pa.chunked_array(
        buckets.column("group").chunks + ticks.column("group").chunks, pa.string()
    )
    names, indexes = codes(both)
    return names, indexes[: buckets.num_rows], indexes[buckets.num_rows :]


def _windows_of(
    buckets: pa.Table, group: Ints, ticks: pa.Table, tick_group: Ints, size_ms: int
) -> dict[str, pa.Array]:
    """The windows of one size, `_group_code` standing for the group."""
    bucket_ms = ints(buckets.column("bucket_ms"))
    start = bucket_ms - bucket_ms % size_ms
    order = np.lexsort((start, group))
    g, s = group[order], start[order]
    windows = runs(g, s)
    starts = windows.starts
    window_of = windows.of_rows(order)
    count = windows.count

    def total(name: str) -> Ints:
        col = column_of(buckets, name)
        return masked_sum(col.values[order], col.valid[order], starts).values

    def extreme(name: str, highest: bool) -> Nullable:
        col = column_of(buckets, name)
        return masked_extreme(col.values[order], col.valid[order], starts, highest)

    def pick(ts: str, so: str, offset: str, highest: bool) -> Nullable:
        """The offset of the bucket point (ts, source offset) that is least / greatest."""
        t, o = column_of(buckets, ts), column_of(buckets, so)
        sign = -1 if highest else 1
        best = first_per(window_of, count, (sign * t.values, sign * o.values), t.valid)
        return column_of(buckets, offset).at(best)

    commits = total("n")
    first = pick("first_ts", "first_so", "first_offset", highest=False)
    last = pick("last_ts", "last_so", "last_offset", highest=True)
    interval_sum = total("interval_sum_ms")
    interval_n = total("interval_n")
    window_group, window_start = g[starts], s[starts]
    # the previous window of the same partition (windows are in (group, start) order)
    has_prev = np.zeros(count, dtype=bool)
    has_prev[1:] = window_group[1:] == window_group[:-1]
    prev_last = Nullable(np.roll(last.values, 1), has_prev & np.roll(last.valid, 1))
    base = np.where(prev_last.valid, prev_last.values, first.values)
    base_ok = np.where(prev_last.valid, True, first.valid)
    progress = Nullable(last.values - base, last.valid & base_ok)
    # greatest() skips a null: no progress known reads as a rate of 0
    rate = np.where(progress.valid, np.maximum(progress.values, 0), 0) * 1000.0 / size_ms
    with np.errstate(divide="ignore", invalid="ignore"):
        average = interval_sum / np.where(interval_n > 0, interval_n, 1)

    # the timeline's lag at the window's end (a life's ticks never overlap another's)
    probes = pa.table(
        {"g": window_group, "t": window_start + size_ms, "w": np.arange(count, dtype=np.int64)}
    )
    tick_rows = pa.table(
        {
            "g": tick_group,
            "t": ticks.column("tick_ms"),
            "r": np.arange(ticks.num_rows, dtype=np.int64),
        }
    )
    matched = probes.join(tick_rows, ["g", "t"], join_type="inner")
    row = np.zeros(count, dtype=np.int64)
    found = np.zeros(count, dtype=bool)
    w = np.asarray(matched.column("w").to_numpy(), dtype=np.int64)
    row[w] = np.asarray(matched.column("r").to_numpy(), dtype=np.int64)
    found[w] = True
    lag = column_of(ticks, "lag")
    lag_seconds = ticks.column("lag_seconds")
    seconds = np.asarray(lag_seconds.fill_null(0.0).to_numpy(), dtype=np.float64)
    seconds_ok = np.asarray(lag_seconds.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return {
        "_group_code": pa.array(window_group),
        "window_ms": pa.array(np.full(count, size_ms, dtype=np.int64)),
        "window_start_ms": pa.array(window_start),
        "commits": pa.array(commits),
        "first_offset": first.arrow(),
        "last_offset": last.arrow(),
        "offset_progress": progress.arrow(),
        "consumption_rate": pa.array(rate),
        "interval_avg_ms": pa.array(average, mask=~(interval_n > 0)),
        "interval_min_ms": extreme("interval_min_ms", highest=False).arrow(),
        "interval_max_ms": extreme("interval_max_ms", highest=True).arrow(),
        "lag": Nullable(lag.values[row], found & lag.valid[row]).arrow(),
        "lag_seconds": pa.array(seconds[row], mask=~(found & seconds_ok[row])),
    }


def sweep(buckets: pa.Table, ticks: pa.Table, sizes_ms: tuple[int, ...]) -> pa.Table:
    """windows.WINDOWS_SWEEP_SCHEMA rows of one topic-partition: buckets (BUCKET_INPUT) and
    its timeline ticks (TICK_INPUT) in."""
    names, group, tick_group = _group_codes(buckets, ticks)
    parts = [pa.table(_windows_of(buckets, group, ticks, tick_group, size)) for size in sizes_ms]
    windows = pa.concat_tables(parts)
    count = windows.num_rows
    topic = buckets.column("topic")[0]
    partition = buckets.column("partition")[0]
    return pa.table(
        {
            "group": names.take(windows.column("_group_code")),
            "topic": pa.array([topic.as_py()] * count, pa.string()),
            "partition": pa.array([partition.as_py()] * count, pa.int32()),
            **{name: windows.column(name) for name in windows.column_names[1:]},
        }
    )
