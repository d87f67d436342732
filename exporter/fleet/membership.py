"""How a replica reads `__consumer_offsets` as a member of its fleet's consumer group: the
client settings of the membership, and the protocol it speaks.

KIP-848 (`group.protocol=consumer`) is GA from Kafka 4.0: the coordinator assigns, and a
member's change moves only the partitions that must move. A broker without it (3.9, where it
is early access and off) answers the member's first ConsumerGroupHeartbeat with an
unsupported-version error; the member then joins with the classic protocol and the
cooperative-sticky assignor, which also moves only what must move (`fallback`).

Not every broker without it says so: 3.9 runs the classic coordinator by default and its
early-access ConsumerGroupHeartbeat (v0) is one librdkafka 2.16 sends without an error and
without ever getting an assignment (a fleet on 3.9 never joined: 3 replicas, 90 s, no
partition). So `--fleet-protocol auto` first asks a broker which protocols its coordinator
runs (`group.coordinator.rebalance.protocols`, `for_broker`); only where that cannot be
asked (no DescribeConfigs on the cluster) does it rely on the error.

Without sinks the group is never committed to (positions come from the checkpoint or the log
start): it holds members and assignments only. With sinks each partition's sink position is
committed to it (exporter/fleet/sink_commits.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final, Literal

from confluent_kafka import KafkaError

Protocol = Literal["consumer", "classic"]
PROTOCOLS: Final = ("auto", "consumer", "classic")

#: a classic member that stops heartbeating is taken out after this long (the broker's
#: group.min.session.timeout.ms is 6 s by default): a SIGKILLed replica's partitions move
#: within it, where librdkafka's default of 45 s would leave them unexported that long
CLASSIC_SESSION_TIMEOUT_MS: Final = 10_000
CLASSIC_HEARTBEAT_MS: Final = 2_000

#: the broker setting naming the group protocols its coordinator runs (Kafka 3.7+): by
#: default "classic,consumer" from 4.0 (",streams" from 4.1), "classic" on 3.9
REBALANCE_PROTOCOLS: Final = "group.coordinator.rebalance.protocols"

#: what a broker without KIP-848 answers a ConsumerGroupHeartbeat with (librdkafka's own code
#: for an API the broker lacks, and the broker's for a version it refuses)
_UNSUPPORTED: Final = frozenset(
    {
        KafkaError._UNSUPPORTED_FEATURE,
        KafkaError.UNSUPPORTED_VERSION,
        KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    }
)


@dataclass(slots=True, frozen=True)
class GroupMembership:
    """Read the topic as a member of `group` (the fleet's name), announcing `client_id`
    (exporter/fleet/identity.py); `protocol` is the one the member speaks now."""

    group: str
    client_id: str
    protocol: Protocol = "consumer"
    #: the protocol was chosen ("auto"): fall back to classic when the broker lacks KIP-848
    may_fall_back: bool = True

    def settings(self) -> dict[str, object]:
        """The client settings of the membership, over the source's own."""
        out: dict[str, object] = {"group.id": self.group, "client.id": self.client_id}
        if self.protocol == "consumer":
            out["group.protocol"] = "consumer"
        else:
            out["group.protocol"] = "classic"
            out["partition.assignment.strategy"] = "cooperative-sticky"
            out["session.timeout.ms"] = CLASSIC_SESSION_TIMEOUT_MS
            out["heartbeat.interval.ms"] = CLASSIC_HEARTBEAT_MS
        return out

    def fallback(self, error: KafkaError) -> GroupMembership | None:
        """The classic membership to join with instead, when `error` says the broker has no
        KIP-848 and the protocol may change; None otherwise."""
        if self.protocol != "consumer" or not self.may_fall_back:
            return None
        if error.code() not in _UNSUPPORTED:
            return None
        text = error.str()
        if "Heartbeat" not in text and "group.protocol" not in text and "KIP-848" not in text:
            return None
        return GroupMembership(self.group, self.client_id, "classic", False)

    def for_broker(self, protocols: Collection[str] | None) -> GroupMembership:
        """The membership to join with where the brokers' coordinator runs `protocols`
        (`REBALANCE_PROTOCOLS`; None: not known): classic where the protocol was left to
        choose and the coordinator runs no KIP-848 groups; this one otherwise."""
        if self.protocol != "consumer" or not self.may_fall_back or protocols is None:
            return self
        if "consumer" in protocols:
            return self
        return GroupMembership(self.group, self.client_id, "classic", False)


def rebalance_protocols(value: str | None) -> frozenset[str] | None:
    """The protocols of a `REBALANCE_PROTOCOLS` value ("classic,consumer"); None for none."""
    if value is None:
        return None
    names = frozenset(p.strip().lower() for p in value.split(",") if p.strip())
    return names or None


def membership(group: str, client_id: str, protocol: str) -> GroupMembership:
    """The membership of `--fleet-protocol` (auto, consumer or classic)."""
    if protocol == "classic":
        return GroupMembership(group, client_id, "classic", False)
    return GroupMembership(group, client_id, "consumer", protocol == "auto")
