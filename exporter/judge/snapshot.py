"""Immutable snapshots of lag and status, computed in the background.

A scrape or an API call only reads the latest `Snapshot`; building one is the only place lag,
lag seconds and status are computed. Per (group, topic) the rows are columnar (arrays), so a
snapshot of a million partitions stays small.
"""

from __future__ import annotations

import logging
import math
import re
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import compress
from pathlib import Path
from typing import Any, Final

from offsetwatch.decoder.codec import built_from, in_use
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.judge.diagnosis import (
    DEFAULT_DIAGNOSIS_CONFIG,
    Cause,
    Diagnosis,
    DiagnosisConfig,
    catch_up,
    diagnose,
    ok_diagnosis,
)
from offsetwatch.exporter.judge.group_views import GroupView, GroupViews
from offsetwatch.exporter.judge.share_snapshot import (
    ShareGroupSnapshot,
    ShareStatusConfig,
    share_group,
)
from offsetwatch.exporter.judge.status import (
    PartitionWindow,
    Status,
    StatusConfig,
    evaluate_group,
    evaluate_partition,
)
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import NEVER, GroupState, OffsetState, PartitionTable
from offsetwatch.exporter.state.share_state import SharePartition, ShareStateStore
from offsetwatch.exporter.stats import Freshness

UNKNOWN: Final = -1
#: the diagnosis of a group nothing is known about (OK, no rebalance seen)
NO_DIAGNOSIS: Final = ok_diagnosis(None, 0.0, False)

log = logging.getLogger(__name__)


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
    #: why the group is not OK, who to look at, its rebalances (exporter/judge/diagnosis.py)
    diagnosis: Diagnosis = NO_DIAGNOSIS
    #: rebalances, member joins and member leaves seen (exporter/state/diagnosis_history.py)
    rebalances_total: int = 0
    members_joined_total: int = 0
    members_left_total: int = 0
    #: share groups (KIP-932): each share partition's state, lag and status from
    #: __share_group_state (exporter/judge/share_snapshot.py); None for other groups
    share: ShareGroupSnapshot | None = None


@dataclass(frozen=True, slots=True)
class ShareStats:
    """What the snapshot says about `__share_group_state` itself (self-metrics)."""

    #: records applied by kind (share_snapshot, share_update, tombstone, unknown)
    applied: tuple[tuple[str, int], ...] = ()
    #: bad input by reason (exporter/state/share_state.py), undecodable records included
    errors: tuple[tuple[str, int], ...] = ()
    #: exported share partitions whose topic id has no known name (shown as the id)
    unnamed_partitions: int = 0
    #: share partitions of groups __consumer_offsets does not know (deleted groups)
    orphan_partitions: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    time_ms: int
    #: lag and status are only meaningful once the first pass over __consumer_offsets is done
    ready: bool
    groups: tuple[GroupSnapshot, ...]
    tracked_partitions: int
    #: classic consumer-protocol assignments that could not be decoded (since start)
    assignment_decode_errors: int = 0
    #: diagnoses that failed (a bug: the group gets cause `unknown` instead)
    diagnosis_errors: int = 0
    share_stats: ShareStats = ShareStats()
    #: how fresh each `__consumer_offsets` partition's state was when this was built
    freshness: Freshness = Freshness()
    #: the same for each `__share_group_state` partition (the share groups' state)
    share_freshness: Freshness = Freshness()

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


def _share_state_unknown(snapshot: GroupSnapshot, grant: str) -> GroupSnapshot:
    """A share group whose `__share_group_state` the broker refuses to the exporter: ERR,
    cause not_authorized, with the grant; its queue's lag is unknown, not 0 (no `share`)."""
    reason = (
        f"the exporter may not read {SHARE_STATE_TOPIC}, where the share group's state is "
        f"(its start offsets, in-flight records and lag are unknown); grant it: {grant}"
    )
    diagnosis = Diagnosis(
        Status.ERR,
        Cause.NOT_AUTHORIZED,
        reason,
        (),
        None,
        False,
        snapshot.diagnosis.rebalances,
    )
    return replace(snapshot, status=Status.ERR, diagnosis=diagnosis)


