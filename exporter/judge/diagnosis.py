"""Why a group is not OK, and which consumer instances to look at.

Pure: called by the snapshot builder for every group, with what the state already holds (the
group's statuses per partition, its members and their assignments, its rebalance history, its
partition tables' offsets at the start of the status window). Nothing here runs during a
scrape or an API call, and nothing is added to the commit path.

The rules, in order (the first that applies wins), are written down in docs/diagnosis.md; keep
the two in step:

1. `not_authorized` / `topic_deleted`: the group is ERR; `not_authorized` when a topic of an
   ERR partition is one the broker refuses to describe to the exporter.
2. `rebalance_storm`: at least `storm_rebalances` rebalances inside the status window.
3. `rewind_by_reset` / `rewind_by_consumer`: the group is REWIND; a reset when the group had
   no members when the offsets went back.
4. `group_empty`: STOP or STALL, and the group has no members.
5. A rebalance is in progress (one less than `rebalance_grace_ms` ago, or the KIP-848
   assignor has not run yet): `unknown`, ownership is changing.
6. `stuck_member`: STOP or STALL partitions, some owned by members whose assignment is known.
7. `partition_unowned`: STOP or STALL partitions that no member owns, every member's
   assignment known, none of them being reassigned.
8. `slow_consumer`: the group is WARN.
9. `unknown`, with the reason why nothing above could be concluded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from offsetwatch.core.status import Status
from offsetwatch.exporter.judge.group_views import GroupView, MemberView, StreamsTopology
from offsetwatch.exporter.state.diagnosis_history import (
    RING_SIZE,
    GroupHistory,
    MemberRef,
    Rebalance,
)
from offsetwatch.exporter.state.offset_state import NEVER, PartitionTable

__all__ = [
    "Cause",
    "Diagnosis",
    "DiagnosisConfig",
    "Suspect",
    "catch_up",
    "diagnose",
]

TopicPartition = tuple[str, int]


class Cause(StrEnum):
    STUCK_MEMBER = "stuck_member"
    GROUP_EMPTY = "group_empty"
    REBALANCE_STORM = "rebalance_storm"
    REWIND_BY_RESET = "rewind_by_reset"
    REWIND_BY_CONSUMER = "rewind_by_consumer"
    SLOW_CONSUMER = "slow_consumer"
    PARTITION_UNOWNED = "partition_unowned"
    TOPIC_DELETED = "topic_deleted"
    #: the exporter may not describe a topic of the group: its log end is unknown, not gone
    NOT_AUTHORIZED = "not_authorized"
    #: share groups: records redelivered again and again or archived at the delivery limit
    POISON_RECORDS = "poison_records"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class DiagnosisConfig:
    #: rebalances inside the status window that make a storm
    storm_rebalances: int = 5
    #: a rebalance younger than this is "in progress": ownership is not judged
    rebalance_grace_ms: int = 60_000
    #: rebalances listed per group (the API's `rebalances`)
    rebalances_shown: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.storm_rebalances <= RING_SIZE:
            raise ValueError(
                f"storm_rebalances must be 1..{RING_SIZE}, got {self.storm_rebalances}"
            )
        if self.rebalance_grace_ms < 0:
            raise ValueError(f"rebalance_grace_ms must be >= 0, got {self.rebalance_grace_ms}")
        if not 0 <= self.rebalances_shown <= RING_SIZE:
            raise ValueError(
                f"rebalances_shown must be 0..{RING_SIZE}, got {self.rebalances_shown}"
            )


DEFAULT_DIAGNOSIS_CONFIG: Final = DiagnosisConfig()


@dataclass(frozen=True, slots=True)
class Suspect:
    member_id: str
    client_id: str
    host: str
    #: the affected partitions it owns; () when ownership is not known (other protocols)
    partitions: tuple[TopicPartition, ...]
    #: streams members: the tasks (`0_2`) reading those partitions
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Diagnosis:
    status: Status
    #: None for an OK group
    cause: Cause | None
    reason: str
    suspects: tuple[Suspect, ...]
    #: lag / net consume rate over the window; None when not catching up (or not known)
    catch_up_seconds: float | None
    falling_behind: bool
    #: newest first
    rebalances: tuple[Rebalance, ...]


def catch_up(
    total_lag: int, drain_per_ms: float | None, status: Status
) -> tuple[float | None, bool]:
    """(catch_up_seconds, falling_behind) from the lag and the net drain rate of the window.

    `drain_per_ms` is the lag shrinking per millisecond (lag at window start minus lag now,
    over the span), None when no lagging partition's start lag is known. An OK group that is
    not draining is keeping pace, not falling behind: only a status that says so counts.
    """
    if total_lag <= 0:
        return 0.0, False
    if drain_per_ms is None:
        return None, False
    if drain_per_ms > 0:
        return total_lag / drain_per_ms / 1000, False
    return None, status is not Status.OK


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the rules read about one group."""

    status: Status
    view: GroupView
    #: (topic, partition) -> status value, for every exported partition that is not OK
    bad: Mapping[TopicPartition, int]
    #: (topic, partition) of partitions that are caught up or moved forward in the window
    progressing: frozenset[TopicPartition]
    #: (topic, partition) -> last backwards commit (ms), for REWIND partitions
    rewinds: Mapping[TopicPartition, int]
    history: GroupHistory | None
    now_ms: int
    window_ms: int
    cfg: DiagnosisConfig
    #: topics the broker refuses to describe to the exporter -> the grant to make
    denied: Mapping[str, str]


