"""Cause and suspects of every episode, from `group_events`: the exporter's diagnosis in Spark.

The rules are those of the live exporter (exporter/judge/diagnosis.py, docs/diagnosis.md), applied
at the episode's start with what `group_events` says about the group at that time: members
(joins and leaves, with client id and host), their latest assignment (`assignment` events:
classic decoded assignments, KIP-848 current assignments) and rebalances (`generation`
events). Joins and leaves are attached to the rebalance of their own record (classic) or to
the next one (KIP-848 writes member records before the epoch bump), exactly as the exporter's
rebalance history does. `tests/spark_jobs/analytics/test_diagnosis_agreement.py` replays one
history through both and checks they agree.

Per episode kind:

* `rebalance_storm`: `rebalance_storm`, suspects the instances that joined or left at least
  twice in the storm window (all that did when none did twice);
* `stall` / `stop` (one partition): `rebalance_storm` when the storm window before the start
  holds `storm_rebalances` rebalances; `group_empty` when the group has no members (a group
  without any event is a simple `assign()` group); `unknown` when the last rebalance is less
  than `rebalance_grace_ms` old; `stuck_member` with the partition's owner; `partition_unowned`
  when every member's assignment is known and none holds it; `unknown` otherwise;
* `rewind`: `rebalance_storm` as above; `rewind_by_reset` when the group had no members at the
  rewind; `rewind_by_consumer` with the partition's owner otherwise;
* `lag_slo`, `commit_rate_anomaly`: no cause (they are not statuses of the exporter).

One group's events and episodes are small, so each group is diagnosed in plain Python in the
executors (one cogroup by group).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType

from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.lake_schema import EPISODES_SCHEMA, struct_of

#: one row per episode (its identity: kind, group, topic, partition, start_ms) with its cause
#: and suspects (JSON: [{member_id, client_id, host, partitions: [{topic, partition}]}], the
#: exporter API's `suspects`)
DIAGNOSES_SCHEMA: Final = struct_of(
    ("kind", StringType(), False),
    ("group", StringType(), False),
    ("topic", StringType(), True),
    ("partition", IntegerType(), True),
    ("start_ms", LongType(), False),
    ("cause", StringType(), True),
    ("suspects", StringType(), True),
)
EPISODE_KEY: Final = ("kind", "group", "topic", "partition", "start_ms")
_EVENT_COLUMNS: Final = (
    "event",
    "ts",
    "generation",
    "member_id",
    "client_id",
    "client_host",
    "detail",
    "source_partition",
    "source_offset",
)
#: events of one record in the order their effects apply: membership and assignments, then
#: the rebalance that carries them
_ORDER: Final = {"member_leave": 0, "member_join": 1, "assignment": 2, "state": 3}

Member = tuple[str, str]  # client id, host
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Rebalance:
    ts: int
    generation: int | None
    #: (member id, client id, host)
    joined: tuple[tuple[str, str, str], ...]
    left: tuple[tuple[str, str, str], ...]
    members: int


@dataclass(slots=True)
class _Group:
    """The group as its events describe it, replayed in log order."""

    #: member id -> (client id, host)
    members: dict[str, Member] = field(default_factory=dict)
    #: member id -> assigned partitions (None: not known)
    assigned: dict[str, frozenset[TopicPartition] | None] = field(default_factory=dict)
    rebalances: list[Rebalance] = field(default_factory=list)
    pending_joined: list[tuple[str, str, str]] = field(default_factory=list)
    pending_left: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Moment:
    """The group right after the events of one record."""

    ts: int
    members: dict[str, Member]
    assigned: dict[str, frozenset[TopicPartition] | None]
    rebalances: int  # how many of `_History.rebalances` had happened


@dataclass(slots=True)
class _History:
    moments: list[_Moment]
    times: list[int]
    rebalances: list[Rebalance]
    has_events: bool

    def at(self, ts: int) -> _Moment | None:
        i = bisect.bisect_right(self.times, ts)
        return self.moments[i - 1] if i else None


def _assigned(detail: str | None) -> frozenset[TopicPartition] | None:
    if not detail:
        return None
    try:
        assigned = json.loads(detail).get("assigned")
    except (ValueError, AttributeError):
        return None
    if not isinstance(assigned, list):
        return None  # streams tasks: no topic partitions
    out: set[TopicPartition] = set()
    for item in assigned:
        if isinstance(item, dict) and "topic" in item:
            out.update((str(item["topic"]), int(p)) for p in item.get("partitions") or ())
    return frozenset(out)


def replay(events: Iterable[Sequence[Any]]) -> _History:
    """The group at every record, from its events (rows of `_EVENT_COLUMNS`)."""
    rows = sorted(events, key=lambda e: (e[7], e[8], _ORDER.get(e[0], 4)))
    group = _Group()
    moments: list[_Moment] = []
    position = None
    generation_at: tuple[int, int | None] | None = None

    def close() -> None:
        nonlocal generation_at
        if generation_at is not None:
            ts, generation = generation_at
            group.rebalances.append(
                Rebalance(
                    ts,
                    generation,
                    tuple(group.pending_joined),
                    tuple(group.pending_left),
                    len(group.members),
                )
            )
            group.pending_joined.clear()
            group.pending_left.clear()
            generation_at = None
        moments.append(
            _Moment(last_ts, dict(group.members), dict(group.assigned), len(group.rebalances))
        )

    last_ts = 0
    for event, ts, generation, member_id, client_id, host, detail, part, offset in rows:
        if position is not None and (part, offset) != position:
            close()
        position = (part, offset)
        last_ts = int(ts)
        if event == "generation":
            generation_at = (int(ts), generation)
        elif event == "member_join" and member_id is not None:
            group.members[member_id] = (client_id or "", host or "")
            group.assigned.setdefault(member_id, None)
            group.pending_joined.append((member_id, client_id or "", host or ""))
        elif event == "member_leave" and member_id is not None:
            client = group.members.pop(member_id, (client_id or "", host or ""))
            group.assigned.pop(member_id, None)
            group.pending_left.append((member_id, *client))
        elif event == "assignment" and member_id is not None:
            if member_id in group.members:
                group.assigned[member_id] = _assigned(detail)
        elif event == "group_deleted":
            group.members.clear()
            group.assigned.clear()
    if position is not None:
        close()
    return _History(moments, [m.ts for m in moments], group.rebalances, bool(rows))


def _suspect(
    member_id: str, member: Member, partitions: Iterable[TopicPartition]
) -> dict[str, Any]:
    return {
        "member_id": member_id,
        "client_id": member[0],
        "host": member[1],
        "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)],
    }


def _storm(
    history: _History, ts: int, settings: AnalyticsSettings, current: dict[str, Member]
) -> list[dict[str, Any]] | None:
    recent = [r for r in history.rebalances if ts - settings.storm_window_ms <= r.ts <= ts]
    if len(recent) < settings.storm_rebalances:
        return None
    seen: dict[Member, list[str]] = {}
    for rebalance in recent:
        for member_id, client_id, host in (*rebalance.joined, *rebalance.left):
            seen.setdefault((client_id, host), []).append(member_id)
    flapping = {k: v for k, v in seen.items() if len(v) >= 2} or seen
    by_instance = {member: member_id for member_id, member in current.items()}
    suspects = []
    for instance, ids in sorted(flapping.items(), key=lambda item: (-len(item[1]), item[0])):
        member_id = by_instance.get(instance, ids[-1])
        suspects.append(_suspect(member_id, instance, ()))
    return suspects


def _owner(moment: _Moment, tp: TopicPartition) -> str | None:
    for member_id, assigned in sorted(moment.assigned.items()):
        if assigned is not None and tp in assigned:
            return member_id
    return None


def diagnose_episode(
    history: _History,
    kind: str,
    topic: str | None,
    partition: int | None,
    start_ms: int,
    settings: AnalyticsSettings,
) -> tuple[str | None, list[dict[str, Any]]]:
    """(cause, suspects) of one episode of the group whose events `history` replayed."""
    moment = history.at(start_ms)
    members = {} if moment is None else moment.members
    if kind == "rebalance_storm":
        return "rebalance_storm", _storm(history, start_ms, settings, members) or []
    if kind not in ("stall", "stop", "rewind"):
        return None, []
    storm = _storm(history, start_ms, settings, members)
    if storm is not None:
        return "rebalance_storm", storm
    tp = None if topic is None or partition is None else (topic, partition)
    if kind == "rewind":
        if not members:
            return "rewind_by_reset", []
        owner = None if moment is None or tp is None else _owner(moment, tp)
        if owner is None:
            return "rewind_by_consumer", []
        return "rewind_by_consumer", [_suspect(owner, members[owner], [tp] if tp else [])]
    if not members:
        return "group_empty", []
    assert moment is not None
    done = history.rebalances[: moment.rebalances]
    if done and start_ms - done[-1].ts < settings.rebalance_grace_ms:
        return "unknown", []
    owner = None if tp is None else _owner(moment, tp)
    if owner is not None:
        return "stuck_member", [_suspect(owner, members[owner], [tp] if tp else [])]
    if all(assigned is not None for assigned in moment.assigned.values()):
        return "partition_unowned", []
    return "unknown", [
        _suspect(member_id, members[member_id], ())
        for member_id, assigned in sorted(moment.assigned.items())
        if assigned is None
    ]


def diagnose_group(
    episodes: Iterable[Sequence[Any]], events: Iterable[Sequence[Any]], settings: AnalyticsSettings
) -> Iterator[tuple[Any, ...]]:
    """DIAGNOSES_SCHEMA rows of one group's episodes (rows of EPISODE_KEY)."""
    episodes = list(episodes)
    if not episodes:
        return
    history = replay(events)
    for kind, group, topic, partition, start_ms in episodes:
        cause, suspects = diagnose_episode(history, kind, topic, partition, start_ms, settings)
        yield (
            kind,
            group,
            topic,
            partition,
            start_ms,
            cause,
            None if cause is None else json.dumps(suspects, separators=(",", ":")),
        )