def _share_stats(
    state: OffsetState,
    share: ShareStateStore | None,
    share_groups: dict[str, list[tuple[str, int, SharePartition]]],
    share_errors: dict[str, int] | None,
    unnamed: int,
    owned: tuple[frozenset[int], int] | None = None,
) -> ShareStats:
    """`owned`: a fleet replica's `__consumer_offsets` partitions and their count; the share
    groups of another replica's partitions are no orphans, only not this replica's."""
    errors = dict(share.errors) if share is not None else {}
    for reason, n in (share_errors or {}).items():
        errors[reason] = errors.get(reason, 0) + n
    return ShareStats(
        applied=() if share is None else tuple(sorted(share.applied.items())),
        errors=tuple(sorted(errors.items())),
        unnamed_partitions=unnamed,
        orphan_partitions=sum(
            len(p)
            for g, p in share_groups.items()
            if g not in state.groups and (owned is None or partition_for(g, owned[1]) in owned[0])
        ),
    )


def _allowed(name: str, allow: re.Pattern[str] | None, deny: re.Pattern[str] | None) -> bool:
    if allow is not None and not allow.search(name):
        return False
    return not (deny is not None and deny.search(name))


_BUILT: Final = built_from(
    "offsetwatch.exporter.judge._snapshot_speedups",
    Path(__file__).with_name("_snapshot_speedups.c"),
)


def snapshot_accelerator() -> tuple[Any, str]:
    """(exporter.judge._snapshot_speedups or None, why it is not used)."""
    return in_use(_BUILT)


def _accelerated_loop() -> Any:
    module, _why = snapshot_accelerator()
    return None if module is None else module.partition_loop


