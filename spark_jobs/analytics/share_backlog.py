"""Episodes of share groups' queues (KIP-932) from the lake's `share_state` and `log_ends`.

Pure Python per share partition (its state records and its topic partition's log-end samples
are few: one row per `__share_group_state` record), run in the executors by
`share_episodes`. On the analytics' tick grid, at each tick T the partition's state is its last
`share_state` row at or before T and the log end its last sample at or before T; the share
lag is KIP-1226's: log end - start offset - records acknowledged or archived past it.

* `share_backlog`: a run of ticks where the lag is above 0 and, against the tick one status
  window (`status.window_ms`) before, either grew ("growing") or the start offset has not
  moved while records waited then too ("stalled"). Starts at the first such tick, ends at the
  first tick that is not (null: open at the end of the data); size: the peak lag. The lag
  a window before is 0, not unknown, when that tick predates the first log-end sample and the
  share lag with that sample's log end is 0 (a log end never goes down), as the exporter
  bounds it (`LogEndHistory.lag_at`).
* `share_poison`: a run of ticks where records past the start offset are archived, or not
  done and delivered `poison_limit` times or more; size: the most such records at once;
  detail lists them: `{"offsets": [{"first_offset", "last_offset", "delivery_count",
  "delivery_state"}]}` (each range with the highest count seen in the episode).

A share partition without log-end samples, or whose topic name is unknown (the lake's log
ends are by name), has no backlog episodes; poison needs no log end.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import functions as F

from offsetwatch.decoder import share_combine as sc
from offsetwatch.spark_jobs.lake_schema import EPISODES_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings

BACKLOG: Final = "share_backlog"
POISON: Final = "share_poison"


@dataclass(frozen=True, slots=True)
class StatePoint:
    """A share partition's state after one record (None: deleted)."""

    ts: int
    state: sc.ShareState | None


@dataclass(frozen=True, slots=True)
class Episode:
    kind: str
    start_ms: int
    end_ms: int | None
    size: float
    unit: str
    detail: str


def _at(times: Sequence[int], ts: int) -> int:
    """Index of the last entry at or before `ts` (-1: none)."""
    return bisect_right(times, ts) - 1


