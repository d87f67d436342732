"""Rebalance history per group, kept up to date by the ingest (`OffsetState.apply`).

`__consumer_offsets` stores snapshots of a group, not events: a rebalance is a new classic
generation or a new KIP-848 / share / streams group epoch in the next group record, a join is
a member that was not there before. This module compares each group record with the one it
replaces and keeps, per group, a bounded ring of the last rebalances (time, generation or
epoch, who joined, who left, members after it) and three counters.

Only group records reach it, never offset commits, so the commit hot path does not change.
The rules are those of the lake's `group_events` (spark_jobs/lake_group_events.py), so the
exporter and `spark analyze` see the same rebalances:

* classic: a GroupMetadata whose generation differs from the previous one and is > 0
  (generation 0 is the group's creation) is a rebalance; its joins and leaves are the member
  ids that appeared in / vanished from the member list. A GroupMetadata tombstone forgets the
  members without counting them as leaves (the lake does the same: the group is deleted or
  migrates).
* KIP-848 consumer, share and streams groups: a member-metadata record for a new member id is
  a join, its tombstone a leave; a group-metadata record with a new epoch is a rebalance.
  Kafka writes the member records before the epoch bump they cause, so joins and leaves are
  held as pending and attached to the next rebalance.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from offsetwatch.decoder.records import (
    ConsumerGroupMemberMetadataValue,
    GroupMemberKey,
    GroupMetadataValue,
    Record,
    ShareGroupMemberMetadataValue,
    StreamsGroupMemberMetadataValue,
)

__all__ = [
    "EPOCH_TYPES",
    "HISTORY_TYPES",
    "MEMBER_TYPES",
    "RING_SIZE",
    "GroupHistory",
    "MemberRef",
    "Rebalance",
    "observe",
]

#: rebalances kept per group; the storm threshold and the API's list are at most this long
RING_SIZE: Final = 20
#: a join or leave list longer than this is cut (a group of thousands of members restarting)
_MAX_LISTED: Final = 50

CLASSIC_TYPE: Final = 2
#: group-epoch record type -> member-metadata record type of the same protocol
EPOCH_TYPES: Final = {3: 5, 11: 10, 17: 19}
MEMBER_TYPES: Final = frozenset(EPOCH_TYPES.values())
#: the record types `observe` looks at
HISTORY_TYPES: Final = frozenset({CLASSIC_TYPE, *EPOCH_TYPES, *MEMBER_TYPES})


@dataclass(frozen=True, slots=True)
class MemberRef:
    """A member as a rebalance saw it join or leave."""

    member_id: str
    client_id: str
    host: str


@dataclass(frozen=True, slots=True)
class Rebalance:
    #: time of the record that carries the new generation / epoch (epoch ms)
    time_ms: int
    #: classic generation or KIP-848 / share / streams group epoch
    generation: int
    joined: tuple[MemberRef, ...]
    left: tuple[MemberRef, ...]
    #: members right after the rebalance
    members: int


@dataclass(slots=True)
class GroupHistory:
    rebalances: deque[Rebalance] = field(default_factory=lambda: deque(maxlen=RING_SIZE))
    rebalances_total: int = 0
    joined_total: int = 0
    left_total: int = 0
    #: joins and leaves seen since the last rebalance (KIP-848: before the epoch bump)
    pending_joined: list[MemberRef] = field(default_factory=list)
    pending_left: list[MemberRef] = field(default_factory=list)

    def join(self, member: MemberRef) -> None:
        self.joined_total += 1
        if len(self.pending_joined) < _MAX_LISTED:
            self.pending_joined.append(member)

    def leave(self, member: MemberRef) -> None:
        self.left_total += 1
        if len(self.pending_left) < _MAX_LISTED:
            self.pending_left.append(member)

    def rebalance(self, time_ms: int, generation: int, members: int) -> None:
        self.rebalances_total += 1
        self.rebalances.append(
            Rebalance(
                time_ms,
                generation,
                tuple(self.pending_joined),
                tuple(self.pending_left),
                members,
            )
        )
        self.pending_joined.clear()
        self.pending_left.clear()

    # -- checkpoints (plain JSON-able lists; see exporter/sinks/checkpoint.py) --------------------

    def to_json(self) -> list[Any]:
        return [
            self.rebalances_total,
            self.joined_total,
            self.left_total,
            [
                [r.time_ms, r.generation, _refs(r.joined), _refs(r.left), r.members]
                for r in self.rebalances
            ],
            _refs(self.pending_joined),
            _refs(self.pending_left),
        ]

    @classmethod
    def from_json(cls, data: list[Any]) -> GroupHistory:
        totals, joined, left, ring, pending_joined, pending_left = data
        history = cls(
            rebalances_total=int(totals),
            joined_total=int(joined),
            left_total=int(left),
            pending_joined=_members(pending_joined),
            pending_left=_members(pending_left),
        )
        history.rebalances.extend(
            Rebalance(int(t), int(g), tuple(_members(j)), tuple(_members(lft)), int(m))
            for t, g, j, lft, m in ring
        )
        return history


def _refs(members: Iterable[MemberRef]) -> list[list[str]]:
    return [[m.member_id, m.client_id, m.host] for m in members]


def _members(data: list[list[str]]) -> list[MemberRef]:
    return [MemberRef(str(a), str(b), str(c)) for a, b, c in data]


def _member_ref(record: Record | None, member_id: str) -> MemberRef:
    value = None if record is None else record.value
    if isinstance(
        value,
        ConsumerGroupMemberMetadataValue
        | ShareGroupMemberMetadataValue
        | StreamsGroupMemberMetadataValue,
    ):
        return MemberRef(member_id, value.client_id, value.client_host)
    return MemberRef(member_id, "", "")


def observe(
    history: GroupHistory,
    record: Record,
    previous: Record | None,
    member_count: int,
) -> None:
    """Update `history` with a group record, before it replaces `previous` (same key).

    `member_count`: for an epoch record, the members the group has (member-metadata records
    held); unused for other types.
    """
    key_type = record.key_type
    value = record.value
    if key_type == CLASSIC_TYPE:
        if not isinstance(value, GroupMetadataValue):
            history.pending_joined.clear()
            history.pending_left.clear()
            return
        before = previous.value if previous is not None else None
        old = (
            {m.member_id: m for m in before.members}
            if isinstance(before, GroupMetadataValue)
            else {}
        )
        new = {m.member_id for m in value.members}
        for member_id, m in old.items():
            if member_id not in new:
                history.leave(MemberRef(member_id, m.client_id, m.client_host))
        for m in value.members:
            if m.member_id not in old:
                history.join(MemberRef(m.member_id, m.client_id, m.client_host))
        old_generation = before.generation if isinstance(before, GroupMetadataValue) else None
        generation = value.generation
        if generation != old_generation and generation > 0:
            history.rebalance(record.timestamp, generation, len(new))
        return
    if key_type in MEMBER_TYPES:
        key: GroupMemberKey = record.key  # type: ignore[assignment]
        member_id = key.member_id
        if value is None:
            if previous is not None:
                history.leave(_member_ref(previous, member_id))
        elif previous is None:
            history.join(_member_ref(record, member_id))
        return
    if key_type in EPOCH_TYPES and value is not None:
        epoch: int = value.epoch  # type: ignore[union-attr]
        before_epoch = None
        if previous is not None and previous.value is not None:
            before_epoch = previous.value.epoch  # type: ignore[union-attr]
        if epoch != before_epoch:
            history.rebalance(record.timestamp, epoch, member_count)
