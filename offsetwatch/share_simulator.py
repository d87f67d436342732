"""Share groups (KIP-932 queues) for the demo: the records a 4.0 broker would write for them.

librdkafka's mock cluster has no share coordinator, so the demo writes what a Kafka 4.0 broker
writes for a share group: its `__consumer_offsets` records (key types 9-14: the group, its
topics' ids and names, members, assignments) and its `__share_group_state` records (one
ShareSnapshot per share partition), all through the decoder's encoders, so the exporter reads
them exactly as it reads a real broker's. One queue per status a share group can have:

* `share-poison`: keeps up, but some records were archived at the delivery limit (5) and
  others wait for their third delivery: WARN, cause poison_records, on partitions 0 and 3;
* `share-lagging`: the members acknowledge half of what is produced: WARN, the backlog grows;
* `share-stuck`: two members hold records and the start offset never moves: STALL;
* `share-stopped`: records wait and the group has no members: STOP.

A snapshot is written per partition at every tick (Kafka writes one every
`share.coordinator.snapshot.update.records.per.snapshot` updates; snapshots alone keep the
demo's state exactly what the simulation says, and updates are covered by the exporter's tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.decoder.records import (
    GroupKey,
    GroupMemberKey,
    Record,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupPartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    StateBatch,
    TopicMetadata,
    TopicPartitions,
)
from offsetwatch.decoder.share_state import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    SHARE_STATE_TOPIC,
    ShareStateCodec,
)
from offsetwatch.record_factory import KeyValue, topic_id_for

__all__ = ["SHARE_BEHAVIOURS", "SHARE_STATE_PARTITIONS", "ShareQueue", "ShareRecords"]

#: partitions of the demo's `__share_group_state` (Kafka's default is 50; any count works)
SHARE_STATE_PARTITIONS: Final = 3
SHARE_BEHAVIOURS: Final = frozenset(
    {"share-poison", "share-lagging", "share-stuck", "share-stopped"}
)
#: records a member has in flight past the start offset (acquired, released, acknowledged...)
IN_FLIGHT: Final = 40
#: the poison queue's partitions with records archived at the delivery limit
POISON_PARTITIONS: Final = (0, 3)


@dataclass(slots=True)
class ShareRecords:
    """Encodes a share group's `__consumer_offsets` and `__share_group_state` records."""

    codec: Codec = field(default_factory=Codec)
    state_codec: ShareStateCodec = field(default_factory=ShareStateCodec)

    def _encode(self, key_type: int, key: object, value: object) -> KeyValue:
        return self.codec.encode(Record(key_type, key, 0, value))  # type: ignore[arg-type]

    def group(
        self,
        group: str,
        epoch: int,
        topic: str,
        partitions: int,
        members: list[tuple[str, str, str]],
    ) -> list[KeyValue]:
        """A stable share group whose members (member id, client id, host) all share every
        partition of `topic`, in the order a 4.0 coordinator writes the records."""
        topic_id = topic_id_for(topic)
        everything = (TopicPartitions(topic_id, tuple(range(partitions)), None),)
        out = [
            self._encode(11, GroupKey(group), ShareGroupMetadataValue(epoch)),
            self._encode(
                9,
                GroupKey(group),
                ShareGroupPartitionMetadataValue((TopicMetadata(topic_id, topic, partitions, ()),)),
            ),
        ]
        for member_id, client_id, host in members:
            key = GroupMemberKey(group, member_id)
            out.append(
                self._encode(
                    10, key, ShareGroupMemberMetadataValue(None, client_id, host, (topic,))
                )
            )
            out.append(self._encode(13, key, ShareGroupTargetAssignmentMemberValue(everything)))
        out.append(
            self._encode(12, GroupKey(group), ShareGroupTargetAssignmentMetadataValue(epoch))
        )
        for member_id, _, _ in members:
            value = ShareGroupCurrentMemberAssignmentValue(epoch, epoch - 1, 0, everything)
            out.append(self._encode(14, GroupMemberKey(group, member_id), value))
        return out

    def snapshot(
        self,
        group: str,
        topic: str,
        partition: int,
        epoch: int,
        start_offset: int,
        batches: list[tuple[int, int, int, int]],
    ) -> tuple[int, bytes, bytes | None]:
        """(`__share_group_state` partition, key, value) of a ShareSnapshot; `batches` are
        (first offset, last offset, delivery state, delivery count)."""
        topic_id = topic_id_for(topic)
        value = ShareSnapshotValue(
            epoch, 1, 0, start_offset, tuple(StateBatch(*b) for b in batches)
        )
        record = ShareStateRecord(0, SharePartitionKey(group, topic_id, partition), 0, value)
        key, encoded = self.state_codec.encode(record)
        # Kafka's share coordinator: abs("group:topicId:partition".hashCode()) % partitions
        target = partition_for(f"{group}:{topic_id}:{partition}", SHARE_STATE_PARTITIONS)
        return target, key, encoded