_NONE_DENIED: Final[Mapping[str, str]] = {}


def diagnose(
    status: Status,
    view: GroupView,
    bad: Mapping[TopicPartition, int],
    tables: Mapping[str, PartitionTable],
    lag_by_partition: Mapping[TopicPartition, int],
    history: GroupHistory | None,
    now_ms: int,
    window_ms: int,
    catch_up_seconds: float | None,
    falling_behind: bool,
    cfg: DiagnosisConfig = DEFAULT_DIAGNOSIS_CONFIG,
    denied: Mapping[str, str] = _NONE_DENIED,
) -> Diagnosis:
    """The diagnosis of a group that is not OK (`bad` holds its non-OK partitions; `denied`
    the topics the exporter may not describe, with the grant that would let it).

    `lag_by_partition`: the known lag of every exported partition (used to tell progressing
    partitions: caught up, or moved forward since the window start).
    """
    progressing = frozenset(
        tp for tp, lag in lag_by_partition.items() if lag == 0 or _moved(tables, tp)
    )
    rewinds = {
        tp: tables[tp[0]].rewind_ts[tp[1]] for tp, value in bad.items() if value == Status.REWIND
    }
    facts = _Facts(status, view, bad, progressing, rewinds, history, now_ms, window_ms, cfg, denied)
    cause, reason, suspects = _judge(facts)
    return Diagnosis(
        status,
        cause,
        reason,
        suspects,
        catch_up_seconds,
        falling_behind,
        recent_rebalances(history, cfg),
    )


def ok_diagnosis(
    history: GroupHistory | None,
    catch_up_seconds: float | None,
    falling_behind: bool,
    cfg: DiagnosisConfig = DEFAULT_DIAGNOSIS_CONFIG,
) -> Diagnosis:
    return Diagnosis(
        Status.OK,
        None,
        "",
        (),
        catch_up_seconds,
        falling_behind,
        recent_rebalances(history, cfg),
    )


def recent_rebalances(history: GroupHistory | None, cfg: DiagnosisConfig) -> tuple[Rebalance, ...]:
    if history is None or not cfg.rebalances_shown:
        return ()
    ring = history.rebalances
    return tuple(
        ring[i] for i in range(len(ring) - 1, max(-1, len(ring) - 1 - cfg.rebalances_shown), -1)
    )


def _moved(tables: Mapping[str, PartitionTable], tp: TopicPartition) -> bool:
    table = tables.get(tp[0])
    if table is None:
        return False
    return table.committed[tp[1]] > table.window_offset[tp[1]]


# -- the rules ------------------------------------------------------------------------------

_STUCK: Final = frozenset({Status.STALL.value, Status.STOP.value})
_Verdict = tuple[Cause, str, tuple[Suspect, ...]]


def _judge(f: _Facts) -> _Verdict:
    if f.status is Status.ERR:
        return _topic_deleted(f)
    storm = _storm(f)
    if storm is not None:
        return storm
    if f.status is Status.REWIND:
        return _rewind(f)
    if f.status in (Status.STOP, Status.STALL):
        return _stuck(f)
    if f.status is Status.WARN:
        return _slow(f)
    return Cause.UNKNOWN, f"status {f.status.name}: no rule applies", ()


def _topic_deleted(f: _Facts) -> _Verdict:
    errs = sorted(tp for tp, value in f.bad.items() if value == Status.ERR)
    refused = sorted({topic for topic, _p in errs if topic in f.denied})
    if refused:
        return (
            Cause.NOT_AUTHORIZED,
            f"the exporter is not authorized to describe topic {refused[0]!r}"
            + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else "")
            + f", so its log end and lag are unknown (not deleted); grant: {f.denied[refused[0]]}",
            (),
        )
    return (
        Cause.TOPIC_DELETED,
        f"{_parts(errs)}: the log end is unknown (topic deleted?) or below the committed "
        "offset (topic recreated or truncated)",
        (),
    )


