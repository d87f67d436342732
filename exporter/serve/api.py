"""JSON views of a snapshot for the HTTP API: pure functions, snapshot in, dict out.

`/api/v1/groups` lists groups; `/api/v1/groups/{group}` describes one group the way
`kafka-consumer-groups --describe` does (one row per partition: committed offset, log end,
lag, owner) plus what offsetwatch adds (lag in seconds, status, commit metadata, members and
their assignments). Unknown numbers (log end not sampled, lag in seconds not known, no leader
epoch) are null, never NaN or -1: NaN is not JSON.
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from typing import Any, Final

from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.judge.diagnosis import Diagnosis
from offsetwatch.exporter.judge.group_views import (
    GroupView,
    MemberView,
    StreamsTasks,
    StreamsTopology,
    Tasks,
)
from offsetwatch.exporter.judge.share_snapshot import ShareGroupSnapshot, SharePartitionRow
from offsetwatch.exporter.judge.snapshot import GroupSnapshot, Snapshot, TopicRows
from offsetwatch.exporter.judge.status import Status
from offsetwatch.exporter.state.diagnosis_history import MemberRef
from offsetwatch.exporter.stats import Freshness, PipelineStats, StalePartition

__all__ = [
    "diagnosis_json",
    "freshness_json",
    "group_detail",
    "group_summary",
    "groups_list",
    "owner_index",
    "readiness",
    "share_json",
    "share_state_summary",
    "to_json",
]

JsonDict = dict[str, Any]


def _float(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _known(value: int) -> int | None:
    """Offsets, epochs and lags use -1 for "unknown"."""
    return value if value >= 0 else None


def _time(ms: int) -> str | None:
    if ms <= 0:
        return None
    stamp = datetime.fromtimestamp(ms / 1000, UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _last_commit(ms: int) -> JsonDict:
    return {"last_commit_ms": ms if ms > 0 else None, "last_commit": _time(ms)}


def group_summary(
    group: GroupSnapshot, stale: bool = False, share_state: JsonDict | None = None
) -> JsonDict:
    """`stale`: the cluster has not confirmed the group's partition of `__consumer_offsets`
    lately (its detail says since when and why); `share_state` (a share group's, from
    `share_state_summary`) adds its `share_state_*` fields, and its stale state partitions
    make the group `stale` too."""
    view = group.view
    summary: JsonDict = {
        "group": view.group_id,
        "kind": view.kind,
        "state": view.state,
        "members": len(view.members),
        "status": group.status.name,
        "cause": None if group.diagnosis.cause is None else group.diagnosis.cause.value,
        "total_lag": group.total_lag,
        "max_lag_seconds": _float(group.max_lag_seconds),
        **_last_commit(group.last_commit_ts),
        "topics": len(group.topics),
        "partitions": sum(len(rows) for rows in group.topics),
        "stale": stale,
    }
    if share_state is not None:
        summary.update(share_state)
        summary["stale"] = stale or bool(share_state["share_state_stale"])
    return summary


def groups_list(snapshot: Snapshot) -> list[JsonDict]:
    """One summary per group, by group id."""
    freshness, now = snapshot.freshness, snapshot.time_ms
    stale = {s.partition for s in freshness.stale(now)}
    share_freshness = snapshot.share_freshness
    out = []
    for group in snapshot.groups:
        group_id = group.view.group_id
        # the usual case, nothing stale: no group's partition needs looking up
        group_stale = bool(stale) and freshness.of_group(group_id) in stale
        share_state = (
            None
            if group.share is None
            else share_state_summary(share_freshness, group_id, group.share, now)
        )
        out.append(group_summary(group, group_stale, share_state))
    return out


def _owner(member: MemberView | None) -> JsonDict | None:
    if member is None:
        return None
    return {
        "member_id": member.member_id,
        "client_id": member.client_id,
        "host": member.client_host,
    }


def _rows(rows: TopicRows, owners: dict[tuple[str, int], MemberView]) -> list[JsonDict]:
    out = []
    topic = rows.topic
    for i, partition in enumerate(rows.partitions):
        out.append(
            {
                "topic": topic,
                "partition": partition,
                "committed": rows.committed[i],
                "log_end": _known(rows.log_end[i]),
                "lag": _known(rows.lag[i]),
                "lag_seconds": _float(rows.lag_seconds[i]),
                "status": Status(rows.status[i]).name,
                **_last_commit(rows.commit_ts[i]),
                "metadata": rows.metadata[i],
                "leader_epoch": _known(rows.leader_epoch[i]),
                "owner": _owner(owners.get((topic, partition))),
            }
        )
    return out


def _member(member: MemberView) -> JsonDict:
    return {
        "member_id": member.member_id,
        "client_id": member.client_id,
        "host": member.client_host,
        "instance_id": member.instance_id,
        "rack_id": member.rack_id,
        "member_epoch": member.member_epoch,
        "assignment": [
            {"topic": topic, "partitions": list(partitions)}
            for topic, partitions in member.assignment
        ],
        **({} if member.tasks is None else {"tasks": _streams_tasks(member.tasks)}),
    }


def _task_list(tasks: Tasks) -> list[JsonDict]:
    return [{"subtopology": sub, "partitions": list(partitions)} for sub, partitions in tasks]


def _streams_tasks(tasks: StreamsTasks) -> JsonDict:
    """A streams member's tasks, named as Kafka Streams names them (`0_2`) too."""
    return {
        "process_id": tasks.process_id,
        "topology_epoch": tasks.topology_epoch,
        "active": _task_list(tasks.active),
        "standby": _task_list(tasks.standby),
        "warmup": _task_list(tasks.warmup),
        "target_active": _task_list(tasks.target_active),
        "target_standby": _task_list(tasks.target_standby),
        "target_warmup": _task_list(tasks.target_warmup),
        "active_task_ids": [f"{sub}_{p}" for sub, partitions in tasks.active for p in partitions],
    }


