"""A short per-group history of lag for the console: sparklines and the group detail chart.

The exporter's snapshots only hold the present. The console wants the last hour: per group,
the total log end of its partitions, the total lag, and the largest lag in seconds. The main
loop appends one point per group after a snapshot (`record`); HTTP threads read (`series`,
`lag_seconds_all`) without ever blocking it.

Two tiers keep the memory bounded whatever the snapshot interval:

* recent: the newest `recent` points as recorded (one per snapshot, at most one a second):
  the last minutes at full resolution (a demo run is drawn point by point);
* hourly: one point per `span_ms / buckets` (a minute) for the last `span_ms` (an hour).

A series is the hourly points older than the first recent one, then the recent ones. Each
tier trims its oldest points in batches (`slack` at a time) with C-level slices, so the main
loop never pays a per-point Python loop. Three numbers per point, 24 bytes; at most
`recent + buckets + 1 + both slacks` points (151 by default): ~4 KB per group with the
arrays' own overhead (measured by benchmarks/console.py).

Concurrency: one writer (the main loop), many readers. A tier's time axis is shared by every
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
from typing import Final

from offsetwatch.exporter.judge.snapshot import GroupSnapshot, Snapshot

__all__ = ["DEFAULT_BUCKETS", "DEFAULT_RECENT", "DEFAULT_SPAN_MS", "ConsoleHistory", "GroupSeries"]

DEFAULT_RECENT: Final = 60
DEFAULT_BUCKETS: Final = 60
DEFAULT_SPAN_MS: Final = 3_600_000
#: one point per snapshot, but never more often than this
DEFAULT_MIN_STEP_MS: Final = 1_000
#: a reader that keeps meeting the writer gives up after ~1 s (it never has so far)
_READ_ATTEMPTS: Final = 500
_WRITER_BUSY_S: Final = 0.002

#: (sum of known log ends, total lag, largest lag seconds) of a group at one time
Point = tuple[int, int, float]


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


class _Tier:
    """Points on one shared time axis, the newest `size` kept (trimmed `slack` at a time)."""

    __slots__ = ("groups", "size", "slack", "times")

    def __init__(self, size: int, slack: int) -> None:
        self.size = size
        self.slack = slack
        self.times = array("q")
        self.groups: dict[str, _Columns] = {}

    def append(self, now: int, present: dict[str, Point]) -> None:
        groups = self.groups
        for gone in groups.keys() - present.keys():
            del groups[gone]
        for group_id, (log_end, lag, seconds) in present.items():
            columns = groups.get(group_id)
            if columns is None:
                columns = groups[group_id] = _Columns()
            columns.log_end.append(log_end)
            columns.lag.append(lag)
            columns.lag_seconds.append(seconds)
        self.times.append(now)
        if len(self.times) > self.size + self.slack:
            keep = self.size
            self.times = self.times[-keep:]
            for columns in groups.values():
                if len(columns.lag) > keep:
                    columns.log_end = columns.log_end[-keep:]
                    columns.lag = columns.lag[-keep:]
                    columns.lag_seconds = columns.lag_seconds[-keep:]

    def read(self, group_id: str) -> tuple[array[int], array[int], array[int], array[float]]:
        """(times, log ends, lags, lag seconds) of a group: empty when it has none here."""
        columns = self.groups.get(group_id)
        if columns is None:
            return array("q"), array("q"), array("q"), array("d")
        log_end, lag, seconds = columns.log_end[:], columns.lag[:], columns.lag_seconds[:]
        times = self.times[len(self.times) - len(lag) :]
        return times, log_end, lag, seconds


def _log_end_total(group: GroupSnapshot) -> int:
    """Sum of the known log ends (-1 is unknown): sum + count in C, no Python loop."""
    total = 0
    for rows in group.topics:
        ends = rows.log_end
        total += sum(ends) + ends.count(-1)
    if group.share is not None:
        # a share group's log ends are its share partitions' (it commits no offsets): without
        # them its chart plotted consumed positions of 0 - lag, below zero
        total += sum(row.log_end for row in group.share.partitions if row.log_end >= 0)
    return total


class ConsoleHistory:
    def __init__(
        self,
        recent: int = DEFAULT_RECENT,
        buckets: int = DEFAULT_BUCKETS,
        span_ms: int = DEFAULT_SPAN_MS,
        min_step_ms: int = DEFAULT_MIN_STEP_MS,
    ) -> None:
        if recent < 2 or buckets < 2:
            raise ValueError(
                f"need at least 2 recent points and 2 buckets, got {recent}, {buckets}"
            )
        self.span_ms = span_ms
        self.bucket_ms = max(1, span_ms // buckets)
        self.min_step_ms = min_step_ms
        slack = max(1, recent // 4)
        self._recent = _Tier(recent, slack)
        self._hourly = _Tier(buckets + 1, max(1, buckets // 4))
        self._seq = 0

    # -- writer (main loop) ----------------------------------------------------------------

    def record(self, snapshot: Snapshot) -> bool:
        """Add a point per group of a ready snapshot; False when skipped (not ready, too soon)."""
        if not snapshot.ready:
            return False
        now = snapshot.time_ms
        recent = self._recent.times
        if recent and now - recent[-1] < self.min_step_ms:
            return False
        present: dict[str, Point] = {
            group.view.group_id: (
                _log_end_total(group),
                group.total_lag,
                round(group.max_lag_seconds, 1),
            )
            for group in snapshot.groups
        }
        hourly = self._hourly.times
        new_bucket = not hourly or now // self.bucket_ms != hourly[-1] // self.bucket_ms
        self._seq += 1  # odd: readers retry
        try:
            self._recent.append(now, present)
            if new_bucket:
                self._hourly.append(now, present)
        finally:
            self._seq += 1
        return True

    # -- readers (HTTP threads) ------------------------------------------------------------

    def _old_range(self) -> tuple[int, int]:
        """(skip, stop): the hourly axis points to show, [skip, stop), are those before the
        first recent point and within the span of the newest one."""
        hourly, recent = self._hourly.times, self._recent.times
        if not recent:
            return 0, 0
        first, limit = recent[0], recent[-1] - self.span_ms
        stop = 0
        while stop < len(hourly) and hourly[stop] < first:
            stop += 1
        skip = 0
        while skip < stop and hourly[skip] < limit:
            skip += 1
        return skip, stop

    def _older(self, group_id: str, skip: int, stop: int) -> tuple[int, int] | None:
        """The slice of the group's hourly columns that falls in [skip, stop) of the axis."""
        columns = self._hourly.groups.get(group_id)
        if columns is None:
            return None
        lacking = len(self._hourly.times) - len(columns.lag)
        return max(skip, lacking) - lacking, max(0, stop - lacking)

    def series(self, group_id: str) -> GroupSeries | None:
        """The group's points, or None when it has none (unknown, or not sampled yet)."""
        for _ in range(_READ_ATTEMPTS):
            before = self._seq
            if before & 1:
                time.sleep(_WRITER_BUSY_S)
                continue
            times, log_end, lag, seconds = self._recent.read(group_id)
            if len(times) == len(self._recent.times):  # the group was there all along
                skip, stop = self._old_range()
                older = self._older(group_id, skip, stop)
                if older is not None and older[1] > older[0]:
                    a, b = older
                    old = self._hourly.read(group_id)
                    times = old[0][a:b] + times
                    log_end, lag, seconds = (
                        old[1][a:b] + log_end,
                        old[2][a:b] + lag,
                        old[3][a:b] + seconds,
                    )
            if self._seq != before:
                continue
            if not len(times):
                return None
            return GroupSeries(tuple(times), tuple(log_end), tuple(lag), tuple(seconds))
        return None

    def lag_seconds_all(
        self, only: Collection[str] | None = None
    ) -> tuple[tuple[int, ...], dict[str, list[float]]]:
        """(time axis, group -> lag seconds aligned to the tail of it) for every group, or
        for the groups in `only` that have a history. The axis is the hourly points before
        the first recent one, then the recent ones."""
        for _ in range(_READ_ATTEMPTS):
            before = self._seq
            if before & 1:
                time.sleep(_WRITER_BUSY_S)
                continue
            recent, hourly = self._recent, self._hourly
            skip, stop = self._old_range()
            axis = tuple(hourly.times[skip:stop]) + tuple(recent.times)
            full = len(recent.times)
            groups: dict[str, list[float]] = {}
            for group_id in list(recent.groups) if only is None else only:
                columns = recent.groups.get(group_id)
                if columns is None:
                    continue
                values = columns.lag_seconds.tolist()
                if len(values) == full:
                    older = self._older(group_id, skip, stop)
                    kept = hourly.groups.get(group_id)
                    if older is not None and kept is not None and older[1] > older[0]:
                        values = kept.lag_seconds[older[0] : older[1]].tolist() + values
                groups[group_id] = values
            if self._seq == before:
                return axis, groups
        return (), {}

    @property
    def version(self) -> int:
        """Changes whenever a point was added: readers cache what they derive by it."""
        return self._seq

    def __len__(self) -> int:
        """Points on the time axis a full series has."""
        skip, stop = self._old_range()
        return stop - skip + len(self._recent.times)


def finite(value: float) -> float | None:
    """JSON has no NaN: unknown lag seconds become null (rounded to ms otherwise)."""
    return round(value, 3) if math.isfinite(value) else None
