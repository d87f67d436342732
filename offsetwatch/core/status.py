"""Burrow-style consumer status per partition and per group, over a sliding time window.

Pure logic, shared by the exporter and the Spark analytics: the exporter's state store
gathers a `PartitionWindow` per (group, topic, partition) and this module only decides. The
exporter's window slides in half-window steps (exporter/state/offset_state.py): its evidence starts
at a bucket boundary one to one and a half windows ago (or at a younger partition's first commit),
so "for a whole window" holds for the rules.
The rules, their order and the false positives each one avoids are written down in
docs/status-rules.md; keep the two in step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "DEFAULT_STATUS_CONFIG",
    "PartitionWindow",
    "Status",
    "StatusConfig",
    "commit_rate_per_second",
    "evaluate_group",
    "evaluate_partition",
    "seconds_since_last_commit",
]


class Status(IntEnum):
    """Partition/group status, ordered by severity.

    The numeric value is what the Prometheus status gauge exports, so it must never be
    renumbered: 0 OK, 1 WARN, 2 REWIND, 3 STALL, 4 STOP, 5 ERR. A group is its worst partition,
    which is why severity and value share one order.
    """

    OK = 0
    WARN = 1
    REWIND = 2
    STALL = 3
    STOP = 4
    ERR = 5


@dataclass(slots=True, frozen=True)
class PartitionWindow:
    """Everything the rules need about one (group, topic, partition) at evaluation time.

    The window is [now - window_ms, now]; the evidence about commits (`window_first_*`,
    `commits_in_window`, `lag_at_window_start`) covers it from a start at or before
    now - window_ms (the exporter's: one to one and a half windows ago), or from the
    partition's first commit if that is later. Offsets are Kafka offsets (the committed offset
    is the next message the group will read), times are epoch milliseconds.
    """

    committed_offset: int
    #: Time of the last commit for this partition.
    commit_time_ms: int
    #: Offset committed at the start of the evidence (the last commit at or before it).
    window_first_offset: int
    #: When the evidence starts.
    window_first_commit_time_ms: int
    #: Commits since the start of the evidence.
    commits_in_window: int
    #: Last time a commit went backwards (offset reset, seek, re-processing); None if never.
    last_rewind_time_ms: int | None
    #: Latest sampled log end offset; None when unknown (topic deleted / not sampled).
    log_end_offset: int | None
    #: Lag in offsets at the start of the evidence: the log end at that time minus the offset
    #: committed at that time (clamped at 0). None when unknown (history does not reach back
    #: that far, e.g. during the first window after start-up; the exporter gives 0 when the
    #: oldest sample it has is no higher than that offset, see exporter/state/lag.py `lag_at`).
    lag_at_window_start: int | None
    #: First time the current log end was seen, if it was seen at least twice (see
    #: `LogEndHistory.unchanged_since_ms`); None if the latest sample moved it.
    log_end_unchanged_since_ms: int | None
    #: The group has members / an active coordinator state. False for Empty and Dead groups
    #: and for "simple" groups that commit through assign() without ever joining.
    group_is_live: bool
    #: When `log_end_offset` was sampled. Needed to tell a consumer that committed past a stale
    #: sample (normal for a busy partition) from one pointing past a truncated log (ERR).
    #: None means "as of now", i.e. committed > log end is always an error.
    log_end_time_ms: int | None = None

    @property
    def lag(self) -> int | None:
        """Lag in offsets (never negative); None when the log end is unknown."""
        if self.log_end_offset is None:
            return None
        return max(0, self.log_end_offset - self.committed_offset)


@dataclass(slots=True, frozen=True)
class StatusConfig:
    """Tunables of the rules; the defaults match docs/status-rules.md."""

    window_ms: int = 600_000
    #: STALL needs proof the consumer is alive: at least this many commits inside the window.
    stall_min_commits: int = 2
    #: A lag up to this many offsets is treated as "sitting before a transaction marker" when
    #: the log end stopped moving before the last commit. 0 disables the allowance (clusters
    #: without transactional producers).
    marker_tolerance: int = 1
    #: WARN needs the lag to grow by more than this fraction of what the consumer consumed in
    #: the window, so commit-interval and sampling noise on a healthy consumer does not flap.
    warn_min_growth_ratio: float = 0.05

    def __post_init__(self) -> None:
        if self.window_ms <= 0:
            raise ValueError(f"window_ms must be > 0, got {self.window_ms}")
        if self.stall_min_commits < 1:
            raise ValueError(f"stall_min_commits must be >= 1, got {self.stall_min_commits}")
        if self.marker_tolerance < 0:
            raise ValueError(f"marker_tolerance must be >= 0, got {self.marker_tolerance}")
        if self.warn_min_growth_ratio < 0:
            raise ValueError(
                f"warn_min_growth_ratio must be >= 0, got {self.warn_min_growth_ratio}"
            )


DEFAULT_STATUS_CONFIG = StatusConfig()


def _behind_at_window_start(w: PartitionWindow, window_start_ms: int, cfg: StatusConfig) -> bool:
    """Was there already work waiting when the window opened?

    STOP, STALL and WARN accuse a consumer of not doing something for a whole window; that is
    only fair if messages were waiting for the whole window. A lag no larger than the marker
    tolerance counts only if the log end then stayed put all window (otherwise it was most
    likely a transaction marker, and the real messages arrived later).
    """
    start_lag = w.lag_at_window_start
    if start_lag is None:
        # Unknown only while the history does not reach back that far (see the field): fall
        # back to the plain rule rather than staying silent about a consumer that may have
        # been dead for days.
        return True
    if start_lag > cfg.marker_tolerance:
        return True
    return (
        start_lag > 0
        and w.log_end_unchanged_since_ms is not None
        and w.log_end_unchanged_since_ms <= window_start_ms
    )


def evaluate_partition(
    w: PartitionWindow, now_ms: int, cfg: StatusConfig = DEFAULT_STATUS_CONFIG
) -> Status:
    """Status of one partition; the first matching rule of docs/status-rules.md wins."""
    log_end = w.log_end_offset
    # Rule 1: ERR.
    if log_end is None:
        return Status.ERR
    if w.committed_offset > log_end:
        if w.log_end_time_ms is None or w.log_end_time_ms >= w.commit_time_ms:
            return Status.ERR
        # The sample predates the commit: the consumer simply read messages appended since.
        return Status.OK
    lag = log_end - w.committed_offset

    # Rule 2: caught up.
    if lag == 0:
        return Status.OK
    # Rule 3: sitting before a transaction marker (or an abort marker) that it cannot consume.
    if (
        lag <= cfg.marker_tolerance
        and w.log_end_unchanged_since_ms is not None
        and w.log_end_unchanged_since_ms <= w.commit_time_ms
    ):
        return Status.OK

    window_start = now_ms - cfg.window_ms
    # Rule 4: REWIND.
    if w.last_rewind_time_ms is not None and w.last_rewind_time_ms >= window_start:
        return Status.REWIND

    behind = _behind_at_window_start(w, window_start, cfg)
    # Rule 5: STOP. An empty/simple group has nobody who could be about to commit, so it needs
    # no proof that the messages waited all window.
    if w.commit_time_ms < window_start:
        if behind or not w.group_is_live:
            return Status.STOP
        return Status.OK

    # Rule 6: STALL.
    if (
        w.commits_in_window >= cfg.stall_min_commits
        and w.committed_offset <= w.window_first_offset
        and behind
    ):
        return Status.STALL

    # Rule 7: WARN.
    consumed = w.committed_offset - w.window_first_offset
    start_lag = w.lag_at_window_start
    if consumed > 0 and start_lag is not None and behind:
        growth = lag - start_lag
        if growth > 0 and growth > cfg.warn_min_growth_ratio * consumed:
            return Status.WARN

    # Rule 8.
    return Status.OK


def evaluate_group(statuses: Iterable[Status]) -> Status:
    """A group is as bad as its worst partition; a group with no partitions is OK."""
    return max(statuses, default=Status.OK)


def commit_rate_per_second(commits_in_window: int, window_ms: int) -> float:
    """Average commits per second over the window (0.0 for an empty or zero-length window)."""
    if window_ms <= 0 or commits_in_window <= 0:
        return 0.0
    return commits_in_window * 1000.0 / window_ms


def seconds_since_last_commit(commit_time_ms: int, now_ms: int) -> float:
    """Seconds since the last commit, clamped at 0 so clock skew never yields a negative age."""
    return max(0, now_ms - commit_time_ms) / 1000.0
