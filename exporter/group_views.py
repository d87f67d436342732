"""Readable views of a group, derived from the latest records `OffsetState` keeps.

Classic groups: the last GroupMetadata record (members, their client ids/hosts and the
partitions of their consumer-protocol assignment). KIP-848 consumer groups: group epoch,
target assignment epoch and per-member epochs/assignments (types 3-8, topic ids resolved to
names through the partition metadata record where Kafka writes one, 4.0, else through the
exporter's topic metadata lookups, `topic_names`). Share and streams groups: epochs and
members.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from offsetwatch.decoder.consumer_protocol import ConsumerProtocol
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataValue,
    Record,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupMetadataWithHashValue,
    ShareGroupPartitionMetadataValue,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    TopicPartitions,
)
from offsetwatch.exporter.state import GroupState

Assignment = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None
    rack_id: str | None
    #: KIP-848 member epoch; None for classic members
    member_epoch: int | None
    #: (topic name - or topic id when no name is known - , partitions)
    assignment: Assignment
    #: KIP-848: the member's target assignment (what it is being moved to); () otherwise
    target: Assignment = ()
    #: why `assignment` says nothing about partitions, None when it does: "undecodable",
    #: "missing" (no assignment record / empty bytes), or the protocol type that carries no
    #: topic partitions (e.g. "connect")
    assignment_error: str | None = None


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    #: CLASSIC / CONSUMER / SHARE / STREAMS
    kind: str
    #: Kafka's group state names: EMPTY, STABLE, ASSIGNING, RECONCILING (KIP-848), DEAD
    state: str
    protocol_type: str
    #: classic: the chosen assignor; consumer groups: the members' server assignor
    protocol: str
    #: classic generation or KIP-848 group epoch (-1 when unknown)
    generation: int
    assignment_epoch: int
    #: offsets committed without ever joining (assign() + commit): no metadata record
    is_simple: bool
    members: tuple[MemberView, ...]

    def owner_of(self, topic: str, partition: int) -> MemberView | None:
        for member in self.members:
            for assigned_topic, partitions in member.assignment:
                if assigned_topic == topic and partition in partitions:
                    return member
        return None


#: a classic member's decoded assignment, or the reason it has none
_Decoded = tuple[Assignment, str | None]


@dataclass(slots=True)
class GroupViews:
    protocol: ConsumerProtocol = field(default_factory=ConsumerProtocol)
    #: classic assignments that failed to decode, counted once per GroupMetadata record
    assignment_decode_errors: int = 0
    #: group id -> (GroupMetadata record, its members' decoded assignments): a record is
    #: decoded once, not at every snapshot
    _classic_cache: dict[str, tuple[Record, tuple[_Decoded, ...]]] = field(default_factory=dict)
    #: topic id -> name learned outside the group's own records (the exporter's metadata
    #: lookups): Kafka 4.1 and later no longer write ConsumerGroupPartitionMetadata (key 4),
    #: so a KIP-848 member's assignment names its topics by id only
    topic_names: dict[str, str] = field(default_factory=dict)
    #: ids an assignment held that no record nor lookup named, since the last `take_unnamed`
    unnamed_ids: set[str] = field(default_factory=set)

    def retain(self, group_ids: Iterable[str]) -> None:
        """Forget the cached assignments of groups that are gone."""
        keep = set(group_ids)
        for group_id in [g for g in self._classic_cache if g not in keep]:
            del self._classic_cache[group_id]

    def take_unnamed(self) -> frozenset[str]:
        """The topic ids seen without a name since the last call (for a metadata lookup)."""
        ids = frozenset(self.unnamed_ids)
        self.unnamed_ids.clear()
        return ids

    def _resolve(self, assigned: tuple[TopicPartitions, ...], names: dict[str, str]) -> Assignment:
        """Names from the group's own record first, then the exporter's lookups (looked up
        in both rather than merged: the lookups hold every topic of the cluster)."""
        resolved = []
        for tp in assigned:
            name = names.get(tp.topic_id) or self.topic_names.get(tp.topic_id)
            if name is None:
                self.unnamed_ids.add(tp.topic_id)
                name = tp.topic_id
            resolved.append((name, tp.partitions))
        return tuple(resolved)

    def view(self, group: GroupState) -> GroupView:
        kind = group.kind
        if kind == "CONSUMER":
            return self._consumer(group)
        if kind == "SHARE":
            return self._share(group)
        if kind == "STREAMS":
            return self._streams(group)
        return self._classic(group)

    def _classic(self, group: GroupState) -> GroupView:
        record = group.record(2)
        if record is None or not isinstance(record.value, GroupMetadataValue):
            return GroupView(group.group_id, "CLASSIC", "EMPTY", "", "", -1, -1, True, ())
        value = record.value
        cached = self._classic_cache.get(group.group_id)
        if cached is None or cached[0] is not record:
            decoded = tuple(
                self._classic_assignment(value.protocol_type, m.assignment) for m in value.members
            )
            self._classic_cache[group.group_id] = (record, decoded)
        else:
            decoded = cached[1]
        members = tuple(
            MemberView(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                instance_id=m.group_instance_id,
                rack_id=None,
                member_epoch=None,
                assignment=assignment,
                assignment_error=error,
            )
            for m, (assignment, error) in zip(value.members, decoded, strict=True)
        )
        return GroupView(
            group_id=group.group_id,
            kind="CLASSIC",
            state="STABLE" if members else "EMPTY",
            protocol_type=value.protocol_type,
            protocol=value.protocol or "",
            generation=value.generation,
            assignment_epoch=value.generation,
            is_simple=False,
            members=members,
        )

    def _classic_assignment(self, protocol_type: str, raw: bytes) -> _Decoded:
        if protocol_type != "consumer":
            return (), protocol_type or "missing"
        if not raw:
            return (), "missing"
        try:
            _version, assignment = self.protocol.decode_assignment(raw)
        except DecodeError:
            self.assignment_decode_errors += 1
            return (), "undecodable"
        return tuple((tp.topic, tp.partitions) for tp in assignment.assigned_partitions), None

    def _consumer(self, group: GroupState) -> GroupView:
        epoch = -1
        metadata = group.record(3)
        if metadata is not None and isinstance(metadata.value, ConsumerGroupMetadataValue):
            epoch = metadata.value.epoch
        target_epoch = -1
        target = group.record(6)
        if target is not None and isinstance(
            target.value, ConsumerGroupTargetAssignmentMetadataValue
        ):
            target_epoch = target.value.assignment_epoch
        names = _topic_names(group, 4)
        members = []
        reconciling = False
        assignor = ""
        for member_id, record in group.records_of(5):
            value = record.value
            if not isinstance(value, ConsumerGroupMemberMetadataValue):
                continue
            assignor = assignor or (value.server_assignor or "")
            current = group.record(8, member_id)
            member_epoch: int | None = None
            assignment: Assignment = ()
            error: str | None = "missing"
            if current is not None and isinstance(
                current.value, ConsumerGroupCurrentMemberAssignmentValue
            ):
                member_epoch = current.value.member_epoch
                assignment = self._resolve(current.value.assigned_partitions, names)
                error = None
                if current.value.state != 0 or member_epoch != target_epoch:
                    reconciling = True
            target_record = group.record(7, member_id)
            target_assignment: Assignment = ()
            if target_record is not None and isinstance(
                target_record.value, ConsumerGroupTargetAssignmentMemberValue
            ):
                target_assignment = self._resolve(target_record.value.topic_partitions, names)
            members.append(
                MemberView(
                    member_id=member_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    member_epoch=member_epoch,
                    assignment=assignment,
                    target=target_assignment,
                    assignment_error=error,
                )
            )
        # Kafka's ConsumerGroup.State: the target assignment lags the group epoch while the
        # assignor runs, members lag the target while they reconcile
        if not members:
            state = "EMPTY"
        elif target_epoch < epoch:
            state = "ASSIGNING"
        elif reconciling:
            state = "RECONCILING"
        else:
            state = "STABLE"
        return GroupView(
            group_id=group.group_id,
            kind="CONSUMER",
            state=state,
            protocol_type="consumer",
            protocol=assignor,
            generation=epoch,
            assignment_epoch=target_epoch,
            is_simple=False,
            members=tuple(members),
        )

    def _share(self, group: GroupState) -> GroupView:
        epoch = -1
        metadata = group.record(11)
        if metadata is not None and isinstance(
            metadata.value, ShareGroupMetadataValue | ShareGroupMetadataWithHashValue
        ):
            epoch = metadata.value.epoch
        names = _topic_names(group, 9)
        members = []
        for member_id, record in group.records_of(10):
            value = record.value
            if not isinstance(value, ShareGroupMemberMetadataValue):
                continue
            current = group.record(14, member_id)
            member_epoch: int | None = None
            assignment: Assignment = ()
            if current is not None and isinstance(
                current.value, ShareGroupCurrentMemberAssignmentValue
            ):
                member_epoch = current.value.member_epoch
                assignment = self._resolve(current.value.assigned_partitions, names)
            members.append(
                MemberView(
                    member_id,
                    value.client_id,
                    value.client_host,
                    None,
                    value.rack_id,
                    member_epoch,
                    assignment,
                )
            )
        state = "STABLE" if members else "EMPTY"
        return GroupView(
            group.group_id, "SHARE", state, "share", "", epoch, epoch, False, tuple(members)
        )

    def _streams(self, group: GroupState) -> GroupView:
        epoch = -1
        metadata = group.record(17)
        if metadata is not None and isinstance(metadata.value, StreamsGroupMetadataValue):
            epoch = metadata.value.epoch
        members = []
        for member_id, record in group.records_of(19):
            value = record.value
            if not isinstance(value, StreamsGroupMemberMetadataValue):
                continue
            current = group.record(22, member_id)
            member_epoch = None
            assignment: Assignment = ()
            if current is not None and isinstance(
                current.value, StreamsGroupCurrentMemberAssignmentValue
            ):
                member_epoch = current.value.member_epoch
                # streams assign tasks (subtopology, partition), not topic partitions
                assignment = tuple(
                    (f"subtopology:{task.subtopology_id}", task.partitions)
                    for task in current.value.active_tasks
                )
            members.append(
                MemberView(
                    member_id,
                    value.client_id,
                    value.client_host,
                    value.instance_id,
                    value.rack_id,
                    member_epoch,
                    assignment,
                    # tasks, not the topic partitions offsets are committed for
                    assignment_error="streams",
                )
            )
        state = "STABLE" if members else "EMPTY"
        return GroupView(
            group.group_id, "STREAMS", state, "streams", "", epoch, epoch, False, tuple(members)
        )


def _topic_names(group: GroupState, key_type: int) -> dict[str, str]:
    record = group.record(key_type)
    if record is None or not isinstance(
        record.value, ConsumerGroupPartitionMetadataValue | ShareGroupPartitionMetadataValue
    ):
        return {}
    return {topic.topic_id: topic.topic_name for topic in record.value.topics}
