"""The numpy building blocks the analytics sweeps share (commit_sweep, timeline_sweep,
windows_sweep): integer types and sentinels, nullable columns, run boundaries, masked sums
and extremes per run, and the first row of each group.

Every sweep works the same way: order the rows by a key, cut the ordered rows into runs where
the key changes, and fold each run with a `reduceat`. Nulls travel as (values, validity)
pairs; a fold over a run with no valid row is itself null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

#: the sentinels a masked extreme fills invalid rows with (never a result: the run is null)
MIN: Final = np.iinfo(np.int64).min
MAX: Final = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class Nullable:
    """An int64 column as values (anything where not valid) and its validity."""

    values: Ints
    valid: Bools

    def arrow(self) -> pa.Array:
        return pa.array(self.values, mask=~self.valid)

    def at(self, rows: Ints) -> Nullable:
        """The values at `rows`; a row index below 0 gives null."""
        ok = rows >= 0
        safe = np.maximum(rows, 0)
        return Nullable(self.values[safe], ok & self.valid[safe])


def column_of(table: pa.Table, name: str) -> Nullable:
    """An integer column of an Arrow table, nulls as 0 with their validity."""
    return nullable(table.column(name))


def nullable(column: pa.ChunkedArray | pa.Array) -> Nullable:
    return Nullable(
        np.asarray(column.fill_null(0).to_numpy(), dtype=np.int64),
        np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool),
    )


def bools(column: pa.ChunkedArray | pa.Array) -> Bools:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=bool)


def ints(column: pa.ChunkedArray | pa.Array) -> Ints:
    return np.asarray(column.to_numpy(), dtype=np.int64)


def codes(column: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, Ints]:
    """(the distinct values, each row's index among them): a string key as integers."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = column.dictionary_encode()
    return encoded.dictionary, np.asarray(encoded.indices, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Runs:
    """Rows ordered by a key, cut where the key changes."""

    #: the row (of the ordered rows) each run starts at
    starts: Ints
    #: per ordered row: the index of its run
    run: Ints
    #: per ordered row: whether it starts a run
    first: Bools

    @property
    def count(self) -> int:
        return len(self.starts)

    def of_rows(self, order: Ints) -> Ints:
        """Per row in the original order (`order` sorted it): the index of its run."""
        out = np.empty(len(order), dtype=np.int64)
        out[order] = self.run
        return out


def runs(*keys: npt.NDArray[np.generic]) -> Runs:
    """The runs of rows already ordered by `keys`: a run ends where any key changes."""
    size = len(keys[0])
    first = np.zeros(size, dtype=bool)
    if size:
        first[0] = True
    for key in keys:
        first[1:] |= key[1:] != key[:-1]
    return Runs(np.flatnonzero(first), np.cumsum(first) - 1, first)


def masked_sum(values: Ints, valid: Bools, starts: Ints) -> Nullable:
    """Per run (ordered rows, `starts` of each run): the sum of the valid values; null when
    the run has none."""
    total = np.add.reduceat(np.where(valid, values, 0), starts)
    return Nullable(total, np.logical_or.reduceat(valid, starts))


def masked_extreme(values: Ints, valid: Bools, starts: Ints, highest: bool) -> Nullable:
    """Per run: the greatest (or least) valid value; null when the run has none."""
    if highest:
        extreme = np.maximum.reduceat(np.where(valid, values, MIN), starts)
    else:
        extreme = np.minimum.reduceat(np.where(valid, values, MAX), starts)
    return Nullable(extreme, np.logical_or.reduceat(valid, starts))


def first_per(group: Ints, size: int, order_keys: tuple[Ints, ...], mask: Bools) -> Ints:
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


def segment_cumsum(flags: Bools, starts: Ints, run: Ints) -> Ints:
    """Running count of `flags` within each run (run: the run index of each ordered row)."""
    total = np.cumsum(flags, dtype=np.int64)
    before = total[starts] - flags[starts]
    return total - before[run]


def ffill_index(valid: Bools, seg_start: Ints) -> tuple[Ints, Bools]:
    """Per row: the index of the latest valid row at or before it in its segment (rows of a
    segment contiguous, `seg_start` the first row of each row's segment), and whether there
    is one."""
    idx = np.maximum.accumulate(np.where(valid, np.arange(len(valid)), -1))
    return np.maximum(idx, 0), idx >= seg_start
