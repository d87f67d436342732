"""Brokers for what librdkafka's mock cluster cannot answer (its ApiVersions, librdkafka 2.16:
no ListGroups, DescribeGroups or ConsumerGroupDescribe; ListOffsets by timestamp answers -1).

* `RecordedBroker` replays a real Kafka 4.0.0 broker: the groups, members, committed offsets
  and log ends captured in the conformance run (groups-final.json).
* `MockPlus` is the real `AdminBroker` on the mock, with only the missing answers added:
  group descriptions given by the test, and timestamp lookups answered the way Kafka answers
  them (the first offset whose record timestamp is >= T, -1 when there is none), computed
  from the records actually stored in the mock.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from offsetwatch.core.acl_hints import Resource, grant_line
from offsetwatch.offset_ops.admin import AdminBroker
from offsetwatch.offset_ops.broker import EARLIEST, LATEST, OffsetQuery
from offsetwatch.offset_ops.model import (
    Committed,
    GroupInfo,
    GroupListing,
    MemberInfo,
    TopicPartitionKey,
)


def _key(text: str) -> TopicPartitionKey:
    topic, _, partition = text.rpartition(":")
    return topic, int(partition)


def recorded_groups(conformance_dir: Path) -> dict[str, dict[str, object]]:
    path = conformance_dir / "runs" / "main" / "groups-final.json"
    groups: dict[str, dict[str, object]] = json.loads(path.read_text(encoding="utf-8"))
    # Share groups are no consumer groups: ListConsumerGroups does not return them.
    return {g: record for g, record in groups.items() if "offsets" in record}


def info_from_record(group_id: str, record: Mapping[str, object]) -> GroupInfo:
    members = record["members"]
    assert isinstance(members, list)
    return GroupInfo(
        group_id=group_id,
        type=str(record["type"]),
        state=str(record["state"]),
        coordinator="127.0.0.1:19092 (1)",
        assignor=str(record["partition_assignor"]),
        is_simple=bool(record["is_simple_consumer_group"]),
        members=tuple(
            MemberInfo(
                m["member_id"],
                m["client_id"],
                m["host"],
                m["group_instance_id"],
                tuple(_key(a) for a in m["assignment"]),
            )
            for m in members
        ),
    )


class RecordedBroker:
    """A real Kafka 4.0.0 broker's answers, replayed. Log starts were not recorded: 0."""

    def __init__(self, groups: Mapping[str, Mapping[str, object]]) -> None:
        self._groups = groups
        self.altered: dict[str, dict[TopicPartitionKey, Committed]] = {}
        self._requests = 0
        self._log_end: dict[TopicPartitionKey, int] = {}
        for record in groups.values():
            for row in record["offsets"]:  # type: ignore[attr-defined]
                self._log_end[(row["topic"], row["partition"])] = row["log_end_offset"]

    @property
    def requests(self) -> int:
        return self._requests

    def list_groups(self) -> list[GroupListing]:
        self._requests += 1
        return [
            GroupListing(g, str(r["type"]), str(r["state"]), bool(r["is_simple_consumer_group"]))
            for g, r in sorted(self._groups.items())
        ]

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        self._requests += 1
        return {
            g: info_from_record(g, self._groups[g])
            if g in self._groups
            else GroupInfo(g, "UNKNOWN", "DEAD", "", "", False)
            for g in group_ids
        }

    def may_list_every_group(self) -> bool | None:
        return True

    def refused_topics(self, topics: Collection[str]) -> dict[str, str]:
        return {}

    def grant(self, operation: str, resource: Resource, name: str = "") -> str:
        return grant_line({}, operation, resource, name)

    def partition_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, partition in self._log_end:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def committed(
        self, requests: Mapping[str, Sequence[TopicPartitionKey] | None]
    ) -> dict[str, dict[TopicPartitionKey, Committed]]:
        out = {}
        for group, named in requests.items():
            self._requests += 1
            rows = self._groups.get(group, {}).get("offsets", [])  # type: ignore[attr-defined]
            found = {
                (r["topic"], r["partition"]): Committed(
                    r["committed_offset"], r["metadata"] or "", r["leader_epoch"]
                )
                for r in rows
                if r["committed_offset"] >= 0
            }
            out[group] = {k: c for k, c in found.items() if named is None or k in named}
        return out

    def list_offsets(
        self, partitions: Sequence[TopicPartitionKey], query: OffsetQuery
    ) -> dict[TopicPartitionKey, int]:
        self._requests += 1
        if query == LATEST:
            return {k: self._log_end[k] for k in partitions}
        if query == EARLIEST:
            return dict.fromkeys(partitions, 0)
        raise AssertionError("no timestamp answers were recorded")

    def alter(self, group_id: str, offsets: Mapping[TopicPartitionKey, Committed]) -> None:
        self._requests += 1
        self.altered[group_id] = dict(offsets)


def kafka_offset_for_time(timestamps: Sequence[int], start: int, time_ms: int) -> int:
    """Kafka's ListOffsets by timestamp: the first offset whose timestamp is >= time_ms, or -1."""
    for i, stamp in enumerate(timestamps):
        if stamp >= time_ms:
            return start + i
    return -1


class MockPlus(AdminBroker):
    """AdminBroker on the mock, plus the answers the mock lacks (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str,
        infos: Mapping[str, GroupInfo] | None = None,
    ) -> None:
        super().__init__({"bootstrap.servers": bootstrap_servers})
        self._bootstrap = bootstrap_servers
        self._infos = dict(infos or {})

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        return {
            g: self._infos.get(g, GroupInfo(g, "UNKNOWN", "DEAD", "", "", False)) for g in group_ids
        }

    def list_offsets(
        self, partitions: Sequence[TopicPartitionKey], query: OffsetQuery
    ) -> dict[TopicPartitionKey, int]:
        if query in (EARLIEST, LATEST):
            return super().list_offsets(partitions, query)
        starts = super().list_offsets(partitions, EARLIEST)
        ends = super().list_offsets(partitions, LATEST)
        return {
            key: kafka_offset_for_time(
                self._timestamps(key, starts[key], ends[key]), starts[key], int(query)
            )
            for key in partitions
        }

    def _timestamps(self, key: TopicPartitionKey, start: int, end: int) -> list[int]:
        if end <= start:
            return []
        consumer = Consumer(
            {"bootstrap.servers": self._bootstrap, "group.id": "timestamps", "log_level": 3}
        )
        try:
            consumer.assign([TopicPartition(key[0], key[1], start)])
            stamps: list[int] = []
            while len(stamps) < end - start:
                message = consumer.poll(5.0)
                assert message is not None, f"no record from {key} at {start + len(stamps)}"
                if message.error() is None:
                    stamps.append(message.timestamp()[1])
            return stamps
        finally:
            consumer.close()