def topology_json(topology: StreamsTopology) -> JsonDict:
    return {
        "epoch": topology.epoch,
        "validated_epoch": _known(topology.validated_epoch),
        "subtopologies": [
            {
                "subtopology": sub.subtopology_id,
                "source_topics": list(sub.source_topics),
                "repartition_source_topics": list(sub.repartition_source_topics),
                "repartition_sink_topics": list(sub.repartition_sink_topics),
                "changelog_topics": list(sub.changelog_topics),
            }
            for sub in topology.subtopologies
        ],
    }


def owner_index(view: GroupView) -> dict[tuple[str, int], MemberView]:
    """(topic, partition) -> owning member: `GroupView.owner_of` for all partitions at once."""
    owners: dict[tuple[str, int], MemberView] = {}
    for member in view.members:
        for topic, partitions in member.assignment:
            for partition in partitions:
                owners.setdefault((topic, partition), member)
    return owners


def group_detail(snapshot: Snapshot, group_id: str) -> JsonDict | None:
    """Everything known about one group; None when the snapshot has no such group."""
    group = snapshot.group(group_id)
    if group is None:
        return None
    view = group.view
    owners = owner_index(view)
    return {
        "group": view.group_id,
        "kind": view.kind,
        "state": view.state,
        "protocol_type": view.protocol_type,
        "protocol": view.protocol,
        "generation": _known(view.generation),
        "assignment_epoch": _known(view.assignment_epoch),
        "is_simple": view.is_simple,
        "status": group.status.name,
        "total_lag": group.total_lag,
        "max_lag_seconds": _float(group.max_lag_seconds),
        "commits_total": group.commits_total,
        "commit_rate": _float(group.commit_rate),
        **_last_commit(group.last_commit_ts),
        "ready": snapshot.ready,
        "snapshot_time_ms": snapshot.time_ms,
        "freshness": freshness_json(snapshot.freshness, view.group_id, snapshot.time_ms),
        "partitions": [row for rows in group.topics for row in _rows(rows, owners)],
        "members": [_member(member) for member in view.members],
        "diagnosis": diagnosis_json(group.diagnosis),
        **(
            {}
            if group.share is None
            else {
                "share": share_json(
                    group.share, snapshot.share_freshness, view.group_id, snapshot.time_ms
                )
            }
        ),
        **({} if view.topology is None else {"topology": topology_json(view.topology)}),
    }


_STATE_NAMES = {0: "available", 2: "acknowledged", 4: "archived"}