def episode_diagnoses(
    episodes: DataFrame, group_events: DataFrame, settings: AnalyticsSettings
) -> DataFrame:
    """DIAGNOSES_SCHEMA: the cause and suspects of every episode."""
    keyed_episodes = episodes.select(*EPISODE_KEY).rdd.map(lambda row: (row[1], tuple(row)))
    keyed_events = group_events.select("group", *_EVENT_COLUMNS).rdd.map(
        lambda row: (row[0], tuple(row)[1:])
    )
    rows = keyed_episodes.cogroup(keyed_events).flatMap(
        lambda item: diagnose_group(item[1][0], item[1][1], settings)
    )
    return episodes.sparkSession.createDataFrame(rows, DIAGNOSES_SCHEMA)


def with_diagnoses(episodes: DataFrame, diagnoses: DataFrame) -> DataFrame:
    """Episodes (EPISODES_SCHEMA) with `cause` and `suspects` appended, in the episodes'
    order: the diagnoses (one small row per episode) are broadcast, so the join streams the
    episodes through as they come instead of shuffling them (`spark stream` emits its alerts
    in that order, and two runs over the same history must emit the same)."""
    key = [F.col(f"e.{name}").eqNullSafe(F.col(f"d.{name}")) for name in EPISODE_KEY]
    joined = episodes.alias("e").join(F.broadcast(diagnoses.alias("d")), key, "left")
    return joined.select(
        *[F.col(f"e.{f.name}").alias(f.name) for f in EPISODES_SCHEMA.fields],
        F.col("d.cause").alias("cause"),
        F.col("d.suspects").alias("suspects"),
    )


__all__ = [
    "DIAGNOSES_SCHEMA",
    "diagnose_episode",
    "diagnose_group",
    "episode_diagnoses",
    "replay",
    "with_diagnoses",
]