@dataclass(slots=True)
class ShareQueue:
    """One simulated share group; `step` writes its state for the current log ends."""

    group: str
    behaviour: str
    topic: str
    partitions: int
    #: messages per second per partition of the topic
    rate: float
    records: ShareRecords
    start: dict[int, float] = field(default_factory=dict)
    epoch: int = 0
    _written_once: bool = False

    def members(self) -> list[tuple[str, str, str]]:
        if self.behaviour == "share-stopped":
            return []
        return [(f"{self.group}-worker-{i}", f"{self.group}-worker", f"/10.2.0.{i + 1}")
                for i in range(2)]  # fmt: skip

    def step(
        self,
        log_end: Callable[[str, int], int],
        write_group: Callable[[str, list[KeyValue]], None],
        write_state: Callable[[int, bytes, bytes | None], None],
    ) -> None:
        if not self.start:
            self.epoch = 1
            records = self.records.group(self.group, 1, self.topic, self.partitions, self.members())
            write_group(self.group, records)
            # the queues start with a backlog, as a queue whose consumers just started
            self.start = {
                p: float(max(0, log_end(self.topic, p) - IN_FLIGHT)) for p in range(self.partitions)
            }
        if self.behaviour in ("share-stuck", "share-stopped") and self._written_once:
            return  # nothing moves, so a broker writes nothing
        self._written_once = True
        self.epoch += 1
        for p in range(self.partitions):
            end = log_end(self.topic, p)
            if self.behaviour == "share-poison":
                self.start[p] = float(max(0, end - IN_FLIGHT))
            elif self.behaviour == "share-lagging":
                self.start[p] = min(float(end), self.start[p] + 0.5 * self.rate)
            start = int(self.start[p])
            batches = _below(end, self._batches(p, start))
            write_state(*self.records.snapshot(
                self.group, self.topic, p, self.epoch, start, batches))  # fmt: skip

    def _batches(self, partition: int, start: int) -> list[tuple[int, int, int, int]]:
        if self.behaviour == "share-poison":
            out = [(start, start + 9, AVAILABLE, 2)]  # released twice: waits for a third try
            if partition in POISON_PARTITIONS:
                out.append((start + 10, start + 14, ARCHIVED, 5))  # given up at the limit
            out.append((start + 15, start + 29, ACKNOWLEDGED, 1))
            return out
        if self.behaviour == "share-lagging":
            return [(start, start + 4, AVAILABLE, 1), (start + 5, start + 9, ACKNOWLEDGED, 1)]
        # stuck and stopped: records released once and never taken again
        return [(start, start + 9, AVAILABLE, 1)]


def _below(end: int, batches: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Only records that exist: a broker keeps no state for offsets past the log end (a
    young topic has fewer than a queue's in-flight records)."""
    return [
        (first, min(last, end - 1), count, state)
        for first, last, count, state in batches
        if first < end
    ]


def create_share_topic(create_topic: Callable[[str, int], None]) -> None:
    create_topic(SHARE_STATE_TOPIC, SHARE_STATE_PARTITIONS)


def state_writer(producer: Any) -> Callable[[int, bytes, bytes | None], None]:
    def write(partition: int, key: bytes, value: bytes | None) -> None:
        producer.produce(SHARE_STATE_TOPIC, value, key, partition=partition)

    return write