def _ticks(first_ms: int, end_ms: int, tick_ms: int) -> range:
    """The grid from the first tick at or after `first_ms` to the first at or after
    `end_ms` (as the status timeline's end tick: the last data is seen)."""
    return range(-(-first_ms // tick_ms) * tick_ms, -(-end_ms // tick_ms) * tick_ms + 1, tick_ms)


def partition_episodes(
    points: Sequence[StatePoint],
    log_ends: Sequence[tuple[int, int]],
    end_ms: int,
    tick_ms: int,
    window_ms: int,
    poison_limit: int = sc.DEFAULT_POISON_LIMIT,
) -> list[Episode]:
    """The episodes of one share partition: `points` and `log_ends` ((sampled_at_ms,
    log_end_offset)) in time order; ticks up to `end_ms`."""
    if not points:
        return []
    point_times = [p.ts for p in points]
    end_times = [t for t, _ in log_ends]
    ticks = _ticks(points[0].ts, end_ms, tick_ms)
    first_end = log_ends[0][1] if log_ends else None
    lags: list[int | None] = []
    #: the lag at each tick as the start of a later tick's window (`_lag_then`)
    lags_then: list[int | None] = []
    starts: list[int | None] = []
    poison: list[list[sc.Batch]] = []
    for tick in ticks:
        state = points[_at(point_times, tick)].state
        at = _at(end_times, tick)
        lag = None if state is None or at < 0 else sc.share_lag(state, log_ends[at][1])
        lags.append(lag)
        lags_then.append(lag if at >= 0 else _lag_then(state, first_end))
        starts.append(None if state is None else state.start_offset)
        poison.append([] if state is None else sc.poison_batches(state, poison_limit))
    back = window_ms // tick_ms
    out: list[Episode] = []
    backlog_run: list[tuple[int, int, str]] = []  # (tick, lag, cause) of the open run
    poison_run: list[tuple[int, list[sc.Batch]]] = []
    for i, tick in enumerate(ticks):
        cause = _backlog_cause(lags, lags_then, starts, i, back)
        if cause is not None:
            lag = lags[i]
            assert lag is not None
            backlog_run.append((tick, lag, cause))
        elif backlog_run:
            out.append(_backlog(backlog_run, tick, starts[i - len(backlog_run)]))
            backlog_run = []
        if poison[i]:
            poison_run.append((tick, poison[i]))
        elif poison_run:
            out.append(_poison(poison_run, tick))
            poison_run = []
    if backlog_run:
        out.append(_backlog(backlog_run, None, starts[len(ticks) - len(backlog_run)]))
    if poison_run:
        out.append(_poison(poison_run, None))
    return out


def _lag_then(state: sc.ShareState | None, first_end: int | None) -> int | None:
    """The share lag at a tick before the first log-end sample, when bounded: 0 if it is 0
    with the first sample's log end (None: unknown).

    A log end never goes down, so it was at most the first sample's then, and the share lag
    grows with the log end: a queue with nothing waiting at that log end had nothing waiting
    before it either. The exporter bounds a share queue's backlog at its window start the same
    way (exporter/judge/share_snapshot.py, `LogEndHistory.lag_at`). Left unknown, a queue stuck
    since before its topic was first sampled had no backlog episode until the window start
    reached that sample. The first sample starts the history, so no reset (recreated topic)
    lies between.
    """
    if state is None or first_end is None or sc.share_lag(state, first_end) != 0:
        return None
    return 0


def _backlog_cause(
    lags: Sequence[int | None],
    lags_then: Sequence[int | None],
    starts: Sequence[int | None],
    i: int,
    back: int,
) -> str | None:
    if i < back:
        return None
    now, before = lags[i], lags_then[i - back]
    if now is None or before is None or now <= 0:
        return None
    if now > before:
        return "growing"
    if before > 0 and starts[i] == starts[i - back]:
        return "stalled"
    return None


def _backlog(run: list[tuple[int, int, str]], end: int | None, start_offset: int | None) -> Episode:
    causes = sorted({cause for _, _, cause in run})
    detail = {"causes": causes, "start_offset": start_offset}
    peak = float(max(lag for _, lag, _ in run))
    return Episode(BACKLOG, run[0][0], end, peak, "records", _j(detail))


def _poison(run: list[tuple[int, list[sc.Batch]]], end: int | None) -> Episode:
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for _, batches in run:
        for first, last, count, state in batches:
            seen[(first, last)] = max(seen.get((first, last), (0, 0)), (count, state))
    offsets = [
        {"first_offset": f, "last_offset": la, "delivery_count": c, "delivery_state": s}
        for (f, la), (c, s) in sorted(seen.items())
    ]
    size = max(sum(b[1] - b[0] + 1 for b in batches) for _, batches in run)
    return Episode(POISON, run[0][0], end, float(size), "records", _j({"offsets": offsets}))


def _j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# -- Spark ------------------------------------------------------------------------------------


def _state_of(row: Any) -> sc.ShareState | None:
    if row["state_start_offset"] is None:
        return None
    return sc.ShareState(
        start_offset=int(row["state_start_offset"]),
        state_epoch=int(row["state_state_epoch"]),
        leader_epoch=int(row["state_leader_epoch"]),
        snapshot_epoch=int(row["state_snapshot_epoch"]),
        batches=tuple((int(b[0]), int(b[1]), int(b[3]), int(b[2])) for b in row["state_batches"]),
    )


def _partition_rows(
    item: tuple[Any, tuple[Iterable[Any], Iterable[Any]]],
    end_ms: int,
    tick_ms: int,
    window_ms: int,
    poison_limit: int,
) -> Iterator[tuple[Any, ...]]:
    (topic, partition), (states, samples) = item
    log_ends = sorted((int(r["sampled_at_ms"]), int(r["log_end_offset"])) for r in samples)
    by_group: dict[str, list[Any]] = {}
    for row in states:
        by_group.setdefault(row["group"], []).append(row)
    for group, rows in sorted(by_group.items()):
        # late rows carry no state of their own: the partition's state did not change
        rows = [r for r in rows if r["kind"] == "delete" or r["state_start_offset"] is not None]
        rows.sort(key=lambda r: (r["source_partition"], r["source_offset"]))
        points = [StatePoint(int(r["record_ts"]), _state_of(r)) for r in rows]
        points.sort(key=lambda p: p.ts)
        found = partition_episodes(points, log_ends, end_ms, tick_ms, window_ms, poison_limit)
        for e in found:
            yield (e.kind, group, topic, partition, e.start_ms, e.end_ms, e.size, e.unit, e.detail)


def share_episodes(
    share_state: DataFrame,
    log_ends: DataFrame,
    end_ms: int,
    settings: AnalyticsSettings,
    poison_limit: int = sc.DEFAULT_POISON_LIMIT,
) -> DataFrame:
    """EPISODES_SCHEMA rows of every share partition (topic: the name, else the topic id)."""
    keyed_states = share_state.withColumn("topic", F.coalesce("topic", "topic_id")).rdd.map(
        lambda r: ((r["topic"], int(r["partition"])), r)
    )
    keyed_ends = log_ends.select("topic", "partition", "sampled_at_ms", "log_end_offset").rdd.map(
        lambda r: ((r["topic"], int(r["partition"])), r)
    )
    tick_ms, window_ms = settings.tick_ms, settings.status.window_ms

    def rows(item: tuple[Any, tuple[Iterable[Any], Iterable[Any]]]) -> Iterator[tuple[Any, ...]]:
        if not list(item[1][0]):
            return iter(())
        return _partition_rows(item, end_ms, tick_ms, window_ms, poison_limit)

    out = keyed_states.cogroup(keyed_ends).flatMap(rows)
    return share_state.sparkSession.createDataFrame(out, EPISODES_SCHEMA)


__all__ = ["BACKLOG", "POISON", "Episode", "StatePoint", "partition_episodes", "share_episodes"]
