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

    def mismatched(self, fingerprint: str | None) -> tuple[FleetMember, ...]:
        """The replicas whose settings fingerprint is not `fingerprint` (this replica's):
        they filter or aggregate otherwise, so the fleet's union would mix two exports. One
        that announces none (an older offsetwatch) cannot be shown to agree: it is listed."""
        return tuple(
            m
            for m in self.members
            if m.replica is not None and m.replica.fingerprint != fingerprint
        )


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
        me: ReplicaIdentity | None = None,
    ) -> None:
        self.fleet, self.topic = fleet, topic
        #: this replica: the others' settings fingerprints are compared with its own
        self.me = me
        #: the (replica, fingerprint) pairs out of step last said, so a mismatch is said
        #: once when it starts or changes, not at every refresh
        self._mismatch_said: frozenset[tuple[str, str | None]] = frozenset()
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
        if self.me is not None:
            self._say_mismatch(view, self.me)
        return view

    def _say_mismatch(self, view: FleetView, me: ReplicaIdentity) -> None:
        """One WARNING when replicas with other export settings appear (or the set changes),
        naming them and which side is out of step; one INFO when they agree again."""
        others = view.mismatched(me.fingerprint)
        key = frozenset(
            (m.replica.name, m.replica.fingerprint) for m in others if m.replica is not None
        )
        if key == self._mismatch_said:
            return
        self._mismatch_said = key
        if not key:
            log.info("fleet %s: every replica exports with the same settings again", self.fleet)
            return
        log.warning("%s", mismatch_line(view, me))


def _fingerprint_text(fingerprint: str | None) -> str:
    return fingerprint or "none (an offsetwatch that announces no settings)"


def mismatch_line(view: FleetView, me: ReplicaIdentity) -> str:
    """The one line that says which replicas export with other settings than `me`, and who
    is out of step: the replicas in the minority (by settings fingerprint) are."""
    names: dict[str | None, set[str]] = {}
    for member in view.replicas():
        assert member.replica is not None
        names.setdefault(member.replica.fingerprint, set()).add(member.replica.name)
    names.setdefault(me.fingerprint, set()).add(me.name)
    counts = sorted((len(n), fp or "") for fp, n in names.items())
    largest = counts[-1][0]
    majority = [fp for n, fp in counts if n == largest]
    differing = sorted(
        {
            f"{m.replica.name} ({_fingerprint_text(m.replica.fingerprint)})"
            for m in view.mismatched(me.fingerprint)
            if m.replica is not None
        }
    )
    agree = len(names[me.fingerprint])
    if len(majority) > 1:
        said = (
            f"replica(s) {', '.join(differing)} export with other settings than this replica "
            f"{me.name} ({_fingerprint_text(me.fingerprint)}), and no settings are shared by "
            "more replicas than the others: which is out of step is for the operator to say"
        )
    elif majority[0] == (me.fingerprint or ""):
        said = (
            f"replica(s) {', '.join(differing)} export with other settings than the "
            f"{agree} replica(s) with this one's ({me.name} among them, "
            f"{_fingerprint_text(me.fingerprint)}): they are out of step"
        )
    else:
        said = (
            f"this replica {me.name} ({_fingerprint_text(me.fingerprint)}) exports with other "
            f"settings than {largest} replica(s) that agree on {majority[0] or 'none'}: this "
            f"replica is out of step (differing from it: {', '.join(differing)})"
        )
    return (
        f"fleet {view.fleet}: {said}. The fleet's union mixes two exports (filters, "
        "granularity, cluster name, aliases or status rules differ): give every replica the "
        "same settings (each logs them at start, 'starting with ...') and restart the one out "
        "of step"
    )
