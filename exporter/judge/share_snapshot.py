"""Share groups (KIP-932) in a snapshot: per share partition counts, lag, lag seconds, status.

Pure: built from the `ShareStateStore`, the group's view (members) and the log-end histories
when a snapshot is built. Per share partition:

* start offset, and the records of the persisted batches past it by delivery state
  (available = released and waiting for redelivery, acknowledged, archived; the persisted
  state never says which are acquired right now);
* share lag (KIP-1226): log end - start offset - acknowledged - archived;
* lag seconds: the age of the oldest record not yet done (the first offset past the start
  offset that is neither acknowledged nor archived), from the log-end history as for consumer
  groups (exporter/state/lag.py);
* the highest delivery count, and the poison batches: records available again after
  `redelivery_warn` deliveries or more (redelivered again and again), or archived after
  `delivery_limit` deliveries (given up at the broker's `group.share.delivery.count.limit`).

Status of a queue (docs/status-rules.md, "Share groups"), first match wins:
ERR (log end unknown), OK (no lag), STOP (records wait and the group has no members),
STALL (members, records waited at the window start and still wait, the start offset did not
move for the whole window), WARN (the backlog grew over the window by more than
`warn_min_growth_ratio` of what was consumed), OK. Poison batches raise an OK partition to WARN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from offsetwatch.decoder.share_combine import Batch
from offsetwatch.exporter.judge.diagnosis import Cause, Diagnosis, Suspect
from offsetwatch.exporter.judge.group_views import GroupView
from offsetwatch.exporter.judge.status import Status
from offsetwatch.exporter.state.lag import LogEndHistory, lag_seconds
from offsetwatch.exporter.state.offset_state import NEVER, GroupState
from offsetwatch.exporter.state.share_state import ARCHIVED, AVAILABLE, SharePartition
from offsetwatch.exporter.state.topic_names import share_topic_names

UNKNOWN: Final = -1


@dataclass(frozen=True, slots=True)
class ShareStatusConfig:
    window_ms: int = 600_000
    #: the broker's group.share.delivery.count.limit: archived at it = given up
    delivery_limit: int = 5
    #: records available again after this many deliveries are "redelivered again and again"
    redelivery_warn: int = 3
    warn_min_growth_ratio: float = 0.05

    def __post_init__(self) -> None:
        if self.delivery_limit < 1 or self.redelivery_warn < 1:
            raise ValueError("delivery_limit and redelivery_warn must be >= 1")


@dataclass(frozen=True, slots=True)
class SharePartitionRow:
    #: the topic's name, or its id while no name is known
    topic: str
    topic_id: str
    named: bool
    partition: int
    start_offset: int
    state_epoch: int
    leader_epoch: int
    #: UNKNOWN (-1) when not sampled (yet)
    log_end: int
    lag: int
    #: NaN when unknown
    lag_seconds: float
    available: int
    acknowledged: int
    archived: int
    unknown_state: int
    max_delivery_count: int
    status: Status
    #: the persisted in-flight batches: (first, last, delivery count, delivery state)
    batches: tuple[Batch, ...]
    #: batches redelivered again and again or archived at the delivery limit
    poison: tuple[Batch, ...]
    #: bad input seen for this partition, by reason
    problems: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupSnapshot:
    partitions: tuple[SharePartitionRow, ...]
    status: Status
    total_lag: int
    max_lag_seconds: float
    diagnosis: Diagnosis

    @property
    def poison_records(self) -> int:
        return sum(b[1] - b[0] + 1 for row in self.partitions for b in row.poison)


def share_group(
    group: GroupState | None,
    view: GroupView,
    partitions: list[tuple[str, int, SharePartition]],
    histories: dict[tuple[str, int], LogEndHistory],
    now_ms: int,
    window_start_ms: int,
    cfg: ShareStatusConfig,
    known_names: dict[str, str] | None = None,
    topic_ok: object = None,
) -> ShareGroupSnapshot:
    names = dict(known_names or {})
    if group is not None:
        names.update(share_topic_names(group))
    live = bool(view.members)
    rows = []
    for topic_id, partition, state in partitions:
        name = names.get(topic_id)
        topic = topic_id if name is None else name
        if callable(topic_ok) and not topic_ok(topic):
            continue
        rows.append(
            _row(topic, name is not None, topic_id, partition, state, histories, now_ms,
                 window_start_ms, live, cfg)
        )  # fmt: skip
    rows.sort(key=lambda r: (r.topic, r.partition))
    status = max((r.status for r in rows), default=Status.OK)
    total_lag = sum(r.lag for r in rows if r.lag > 0)
    max_lag_s = max((r.lag_seconds for r in rows if not math.isnan(r.lag_seconds)), default=0.0)
    return ShareGroupSnapshot(
        tuple(rows), status, total_lag, max_lag_s, _diagnose(status, view, rows)
    )


def _row(
    topic: str,
    named: bool,
    topic_id: str,
    partition: int,
    state: SharePartition,
    histories: dict[tuple[str, int], LogEndHistory],
    now_ms: int,
    window_start_ms: int,
    live: bool,
    cfg: ShareStatusConfig,
) -> SharePartitionRow:
    available, acknowledged, archived, unknown = state.counts()
    start = state.start_offset
    poison = tuple(
        b
        for b in state.batches
        if b[1] >= start
        and (
            (b[3] == AVAILABLE and b[2] >= cfg.redelivery_warn)
            or (b[3] == ARCHIVED and b[2] >= cfg.delivery_limit)
        )
    )
    history = histories.get((topic, partition)) if named else None
    latest = None if history is None else history.latest()
    log_end = lag = UNKNOWN
    seconds = math.nan
    status = Status.ERR
    if history is not None and latest is not None:
        # the state proves records up to its last batch exist: a sample older than the
        # snapshot is a log end at least that far, never a negative lag
        log_end = max(latest[1], start, *(b[1] + 1 for b in state.batches))
        # start -1: Kafka has not persisted the partition's state yet (acquired records are
        # not persisted); count from offset 0, not from -1 (one more than the whole log)
        lag = max(0, log_end - max(start, 0) - acknowledged - archived)
        seconds = 0.0 if lag == 0 else lag_seconds(history, state.oldest_pending(), now_ms).seconds
        status = _status(state, history, lag, live, window_start_ms, cfg)
        if poison and status is Status.OK:
            status = Status.WARN
    return SharePartitionRow(
        topic=topic,
        topic_id=topic_id,
        named=named,
        partition=partition,
        start_offset=start,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        log_end=log_end,
        lag=lag,
        lag_seconds=seconds,
        available=available,
        acknowledged=acknowledged,
        archived=archived,
        unknown_state=unknown,
        max_delivery_count=state.max_delivery_count(),
        status=status,
        batches=tuple(state.batches),
        poison=poison,
        problems=tuple(sorted((state.problems or {}).items())),
    )


def _status(
    state: SharePartition,
    history: LogEndHistory,
    lag: int,
    live: bool,
    window_start_ms: int,
    cfg: ShareStatusConfig,
) -> Status:
    if lag == 0:
        return Status.OK
    if not live:
        return Status.STOP
    # the evidence covers a window only once a roll passed and the partition was seen before
    if window_start_ms == NEVER or state.first_seen_ms > window_start_ms:
        return Status.OK
    start_then = state.window_start
    # bounded by the first sample when the window start predates the history, as a consumer
    # group's lag at window start is (LogEndHistory.lag_at): no STALL, OK, STALL after start-up
    backlog_then = history.lag_at(window_start_ms, start_then)
    behind = backlog_then is None or backlog_then > 0
    if behind and state.start_offset <= start_then:
        return Status.STALL
    if backlog_then is not None and backlog_then > 0:
        consumed = max(0, state.start_offset - start_then)
        if lag - backlog_then > max(0.0, cfg.warn_min_growth_ratio * consumed):
            return Status.WARN
    return Status.OK


def _diagnose(status: Status, view: GroupView, rows: list[SharePartitionRow]) -> Diagnosis:
    """Cause and suspects of a queue that is not OK (docs/diagnosis.md, share groups)."""
    if status is Status.OK:
        return Diagnosis(Status.OK, None, "", (), None, False, ())
    bad = [(r.topic, r.partition) for r in rows if r.status is status]
    suspects: tuple[Suspect, ...] = ()
    if status is Status.ERR:
        cause, reason = Cause.TOPIC_DELETED, "the log end of a share partition is unknown"
    elif status is Status.STOP:
        cause, reason = Cause.GROUP_EMPTY, "records wait and the share group has no members"
    elif status is Status.STALL:
        cause = Cause.STUCK_MEMBER
        reason = "records wait and the start offset has not moved for the whole window"
        suspects = _suspects(view, bad)
    elif any(r.poison for r in rows if r.status is status):
        cause = Cause.POISON_RECORDS
        offsets = ", ".join(
            f"{r.topic}-{r.partition}@{b[0]}-{b[1]}" for r in rows for b in r.poison
        )
        reason = f"records redelivered again and again or archived at the limit: {offsets}"
        suspects = _suspects(view, bad)
    else:
        cause = Cause.SLOW_CONSUMER
        reason = "the backlog grew over the window: the members consume slower than producers"
    return Diagnosis(status, cause, reason, suspects, None, status is Status.WARN, ())


def _suspects(view: GroupView, bad: list[tuple[str, int]]) -> tuple[Suspect, ...]:
    """Every member assigned a bad partition (a share partition has many owners)."""
    wanted = set(bad)
    out = []
    for member in view.members:
        owned = tuple(
            sorted((t, p) for t, parts in member.assignment for p in parts if (t, p) in wanted)
        )
        if owned:
            out.append(Suspect(member.member_id, member.client_id, member.client_host, owned))
    return tuple(out)
