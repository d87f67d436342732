"""A short per-group history of lag for the console: sparklines and the group detail chart.

The exporter's snapshots only hold the present. The console wants the last hour: per group,
the total log end of its partitions, the total lag, and the largest lag in seconds. The main
loop appends one point per group after a snapshot (`record`); HTTP threads read (`series`,
`lag_seconds_all`) without ever blocking it.

Memory is bounded per group: at most `capacity` points. While the buffer has room every
point is kept (a demo run of minutes is shown at snapshot resolution); once full, the older
half is thinned to every other point, so resolution falls off with age and the span still
reaches back `span_ms` (points older than that are dropped). Three numbers per point, 24
bytes, so 120 points cost ~2.9 KB per group (29 MB at 10,000 groups).

Concurrency: one writer (the main loop), many readers. The time axis is shared by every
group (a group's values are aligned to the tail of it), and the writer brackets each change
with a sequence counter (a seqlock): readers copy what they need and retry if the counter
moved or was odd. Copies are single C-level slices, atomic under the GIL.
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from offsetwatch.exporter.snapshot import GroupSnapshot, Snapshot

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_SPAN_MS", "ConsoleHistory", "GroupSeries"]

DEFAULT_CAPACITY: Final = 120
DEFAULT_SPAN_MS: Final = 3_600_000
#: one point per snapshot, but never more often than this
DEFAULT_MIN_STEP_MS: Final = 1_000
#: a reader that keeps meeting the writer gives up after ~1 s (it never has so far)
_READ_ATTEMPTS: Final = 500
_WRITER_BUSY_S: Final = 0.002


@dataclass(frozen=True, slots=True)
class GroupSeries:
    """One group's history, oldest first; lag seconds are NaN where unknown."""

    times_ms: tuple[int, ...]
    log_end: tuple[int, ...]
    lag: tuple[int, ...]
    lag_seconds: tuple[float, ...]


class _Columns:
    __slots__ = ("lag", "lag_seconds", "log_end")

    def __init__(self) -> None:
        self.log_end = array("q")
        self.lag = array("q")
        #: rounded to 0.1 s when recorded: what the API sends, encoded without a Python loop
        self.lag_seconds = array("d")


def _log_end_total(group: GroupSnapshot) -> int:
    """Sum of the known log ends (-1 is unknown): sum + count in C, no Python loop."""
    total = 0
    for rows in group.topics:
        ends = rows.log_end
        total += sum(ends) + ends.count(-1)
    return total


class ConsoleHistory:
    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        span_ms: int = DEFAULT_SPAN_MS,
        min_step_ms: int = DEFAULT_MIN_STEP_MS,
    ) -> None:
        if capacity < 4:
            raise ValueError(f"capacity must be at least 4, got {capacity}")
        self.capacity = capacity
        self.span_ms = span_ms
        self.min_step_ms = min_step_ms
        self._times = array("q")
        self._groups: dict[str, _Columns] = {}
        self._seq = 0

    # -- writer (main loop) ----------------------------------------------------------------

    def record(self, snapshot: Snapshot) -> bool:
        """Add a point per group of a ready snapshot; False when skipped (not ready, too soon)."""
        if not snapshot.ready:
            return False
        times = self._times
        now = snapshot.time_ms
        if times and now - times[-1] < self.min_step_ms:
            return False
        present = {}
        for group in snapshot.groups:
            present[group.view.group_id] = (
                _log_end_total(group),
                group.total_lag,
                group.max_lag_seconds,
            )
        self._seq += 1  # odd: readers retry
        try:
            groups = self._groups
            for gone in groups.keys() - present.keys():
                del groups[gone]
            for group_id, (log_end, lag, seconds) in present.items():
                columns = groups.get(group_id)
                if columns is None:
                    columns = groups[group_id] = _Columns()
                columns.log_end.append(log_end)
                columns.lag.append(lag)
                columns.lag_seconds.append(round(seconds, 1))
            times.append(now)
            self._trim(now)
        finally:
            self._seq += 1
        return True

    def _trim(self, now: int) -> None:
        """Drop points older than the span; thin the older half once the buffer is full.

        What is kept is one or two slices of the time axis (the second one with a stride of
        2), so every group's columns are cut with C-level slices, not per-point Python.
        """
        times = self._times
        n = len(times)
        limit = now - self.span_ms
        old = 0
        while old < n and times[old] < limit:
            old += 1
        cuts: tuple[tuple[int, int, int], ...]
        if n - old >= self.capacity:
            half = old + (n - old) // 2
            # every other point of the older half, ending with its newest (half - 1)
            first = old + (half - 1 - old) % 2
            cuts = ((first, half, 2), (half, n, 1))
        elif old:
            cuts = ((old, n, 1),)
        else:
            return
        self._times = _cut(times, cuts, 0)
        for columns in self._groups.values():
            offset = n - len(columns.lag)
            columns.log_end = _cut(columns.log_end, cuts, offset)
            columns.lag = _cut(columns.lag, cuts, offset)
            columns.lag_seconds = _cut(columns.lag_seconds, cuts, offset)

    # -- readers (HTTP threads) ------------------------------------------------------------

    def series(self, group_id: str) -> GroupSeries | None:
        """The group's points, or None when it has none (unknown, or not sampled yet)."""
        for _ in range(_READ_ATTEMPTS):
            before = self._seq
            if before & 1:
                time.sleep(_WRITER_BUSY_S)
                continue
            columns = self._groups.get(group_id)
            if columns is None:
                result = None
            else:
                log_end, lag, seconds = columns.log_end[:], columns.lag[:], columns.lag_seconds[:]
                times = self._times[len(self._times) - len(lag) :]
                result = GroupSeries(tuple(times), tuple(log_end), tuple(lag), tuple(seconds))
            if self._seq == before and (result is None or len(result.times_ms) == len(lag)):
                return result
        return None

    def lag_seconds_all(
        self, only: Collection[str] | None = None
    ) -> tuple[tuple[int, ...], dict[str, list[float]]]:
        """(time axis, group -> lag seconds aligned to the tail of it) for every group, or
        for the groups in `only` that have a history."""
        for _ in range(_READ_ATTEMPTS):
            before = self._seq
            if before & 1:
                time.sleep(_WRITER_BUSY_S)
                continue
            times = tuple(self._times)
            if only is None:
                groups = {g: c.lag_seconds.tolist() for g, c in list(self._groups.items())}
            else:
                found = self._groups
                groups = {g: c.lag_seconds.tolist() for g in only if (c := found.get(g))}
            if self._seq == before:
                return times, groups
        return (), {}

    @property
    def version(self) -> int:
        """Changes whenever a point was added: readers cache what they derive by it."""
        return self._seq

    def __len__(self) -> int:
        return len(self._times)


def _cut(column: array[Any], cuts: tuple[tuple[int, int, int], ...], offset: int) -> array[Any]:
    """The slices `cuts` (start, stop, step over the shared time axis) of a column that
    holds its last len(column) points, i.e. starts at axis index `offset`."""
    out = column[:0]
    for start, stop, step in cuts:
        local = start - offset
        if local < 0:
            local %= step  # the first index of the stride inside this column
        end = stop - offset
        if end > local:
            out += column[local:end:step]
    return out


def finite(value: float) -> float | None:
    """JSON has no NaN: unknown lag seconds become null (rounded to ms otherwise)."""
    return round(value, 3) if math.isfinite(value) else None