@dataclass(slots=True)
class SnapshotBuilder:
    status_config: StatusConfig = field(default_factory=StatusConfig)
    filters: Filters = field(default_factory=Filters)
    views: GroupViews = field(default_factory=GroupViews)
    diagnosis_config: DiagnosisConfig = DEFAULT_DIAGNOSIS_CONFIG
    diagnosis_errors: int = 0
    share_config: ShareStatusConfig | None = None
    #: topics the broker refuses to describe -> the grant to make (as of the last build)
    denied_topics: Mapping[str, str] = field(default_factory=dict)
    #: the grant of Read on `__share_group_state` while the broker refuses it (as of the last
    #: build): a share group's state is then unknown, never "no share partitions, lag 0"
    share_state_refused: str | None = None
    #: a fleet replica's `__consumer_offsets` partitions and their count (None alone), as of
    #: the last build
    owned: tuple[frozenset[int], int] | None = None
    #: the per-partition loop in C (exporter/judge/_snapshot_speedups.c); None: `_partition_loop`
    accelerated_loop: Any = field(default_factory=_accelerated_loop, repr=False, compare=False)

    def build(
        self,
        state: OffsetState,
        histories: dict[tuple[str, int], LogEndHistory],
        now_ms: int,
        ready: bool,
        share: ShareStateStore | None = None,
        share_errors: dict[str, int] | None = None,
        topic_names: dict[str, str] | None = None,
        denied_topics: Mapping[str, str] | None = None,
        share_state_refused: str | None = None,
        catching_up: tuple[frozenset[int], int] | None = None,
        owned: tuple[frozenset[int], int] | None = None,
    ) -> Snapshot:
        """`catching_up`: (`__consumer_offsets` partitions being read from their start, the
        partition count) of a fleet replica that just gained them: their groups are left out
        until read to their end, never served half read."""
        groups = []
        hidden, count = catching_up if catching_up is not None else (frozenset(), 0)
        if denied_topics is not None:
            self.denied_topics = denied_topics
        self.share_state_refused = share_state_refused
        self.owned = owned
        tracked = 0
        window_start_ms = state.window_clock.window_ms
        share_groups = {} if share is None else share.groups()
        unnamed = 0
        if topic_names is not None:
            self.views.topic_names = topic_names
        for group_id, group in list(state.groups.items()):
            if not self.filters.group_ok(group_id):
                continue
            if hidden and partition_for(group_id, count) in hidden:
                continue
            snapshot = self._group(group, histories, now_ms, window_start_ms)
            partitions = share_groups.get(group_id)
            if partitions is not None and share is not None:
                snapshot = self._share(
                    snapshot, group, partitions, histories, now_ms, share, topic_names
                )
                assert snapshot.share is not None
                tracked += len(snapshot.share.partitions)
                unnamed += sum(1 for row in snapshot.share.partitions if not row.named)
            elif share_state_refused is not None and snapshot.view.kind == "SHARE":
                snapshot = _share_state_unknown(snapshot, share_state_refused)
            tracked += sum(len(t) for t in snapshot.topics)
            groups.append(snapshot)
        groups.sort(key=lambda g: g.view.group_id)
        self.views.retain(state.groups)
        return Snapshot(
            now_ms,
            ready,
            tuple(groups),
            tracked,
            self.views.assignment_decode_errors,
            self.diagnosis_errors,
            _share_stats(state, share, share_groups, share_errors, unnamed, owned),
        )

    def catching_up(
        self,
        state: OffsetState,
        now_ms: int,
        share: ShareStateStore | None = None,
        share_errors: dict[str, int] | None = None,
    ) -> Snapshot:
        """The snapshot served before the first pass is done: counters only, no groups.

        Rows, lag and status of a state still replaying history were built every interval and
        thrown away (nothing group-level is exported before ready: /metrics leaves them out,
        the console history skips them); that was over half of a catch-up's CPU. The API and
        the console say "not ready" with no groups until the first ready build.
        """
        share_groups = {} if share is None else share.groups()
        return Snapshot(
            now_ms,
            False,
            (),
            0,
            self.views.assignment_decode_errors,
            self.diagnosis_errors,
            _share_stats(state, share, share_groups, share_errors, 0, self.owned),
        )

    def _share(
        self,
        snapshot: GroupSnapshot,
        group: GroupState,
        partitions: list[tuple[str, int, SharePartition]],
        histories: dict[tuple[str, int], LogEndHistory],
        now_ms: int,
        share: ShareStateStore,
        topic_names: dict[str, str] | None,
    ) -> GroupSnapshot:
        """A share group's snapshot: its status, lag and diagnosis are the queue's."""
        cfg = self.share_config or ShareStatusConfig(window_ms=self.status_config.window_ms)
        queue = share_group(
            group,
            snapshot.view,
            partitions,
            histories,
            now_ms,
            share.window_clock.window_ms,
            cfg,
            topic_names,
            self.filters.topic_ok,
        )
        history = group.history
        rebalances = () if history is None else snapshot.diagnosis.rebalances
        diagnosis = queue.diagnosis
        if rebalances:
            diagnosis = Diagnosis(
                diagnosis.status,
                diagnosis.cause,
                diagnosis.reason,
                diagnosis.suspects,
                diagnosis.catch_up_seconds,
                diagnosis.falling_behind,
                rebalances,
            )
        return GroupSnapshot(
            view=snapshot.view,
            topics=snapshot.topics,
            status=max(snapshot.status, queue.status),
            commits_total=snapshot.commits_total,
            last_commit_ts=snapshot.last_commit_ts,
            commit_rate=snapshot.commit_rate,
            total_lag=snapshot.total_lag + queue.total_lag,
            max_lag_seconds=max(snapshot.max_lag_seconds, queue.max_lag_seconds),
            diagnosis=diagnosis,
            rebalances_total=snapshot.rebalances_total,
            members_joined_total=snapshot.members_joined_total,
            members_left_total=snapshot.members_left_total,
            share=queue,
        )

    def _group(
        self,
        group: GroupState,
        histories: dict[tuple[str, int], LogEndHistory],
        now_ms: int,
        window_start_ms: int,
    ) -> GroupSnapshot:
        view = self.views.view(group)
        live = view.state != "EMPTY"
        topics = []
        total_lag = 0
        max_lag_s = 0.0
        last_commit = NEVER
        commit_rate = 0.0
        drain_per_ms = 0.0
        drain_known = False
        statuses: list[Status] = []
        topic_ok = self.filters.topic_ok
        for topic, table in sorted(group.topics.items()):
            if not topic_ok(topic):
                continue
            rows, rate, drain = self._topic(topic, table, histories, now_ms, window_start_ms, live)
            topics.append(rows)
            commit_rate += rate
            if drain is not None:
                drain_per_ms += drain
                drain_known = True
            if not len(rows):
                continue
            total_lag += sum([lag for lag in rows.lag if lag > 0])
            # NaN (unknown) is never greater: no isnan() needed
            for seconds in rows.lag_seconds:
                if seconds > max_lag_s:
                    max_lag_s = seconds
            newest = max(rows.commit_ts)
            if newest > last_commit:
                last_commit = newest
            statuses += map(_STATUS_OF.__getitem__, rows.status)
        status = evaluate_group(statuses)
        history = group.history
        return GroupSnapshot(
            view=view,
            topics=tuple(topics),
            status=status,
            commits_total=group.commits_total,
            last_commit_ts=last_commit,
            commit_rate=commit_rate,
            total_lag=total_lag,
            max_lag_seconds=max_lag_s,
            diagnosis=self._diagnosis(
                group,
                view,
                topics,
                status,
                total_lag,
                drain_per_ms if drain_known else None,
                now_ms,
            ),
            rebalances_total=0 if history is None else history.rebalances_total,
            members_joined_total=0 if history is None else history.joined_total,
            members_left_total=0 if history is None else history.left_total,
        )

    def _diagnosis(
        self,
        group: GroupState,
        view: GroupView,
        topics: list[TopicRows],
        status: Status,
        total_lag: int,
        drain_per_ms: float | None,
        now_ms: int,
    ) -> Diagnosis:
        """The group's diagnosis; only a group that is not OK walks its partitions again."""
        cfg = self.diagnosis_config
        catch_up_s, falling_behind = catch_up(total_lag, drain_per_ms, status)
        if status is Status.OK:
            return ok_diagnosis(group.history, catch_up_s, falling_behind, cfg)
        try:
            bad = {}
            lags = {}
            for rows in topics:
                topic = rows.topic
                for p, value, lag in zip(rows.partitions, rows.status, rows.lag, strict=True):
                    if value:
                        bad[(topic, p)] = value
                    if lag >= 0:
                        lags[(topic, p)] = lag
            return diagnose(
                status,
                view,
                bad,
                group.topics,
                lags,
                group.history,
                now_ms,
                self.status_config.window_ms,
                catch_up_s,
                falling_behind,
                cfg,
                self.denied_topics,
            )
        except Exception as error:  # a bug here must not stop the snapshots (nor the daemon)
            if not self.diagnosis_errors:
                log.exception("diagnosis of group %r failed", group.group_id)
            self.diagnosis_errors += 1
            return Diagnosis(
                status,
                Cause.UNKNOWN,
                f"the diagnosis failed ({type(error).__name__}); see the exporter's log",
                (),
                catch_up_s,
                falling_behind,
                (),
            )

    def _topic(
        self,
        topic: str,
        table: PartitionTable,
        histories: dict[tuple[str, int], LogEndHistory],
        now_ms: int,
        window_start_ms: int,
        live: bool,
    ) -> tuple[TopicRows, float, float | None]:
        """The rows of one (group, topic), its commits per second over the window, and how
        fast its lag shrinks (per ms; None when no start-of-window lag is known)."""
        cfg = self.status_config
        present = table.present
        # slots past the highest committed partition are the table's spare capacity
        size = present.rfind(1) + 1
        committed_all = table.committed
        commit_ts_all = table.commit_ts
        window_offset = table.window_offset
        first_commit_ts = table.first_commit_ts
        window_commits = table.window_commits
        next_commits = table.next_commits
        bucket_commits = table.bucket_commits
        rewind_ts = table.rewind_ts
        # Columns are gathered in C: slices when every slot is committed (the usual case),
        # else one comprehension per column over the committed partition numbers.
        if present.count(1) == size:
            numbers: Sequence[int] = range(size)
            partitions = array("q", numbers)
            committed = committed_all[:size]
            epochs = table.leader_epoch[:size]
            commit_ts = commit_ts_all[:size]
            metadata = ("",) * size if table.metadata is None else tuple(table.metadata[:size])
        else:
            numbers = list(compress(range(size), present))
            partitions = array("q", numbers)
            committed = array("q", [committed_all[p] for p in numbers])
            epoch_all = table.leader_epoch
            epochs = array("i", [epoch_all[p] for p in numbers])
            commit_ts = array("q", [commit_ts_all[p] for p in numbers])
            metadata_all = table.metadata
            metadata = (
                ("",) * len(numbers)
                if metadata_all is None
                else tuple([metadata_all[p] for p in numbers])
            )
        n = len(numbers)
        log_end = array("q", _UNKNOWN_Q * n)
        lags = array("q", _UNKNOWN_Q * n)
        lag_s = array("d", _NAN_D * n)
        status = bytearray(n)
        sums = None
        fast = self.accelerated_loop
        if fast is not None and type(histories) is dict:
            sums = fast(
                topic,
                histories,
                LogEndHistory,
                now_ms,
                window_start_ms,
                live,
                (
                    cfg.window_ms,
                    cfg.stall_min_commits,
                    cfg.marker_tolerance,
                    cfg.warn_min_growth_ratio,
                ),
                partitions,
                committed,
                commit_ts,
                window_offset,
                first_commit_ts,
                window_commits,
                next_commits,
                bucket_commits,
                rewind_ts,
                log_end,
                lags,
                lag_s,
                status,
            )
        if sums is None:
            sums = _partition_loop(
                topic,
                table,
                numbers,
                committed,
                commit_ts,
                histories,
                now_ms,
                window_start_ms,
                live,
                cfg,
                log_end,
                lags,
                lag_s,
                status,
            )
        commits_per_ms, shared_commits, drain_per_ms, shared_drain, drain_known = sums
        min_span_ms = cfg.window_ms
        rows = TopicRows(
            topic,
            partitions,
            committed,
            epochs,
            commit_ts,
            log_end,
            lags,
            lag_s,
            bytes(status),
            metadata,
        )
        commits_per_ms += shared_commits / max(now_ms - window_start_ms, min_span_ms)
        if shared_drain:
            drain_per_ms += shared_drain / max(now_ms - window_start_ms, 1)
        return rows, commits_per_ms * 1000, drain_per_ms if drain_known else None