def _batch(batch: tuple[int, int, int, int]) -> JsonDict:
    first, last, count, state = batch
    return {
        "first_offset": first,
        "last_offset": last,
        "delivery_state": _STATE_NAMES.get(state, f"unknown({state})"),
        "delivery_count": count,
    }


def _share_row(row: SharePartitionRow, state_partition: int | None) -> JsonDict:
    return {
        "topic": row.topic,
        "topic_id": row.topic_id,
        "topic_named": row.named,
        "partition": row.partition,
        "start_offset": row.start_offset,
        "state_epoch": row.state_epoch,
        "leader_epoch": _known(row.leader_epoch),
        "log_end": _known(row.log_end),
        "lag": _known(row.lag),
        "lag_seconds": _float(row.lag_seconds),
        "status": row.status.name,
        "records": {
            "available": row.available,
            "acknowledged": row.acknowledged,
            "archived": row.archived,
            "unknown": row.unknown_state,
        },
        "max_delivery_count": row.max_delivery_count,
        "in_flight": [_batch(b) for b in row.batches],
        "poison": [_batch(b) for b in row.poison],
        "problems": dict(row.problems),
        # the `__share_group_state` partition its state is read from (null while unknown)
        "state_partition": state_partition,
    }


def share_json(
    share: ShareGroupSnapshot,
    freshness: Freshness | None = None,
    group_id: str = "",
    now_ms: int = 0,
) -> JsonDict:
    """The `share` object of a share group: each share partition's state (docs/console.md),
    and with `freshness` (of `__share_group_state`) how fresh the state partitions holding it
    are (`stale`, `state_freshness`)."""
    fresh = Freshness() if freshness is None else freshness
    where = [fresh.of_share(group_id, row.topic_id, row.partition) for row in share.partitions]
    state_partitions = sorted({p for p in where if p is not None})
    state_freshness = [_state_freshness_json(fresh, p, now_ms) for p in state_partitions]
    return {
        "status": share.status.name,
        "total_lag": share.total_lag,
        "max_lag_seconds": _float(share.max_lag_seconds),
        "poison_records": share.poison_records,
        "partitions": [
            _share_row(row, partition)
            for row, partition in zip(share.partitions, where, strict=True)
        ],
        "stale": any(f["stale"] for f in state_freshness),
        "state_freshness": state_freshness,
    }


def _state_freshness_json(freshness: Freshness, partition: int, now_ms: int) -> JsonDict:
    """When the cluster last confirmed one `__share_group_state` partition complete."""
    stale = freshness.is_stale(partition, now_ms)
    return {
        "state_partition": partition,
        "confirmed_at": _time(freshness.confirmed_ms.get(partition, 0)),
        "age_seconds": round(freshness.age_s(partition, now_ms), 3),
        "stale": stale,
        "cause": freshness.cause_of(partition) if stale else None,
    }


def share_state_summary(
    freshness: Freshness, group_id: str, share: ShareGroupSnapshot, now_ms: int
) -> JsonDict:
    """A share group's `share_state_*` fields of `/api/v1/groups`: whether a
    `__share_group_state` partition holding its state is stale, the age of the one confirmed
    longest ago (null while the topic's partitions are unknown) and, when stale, its cause."""
    where = {freshness.of_share(group_id, row.topic_id, row.partition) for row in share.partitions}
    partitions = [p for p in where if p is not None]
    if not partitions:
        return {
            "share_state_stale": False,
            "share_state_age_seconds": None,
            "share_state_cause": None,
        }
    # stale grows with age: the oldest is stale if any is
    oldest = max(partitions, key=lambda p: (freshness.age_s(p, now_ms), -p))
    stale = freshness.is_stale(oldest, now_ms)
    return {
        "share_state_stale": stale,
        "share_state_age_seconds": round(freshness.age_s(oldest, now_ms), 3),
        "share_state_cause": freshness.cause_of(oldest) if stale else None,
    }


def _ref(member: MemberRef) -> JsonDict:
    return {"member_id": member.member_id, "client_id": member.client_id, "host": member.host}


