"""How a replica reads `__consumer_offsets` as a member of its fleet's consumer group: the
client settings of the membership, and the protocol it speaks.

KIP-848 (`group.protocol=consumer`) is GA from Kafka 4.0: the coordinator assigns, and a
member's change moves only the partitions that must move. A broker without it (3.9, where it
is early access and off) answers the member's first ConsumerGroupHeartbeat with an
unsupported-version error; the member then joins with the classic protocol and the
cooperative-sticky assignor, which also moves only what must move (`fallback`).

The group is never committed to: positions come from the checkpoint or the log start, so the
group holds members and assignments only (it shows as a consumer group with no offsets).
"""

from __future__ import annotations

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


def membership(group: str, client_id: str, protocol: str) -> GroupMembership:
    """The membership of `--fleet-protocol` (auto, consumer or classic)."""
    if protocol == "classic":
        return GroupMembership(group, client_id, "classic", False)
    return GroupMembership(group, client_id, "consumer", protocol == "auto")
