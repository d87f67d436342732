"""Group lifecycle events from a group's records, in log order: the `group_events` lake table.

`__consumer_offsets` stores snapshots (the latest GroupMetadata, the latest member record...),
not events: a rebalance is a new generation in the next snapshot, a member join is a member id
that was not there before. So events come from comparing each record with the group's state
before it. That state is carried between incremental compactions (`GroupState.to_json`, kept
in the lake's bookkeeping), so the second half of a history gives the same events as the whole.

Pure Python, one group at a time (all of a group's records live in one `__consumer_offsets`
partition, so log order is offset order); `compact` runs it in the executors per group.
Input records are canonical dicts (`type`, `tombstone`, `timestamp`, `partition`, `offset`,
`key`, `value`), as the decoder and the archive write them.

Kafka semantics followed (see the conformance README):
* classic groups: every GroupMetadata value is the group after a rebalance or after going
  Empty; members and their assignments are in it. A GroupMetadata tombstone deletes the
  group, except during an online protocol migration, where the tombstone and the new
  protocol's first records are written together (same timestamp): that is a `state` event
  `Migrated`, not a deletion. The same holds the other way for ConsumerGroupMetadata.
* KIP-848 consumer / share / streams groups: the group epoch is in the *GroupMetadata record
  (each write is a new epoch), members are the member-metadata records (a tombstone is a
  leave) and a member's current assignment record carries its reconciled assignment.
* `state` is derived from membership (`Empty` / `Stable`) for every protocol, `Dead` after a
  deletion: `__consumer_offsets` does not store the transient states (PreparingRebalance,
  Reconciling...), so the lake cannot know them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Final

from offsetwatch.decoder import contract

CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"
SHARE: Final = "share"
STREAMS: Final = "streams"

EMPTY: Final = "Empty"
STABLE: Final = "Stable"
DEAD: Final = "Dead"
MIGRATED: Final = "Migrated"

#: record type -> (group type, role)
_ROLES: Final[Mapping[str, tuple[str, str]]] = {
    "group_metadata": (CLASSIC, "group"),
    "consumer_group_metadata": (CONSUMER, "group"),
    "consumer_group_partition_metadata": (CONSUMER, "topics"),
    "consumer_group_member_metadata": (CONSUMER, "member"),
    "consumer_group_current_member_assignment": (CONSUMER, "assignment"),
    "share_group_metadata": (SHARE, "group"),
    "share_group_partition_metadata": (SHARE, "topics"),
    "share_group_member_metadata": (SHARE, "member"),
    "share_group_current_member_assignment": (SHARE, "assignment"),
    "streams_group_metadata": (STREAMS, "group"),
    "streams_group_partition_metadata": (STREAMS, "topics"),
    "streams_group_member_metadata": (STREAMS, "member"),
    "streams_group_current_member_assignment": (STREAMS, "assignment"),
}

#: the record types whose records `events_for_group` reads (the others change no event)
GROUP_RECORD_TYPES: Final = frozenset(_ROLES)

_TASK_FIELDS: Final = ("active_tasks", "standby_tasks", "warmup_tasks")


@dataclass(frozen=True, slots=True)
class GroupEvent:
    """One row of `group_events` (without `date`, which the Spark side derives from `ts`)."""

    group: str
    group_type: str
    event: str
    ts: int
    generation: int | None
    state: str | None
    member_id: str | None
    client_id: str | None
    client_host: str | None
    detail: str | None
    source_partition: int
    source_offset: int


@dataclass(slots=True)
class GroupState:
    """What the events of the next record are computed against."""

    group_type: str | None = None
    generation: int | None = None
    state: str | None = None
    #: member id -> [client_id, client_host, assignment text or None]
    members: dict[str, list[str | None]] = field(default_factory=dict)
    #: KIP-848 topic id -> topic name (from the partition-metadata record)
    topic_names: dict[str, str] = field(default_factory=dict)
    #: (partition, offset) of the last record applied: older records are not applied again
    position: tuple[int, int] = (-1, -1)

    def to_json(self) -> str:
        return json.dumps(
            {
                "group_type": self.group_type,
                "generation": self.generation,
                "state": self.state,
                "members": self.members,
                "topic_names": self.topic_names,
                "position": list(self.position),
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> GroupState:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(
            group_type=data["group_type"],
            generation=data["generation"],
            state=data["state"],
            members={k: list(v) for k, v in data["members"].items()},
            topic_names=dict(data["topic_names"]),
            position=(int(data["position"][0]), int(data["position"][1])),
        )


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _as_list(value: Any) -> list[Any]:
    """A list field. Fields whose branches clash in the Spark schema (spark_jobs/schema.py)
    arrive as JSON text: the whole list, or each of its items."""
    if value is None:
        return []
    if isinstance(value, str):
        value = json.loads(value)
        if not isinstance(value, list):
            return []
    return [
        json.loads(item) if isinstance(item, str) and item[:1] == "{" else item for item in value
    ]


@dataclass(slots=True)
class _Emitter:
    group: str
    state: GroupState
    record: Mapping[str, Any]
    out: list[GroupEvent]

    def emit(
        self,
        event: str,
        *,
        member_id: str | None = None,
        client: Sequence[str | None] = (None, None),
        detail: Any = None,
        generation: int | None = None,
    ) -> None:
        self.out.append(
            GroupEvent(
                group=self.group,
                group_type=self.state.group_type or CLASSIC,
                event=event,
                ts=int(self.record["timestamp"]),
                generation=self.state.generation if generation is None else generation,
                state=self.state.state,
                member_id=member_id,
                client_id=client[0],
                client_host=client[1],
                detail=None if detail is None else _compact(detail),
                source_partition=int(self.record["partition"]),
                source_offset=int(self.record["offset"]),
            )
        )


def events_for_group(
    group: str, state: GroupState, records: Iterable[Mapping[str, Any]]
) -> list[GroupEvent]:
    """Apply `records` (one group's, any order) to `state` in log order; return their events.

    `state` is updated in place. Records at or before `state.position` were applied by an
    earlier run and are skipped, so re-reading an at-least-once archive changes nothing.
    """
    ordered = sorted(
        (r for r in records if r.get(contract.TYPE) in GROUP_RECORD_TYPES),
        key=lambda r: (int(r["partition"]), int(r["offset"])),
    )
    out: list[GroupEvent] = []
    for index, record in enumerate(ordered):
        position = (int(record["partition"]), int(record["offset"]))
        if position <= state.position:
            continue
        _apply(_Emitter(group, state, record, out), islice(ordered, index + 1, None))
        state.position = position
    return out


def _apply(emitter: _Emitter, following: Iterable[Mapping[str, Any]]) -> None:
    record = emitter.record
    group_type, role = _ROLES[record[contract.TYPE]]
    state = emitter.state
    value = record.get(contract.VALUE)
    if record.get(contract.TOMBSTONE) or value is None:
        if role == "group":
            _group_tombstone(emitter, group_type, following)
        elif role == "member":
            _member_leave(emitter, record["key"]["member_id"])
        return
    if state.group_type != group_type:
        state.group_type = group_type
    if role == "group":
        if group_type == CLASSIC:
            _classic_group(emitter, value)
        else:
            _new_epoch(emitter, int(value["epoch"]))
    elif role == "topics":
        for topic in _as_list(value.get("topics")):
            state.topic_names[topic["topic_id"]] = topic["topic_name"]
    elif role == "member":
        member_id = record["key"]["member_id"]
        if member_id not in state.members:
            client = [value.get("client_id"), value.get("client_host"), None]
            state.members[member_id] = client
            _set_state(emitter)
            emitter.emit(
                "member_join",
                member_id=member_id,
                client=client,
                detail={
                    k: value[k]
                    for k in ("instance_id", "rack_id", "subscribed_topic_names", "process_id")
                    if value.get(k) is not None
                },
            )
    else:
        _member_assignment(emitter, record["key"]["member_id"], value)


def _same_time_other_protocol(
    record: Mapping[str, Any], following: Iterable[Mapping[str, Any]], group_type: str
) -> str | None:
    """The protocol a migration goes to, when the tombstone is one (see the module doc): a
    record of another protocol written at the same instant (the migration's batch)."""
    for later in following:
        if later.get(contract.TIMESTAMP) != record.get(contract.TIMESTAMP):
            return None
        other_type, _ = _ROLES[later[contract.TYPE]]
        if other_type != group_type and not later.get("tombstone"):
            return other_type
    return None


def _group_tombstone(
    emitter: _Emitter, group_type: str, following: Iterable[Mapping[str, Any]]
) -> None:
    state = emitter.state
    target = _same_time_other_protocol(emitter.record, following, group_type)
    if target is not None:
        state.state = MIGRATED
        state.members.clear()
        emitter.emit("state", detail={"from": group_type, "to": target})
        state.group_type = target
        state.generation = None
        return
    state.group_type = state.group_type or group_type
    state.state = DEAD
    state.members.clear()
    emitter.emit("group_deleted")
    state.generation = None
    state.topic_names.clear()


def _classic_group(emitter: _Emitter, value: Mapping[str, Any]) -> None:
    state = emitter.state
    generation = int(value["generation"])
    members: dict[str, list[str | None]] = {}
    for member in _as_list(value.get("members")):
        decoded = member.get("assignment_decoded")
        assigned = None if decoded is None else _compact(decoded.get("assigned_partitions"))
        members[member["member_id"]] = [member["client_id"], member["client_host"], assigned]
    # generation 0 is the group's creation, not a rebalance
    if generation != state.generation and generation > 0:
        emitter.emit(
            "generation",
            generation=generation,
            detail={
                "protocol_type": value.get("protocol_type"),
                "protocol": value.get("protocol"),
                "leader": value.get("leader"),
                "members": len(members),
            },
        )
    state.generation = generation
    for member_id in [m for m in state.members if m not in members]:
        client = state.members.pop(member_id)
        emitter.emit("member_leave", member_id=member_id, client=client)
    for member_id, client in members.items():
        previous = state.members.get(member_id)
        state.members[member_id] = client
        if previous is None:
            emitter.emit("member_join", member_id=member_id, client=client)
        if client[2] is not None and (previous is None or previous[2] != client[2]):
            emitter.emit(
                "assignment",
                member_id=member_id,
                client=client,
                detail={"assigned": json.loads(client[2])},
            )
    _set_state(emitter)


def _new_epoch(emitter: _Emitter, epoch: int) -> None:
    state = emitter.state
    if epoch != state.generation:
        state.generation = epoch
        _set_state(emitter)
        emitter.emit("generation", detail={"members": len(state.members)})


def _set_state(emitter: _Emitter) -> None:
    state = emitter.state
    new_state = STABLE if state.members else EMPTY
    if new_state != state.state:
        state.state = new_state
        emitter.emit("state")


def _member_leave(emitter: _Emitter, member_id: str) -> None:
    state = emitter.state
    client = state.members.pop(member_id, None)
    if client is None:
        return
    emitter.emit("member_leave", member_id=member_id, client=client)
    _set_state(emitter)


def _member_assignment(emitter: _Emitter, member_id: str, value: Mapping[str, Any]) -> None:
    state = emitter.state
    if state.group_type == STREAMS:
        assigned: Any = {name: _as_list(value.get(name)) for name in _TASK_FIELDS}
    else:
        assigned = [
            {
                "topic": state.topic_names.get(tp["topic_id"], tp["topic_id"]),
                "partitions": tp["partitions"],
            }
            for tp in _as_list(value.get("assigned_partitions"))
        ]
    text = _compact(assigned)
    client = state.members.get(member_id)
    if client is not None and client[2] == text:
        return
    if client is not None:
        client[2] = text
    emitter.emit(
        "assignment",
        member_id=member_id,
        client=client or (None, None),
        generation=int(value["member_epoch"]),
        detail={"assigned": assigned},
    )


def iter_events(
    group: str, state_json: str | None, records: Iterable[Mapping[str, Any]]
) -> Iterator[GroupEvent | str]:
    """`events_for_group` for executors: the events, then the group's new state as JSON."""
    state = GroupState.from_json(state_json)
    yield from events_for_group(group, state, records)
    yield state.to_json()