def diagnosis_json(diagnosis: Diagnosis) -> JsonDict:
    """The `diagnosis` object of a group (docs/diagnosis.md): exactly these keys."""
    catch_up = diagnosis.catch_up_seconds
    return {
        "status": diagnosis.status.name,
        "cause": None if diagnosis.cause is None else diagnosis.cause.value,
        "reason": diagnosis.reason,
        "suspects": [
            {
                "member_id": suspect.member_id,
                "client_id": suspect.client_id,
                "host": suspect.host,
                "partitions": [
                    {"topic": topic, "partition": partition}
                    for topic, partition in suspect.partitions
                ],
                **({"tasks": list(suspect.tasks)} if suspect.tasks else {}),
            }
            for suspect in diagnosis.suspects
        ],
        "catch_up_seconds": None if catch_up is None else _float(catch_up),
        "falling_behind": diagnosis.falling_behind,
        "rebalances": [
            {
                "time": _time(rebalance.time_ms),
                "generation": rebalance.generation,
                "joined": [_ref(member) for member in rebalance.joined],
                "left": [_ref(member) for member in rebalance.left],
            }
            for rebalance in diagnosis.rebalances
        ],
    }


#: the part whose failure makes the exporter not ready (exporter/sources/reader.py)
OFFSETS_READER: Final = "offsets_reader"


#: stale partitions named in /readyz (the count names them all)
STALE_LISTED: Final = 10


def _stale_json(stale: StalePartition) -> JsonDict:
    return {
        "partition": stale.partition,
        "confirmed_at": _time(stale.confirmed_ms),
        "age_seconds": round(stale.age_s, 3),
        "cause": stale.cause,
    }


def freshness_json(freshness: Freshness, group_id: str, now_ms: int) -> JsonDict | None:
    """The `freshness` object of a group: when the cluster last confirmed its partition of
    `__consumer_offsets` complete (README "Freshness"); None before the source knows the
    topic's partitions."""
    partition = freshness.of_group(group_id)
    if partition is None:
        return None
    confirmed = freshness.confirmed_ms.get(partition, 0)
    stale = freshness.is_stale(partition, now_ms)
    return {
        "offsets_partition": partition,
        "confirmed_at": _time(confirmed),
        "age_seconds": round(freshness.age_s(partition, now_ms), 3),
        "stale": stale,
        "cause": freshness.cause_of(partition) if stale else None,
    }


