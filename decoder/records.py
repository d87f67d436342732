"""Typed records of `__consumer_offsets`: keys, values and their nested structs.

Field order is wire order. Python names are snake_case; Kafka's JSON names are their
camelCase form (see `layout.field_layouts`). Sources: ../shared/spec/consumer-offsets-format.md
(Kafka 0.8.2 through 4.x and trunk).
"""

from __future__ import annotations

from dataclasses import dataclass

from offsetwatch.decoder.layout import ZERO_UUID, Kind, Tags, tags_field, wire

I8, I16, I32, I64, U16 = Kind.INT8, Kind.INT16, Kind.INT32, Kind.INT64, Kind.UINT16
STR, BYTES, UUID, ARR, STRUCT = Kind.STRING, Kind.BYTES, Kind.UUID, Kind.ARRAY, Kind.STRUCT

# --------------------------------------------------------------------------------------------
# Keys (never flexible)


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Key types 0 (legacy, 0.8.2) and 1."""

    group: str = wire(STR)
    topic: str = wire(STR)
    partition: int = wire(I32)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Key type 2: a classic-protocol group."""

    group: str = wire(STR)


@dataclass(frozen=True, slots=True)
class GroupKey:
    """Group-scoped records of KIP-848 consumer, share and streams groups."""

    group_id: str = wire(STR)


@dataclass(frozen=True, slots=True)
class GroupMemberKey:
    """Member-scoped records of KIP-848 consumer, share and streams groups."""

    group_id: str = wire(STR)
    member_id: str = wire(STR)


@dataclass(frozen=True, slots=True)
class RegularExpressionKey:
    """Key type 16: a resolved subscription regex of a consumer group."""

    group_id: str = wire(STR)
    regular_expression: str = wire(STR)


Key = OffsetCommitKey | GroupMetadataKey | GroupKey | GroupMemberKey | RegularExpressionKey

# --------------------------------------------------------------------------------------------
# Type 0/1: offset commits


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int = wire(I64)
    leader_epoch: int = wire(I32, versions="3+", default=-1)
    metadata: str = wire(STR)
    commit_timestamp: int = wire(I64)
    expire_timestamp: int = wire(I64, versions="1", default=-1)
    topic_id: str = wire(UUID, versions="4+", tag=0, default=ZERO_UUID)
    tags: Tags = tags_field()


# --------------------------------------------------------------------------------------------
# Type 2: classic group metadata


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str = wire(STR)
    group_instance_id: str | None = wire(STR, versions="3+", nullable="0+")
    client_id: str = wire(STR)
    client_host: str = wire(STR)
    rebalance_timeout: int = wire(I32, versions="1+", default=-1)
    session_timeout: int = wire(I32)
    subscription: bytes = wire(BYTES)
    assignment: bytes = wire(BYTES)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str = wire(STR)
    generation: int = wire(I32)
    protocol: str | None = wire(STR, nullable="0+")
    leader: str | None = wire(STR, nullable="0+")
    current_state_timestamp: int = wire(I64, versions="2+", default=-1)
    members: tuple[MemberMetadata, ...] = wire(ARR, item=MemberMetadata)
    tags: Tags = tags_field()


# --------------------------------------------------------------------------------------------
# Shared nested structs of KIP-848 / share / streams records


@dataclass(frozen=True, slots=True)
class PartitionRacks:
    partition: int = wire(I32)
    racks: tuple[str, ...] = wire(ARR, item=STR)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: str = wire(UUID)
    topic_name: str = wire(STR)
    num_partitions: int = wire(I32)
    partition_metadata: tuple[PartitionRacks, ...] = wire(ARR, item=PartitionRacks)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic_id: str = wire(UUID)
    partitions: tuple[int, ...] = wire(ARR, item=I32)
    #: trunk (KIP-1251): epochs at which each partition was assigned
    assignment_epochs: tuple[int, ...] | None = wire(
        ARR, item=I32, versions="0+", nullable="0+", tag=0
    )
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str = wire(STR)
    metadata: bytes = wire(BYTES)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    session_timeout_ms: int = wire(I32)
    supported_protocols: tuple[ClassicProtocol, ...] = wire(ARR, item=ClassicProtocol)
    tags: Tags = tags_field()


