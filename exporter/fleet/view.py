"""Who in the fleet owns which `__consumer_offsets` partition, as Kafka's group coordinator
says (DescribeConsumerGroups of the fleet's group).

A group's records all live in one partition (`abs(hash(group id)) % partitions`,
decoder/partitioner.py), so the owner of that partition is the replica that reads, keeps and
exports the group. The view is taken on a part's thread (`FleetWatch`) every few seconds; it
is immutable, so the HTTP threads read it as it is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.fleet.identity import ReplicaIdentity

log = logging.getLogger(__name__)

#: how often the fleet's group is described: the window in which a handover is unseen by the
#: view (the owner's own state changes at once; forwarding and /api/v1/fleet follow this)
REFRESH_S: Final = 2.0


@dataclass(slots=True, frozen=True)
class FleetMember:
    """One member of the fleet's group: the replica it says it is (None for a member that is
    no offsetwatch replica) and the partitions the coordinator assigned it."""

    member_id: str
    client_id: str
    host: str
    replica: ReplicaIdentity | None
    partitions: tuple[int, ...]


@dataclass(slots=True, frozen=True)
class FleetView:
    """The fleet as its group's coordinator described it at `time_ms`; `error` says why the
    last description failed (the view is then the last one that worked, or empty)."""

    fleet: str
    time_ms: int = 0
    state: str = "UNKNOWN"
    members: tuple[FleetMember, ...] = ()
    partition_count: int = 0
    error: str | None = None
    _owners: Mapping[int, FleetMember] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        fleet: str,
        time_ms: int,
        state: str,
        members: Iterable[FleetMember],
        partition_count: int,
    ) -> FleetView:
        listed = tuple(sorted(members, key=lambda m: (m.replica is None, m.client_id)))
        owners = {p: m for m in listed for p in m.partitions}
        return cls(fleet, time_ms, state, listed, partition_count, None, owners)

    def failed(self, error: str) -> FleetView:
        """This view, said to be as of its own time: the description just failed."""
        return FleetView(
            self.fleet,
            self.time_ms,
            self.state,
            self.members,
            self.partition_count,
            error,
            self._owners,
        )

    def owner_of_partition(self, partition: int) -> FleetMember | None:
        return self._owners.get(partition)

    def owner_of_group(self, group_id: str) -> FleetMember | None:
        if self.partition_count <= 0:
            return None
        return self._owners.get(partition_for(group_id, self.partition_count))

    def unowned(self) -> tuple[int, ...]:
        """Partitions no member holds: their groups are exported by no replica right now."""
        return tuple(p for p in range(self.partition_count) if p not in self._owners)

    def replicas(self) -> tuple[FleetMember, ...]:
        return tuple(m for m in self.members if m.replica is not None)


def member_of(description_member: Any, topic: str) -> FleetMember:
    """A FleetMember of confluent-kafka's MemberDescription (its assignment on `topic`)."""
    assignment = getattr(description_member, "assignment", None)
    tps = getattr(assignment, "topic_partitions", None) or ()
    return FleetMember(
        member_id=str(description_member.member_id),
        client_id=str(description_member.client_id),
        host=str(description_member.host),
        replica=ReplicaIdentity.parse(str(description_member.client_id)),
        partitions=tuple(sorted(tp.partition for tp in tps if tp.topic == topic)),
    )


class FleetWatch:
    """Describes the fleet's group every REFRESH_S on a thread of its own and keeps the
    latest view (`view`); `describe` is the one call to Kafka (tests give their own)."""

    def __init__(
        self,
        fleet: str,
        topic: str,
        describe: Callable[[str], tuple[str, list[Any]]],
        partition_count: Callable[[], int],
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.fleet, self.topic = fleet, topic
        self._describe = describe
        self._partition_count = partition_count
        self._clock_ms = clock_ms
        self.view = FleetView(fleet)
        self.failures_total = 0
        self._failing = False
        self._lock = threading.Lock()

    def refresh(self) -> FleetView:
        """One description of the group; a failure keeps the last view, with the error."""
        try:
            state, members = self._describe(self.fleet)
            view = FleetView.of(
                self.fleet,
                self._clock_ms(),
                state,
                (member_of(m, self.topic) for m in members),
                self._partition_count(),
            )
        except Exception as error:  # any failure of one round is the view's error
            self.failures_total += 1
            if not self._failing:
                log.warning(
                    "fleet %s: describing the group failed (%s): the fleet view and "
                    "forwarding keep the last answer until it works again",
                    self.fleet,
                    error,
                )
            self._failing = True
            with self._lock:
                self.view = self.view.failed(str(error))
                return self.view
        if self._failing:
            log.info("fleet %s: the group can be described again", self.fleet)
        self._failing = False
        with self._lock:
            self.view = view
        return view
