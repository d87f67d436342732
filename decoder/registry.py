"""The table of record types Kafka writes to `__consumer_offsets` (key type K -> layouts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from offsetwatch.decoder import records as r
from offsetwatch.decoder.layout import Versions


@dataclass(frozen=True, slots=True)
class RecordType:
    key_type: int
    #: canonical name, the `type` discriminator of our JSON
    name: str
    #: Kafka's schema name (without Key/Value)
    kafka_name: str
    key_class: type
    #: layouts of the value; more than one when Kafka changed a layout without a version bump
    #: (share groups while in preview): the first one that consumes the bytes exactly wins
    value_classes: tuple[type, ...]
    value_versions: Versions
    #: first flexible value version, None if never flexible
    flexible_from: int | None
    #: a value version above the known range is read with the newest layout (types 0-2,
    #: whose later versions only add tagged fields); other types reject it
    read_newer_versions: bool = False


def _t(
    key_type: int,
    name: str,
    kafka_name: str,
    key_class: type,
    *value_classes: type,
    versions: str = "0",
    flexible_from: int | None = 0,
    read_newer: bool = False,
) -> RecordType:
    return RecordType(
        key_type,
        name,
        kafka_name,
        key_class,
        value_classes,
        Versions.parse(versions),
        flexible_from,
        read_newer,
    )


_TYPES: Final = (
    _t(0, "offset_commit", "LegacyOffsetCommit", r.OffsetCommitKey, r.OffsetCommitValue,
       versions="0-4", flexible_from=4, read_newer=True),
    _t(1, "offset_commit", "OffsetCommit", r.OffsetCommitKey, r.OffsetCommitValue,
       versions="0-4", flexible_from=4, read_newer=True),
    _t(2, "group_metadata", "GroupMetadata", r.GroupMetadataKey, r.GroupMetadataValue,
       versions="0-4", flexible_from=4, read_newer=True),
    _t(3, "consumer_group_metadata", "ConsumerGroupMetadata", r.GroupKey,
       r.ConsumerGroupMetadataValue),
    _t(4, "consumer_group_partition_metadata", "ConsumerGroupPartitionMetadata", r.GroupKey,
       r.ConsumerGroupPartitionMetadataValue),
    _t(5, "consumer_group_member_metadata", "ConsumerGroupMemberMetadata", r.GroupMemberKey,
       r.ConsumerGroupMemberMetadataValue),
    _t(6, "consumer_group_target_assignment_metadata", "ConsumerGroupTargetAssignmentMetadata",
       r.GroupKey, r.ConsumerGroupTargetAssignmentMetadataValue),
    _t(7, "consumer_group_target_assignment_member", "ConsumerGroupTargetAssignmentMember",
       r.GroupMemberKey, r.ConsumerGroupTargetAssignmentMemberValue),
    _t(8, "consumer_group_current_member_assignment", "ConsumerGroupCurrentMemberAssignment",
       r.GroupMemberKey, r.ConsumerGroupCurrentMemberAssignmentValue),
    _t(9, "share_group_partition_metadata", "ShareGroupPartitionMetadata", r.GroupKey,
       r.ShareGroupPartitionMetadataValue),
    _t(10, "share_group_member_metadata", "ShareGroupMemberMetadata", r.GroupMemberKey,
       r.ShareGroupMemberMetadataValue),
    _t(11, "share_group_metadata", "ShareGroupMetadata", r.GroupKey,
       r.ShareGroupMetadataValue, r.ShareGroupMetadataWithHashValue),
    _t(12, "share_group_target_assignment_metadata", "ShareGroupTargetAssignmentMetadata",
       r.GroupKey, r.ShareGroupTargetAssignmentMetadataValue),
    _t(13, "share_group_target_assignment_member", "ShareGroupTargetAssignmentMember",
       r.GroupMemberKey, r.ShareGroupTargetAssignmentMemberValue),
    _t(14, "share_group_current_member_assignment", "ShareGroupCurrentMemberAssignment",
       r.GroupMemberKey, r.ShareGroupCurrentMemberAssignmentValue),
    _t(15, "share_group_state_partition_metadata", "ShareGroupStatePartitionMetadata",
       r.GroupKey, r.ShareGroupStatePartitionMetadataValue,
       r.ShareGroupStatePartitionMetadataWithInitializingValue),
    _t(16, "consumer_group_regular_expression", "ConsumerGroupRegularExpression",
       r.RegularExpressionKey, r.ConsumerGroupRegularExpressionValue),
    _t(17, "streams_group_metadata", "StreamsGroupMetadata", r.GroupKey,
       r.StreamsGroupMetadataValue),
    _t(18, "streams_group_partition_metadata", "StreamsGroupPartitionMetadata", r.GroupKey,
       r.StreamsGroupPartitionMetadataValue),
    _t(19, "streams_group_member_metadata", "StreamsGroupMemberMetadata", r.GroupMemberKey,
       r.StreamsGroupMemberMetadataValue),
    _t(20, "streams_group_target_assignment_metadata", "StreamsGroupTargetAssignmentMetadata",
       r.GroupKey, r.StreamsGroupTargetAssignmentMetadataValue),
    _t(21, "streams_group_target_assignment_member", "StreamsGroupTargetAssignmentMember",
       r.GroupMemberKey, r.StreamsGroupTargetAssignmentMemberValue),
    _t(22, "streams_group_current_member_assignment", "StreamsGroupCurrentMemberAssignment",
       r.GroupMemberKey, r.StreamsGroupCurrentMemberAssignmentValue),
    _t(23, "streams_group_topology", "StreamsGroupTopology", r.GroupKey,
       r.StreamsGroupTopologyValue),
    _t(24, "streams_group_target_assignment_resolved_topic_ids",
       "StreamsGroupTargetAssignmentResolvedTopicIds", r.GroupKey,
       r.StreamsGroupTargetAssignmentResolvedTopicIdsValue),
)  # fmt: skip

RECORD_TYPES: Final = {t.key_type: t for t in _TYPES}

#: the internal topic of the share coordinator (KIP-932) and its own key-type table
SHARE_STATE_TOPIC: Final = "__share_group_state"

#: `__share_group_state`'s record types. Their key types collide with those of
#: `__consumer_offsets` (0, 1): the topic picks the table, and the records are
#: `ShareStateRecord`s. Each version 0 has two layouts (4.0; 4.1+ after a breaking change of
#: the preview): the first that consumes the bytes exactly wins.
SHARE_STATE_TYPES: Final = {
    t.key_type: t
    for t in (
        _t(0, "share_snapshot", "ShareSnapshot", r.SharePartitionKey, r.ShareSnapshotValue,
           r.ShareSnapshotWithTimestampsValue),
        _t(1, "share_update", "ShareUpdate", r.SharePartitionKey, r.ShareUpdateValue,
           r.ShareUpdateWideEpochValue),
    )
}  # fmt: skip

#: the `key_type` of log-end samples: negative, so never a Kafka key type (those are int16 >= 0)
LOG_END_KEY_TYPE: Final = -1

#: record types offsetwatch writes itself beside the decoded ones (archive, republished topic).
#: Kept out of RECORD_TYPES on purpose: the decoder must never read Kafka bytes as one of them.
OWN_TYPES: Final = (
    RecordType(
        LOG_END_KEY_TYPE,
        "log_end",
        "LogEndSample",
        r.LogEndKey,
        (r.LogEndValue,),
        Versions.parse("0"),
        None,
    ),
)

#: value class -> the record types it belongs to (for encoding without the key type)
TYPE_NAMES: Final = tuple(sorted({t.name for t in _TYPES}))