# --------------------------------------------------------------------------------------------
# Types 3-8, 16: KIP-848 consumer groups


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int = wire(I32)
    metadata_hash: int = wire(I64, tag=0)
    creation_time_ms: int = wire(I64, tag=1, default=-1)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = wire(ARR, item=TopicMetadata)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None = wire(STR, nullable="0+")
    rack_id: str | None = wire(STR, nullable="0+")
    client_id: str = wire(STR)
    client_host: str = wire(STR)
    subscribed_topic_names: tuple[str, ...] = wire(ARR, item=STR)
    subscribed_topic_regex: str | None = wire(STR, nullable="0+")
    rebalance_timeout_ms: int = wire(I32, default=-1)
    server_assignor: str | None = wire(STR, nullable="0+")
    classic_member_metadata: ClassicMemberMetadata | None = wire(
        STRUCT, struct=ClassicMemberMetadata, nullable="0+", tag=0
    )
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int = wire(I32)
    #: "added in 4.3" (KIP-1263)
    assignment_timestamp: int = wire(I64, tag=0)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = wire(ARR, item=TopicPartitions)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int = wire(I32)
    previous_member_epoch: int = wire(I32)
    #: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 127 UNKNOWN
    state: int = wire(I8)
    assigned_partitions: tuple[TopicPartitions, ...] = wire(ARR, item=TopicPartitions)
    partitions_pending_revocation: tuple[TopicPartitions, ...] = wire(ARR, item=TopicPartitions)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...] = wire(ARR, item=STR)
    #: the metadata image offset the regex was resolved at (not the record's value version)
    version: int = wire(I64)
    timestamp: int = wire(I64)
    tags: Tags = tags_field()


# --------------------------------------------------------------------------------------------
# Types 9-15: share groups (KIP-932; layouts changed while in preview)


@dataclass(frozen=True, slots=True)
class ShareGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = wire(ARR, item=TopicMetadata)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None = wire(STR, nullable="0+")
    client_id: str = wire(STR)
    client_host: str = wire(STR)
    subscribed_topic_names: tuple[str, ...] = wire(ARR, item=STR)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    """Kafka 4.0 layout."""

    epoch: int = wire(I32)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataWithHashValue:
    """Trunk layout of the same version 0 (preview feature, breaking change)."""

    epoch: int = wire(I32)
    metadata_hash: int = wire(I64)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int = wire(I32)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = wire(ARR, item=TopicPartitions)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int = wire(I32)
    previous_member_epoch: int = wire(I32)
    state: int = wire(I8)
    assigned_partitions: tuple[TopicPartitions, ...] = wire(ARR, item=TopicPartitions)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: str = wire(UUID)
    topic_name: str = wire(STR)
    partitions: tuple[int, ...] = wire(ARR, item=I32)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: str = wire(UUID)
    topic_name: str = wire(STR)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    """Kafka 4.0 layout (known to 4.0, not written by it)."""

    initialized_topics: tuple[TopicPartitionsInfo, ...] = wire(ARR, item=TopicPartitionsInfo)
    deleting_topics: tuple[TopicInfo, ...] = wire(ARR, item=TopicInfo)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataWithInitializingValue:
    """Trunk layout of the same version 0: topics being initialised come first."""

    initializing_topics: tuple[TopicPartitionsInfo, ...] = wire(ARR, item=TopicPartitionsInfo)
    initialized_topics: tuple[TopicPartitionsInfo, ...] = wire(ARR, item=TopicPartitionsInfo)
    deleting_topics: tuple[TopicInfo, ...] = wire(ARR, item=TopicInfo)
    tags: Tags = tags_field()