def _partition_loop(
    topic: str,
    table: PartitionTable,
    numbers: Sequence[int],
    committed: array[int],
    commit_ts: array[int],
    histories: dict[tuple[str, int], LogEndHistory],
    now_ms: int,
    window_start_ms: int,
    live: bool,
    cfg: StatusConfig,
    log_end: array[int],
    lags: array[int],
    lag_s: array[float],
    status: bytearray,
) -> tuple[float, int, float, int, bool]:
    """The per-partition loop of `SnapshotBuilder._topic`, the reference of the C one
    (exporter/judge/_snapshot_speedups.c): fills log_end, lags, lag_s and status (row i is
    partition numbers[i]) and returns (commits_per_ms, shared_commits, drain_per_ms,
    shared_drain, drain_known) of the partitions not judged from the shared window start,
    and the sums of those that are."""
    window_offset = table.window_offset
    first_commit_ts = table.first_commit_ts
    window_commits = table.window_commits
    next_commits = table.next_commits
    bucket_commits = table.bucket_commits
    rewind_ts = table.rewind_ts
    evaluate = evaluate_partition
    get_history = histories.get
    # Commits per ms over the evidence (one to one and a half windows); a partition first
    # committed a moment ago is averaged over a whole window, not a moment. Partitions
    # judged from the shared window start share one span: added up, divided once.
    min_span_ms = cfg.window_ms
    shared_commits = 0
    commits_per_ms = 0.0
    # How fast the lag shrinks: lag at the evidence start minus lag now, per ms of the
    # span; shared spans are added up and divided once, as the commits are.
    drain_per_ms = 0.0
    shared_drain = 0
    drain_known = False
    for i, p in enumerate(numbers):
        offset = committed[i]
        rewind = rewind_ts[p]
        commits = window_commits[p] + next_commits[p] + bucket_commits[p]
        # a partition first committed after the window boundary is judged from then
        start_ms = first_commit_ts[p]
        shared = start_ms <= window_start_ms
        if shared:
            start_ms = window_start_ms
            shared_commits += commits
        else:
            commits_per_ms += commits / max(now_ms - start_ms, min_span_ms)
        history = get_history((topic, p))
        latest = history.latest() if history is not None else None
        if history is None or latest is None:
            window = _window(
                offset,
                commit_ts[i],
                window_offset[p],
                start_ms,
                commits,
                None if rewind == NEVER else rewind,
                None,
                None,
                None,
                live,
                None,
            )
            status[i] = evaluate(window, now_ms, cfg)
            continue
        sampled_at, end = latest
        log_end[i] = end
        lag = end - offset
        if lag < 0:
            lag = 0
        lags[i] = lag
        lag_s[i] = history.lag_s(offset, now_ms)
        # 0, not unknown, when the evidence predates the history but the first sample
        # shows nothing waiting (LogEndHistory.lag_at): else a consumer stalled from its
        # first commit read STALL, then OK, then STALL as the window start moved
        start_lag = history.lag_at(start_ms, window_offset[p])
        if start_lag is not None:
            drain_known = True
            if shared:
                shared_drain += start_lag - lag
            else:
                drain_per_ms += (start_lag - lag) / max(now_ms - start_ms, 1)
        window = _window(
            offset,
            commit_ts[i],
            window_offset[p],
            start_ms,
            commits,
            None if rewind == NEVER else rewind,
            end,
            start_lag,
            history.unchanged_since_ms(),
            live,
            sampled_at,
        )
        status[i] = evaluate(window, now_ms, cfg)
    return commits_per_ms, shared_commits, drain_per_ms, shared_drain, drain_known


