"""The raw-commit pass of `commit_buckets` in numpy: one Arrow table in, bucket rows out.

Spark hands over every event of a set of groups at once (commits, offset deletions, and
the groups' deletions with a null topic); the sweep orders them per (group, topic,
partition) in `__consumer_offsets` order and derives lives, rewinds and commit intervals
with running sums over the whole array, then folds them into buckets with `reduceat`. A
chain of Spark window functions and a sort aggregate over struct columns did the same at a
fraction of the speed. Semantics: commit_buckets.py.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from offsetwatch.spark_jobs.analytics.kernels import (
    Ints,
    Nullable,
    bools,
    codes,
    ints,
    masked_extreme,
    masked_sum,
    nullable,
    runs,
    segment_cumsum,
)

#: the input columns, as commit_buckets selects them; deletions of a group have a null topic
INPUT_COLUMNS: Final = ("group", "topic", "partition", "ts", "offset", "is_reset", "source_offset")
_POINT = pa.struct(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("source_offset", pa.int64(), nullable=False),
        pa.field("offset", pa.int64()),
    ]
)


def _with_resets(table: pa.Table) -> pa.Table:
    """Commits plus one reset row per (group, topic, partition) for each of the group's
    deletions (the null-topic rows): a deleted group drops every partition it committed."""
    is_deletion = np.asarray(table.column("topic").is_null(), dtype=bool)
    if not is_deletion.any():
        return table
    commits = table.filter(pa.array(~is_deletion))
    deletions = table.filter(pa.array(is_deletion)).select(["group", "ts", "source_offset"])
    keys = (
        commits.select(["group", "topic", "partition"])
        .group_by(["group", "topic", "partition"])
        .aggregate([])
    )
    resets = keys.join(deletions, "group", join_type="inner")
    resets = resets.append_column("offset", pa.nulls(resets.num_rows, pa.int64())).append_column(
        "is_reset", pa.array(np.ones(resets.num_rows, dtype=bool))
    )
    return pa.concat_tables([commits, resets.select(list(INPUT_COLUMNS)).cast(commits.schema)])


def _key_ids(table: pa.Table) -> Ints:
    """One integer per (group, topic, partition)."""
    key = np.zeros(table.num_rows, dtype=np.int64)
    for name in ("group", "topic", "partition"):
        distinct, indexes = codes(table.column(name))
        key = key * len(distinct) + indexes
    return key


def sweep(table: pa.Table, tick_ms: int) -> pa.RecordBatch | None:
    """commit_buckets rows (commit_buckets.BUCKETS_SCHEMA) of the events in `table`
    (INPUT_COLUMNS); None when there are none."""
    table = _with_resets(table.combine_chunks())
    if table.num_rows == 0:
        return None
    key = _key_ids(table)
    source_offset = ints(table.column("source_offset"))
    order = np.lexsort((source_offset, key))
    table = table.take(pa.array(order))
    key, source_offset = key[order], source_offset[order]
    ts = ints(table.column("ts"))
    offsets = nullable(table.column("offset"))
    offset, has_offset = offsets.values, offsets.valid
    is_reset = bools(table.column("is_reset"))
    rows = len(key)

    keys = runs(key)
    starts, run = keys.starts, keys.run
    prev_offset = np.roll(offset, 1)
    prev_has = np.roll(has_offset, 1) & ~keys.first
    prev_ts = np.roll(ts, 1)

    life = segment_cumsum(is_reset, starts, run)
    is_rewind = has_offset & prev_has & (offset < prev_offset)
    has_interval = prev_has
    interval = ts - prev_ts
    rewind_seq = segment_cumsum(is_rewind, starts, run)
    # the offset the latest rewind (so far, in this key) left
    last_rewind = np.maximum.accumulate(np.where(is_rewind, np.arange(rows), -1))
    has_from = last_rewind >= starts[run]
    rewind_from = prev_offset[np.maximum(last_rewind, 0)]
    commit = ~is_reset
    back = commit & ~is_rewind & has_from & has_offset & (offset >= rewind_from)

    bucket = ts - ts % tick_ms
    on_tick = ts % tick_ms == 0
    # buckets in key order; within one, its commits first, by (ts, source_offset)
    by_bucket = np.lexsort((source_offset, ts, is_reset, on_tick, bucket, rewind_seq, life, key))
    b_starts = runs(*(c[by_bucket] for c in (key, life, rewind_seq, bucket, on_tick))).starts

    def agg_sum(values: Ints, mask: npt.NDArray[np.bool_]) -> Nullable:
        return masked_sum(values[by_bucket], mask[by_bucket], b_starts)

    def agg_ext(values: Ints, mask: npt.NDArray[np.bool_], highest: bool) -> Nullable:
        return masked_extreme(values[by_bucket], mask[by_bucket], b_starts, highest)

    n = np.add.reduceat(commit[by_bucket].astype(np.int64), b_starts)
    has_commit = n > 0
    first_row = by_bucket[b_starts]
    last_row = by_bucket[b_starts + np.maximum(n - 1, 0)]

    def point(row: Ints) -> pa.StructArray:
        return pa.StructArray.from_arrays(
            [
                pa.array(ts[row]),
                pa.array(source_offset[row]),
                pa.array(offset[row], mask=~has_offset[row]),
            ],
            fields=list(_POINT),
            mask=pa.array(~has_commit),
        )

    interval_n = np.add.reduceat(has_interval[by_bucket].astype(np.int64), b_starts)
    keys = table.select(["group", "topic", "partition"]).take(pa.array(first_row))
    return pa.RecordBatch.from_arrays(
        [
            keys.column("group").combine_chunks(),
            keys.column("topic").combine_chunks(),
            keys.column("partition").combine_chunks(),
            pa.array(life[first_row]),
            pa.array(rewind_seq[first_row]),
            pa.array(bucket[first_row]),
            pa.array(on_tick[first_row]),
            pa.array(n),
            point(first_row),
            point(last_row),
            agg_sum(interval, has_interval).arrow(),
            pa.array(interval_n),
            agg_ext(interval, has_interval, highest=False).arrow(),
            agg_ext(interval, has_interval, highest=True).arrow(),
            agg_ext(offset, has_offset, highest=True).arrow(),
            agg_ext(ts, is_rewind, highest=True).arrow(),
            agg_ext(prev_offset, is_rewind, highest=True).arrow(),
            agg_ext(offset, is_rewind, highest=True).arrow(),
            agg_ext(ts, back, highest=False).arrow(),
            agg_ext(ts, is_reset, highest=False).arrow(),
        ],
        names=list(BUCKET_COLUMNS),
    )


BUCKET_COLUMNS: Final = (
    "group",
    "topic",
    "partition",
    "life",
    "rewind_seq",
    "bucket_ms",
    "on_tick",
    "n",
    "first",
    "last",
    "interval_sum_ms",
    "interval_n",
    "interval_min_ms",
    "interval_max_ms",
    "max_offset",
    "rewind_ms",
    "rewind_from",
    "rewind_to",
    "back_ms",
    "reset_ms",
)