# --------------------------------------------------------------------------------------------
# Types 17-24: streams groups (KIP-1071, 4.1+)


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str = wire(STR)
    value: str = wire(STR)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataValue:
    """4.1 writes epoch and hash only; 4.2 added tags 0-1, 4.4 tags 2-3 (checked against the
    records of real Kafka Streams applications on each release)."""

    epoch: int = wire(I32)
    metadata_hash: int = wire(I64)
    #: the topology epoch whose topics the coordinator found present (NOT_READY until then)
    validated_topology_epoch: int = wire(I32, tag=0, default=-1)
    #: Kafka's LastAssignmentConfigs: the assignment configs of the last assignment
    assignment_configs: tuple[KeyValue, ...] | None = wire(
        ARR, item=KeyValue, nullable="0+", tag=1, name="lastAssignmentConfigs"
    )
    stored_description_topology_epoch: int = wire(I32, tag=2, default=-1)
    failed_description_topology_epoch: int = wire(I32, tag=3, default=-1)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = wire(ARR, item=TopicMetadata)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str = wire(STR)
    port: int = wire(U16)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    instance_id: str | None = wire(STR, nullable="0+")
    rack_id: str | None = wire(STR, nullable="0+")
    client_id: str = wire(STR)
    client_host: str = wire(STR)
    rebalance_timeout_ms: int = wire(I32)
    topology_epoch: int = wire(I32)
    process_id: str = wire(STR)
    user_endpoint: Endpoint | None = wire(STRUCT, struct=Endpoint, nullable="0+")
    client_tags: tuple[KeyValue, ...] = wire(ARR, item=KeyValue)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataValue:
    assignment_epoch: int = wire(I32)
    #: 4.3+: when the target assignment was computed
    assignment_timestamp: int = wire(I64, tag=0)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class TaskIds:
    subtopology_id: str = wire(STR)
    partitions: tuple[int, ...] = wire(ARR, item=I32)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class CurrentTaskIds:
    """A member's current tasks of one subtopology (its own struct in Kafka's schema)."""

    subtopology_id: str = wire(STR)
    partitions: tuple[int, ...] = wire(ARR, item=I32)
    #: 4.4+: the assignment epoch at which each partition's task was assigned
    assignment_epochs: tuple[int, ...] | None = wire(ARR, item=I32, nullable="0+", tag=0)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberValue:
    active_tasks: tuple[TaskIds, ...] = wire(ARR, item=TaskIds)
    standby_tasks: tuple[TaskIds, ...] = wire(ARR, item=TaskIds)
    warmup_tasks: tuple[TaskIds, ...] = wire(ARR, item=TaskIds)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    member_epoch: int = wire(I32)
    previous_member_epoch: int = wire(I32)
    state: int = wire(I8)
    active_tasks: tuple[CurrentTaskIds, ...] = wire(ARR, item=CurrentTaskIds)
    standby_tasks: tuple[CurrentTaskIds, ...] = wire(ARR, item=CurrentTaskIds)
    warmup_tasks: tuple[CurrentTaskIds, ...] = wire(ARR, item=CurrentTaskIds)
    active_tasks_pending_revocation: tuple[CurrentTaskIds, ...] = wire(ARR, item=CurrentTaskIds)
    standby_tasks_pending_revocation: tuple[CurrentTaskIds, ...] = wire(ARR, item=CurrentTaskIds)
    warmup_tasks_pending_revocation: tuple[CurrentTaskIds, ...] = wire(ARR, item=CurrentTaskIds)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class TopicConfig:
    key: str = wire(STR)
    value: str = wire(STR)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsTopicInfo:
    name: str = wire(STR)
    partitions: int = wire(I32)
    replication_factor: int = wire(I16)
    topic_configs: tuple[TopicConfig, ...] = wire(ARR, item=TopicConfig)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    source_topics: tuple[int, ...] = wire(ARR, item=I16)
    source_topic_regex: tuple[int, ...] = wire(ARR, item=I16)
    repartition_source_topics: tuple[int, ...] = wire(ARR, item=I16)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str = wire(STR)
    source_topics: tuple[str, ...] = wire(ARR, item=STR)
    source_topic_regex: tuple[str, ...] = wire(ARR, item=STR)
    state_changelog_topics: tuple[StreamsTopicInfo, ...] = wire(ARR, item=StreamsTopicInfo)
    repartition_sink_topics: tuple[str, ...] = wire(ARR, item=STR)
    repartition_source_topics: tuple[StreamsTopicInfo, ...] = wire(ARR, item=StreamsTopicInfo)
    copartition_groups: tuple[CopartitionGroup, ...] = wire(ARR, item=CopartitionGroup)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyValue:
    epoch: int = wire(I32)
    subtopologies: tuple[Subtopology, ...] = wire(ARR, item=Subtopology)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class SubtopologyTopicIds:
    subtopology_id: str = wire(STR)
    topic_ids: tuple[str, ...] = wire(ARR, item=UUID)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentResolvedTopicIdsValue:
    assignment_epoch: int = wire(I32)
    resolved_topic_ids_by_subtopology: tuple[SubtopologyTopicIds, ...] = wire(
        ARR, item=SubtopologyTopicIds
    )
    tags: Tags = tags_field()


