"""Readable views of a group, derived from the latest records `OffsetState` keeps.

Classic groups: the last GroupMetadata record (members, their client ids/hosts and the
partitions of their consumer-protocol assignment). KIP-848 consumer groups: group epoch,
target assignment epoch and per-member epochs/assignments (types 3-8, topic ids resolved to
names through the partition metadata record where Kafka writes one, 4.0, else through the
exporter's topic metadata lookups, `topic_names`). Share groups: epochs and members.
Streams groups (KIP-1071): members with their tasks, and the topic partitions those tasks
read, from the group's topology record (a task `S_P` of subtopology S reads partition P of
each of S's source and repartition-source topics, as `kafka-streams-groups.sh` maps them).
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
    CurrentTaskIds,
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
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
    TaskIds,
    TopicPartitions,
)
from offsetwatch.exporter.state.offset_state import GroupState

Assignment = tuple[tuple[str, tuple[int, ...]], ...]
TaskIdsLike = CurrentTaskIds | TaskIds
#: streams tasks: (subtopology id, partitions), as Kafka's TaskIds
Tasks = tuple[tuple[str, tuple[int, ...]], ...]
#: Kafka's streams MemberState.STABLE (the consumer groups' STABLE is 0)
_STREAMS_MEMBER_STABLE = 1


@dataclass(frozen=True, slots=True)
class StreamsTasks:
    """A streams member's tasks: what it runs now and what the target assignment gives it."""

    active: Tasks
    standby: Tasks
    warmup: Tasks
    target_active: Tasks = ()
    target_standby: Tasks = ()
    target_warmup: Tasks = ()
    #: the topology epoch the member runs
    topology_epoch: int = -1
    #: the member's process (several members, one per stream thread, share one)
    process_id: str = ""

    def task_of(self, topology: StreamsTopology | None, topic: str, partition: int) -> str | None:
        """The member's active task reading `topic`'s `partition`, named like Kafka Streams
        names it (`0_2`: subtopology 0, partition 2); None when it runs none."""
        if topology is None:
            return None
        for subtopology, partitions in self.active:
            if partition in partitions and topic in topology.sources_of(subtopology):
                return f"{subtopology}_{partition}"
        return None


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    repartition_source_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StreamsTopology:
    """A streams group's topology record (key 23), and the epoch its topics were validated at."""

    epoch: int
    subtopologies: tuple[Subtopology, ...]
    #: -1: not known (4.1 keeps it in memory) or never validated
    validated_epoch: int = -1

    def sources_of(self, subtopology_id: str) -> tuple[str, ...]:
        for sub in self.subtopologies:
            if sub.subtopology_id == subtopology_id:
                return (*sub.source_topics, *sub.repartition_source_topics)
        return ()


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
    #: "missing" (no assignment record / empty bytes), "topology" (a streams member's tasks
    #: without the group's topology), or the protocol type that carries no topic partitions
    #: (e.g. "connect")
    assignment_error: str | None = None
    #: streams members: their tasks (the assignment above is what those tasks read)
    tasks: StreamsTasks | None = None


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
    #: streams groups: the topology (None when the group has none yet, or another kind)
    topology: StreamsTopology | None = None

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
        validated = -1
        newer_coordinator = False
        metadata = group.record(17)
        if metadata is not None and isinstance(metadata.value, StreamsGroupMetadataValue):
            epoch = metadata.value.epoch
            validated = metadata.value.validated_topology_epoch
            # 4.2+ coordinators write the last assignment's configs; 4.1 writes no tags
            newer_coordinator = metadata.value.assignment_configs is not None
        target_epoch = -1
        target = group.record(20)
        if target is not None and isinstance(
            target.value, StreamsGroupTargetAssignmentMetadataValue
        ):
            target_epoch = target.value.assignment_epoch
        topology = _topology(group, validated)
        members = []
        reconciled = True
        for member_id, record in group.records_of(19):
            value = record.value
            if not isinstance(value, StreamsGroupMemberMetadataValue):
                continue
            current = group.record(22, member_id)
            member_epoch = None
            active: Tasks = ()
            standby: Tasks = ()
            warmup: Tasks = ()
            if current is not None and isinstance(
                current.value, StreamsGroupCurrentMemberAssignmentValue
            ):
                now = current.value
                member_epoch = now.member_epoch
                if now.state != _STREAMS_MEMBER_STABLE or member_epoch != target_epoch:
                    reconciled = False
                active, standby, warmup = (
                    _tasks(now.active_tasks),
                    _tasks(now.standby_tasks),
                    _tasks(now.warmup_tasks),
                )
            else:
                reconciled = False
            targets: tuple[Tasks, Tasks, Tasks] = ((), (), ())
            wanted = group.record(21, member_id)
            if wanted is not None and isinstance(
                wanted.value, StreamsGroupTargetAssignmentMemberValue
            ):
                targets = (
                    _tasks(wanted.value.active_tasks),
                    _tasks(wanted.value.standby_tasks),
                    _tasks(wanted.value.warmup_tasks),
                )
            tasks = StreamsTasks(
                active, standby, warmup, *targets, value.topology_epoch, value.process_id
            )
            assignment, error = _task_partitions(topology, tasks.active, current is not None)
            members.append(
                MemberView(
                    member_id,
                    value.client_id,
                    value.client_host,
                    value.instance_id,
                    value.rack_id,
                    member_epoch,
                    assignment,
                    target=_task_partitions(topology, tasks.target_active, True)[0],
                    assignment_error=error,
                    tasks=tasks,
                )
            )
        ready = topology is not None and (
            topology.epoch == validated
            # a 4.1 coordinator never writes the validated epoch: an assignment means it was
            or (validated == -1 and not newer_coordinator and target_epoch >= 0)
        )
        # Kafka's StreamsGroup.maybeUpdateGroupState, from the same records
        if not members:
            state = "EMPTY"
        elif not ready:
            state = "NOT_READY"
        elif epoch > target_epoch:
            state = "ASSIGNING"
        elif not reconciled:
            state = "RECONCILING"
        else:
            state = "STABLE"
        return GroupView(
            group.group_id,
            "STREAMS",
            state,
            "streams",
            "",
            epoch,
            target_epoch,
            False,
            tuple(members),
            topology,
        )