def _window_rebalances(f: _Facts) -> list[Rebalance]:
    if f.history is None:
        return []
    start = f.now_ms - f.window_ms
    return [r for r in f.history.rebalances if r.time_ms >= start]


def _storm(f: _Facts) -> _Verdict | None:
    recent = _window_rebalances(f)
    if len(recent) < f.cfg.storm_rebalances:
        return None
    # dynamic members get a new member id at every join: an instance is (client id, host)
    seen: dict[tuple[str, str], list[MemberRef]] = {}
    for rebalance in recent:
        for ref in (*rebalance.joined, *rebalance.left):
            seen.setdefault((ref.client_id, ref.host), []).append(ref)
    flapping = {k: refs for k, refs in seen.items() if len(refs) >= 2} or seen
    members = {(m.client_id, m.client_host): m for m in f.view.members}
    suspects = []
    for key, refs in sorted(flapping.items(), key=lambda item: (-len(item[1]), item[0])):
        member = members.get(key)
        if member is not None:
            suspects.append(_suspect(member, _owned(member), f.view.topology))
        else:
            suspects.append(Suspect(refs[-1].member_id, key[0], key[1], ()))
    who = ", ".join(_who(s.client_id, s.host) for s in suspects[:5]) or "no member change seen"
    more = f" and {len(suspects) - 5} more" if len(suspects) > 5 else ""
    return (
        Cause.REBALANCE_STORM,
        f"{len(recent)} rebalances in the last {_duration(f.window_ms)} (generation "
        f"{recent[0].generation} to {recent[-1].generation}); joining and leaving: {who}{more}",
        tuple(suspects),
    )


def members_at(history: GroupHistory | None, time_ms: int, current: int) -> int | None:
    """Members the group had at `time_ms`; None when the history does not reach back."""
    if history is None or not history.rebalances:
        return current
    ring = history.rebalances
    if ring[-1].time_ms <= time_ms:
        return ring[-1].members
    before = [r for r in ring if r.time_ms <= time_ms]
    if before:
        return before[-1].members
    if len(ring) == ring.maxlen:
        return None
    first = ring[0]
    return max(0, first.members - len(first.joined) + len(first.left))


def _rewind(f: _Facts) -> _Verdict:
    current = len(f.view.members)
    by_reset: list[TopicPartition] = []
    by_consumer: list[TopicPartition] = []
    unknown: list[TopicPartition] = []
    for tp, at in sorted(f.rewinds.items()):
        members = current if at == NEVER else members_at(f.history, at, current)
        if members is None:
            unknown.append(tp)
        elif members == 0:
            by_reset.append(tp)
        else:
            by_consumer.append(tp)
    if by_consumer:
        owners, unowned, notes = _ownership(f.view, by_consumer)
        suspects = tuple(_suspect(m, tuple(parts), f.view.topology) for m, parts in owners)
        who = "; ".join(_who_owns(s) for s in suspects) or "no member with a known assignment"
        return (
            Cause.REWIND_BY_CONSUMER,
            f"{_parts(by_consumer)} went back while the group had members (a seek or "
            f"re-processing in the consumer); owned by {who}{_notes(unowned, notes)}",
            suspects,
        )
    if by_reset:
        return (
            Cause.REWIND_BY_RESET,
            f"{_parts(by_reset)} went back while the group had no members (an offset reset "
            "tool or an admin commit)",
            (),
        )
    return (
        Cause.UNKNOWN,
        f"{_parts(unknown)} went back, before the oldest rebalance offsetwatch remembers: "
        "whether the group had members then is not known",
        (),
    )