# --------------------------------------------------------------------------------------------
# `__share_group_state` (KIP-932): the share coordinator's durable state of each share
# partition. Its key types 0 (ShareSnapshot) and 1 (ShareUpdate) are not those of
# __consumer_offsets: the topic decides which table applies (`registry.SHARE_STATE_TYPES`).
# Sources: kafka-share-coordinator-4.0.0.jar common/message/Share*.json; apache/kafka 4.1/4.2
# and trunk share-coordinator/src/main/resources/common/message/ (KAFKA-18170 timestamps,
# #20016 int32 snapshot epoch, KAFKA-19797 / KIP-1226 DeliveryCompleteCount tag).


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """Key types 0 and 1 of `__share_group_state`: one share partition of one share group."""

    group_id: str = wire(STR)
    topic_id: str = wire(UUID)
    partition: int = wire(I32)


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one delivery state (0 available, 2 acknowledged, 4 archived)."""

    first_offset: int = wire(I64)
    last_offset: int = wire(I64)
    delivery_state: int = wire(I8)
    delivery_count: int = wire(I16)
    tags: Tags = tags_field()


#: KIP-1226's tag: Kafka's default when the writer (4.0, 4.1) did not count
DELIVERY_COMPLETE_UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    """Kafka 4.0 layout of version 0: the whole state of a share partition."""

    snapshot_epoch: int = wire(U16)
    state_epoch: int = wire(I32)
    leader_epoch: int = wire(I32)
    start_offset: int = wire(I64)
    state_batches: tuple[StateBatch, ...] = wire(ARR, item=StateBatch)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareSnapshotWithTimestampsValue:
    """Kafka 4.1+ layout of the same version 0 (preview feature, breaking change): int32
    snapshot epoch, create/write timestamps; 4.2 adds the delivery-complete count tag."""

    snapshot_epoch: int = wire(I32)
    state_epoch: int = wire(I32)
    leader_epoch: int = wire(I32)
    start_offset: int = wire(I64)
    #: offsets at or above the start offset whose delivery is complete (KIP-1226, 4.2+)
    delivery_complete_count: int = wire(I32, tag=0, default=DELIVERY_COMPLETE_UNKNOWN)
    create_timestamp: int = wire(I64)
    write_timestamp: int = wire(I64)
    state_batches: tuple[StateBatch, ...] = wire(ARR, item=StateBatch)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    """Kafka 4.0 layout of version 0: a change to the last snapshot (start offset -1: not
    changed)."""

    snapshot_epoch: int = wire(U16)
    leader_epoch: int = wire(I32)
    start_offset: int = wire(I64)
    state_batches: tuple[StateBatch, ...] = wire(ARR, item=StateBatch)
    tags: Tags = tags_field()


@dataclass(frozen=True, slots=True)
class ShareUpdateWideEpochValue:
    """Kafka 4.1+ layout of the same version 0: int32 snapshot epoch; 4.2 adds the
    delivery-complete count tag."""

    snapshot_epoch: int = wire(I32)
    leader_epoch: int = wire(I32)
    start_offset: int = wire(I64)
    delivery_complete_count: int = wire(I32, tag=0, default=DELIVERY_COMPLETE_UNKNOWN)
    state_batches: tuple[StateBatch, ...] = wire(ARR, item=StateBatch)
    tags: Tags = tags_field()


ShareStateValue = (
    ShareSnapshotValue
    | ShareSnapshotWithTimestampsValue
    | ShareUpdateValue
    | ShareUpdateWideEpochValue
)


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """One decoded record of `__share_group_state` (the envelope of `Record`, another table).

    A type of its own, not a `Record`: key types 0/1 mean offset commits in
    `__consumer_offsets`, so nothing keyed on `Record.key_type` may ever see one of these.
    """

    key_type: int
    key: SharePartitionKey
    value_version: int | None
    value: ShareStateValue | None
    partition: int = -1
    offset: int = -1
    timestamp: int = -1

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def type_name(self) -> str:
        from offsetwatch.decoder.registry import SHARE_STATE_TYPES

        return SHARE_STATE_TYPES[self.key_type].name

    @property
    def newer_than_known(self) -> bool:
        return False


# --------------------------------------------------------------------------------------------
# Not from __consumer_offsets: records offsetwatch adds to its own outputs (archive, republished
# topic). They share the canonical envelope but are never decoded from Kafka bytes.


@dataclass(frozen=True, slots=True)
class LogEndKey:
    """A log-end sample's key: the data partition that was sampled."""

    topic: str = wire(STR)
    partition: int = wire(I32)


