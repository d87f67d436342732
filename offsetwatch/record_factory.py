"""Builds real-format `__consumer_offsets` records with the decoder's encoder.

librdkafka's mock cluster serves `__consumer_offsets` like any topic but never writes group
records itself; the demo, the tests and the benchmarks write these instead. Every record goes
through `Codec.encode`, the same encoder that round-trips Kafka 4.0's own bytes exactly.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.consumer_protocol import (
    ConsumerProtocol,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartitionList,
)
from offsetwatch.decoder.layout import Tags
from offsetwatch.decoder.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    CurrentTaskIds,
    GroupKey,
    GroupMemberKey,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TaskIds,
    TopicMetadata,
    TopicPartitions,
)
from offsetwatch.decoder.records import KeyValue as ConfigEntry

KeyValue = tuple[bytes, bytes | None]

# Kafka 4.0 writes an explicit null ClassicMemberMetadata tag for native KIP-848 members
_KAFKA_40_MEMBER_TAGS = Tags(present=(0,))


def topic_id_for(topic: str) -> str:
    """A stable fake topic id (Kafka's 22-character form) derived from the topic name."""
    digest = hashlib.sha256(topic.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    #: topic -> partitions
    assignment: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(slots=True)
class RecordFactory:
    codec: Codec = field(default_factory=Codec)
    protocol: ConsumerProtocol = field(default_factory=ConsumerProtocol)

    def _encode(self, key_type: int, key: object, version: int | None, value: object) -> KeyValue:
        record = Record(key_type, key, version, value)  # type: ignore[arg-type]
        return self.codec.encode(record)

    def commit(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        commit_ts: int,
        *,
        metadata: str = "",
        leader_epoch: int = 0,
    ) -> KeyValue:
        value = OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, -1, "A" * 22)
        return self._encode(1, OffsetCommitKey(group, topic, partition), 3, value)

    def commit_tombstone(self, group: str, topic: str, partition: int) -> KeyValue:
        return self._encode(1, OffsetCommitKey(group, topic, partition), None, None)

    def classic_group(
        self, group: str, generation: int, members: list[Member], now_ms: int
    ) -> KeyValue:
        encoded = []
        for m in members:
            topics = tuple(sorted({t for t, _ in m.assignment}))
            subscription = self.protocol.encode(
                3, ConsumerProtocolSubscription(topics, None, (), generation, None)
            )
            assignment = self.protocol.encode(
                3,
                ConsumerProtocolAssignment(
                    tuple(TopicPartitionList(t, ps) for t, ps in m.assignment), None
                ),
            )
            encoded.append(
                MemberMetadata(
                    m.member_id,
                    None,
                    m.client_id,
                    m.host,
                    300_000,
                    45_000,
                    subscription,
                    assignment,
                )
            )
        value = GroupMetadataValue(
            "consumer" if members else "",
            generation,
            "range" if members else None,
            members[0].member_id if members else None,
            now_ms,
            tuple(encoded),
        )
        return self._encode(2, GroupMetadataKey(group), 3, value)

    def classic_group_tombstone(self, group: str) -> KeyValue:
        return self._encode(2, GroupMetadataKey(group), None, None)

    def consumer_group(
        self, group: str, epoch: int, members: list[Member], topic_partitions: dict[str, int]
    ) -> list[KeyValue]:
        """The KIP-848 records a 4.0 coordinator writes for a stable group."""
        out = [
            self._encode(3, GroupKey(group), 0, ConsumerGroupMetadataValue(epoch, 0, -1)),
            self._encode(
                4,
                GroupKey(group),
                0,
                ConsumerGroupPartitionMetadataValue(
                    tuple(
                        TopicMetadata(topic_id_for(t), t, n, ())
                        for t, n in sorted(topic_partitions.items())
                    )
                ),
            ),
        ]
        for m in members:
            key = GroupMemberKey(group, m.member_id)
            assigned = tuple(TopicPartitions(topic_id_for(t), ps, None) for t, ps in m.assignment)
            subscribed = tuple(sorted({t for t, _ in m.assignment}))
            out.append(
                self._encode(
                    5,
                    key,
                    0,
                    ConsumerGroupMemberMetadataValue(
                        None,
                        None,
                        m.client_id,
                        m.host,
                        subscribed,
                        None,
                        300_000,
                        "uniform",
                        None,
                        _KAFKA_40_MEMBER_TAGS,
                    ),
                )
            )
            out.append(self._encode(7, key, 0, ConsumerGroupTargetAssignmentMemberValue(assigned)))
        out.append(
            self._encode(
                6, GroupKey(group), 0, ConsumerGroupTargetAssignmentMetadataValue(epoch, 0)
            )
        )
        for m in members:
            assigned = tuple(TopicPartitions(topic_id_for(t), ps, None) for t, ps in m.assignment)
            out.append(
                self._encode(
                    8,
                    GroupMemberKey(group, m.member_id),
                    0,
                    ConsumerGroupCurrentMemberAssignmentValue(epoch, epoch - 1, 0, assigned, ()),
                )
            )
        return out

    def streams_group(
        self, group: str, epoch: int, members: list[Member], topic: str
    ) -> list[KeyValue]:
        """The records a 4.4 coordinator writes for a stable streams group (KIP-1071) whose
        topology is one subtopology ("0") reading `topic`: each member runs the tasks of the
        partitions its `assignment` names (task `0_P` reads partition P)."""
        out = []
        for m in members:
            value = StreamsGroupMemberMetadataValue(
                instance_id=None,
                rack_id=None,
                client_id=m.client_id,
                client_host=m.host,
                rebalance_timeout_ms=300_000,
                topology_epoch=0,
                process_id=_process_id(m.member_id),
                user_endpoint=None,
                client_tags=(),
            )
            out.append(self._encode(19, GroupMemberKey(group, m.member_id), 0, value))
        source = Subtopology("0", (topic,), (), (), (), (), ())
        out.append(self._encode(23, GroupKey(group), 0, StreamsGroupTopologyValue(0, (source,))))
        configs = (ConfigEntry("num.standby.replicas", "0"),)
        metadata = StreamsGroupMetadataValue(
            epoch=epoch,
            metadata_hash=0,
            validated_topology_epoch=0,
            assignment_configs=configs,
            stored_description_topology_epoch=-1,
            failed_description_topology_epoch=-1,
        )
        out.append(self._encode(17, GroupKey(group), 0, metadata))
        for m in members:
            tasks = tuple(TaskIds("0", ps) for t, ps in m.assignment if t == topic)
            out.append(
                self._encode(
                    21,
                    GroupMemberKey(group, m.member_id),
                    0,
                    StreamsGroupTargetAssignmentMemberValue(tasks, (), ()),
                )
            )
        out.append(
            self._encode(
                20, GroupKey(group), 0, StreamsGroupTargetAssignmentMetadataValue(epoch, 0)
            )
        )
        for m in members:
            current = tuple(CurrentTaskIds("0", ps, None) for t, ps in m.assignment if t == topic)
            value22 = StreamsGroupCurrentMemberAssignmentValue(
                epoch, epoch - 1, 1, current, (), (), (), (), ()
            )
            out.append(self._encode(22, GroupMemberKey(group, m.member_id), 0, value22))
        return out


def _process_id(member_id: str) -> str:
    """A stable UUID-shaped process id per simulated instance."""
    digest = hashlib.sha256(member_id.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