def _stuck(f: _Facts) -> _Verdict:
    stuck = sorted(tp for tp, value in f.bad.items() if value in _STUCK)
    view = f.view
    how = _how_stuck(f)
    if not view.members:
        if view.is_simple:
            return (
                Cause.GROUP_EMPTY,
                f"{_parts(stuck)} {how}; the group has no members: its commits come from a "
                "consumer that never joined it (assign()), which offsetwatch cannot name",
                (),
            )
        return (
            Cause.GROUP_EMPTY,
            f"{_parts(stuck)} {how}; the group has no members{_since_last(f)}",
            (),
        )
    progress = _in_progress(f)
    if progress is not None:
        return Cause.UNKNOWN, f"{_parts(stuck)} {how}; {progress}", ()
    owners, unowned, notes = _ownership(view, stuck)
    if owners:
        suspects = tuple(_suspect(m, tuple(parts), view.topology) for m, parts in owners)
        blamed = {s.member_id for s in suspects}
        others = [
            m
            for m in view.members
            if m.member_id not in blamed and any(tp in f.progressing for tp in _flat(m.assignment))
        ]
        if others:
            tail = f"the other {len(others)} member{'s' if len(others) != 1 else ''} progress"
        elif len(suspects) == len(view.members):
            tail = "that is every member (whole group): look for a cause they share"
        else:
            tail = "no other member progresses"
        who = "; ".join(_who_owns(s) for s in suspects)
        return (
            Cause.STUCK_MEMBER,
            f"{_parts(stuck)} {how}; owned by {who}; {tail}{_notes(unowned, notes)}",
            suspects,
        )
    if unowned and not notes:
        return (
            Cause.PARTITION_UNOWNED,
            f"{_parts(unowned)} {how} and no member owns "
            f"{'them' if len(unowned) > 1 else 'it'} (assignment of generation "
            f"{view.generation}{_since_last(f, ', since ')})",
            (),
        )
    suspects = tuple(
        _suspect(m, (), None) for m in view.members if m.assignment_error not in (None, "stale")
    )
    return Cause.UNKNOWN, f"{_parts(stuck)} {how}{_notes(unowned, notes)}", suspects


def _slow(f: _Facts) -> _Verdict:
    slow = sorted(tp for tp, value in f.bad.items() if value == Status.WARN)
    owners, unowned, notes = _ownership(f.view, slow)
    suspects = tuple(_suspect(m, tuple(parts), f.view.topology) for m, parts in owners)
    if suspects and len(suspects) == len(f.view.members) and len(suspects) > 1:
        who = "every member (whole group)"
    else:
        who = "; ".join(_who_owns(s) for s in suspects) or "no member with a known assignment"
    return (
        Cause.SLOW_CONSUMER,
        f"{_parts(slow)} move, but their lag grew over the last {_duration(f.window_ms)}; "
        f"consumed by {who}{_notes(unowned, notes)}",
        suspects,
    )


# -- ownership ------------------------------------------------------------------------------


def _effective_error(view: GroupView, member: MemberView) -> str | None:
    if member.assignment_error is not None:
        return member.assignment_error
    # a KIP-848 member behind the target assignment still holds partitions it is to give up
    if (
        view.kind in ("CONSUMER", "STREAMS")
        and member.member_epoch is not None
        and 0 <= member.member_epoch < view.assignment_epoch
    ):
        return "stale"
    return None


def _ownership(
    view: GroupView, partitions: Sequence[TopicPartition]
) -> tuple[list[tuple[MemberView, list[TopicPartition]]], list[TopicPartition], list[str]]:
    """(owners with their partitions, partitions nobody owns, notes on what is not known).

    Only a member whose assignment is known and current owns anything. Partitions a stale
    member still holds, or that a KIP-848 target assignment is moving, are not blamed on
    anyone; the notes say so.
    """
    owner: dict[TopicPartition, MemberView] = {}
    stale: dict[TopicPartition, MemberView] = {}
    target: dict[TopicPartition, MemberView] = {}
    unknown_members: list[MemberView] = []
    for member in view.members:
        error = _effective_error(view, member)
        if error is None:
            for tp in _flat(member.assignment):
                owner.setdefault(tp, member)
        elif error == "stale":
            for tp in _flat(member.assignment):
                stale.setdefault(tp, member)
        else:
            unknown_members.append(member)
        for tp in _flat(member.target):
            target.setdefault(tp, member)
    owned: dict[str, tuple[MemberView, list[TopicPartition]]] = {}
    unowned: list[TopicPartition] = []
    held_stale: list[TopicPartition] = []
    moving: list[TopicPartition] = []
    for tp in partitions:
        holder = owner.get(tp)
        if holder is not None:
            owned.setdefault(holder.member_id, (holder, []))[1].append(tp)
        elif tp in stale:
            held_stale.append(tp)
        elif tp in target:
            moving.append(tp)
        else:
            unowned.append(tp)
    notes = []
    if held_stale:
        who = ", ".join(
            sorted({_who(stale[tp].client_id, stale[tp].client_host) for tp in held_stale})
        )
        notes.append(
            f"{_parts(held_stale)} last held by {who}, whose assignment is stale (member epoch "
            f"behind the target epoch {view.assignment_epoch}): not blamed"
        )
    if moving:
        notes.append(f"{_parts(moving)} being reassigned (target assignment not reached yet)")
    if unknown_members and unowned:
        kinds = sorted({m.assignment_error or "" for m in unknown_members})
        notes.append(
            f"the assignment of {len(unknown_members)} of {len(view.members)} members is not "
            f"known ({', '.join(_error_text(k) for k in kinds)}): who owns "
            f"{_parts(unowned)} cannot be said"
        )
        unowned = []
    return list(owned.values()), unowned, notes


