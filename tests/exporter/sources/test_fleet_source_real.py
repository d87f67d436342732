"""The `__consumer_offsets` source as a member of a fleet's consumer group, on the real broker:
members split the partitions between them, each exactly once; a member that leaves hands its
partitions to the others, which read them from the log start; the group is never committed
to. Kafka's own DescribeConsumerGroups is the reference for who holds what.

Each protocol the flag names: KIP-848 (where the release has it GA, 4.0+), classic, and
`auto`, which must speak KIP-848 where it can and fall back to classic where the broker lacks
it (3.9): the version matrix (scripts/compat_matrix.py) runs this module on every release."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from offsetwatch.exporter.fleet.identity import ReplicaIdentity
from offsetwatch.exporter.fleet.membership import membership
from offsetwatch.exporter.fleet.replica import coordinator_protocols
from offsetwatch.exporter.sources.kafka_source import (
    OffsetsTopicSource,
    PartitionsAssigned,
    PartitionsRevoked,
)
from tests.real_broker import Broker, kip848_groups, require_kip848_groups, unique

pytestmark = pytest.mark.broker


def _member(broker: Broker, fleet: str, name: str, protocol: str) -> OffsetsTopicSource:
    """A member that chooses its protocol as a replica does (FleetPart.choose_protocol)."""
    identity = ReplicaIdentity(name, f"http://127.0.0.1:1/{name}")
    admin = broker.admin()
    chosen = membership(fleet, identity.client_id(), protocol)
    return OffsetsTopicSource(
        {"bootstrap.servers": broker.bootstrap, "log_level": 0},
        membership=chosen.for_broker(coordinator_protocols(admin, 30.0)),
        metadata_refresh_s=2.0,
    )


class _Watched:
    """A member polled by the test, its events kept."""

    def __init__(self, source: OffsetsTopicSource) -> None:
        self.source = source
        self.gained: list[int] = []
        self.revoked: list[int] = []

    def poll(self) -> None:
        for event in self.source.poll_batch(timeout_s=0.2).events:
            if isinstance(event, PartitionsAssigned):
                self.gained.extend(event.partitions)
            elif isinstance(event, PartitionsRevoked):
                self.revoked.extend(event.partitions)


def _until(members: list[_Watched], done: object, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not callable(done) or not done():
        assert time.monotonic() < deadline, (
            f"{what}: {[sorted(m.source.assigned_partitions()) for m in members]}, "
            f"joined {[m.source.joined() for m in members]}, "
            f"caught up {[m.source.caught_up() for m in members]}"
        )
        for member in members:
            member.poll()


@pytest.fixture(params=["consumer", "classic", "auto"])
def protocol(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "consumer":
        require_kip848_groups()
    yield str(request.param)


def test_members_split_the_partitions_and_take_over_a_leaver(
    kafka_broker: Broker, protocol: str
) -> None:
    fleet = unique("fleet")
    members = [_Watched(_member(kafka_broker, fleet, n, protocol)) for n in ("a", "b", "c")]
    try:
        for member in members:
            member.source.start()

        def split() -> bool:
            # __consumer_offsets is created by the members' own coordinator lookups
            count = members[0].source.partition_count()
            held = [m.source.assigned_partitions() for m in members]
            return (
                all(held)
                and sum(len(h) for h in held) == count
                and set().union(*held) == set(range(count))
            )

        _until(members, split, "every partition held by exactly one of three members")
        spoken = {m.source.membership.protocol for m in members}  # type: ignore[union-attr]
        if protocol == "auto":
            # the fallback happened (or not) on this release's own answer, not by a version
            assert spoken == {"consumer" if kip848_groups() else "classic"}
        else:
            assert spoken == {protocol}
        _until(members, lambda: all(m.source.caught_up() for m in members), "caught up")
        admin = kafka_broker.admin()  # kept alive until its futures answer
        described = admin.describe_consumer_groups([fleet])[fleet].result(60)
        kafka_view = {
            ReplicaIdentity.parse(m.client_id): {
                tp.partition for tp in m.assignment.topic_partitions
            }
            for m in described.members
        }
        ours = {
            ReplicaIdentity.parse(m.source.membership.client_id): m.source.assigned_partitions()  # type: ignore[union-attr]
            for m in members
        }
        assert kafka_view == ours

        count = members[0].source.partition_count()
        leaver, *stayers = members
        held = leaver.source.assigned_partitions()
        leaver.source.close()
        _until(
            stayers,
            lambda: (
                set().union(*(m.source.assigned_partitions() for m in stayers)) == set(range(count))
            ),
            "the leaver's partitions taken over",
        )
        assert held <= set(stayers[0].gained) | set(stayers[1].gained)
        _until(stayers, lambda: all(m.source.caught_up() for m in stayers), "caught up again")
        # never committed to: the group has members, and no offsets
        assert kafka_broker.committed(fleet) == {}
    finally:
        for member in members:
            member.source.close()
