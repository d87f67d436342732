"""Immutable snapshots of lag and status, computed in the background.

A scrape or an API call only reads the latest `Snapshot`; building one is the only place lag,
lag seconds and status are computed. Per (group, topic) the rows are columnar (arrays), so a
snapshot of a million partitions stays small.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass, field
from typing import Final

from exporter.group_views import GroupView, GroupViews
from exporter.lag import LogEndHistory, lag_seconds
from exporter.state import NEVER, GroupState, OffsetState, PartitionTable
from exporter.status import (
    PartitionWindow,
    Status,
    StatusConfig,
    evaluate_group,
    evaluate_partition,
)

UNKNOWN: Final = -1


@dataclass(frozen=True, slots=True)
class TopicRows:
    """One (group, topic): parallel columns, one entry per committed partition."""

    topic: str
    partitions: array[int]
    committed: array[int]
    leader_epoch: array[int]
    commit_ts: array[int]
    #: UNKNOWN (-1) when the log end was not sampled (yet)
    log_end: array[int]
    lag: array[int]
    #: NaN when unknown
    lag_seconds: array[float]
    #: Status values (see exporter.status.Status)
    status: bytes
    metadata: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    view: GroupView
    topics: tuple[TopicRows, ...]
    status: Status
    commits_total: int
    last_commit_ts: int
    commit_rate: float
    total_lag: int
    max_lag_seconds: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    time_ms: int
    #: lag and status are only meaningful once the first pass over __consumer_offsets is done
    ready: bool
    groups: tuple[GroupSnapshot, ...]
    tracked_partitions: int

    def group(self, group_id: str) -> GroupSnapshot | None:
        for group in self.groups:
            if group.view.group_id == group_id:
                return group
        return None


EMPTY_SNAPSHOT: Final = Snapshot(time_ms=0, ready=False, groups=(), tracked_partitions=0)


@dataclass(frozen=True, slots=True)
class Filters:
    """Cardinality controls: which groups and topics are exported at all."""

    group_allow: re.Pattern[str] | None = None
    group_deny: re.Pattern[str] | None = None
    topic_allow: re.Pattern[str] | None = None
    topic_deny: re.Pattern[str] | None = None

    def group_ok(self, group_id: str) -> bool:
        return _allowed(group_id, self.group_allow, self.group_deny)

    def topic_ok(self, topic: str) -> bool:
        return _allowed(topic, self.topic_allow, self.topic_deny)


def _allowed(name: str, allow: re.Pattern[str] | None, deny: re.Pattern[str] | None) -> bool:
    if allow is not None and not allow.search(name):
        return False
    return not (deny is not None and deny.search(name))


@dataclass(slots=True)
class SnapshotBuilder:
    status_config: StatusConfig = field(default_factory=StatusConfig)
    filters: Filters = field(default_factory=Filters)
    views: GroupViews = field(default_factory=GroupViews)

    def build(
        self,
        state: OffsetState,
        histories: dict[tuple[str, int], LogEndHistory],
        now_ms: int,
        ready: bool,
    ) -> Snapshot:
        groups = []
        tracked = 0
        for group_id, group in list(state.groups.items()):
            if not self.filters.group_ok(group_id):
                continue
            snapshot = self._group(group, histories, now_ms)
            tracked += sum(len(t) for t in snapshot.topics)
            groups.append(snapshot)
        groups.sort(key=lambda g: g.view.group_id)
        return Snapshot(now_ms, ready, tuple(groups), tracked)

    def _group(
        self, group: GroupState, histories: dict[tuple[str, int], LogEndHistory], now_ms: int
    ) -> GroupSnapshot:
        view = self.views.view(group)
        live = view.state != "EMPTY"
        topics = []
        total_lag = 0
        max_lag_s = 0.0
        last_commit = NEVER
        window_commits = 0
        statuses: list[Status] = []
        for topic, table in sorted(group.topics.items()):
            if not self.filters.topic_ok(topic):
                continue
            rows = self._topic(topic, table, histories, now_ms, live)
            topics.append(rows)
            for i in range(len(rows)):
                if rows.lag[i] > 0:
                    total_lag += rows.lag[i]
                seconds = rows.lag_seconds[i]
                if not math.isnan(seconds) and seconds > max_lag_s:
                    max_lag_s = seconds
                if rows.commit_ts[i] > last_commit:
                    last_commit = rows.commit_ts[i]
                statuses.append(Status(rows.status[i]))
            for p in rows.partitions:
                window_commits += table.window_commits[p]
        window_s = self.status_config.window_ms / 1000
        return GroupSnapshot(
            view=view,
            topics=tuple(topics),
            status=evaluate_group(statuses),
            commits_total=group.commits_total,
            last_commit_ts=last_commit,
            commit_rate=window_commits / window_s,
            total_lag=total_lag,
            max_lag_seconds=max_lag_s,
        )

    def _topic(
        self,
        topic: str,
        table: PartitionTable,
        histories: dict[tuple[str, int], LogEndHistory],
        now_ms: int,
        live: bool,
    ) -> TopicRows:
        cfg = self.status_config
        partitions = array("q")
        committed = array("q")
        epochs = array("i")
        commit_ts = array("q")
        log_end = array("q")
        lags = array("q")
        lag_s = array("d")
        status = bytearray()
        metadata = []
        for p in table.partitions():
            offset = table.committed[p]
            partitions.append(p)
            committed.append(offset)
            epochs.append(table.leader_epoch[p])
            commit_ts.append(table.commit_ts[p])
            metadata.append(table.metadata_of(p))
            history = histories.get((topic, p))
            latest = history.latest() if history is not None else None
            if history is None or latest is None:
                log_end.append(UNKNOWN)
                lags.append(UNKNOWN)
                lag_s.append(math.nan)
                window = _window(table, p, None, None, None, None, live)
                status.append(evaluate_partition(window, now_ms, cfg))
                continue
            sampled_at, end = latest
            lag = max(0, end - offset)
            log_end.append(end)
            lags.append(lag)
            lag_s.append(lag_seconds(history, offset, now_ms).seconds)
            start_end = history.log_end_at(table.window_ts[p])
            start_lag = None if start_end is None else max(0, start_end - table.window_offset[p])
            window = _window(
                table, p, end, sampled_at, start_lag, history.unchanged_since_ms(), live
            )
            status.append(evaluate_partition(window, now_ms, cfg))
        return TopicRows(
            topic,
            partitions,
            committed,
            epochs,
            commit_ts,
            log_end,
            lags,
            lag_s,
            bytes(status),
            tuple(metadata),
        )


def _window(
    table: PartitionTable,
    p: int,
    log_end: int | None,
    sampled_at: int | None,
    start_lag: int | None,
    unchanged_since: int | None,
    live: bool,
) -> PartitionWindow:
    rewind = table.rewind_ts[p]
    return PartitionWindow(
        committed_offset=table.committed[p],
        commit_time_ms=table.commit_ts[p],
        window_first_offset=table.window_offset[p],
        window_first_commit_time_ms=table.window_ts[p],
        commits_in_window=table.window_commits[p],
        last_rewind_time_ms=None if rewind == NEVER else rewind,
        log_end_offset=log_end,
        lag_at_window_start=start_lag,
        log_end_unchanged_since_ms=unchanged_since,
        group_is_live=live,
        log_end_time_ms=sampled_at,
    )
