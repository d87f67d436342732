"""The broker operations offset commands need, as a protocol (tests swap in recorded answers)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Final, Protocol, TypeAlias

from offsetwatch.core.acl_hints import Resource
from offsetwatch.offset_ops.model import (
    Committed,
    GroupInfo,
    GroupListing,
    TopicPartitionKey,
)

EARLIEST: Final = "earliest"
LATEST: Final = "latest"
# A ListOffsets query: EARLIEST, LATEST, or a timestamp in ms (the first offset whose record
# timestamp is >= it; Kafka answers -1 when there is none).
OffsetQuery: TypeAlias = str | int


class OffsetBroker(Protocol):
    """Batched broker I/O: each method is one round of requests, however many items."""

    @property
    def requests(self) -> int:
        """Admin API calls made so far (for the benchmark)."""
        ...

    def list_groups(self) -> list[GroupListing]: ...

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        """Raises Unsupported when the cluster has no DescribeGroups."""
        ...

    def partition_counts(self) -> dict[str, int]:
        """Every non-internal topic and its partition count."""
        ...

    def committed(
        self, requests: Mapping[str, Sequence[TopicPartitionKey] | None]
    ) -> dict[str, dict[TopicPartitionKey, Committed]]:
        """Committed offsets of several groups: the named partitions, or all (None).

        Partitions without a committed offset are left out.
        """
        ...

    def list_offsets(
        self, partitions: Sequence[TopicPartitionKey], query: OffsetQuery
    ) -> dict[TopicPartitionKey, int]: ...

    def may_list_every_group(self) -> bool | None:
        """Whether the principal may Describe the cluster, without which ListGroups answers
        only the groups it may Describe; None when the cluster cannot tell."""
        ...

    def refused_topics(self, topics: Collection[str]) -> dict[str, str]:
        """Which of `topics` the principal may not Describe, with the broker's error (OffsetFetch
        leaves such topics out of its answer without a word)."""
        ...

    def grant(self, operation: str, resource: Resource, name: str = "") -> str:
        """The `kafka-acls.sh` line that grants `operation` on the resource to this principal."""
        ...

    def alter(self, group_id: str, offsets: Mapping[TopicPartitionKey, Committed]) -> None:
        """Commit these offsets for the group, all or nothing per request."""
        ...