def readiness(stats: PipelineStats, now_ms: int | None = None) -> tuple[bool, JsonDict]:
    """(ready, body of /readyz): ready once the source is up, the first pass is done, and the
    cluster confirmed every partition's state lately, of `__consumer_offsets` and of
    `__share_group_state` (none is stale)."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    behind, known = stats.behind()
    body: JsonDict = {
        "ready": False,
        "source_up": stats.source_up,
        "caught_up": stats.ready,
        "partitions": known,
        "partitions_behind": behind,
    }
    freshness = stats.freshness
    stale = freshness.stale(now)
    body["stale_partitions"] = len(stale)
    if stale:
        body["stale"] = [_stale_json(s) for s in stale[:STALE_LISTED]]
    # the share groups' state (`__share_group_state`): nothing tracked while it does not exist
    share_freshness = stats.share_state_freshness
    share_stale = share_freshness.stale(now)
    body["share_state_stale_partitions"] = len(share_stale)
    if share_stale:
        body["share_state_stale"] = [_stale_json(s) for s in share_stale[:STALE_LISTED]]
    reader = next((h for h in stats.parts if h.name == OFFSETS_READER and not h.up), None)
    offsets_refused = next(
        (
            (topic, error, grant)
            for topic, (error, grant) in stats.refused_sources.items()
            if topic != SHARE_STATE_TOPIC
        ),
        None,
    )
    if not stats.source_up:
        body["reason"] = _source_down(stats.source_down_reason or stats.source_last_error)
    elif reader is not None:
        # what is served is no longer read: never ready on it, whatever the last pass said
        body["reason"] = f"the {OFFSETS_READER} fails ({reader.last_error}); restarted with backoff"
    elif offsets_refused is not None:
        # nothing can be read, so nothing catches up: say why rather than "catching up"
        body["reason"] = (
            f"not authorized to read {offsets_refused[0]} ({offsets_refused[1]}); grant it: "
            f"{offsets_refused[2]}"
        )
    elif not stats.fleet_joined and stats.fleet_refused is not None:
        group, error, grant = stats.fleet_refused
        body["reason"] = (
            f"not authorized to join the fleet's consumer group {group!r} ({error}); grant "
            f"it: {grant}"
        )
    elif not stats.fleet_joined:
        body["reason"] = (
            "waiting for the fleet's consumer group to give this replica its "
            "__consumer_offsets partitions"
        )
    elif not stats.ready:
        if known == 0:
            body["reason"] = "catching up: no __consumer_offsets partition positions known yet"
        else:
            body["reason"] = f"catching up: {behind} of {known} partitions not at end yet"
    elif stale:
        first = stale[0]
        body["reason"] = (
            f"stale: the cluster has not confirmed {len(stale)} of {len(freshness.tracked)} "
            f"__consumer_offsets partitions for more than {freshness.stale_after_ms / 1000:g} "
            f"s, so what is served for their groups may be old (partition {first.partition}, "
            f"{first.age_s:.0f} s: {first.cause})"
        )
    elif share_stale:
        first = share_stale[0]
        body["reason"] = (
            f"stale: the cluster has not confirmed {len(share_stale)} of "
            f"{len(share_freshness.tracked)} __share_group_state partitions for more than "
            f"{share_freshness.stale_after_ms / 1000:g} s, so what is served for their share "
            f"groups may be old (partition {first.partition}, {first.age_s:.0f} s: "
            f"{first.cause})"
        )
    else:
        body["ready"] = True
        body["ready_since_ms"] = stats.ready_since_ms
        body["ready_since"] = _time(stats.ready_since_ms)
    # a failing sink does not make the metrics wrong, so it does not make the exporter
    # unready; it is named here (and in offsetwatch_sink_up), never blamed on the source
    failing = [
        {
            "sink": health.name,
            "error": health.last_error,
            "failing_since": _time(health.failing_since_ms),
            "kept_records": health.backlog,
            "dropped_records": health.dropped_total,
        }
        for health in stats.sinks
        if not health.up
    ]
    if failing:
        body["failing_sinks"] = failing
    failing_parts = [
        {
            "part": health.name,
            "error": health.last_error,
            "failing_since": _time(health.failing_since_ms),
            "restarts": health.restarts_total,
        }
        for health in stats.parts
        if not health.up
    ]
    if failing_parts:
        body["failing_parts"] = failing_parts
    # the groups on refused topics show cause not_authorized, and so do share groups while
    # __share_group_state is refused (their state is unknown); the rest is right, so still
    # ready: a refused __consumer_offsets leaves nothing right, and is the reason above
    refused = [
        ("topic", topic, "Read", error, grant)
        for topic, (error, grant) in sorted(stats.refused_sources.items())
    ] + [
        ("topic", topic, "Describe", error, grant)
        for topic, (error, grant) in sorted(stats.denied_topics.items())
    ]
    if stats.fleet_refused is not None:
        group, error, grant = stats.fleet_refused
        refused.append(("group", group, "Read", error, grant))
    if refused:
        body["not_authorized"] = [
            {
                "resource": resource,
                "name": name,
                "operation": operation,
                "error": error,
                "grant": grant,
            }
            for resource, name, operation, error, grant in refused
        ]
    return body["ready"], body


#: words of librdkafka's reasons for a refused login or TLS handshake, and what to check then
_CREDENTIAL_HINTS: Final = (
    (
        "authentication",
        "check the credentials (sasl.username, the password or its .file, the client "
        "certificate); a rotated one is taken as soon as its file is replaced",
    ),
    (
        "ssl routines",
        "check the TLS files (ssl.ca.location, the client certificate and its expiry); a "
        "renewed one is taken as soon as its file is replaced",
    ),
)


def _source_down(last_error: str | None) -> str:
    """'source down', with librdkafka's last reason and, for a refused login or handshake,
    what to check."""
    if not last_error:
        return "source down"
    lowered = last_error.lower()
    hint = next((h for word, h in _CREDENTIAL_HINTS if word in lowered), None)
    return f"source down: {last_error}" + (f"; {hint}" if hint else "")


def to_json(value: Any) -> bytes:
    """UTF-8 JSON; raises on NaN/Infinity rather than writing invalid JSON."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