def _error_text(error: str) -> str:
    if error == "missing":
        return "missing"
    if error == "undecodable":
        return "undecodable assignment bytes"
    if error == "topology":
        return "streams tasks without the group's topology record"
    return f"protocol {error} does not assign topic partitions"


def _flat(assignment: Iterable[tuple[str, tuple[int, ...]]]) -> Iterable[TopicPartition]:
    return ((topic, p) for topic, partitions in assignment for p in partitions)


def _owned(member: MemberView) -> tuple[TopicPartition, ...]:
    if member.assignment_error is not None:
        return ()
    return tuple(_flat(member.assignment))


def _suspect(
    member: MemberView,
    partitions: tuple[TopicPartition, ...],
    topology: StreamsTopology | None,
) -> Suspect:
    tasks: tuple[str, ...] = ()
    if member.tasks is not None:
        named = (member.tasks.task_of(topology, topic, p) for topic, p in partitions)
        tasks = tuple(sorted({task for task in named if task is not None}))
    return Suspect(member.member_id, member.client_id, member.client_host, partitions, tasks)


# -- wording --------------------------------------------------------------------------------


def _in_progress(f: _Facts) -> str | None:
    last = f.history.rebalances[-1] if f.history is not None and f.history.rebalances else None
    if last is not None and f.now_ms - last.time_ms < f.cfg.rebalance_grace_ms:
        age = max(0, f.now_ms - last.time_ms) // 1000
        return (
            f"a rebalance is in progress (generation {last.generation}, {age} s ago): "
            "ownership is changing, judged again once it settles"
        )
    if f.view.state == "ASSIGNING":
        return (
            f"a rebalance is in progress (group epoch {f.view.generation}, target assignment "
            f"still at {f.view.assignment_epoch}): ownership is changing"
        )
    return None


def _since_last(f: _Facts, prefix: str = " since ") -> str:
    if f.history is None or not f.history.rebalances:
        return ""
    return f"{prefix}the rebalance of {_clock(f.history.rebalances[-1].time_ms)}"


def _how_stuck(f: _Facts) -> str:
    values = {value for value in f.bad.values() if value in _STUCK}
    window = _duration(f.window_ms)
    if values == {Status.STOP.value}:
        return f"had no commit for {window} while messages waited"
    if values == {Status.STALL.value}:
        return f"are committed but have not moved for {window} while messages waited"
    return f"have not moved for {window} while messages waited"


def _notes(unowned: list[TopicPartition], notes: list[str]) -> str:
    parts = list(notes)
    if unowned:
        parts.append(f"{_parts(unowned)} owned by no member")
    return "".join(f"; {note}" for note in parts)


def _who(client_id: str, host: str) -> str:
    host = host.lstrip("/")
    return f"{client_id or '?'} on {host}" if host else client_id or "?"


def _who_owns(s: Suspect) -> str:
    if s.tasks:
        label = "task" if len(s.tasks) == 1 else "tasks"
        return _who(s.client_id, s.host) + f" ({s.member_id}, {label} {', '.join(s.tasks)})"
    return _who(s.client_id, s.host) + f" ({s.member_id})"


def _parts(tps: Sequence[TopicPartition]) -> str:
    """`partitions 3 and 7 of orders`, topics in order, at most 10 numbers each."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in tps:
        by_topic.setdefault(topic, []).append(p)
    texts = []
    for topic, numbers in sorted(by_topic.items()):
        numbers.sort()
        shown = [str(n) for n in numbers[:10]]
        if len(numbers) > 10:
            listed = ", ".join(shown) + f" and {len(numbers) - 10} more"
        elif len(shown) > 1:
            listed = ", ".join(shown[:-1]) + " and " + shown[-1]
        else:
            listed = shown[0] if shown else ""
        noun = "partition" if len(numbers) == 1 else "partitions"
        texts.append(f"{noun} {listed} of {topic}")
    return "; ".join(texts) if texts else "no partition"


def _duration(ms: int) -> str:
    seconds = ms // 1000
    if seconds % 60 == 0 and seconds >= 60:
        minutes = seconds // 60
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds} s"


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
