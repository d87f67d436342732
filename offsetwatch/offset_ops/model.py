"""Records shared by the offset operations: what the broker reports about groups and offsets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from offsetwatch.core.acl_hints import Resource

TopicPartitionKey: TypeAlias = tuple[str, int]

# States in which a group has no members (classic and KIP-848 groups spell them alike).
INACTIVE_STATES = frozenset({"EMPTY", "DEAD", "UNKNOWN"})


class OffsetOpsError(Exception):
    """A problem the operator must fix (bad input, a refused plan); nothing was written."""


class NotAuthorized(OffsetOpsError):
    """The broker refused for want of an ACL: the principal may not do `operation` on the
    resource. The message names the `kafka-acls.sh` grant; the fields let a command that
    needs more than the refused request (a reset that will commit needs Read where its
    describe needed Describe) name the grant that covers all of it."""

    def __init__(self, message: str, resource: Resource, name: str, operation: str) -> None:
        super().__init__(message)
        self.resource, self.name, self.operation = resource, name, operation


class OutcomeUnknown(Exception):
    """A change was sent and no answer came (a timeout, a dropped connection): the broker may
    have applied it or not. Not an OffsetOpsError, which promises that nothing was written:
    "failed" would invite a retry, and a retried --shift-by shifts twice."""

    def __init__(self, group_id: str, reason: str) -> None:
        super().__init__(
            f"committing offsets of group {group_id!r}: {reason}; the change may or may not "
            f"have been applied: check with `offsetwatch offsets export --group {group_id}` "
            "before retrying"
        )
        self.group_id = group_id


class Unsupported(OffsetOpsError):
    """The cluster does not implement a request (librdkafka's mock lacks ListGroups and
    DescribeGroups)."""


@dataclass(slots=True, frozen=True)
class Committed:
    """A committed offset with its metadata string and leader epoch (-1 when unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(slots=True, frozen=True)
class GroupListing:
    group_id: str
    type: str
    state: str
    is_simple: bool


@dataclass(slots=True, frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: tuple[TopicPartitionKey, ...]
    #: streams members: their process and tasks as kafka-streams-groups.sh prints them
    #: (`ACTIVE: 0:[0,1]; STANDBY: 1:[2]`), from the exporter
    process_id: str | None = None
    tasks: str | None = None


@dataclass(slots=True, frozen=True)
class GroupInfo:
    """One group as DescribeGroups / ConsumerGroupDescribe report it."""

    group_id: str
    type: str
    state: str
    coordinator: str
    assignor: str
    is_simple: bool
    members: tuple[MemberInfo, ...] = field(default=())

    @property
    def active(self) -> bool:
        return bool(self.members) or self.state.upper() not in INACTIVE_STATES

    @property
    def exists(self) -> bool:
        return self.state.upper() != "DEAD" or bool(self.members)