def _topic_names(group: GroupState, key_type: int) -> dict[str, str]:
    record = group.record(key_type)
    if record is None or not isinstance(
        record.value, ConsumerGroupPartitionMetadataValue | ShareGroupPartitionMetadataValue
    ):
        return {}
    return {topic.topic_id: topic.topic_name for topic in record.value.topics}


def _tasks(assigned: Iterable[TaskIdsLike]) -> Tasks:
    return tuple((task.subtopology_id, tuple(task.partitions)) for task in assigned)


def _topology(group: GroupState, validated: int) -> StreamsTopology | None:
    record = group.record(23)
    if record is None or not isinstance(record.value, StreamsGroupTopologyValue):
        return None
    return StreamsTopology(
        record.value.epoch,
        tuple(
            Subtopology(
                sub.subtopology_id,
                tuple(sub.source_topics),
                tuple(topic.name for topic in sub.repartition_source_topics),
                tuple(sub.repartition_sink_topics),
                tuple(topic.name for topic in sub.state_changelog_topics),
            )
            for sub in record.value.subtopologies
        ),
        validated,
    )


def _task_partitions(
    topology: StreamsTopology | None, tasks: Tasks, has_assignment: bool
) -> tuple[Assignment, str | None]:
    """The topic partitions a member's active tasks read (what its commits are for)."""
    if not has_assignment:
        return (), "missing"
    if topology is None:
        return (), "topology" if tasks else None
    by_topic: dict[str, list[int]] = {}
    for subtopology, partitions in tasks:
        for topic in topology.sources_of(subtopology):
            by_topic.setdefault(topic, []).extend(partitions)
    return tuple((topic, tuple(sorted(set(ps)))) for topic, ps in by_topic.items()), None