@dataclass(frozen=True, slots=True)
class LogEndValue:
    """A log-end sample: the partition's log-end offset (high watermark) at `sampled_at_ms`."""

    log_end_offset: int = wire(I64)
    sampled_at_ms: int = wire(I64)


Value = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
    | ShareGroupPartitionMetadataValue
    | ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupMetadataWithHashValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
    | ShareGroupStatePartitionMetadataWithInitializingValue
    | StreamsGroupMetadataValue
    | StreamsGroupPartitionMetadataValue
    | StreamsGroupMemberMetadataValue
    | StreamsGroupTargetAssignmentMetadataValue
    | StreamsGroupTargetAssignmentMemberValue
    | StreamsGroupCurrentMemberAssignmentValue
    | StreamsGroupTopologyValue
    | StreamsGroupTargetAssignmentResolvedTopicIdsValue
)


# --------------------------------------------------------------------------------------------
# The envelope


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record of `__consumer_offsets`.

    `value` is None for a tombstone (the deletion of whatever the key identifies).
    `partition`/`offset`/`timestamp` locate the record in the topic (-1 when unknown, e.g.
    for bytes decoded out of context).
    """

    key_type: int
    key: Key
    value_version: int | None
    value: Value | None
    partition: int = -1
    offset: int = -1
    timestamp: int = -1

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def type_name(self) -> str:
        from offsetwatch.decoder.registry import RECORD_TYPES

        return RECORD_TYPES[self.key_type].name

    @property
    def newer_than_known(self) -> bool:
        """The value version is above what this decoder knows (parsed with the newest layout)."""
        from offsetwatch.decoder.registry import RECORD_TYPES

        version = self.value_version
        return version is not None and version > RECORD_TYPES[self.key_type].value_versions.high


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A key type this decoder does not know: kept whole, never dropped."""

    key_type: int
    key: bytes
    value: bytes | None
    partition: int = -1
    offset: int = -1
    timestamp: int = -1

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def type_name(self) -> str:
        return "unknown"


AnyRecord = Record | UnknownRecord