#: Status by its value (the status column holds values)
_STATUS_OF: Final = {status.value: status for status in Status}
#: an UNKNOWN int64 and a NaN double, as array items, to build columns with one allocation
_UNKNOWN_Q: Final = array("q", [UNKNOWN])
_NAN_D: Final = array("d", [math.nan])


class _WindowSlots:
    """`PartitionWindow`'s slots without its frozen `__setattr__`.

    A frozen dataclass sets each field through `object.__setattr__` in `__init__` (~2 us for
    eleven fields); a snapshot builds one window per partition. `_window` fills these plain
    slots and then switches the object's class: the result is the same `PartitionWindow`
    (equal, hashable, frozen from then on) for about a tenth of the cost.
    """

    __slots__ = PartitionWindow.__slots__


#: the fields `_window` sets, in PartitionWindow's order; anything else means "use __init__"
_WINDOW_FIELDS: Final = (
    "committed_offset",
    "commit_time_ms",
    "window_first_offset",
    "window_first_commit_time_ms",
    "commits_in_window",
    "last_rewind_time_ms",
    "log_end_offset",
    "lag_at_window_start",
    "log_end_unchanged_since_ms",
    "group_is_live",
    "log_end_time_ms",
)


def _fast_window(
    committed_offset: int,
    commit_time_ms: int,
    window_first_offset: int,
    window_first_commit_time_ms: int,
    commits_in_window: int,
    last_rewind_time_ms: int | None,
    log_end_offset: int | None,
    lag_at_window_start: int | None,
    log_end_unchanged_since_ms: int | None,
    group_is_live: bool,
    log_end_time_ms: int | None,
) -> PartitionWindow:
    w: Any = _new(_WindowSlots)
    w.committed_offset = committed_offset
    w.commit_time_ms = commit_time_ms
    w.window_first_offset = window_first_offset
    w.window_first_commit_time_ms = window_first_commit_time_ms
    w.commits_in_window = commits_in_window
    w.last_rewind_time_ms = last_rewind_time_ms
    w.log_end_offset = log_end_offset
    w.lag_at_window_start = lag_at_window_start
    w.log_end_unchanged_since_ms = log_end_unchanged_since_ms
    w.group_is_live = group_is_live
    w.log_end_time_ms = log_end_time_ms
    w.__class__ = PartitionWindow
    window: PartitionWindow = w
    return window


_new: Final[Any] = object.__new__
#: positional PartitionWindow(...) in field order; the fast path while the fields are the same
_window: Final[Callable[..., PartitionWindow]] = (
    _fast_window
    if PartitionWindow.__slots__ == _WINDOW_FIELDS and not hasattr(PartitionWindow, "__post_init__")
    else PartitionWindow
)
