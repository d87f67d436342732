"""The membership's client settings per protocol, and the fall-back to classic only where
the broker lacks KIP-848 and the protocol was left to choose."""

from __future__ import annotations

from confluent_kafka import KafkaError

from offsetwatch.exporter.fleet.membership import membership, rebalance_protocols

NO_KIP848 = KafkaError(
    KafkaError._UNSUPPORTED_FEATURE,
    "The broker does not support ConsumerGroupHeartbeat: KIP-848 group.protocol=consumer",
)


def test_settings_per_protocol() -> None:
    kip848 = membership("fleet", "cid", "auto").settings()
    assert kip848 == {"group.id": "fleet", "client.id": "cid", "group.protocol": "consumer"}
    classic = membership("fleet", "cid", "classic").settings()
    assert classic["group.protocol"] == "classic"
    assert classic["partition.assignment.strategy"] == "cooperative-sticky"
    assert int(str(classic["session.timeout.ms"])) <= 10_000


def test_auto_falls_back_once_to_classic() -> None:
    chosen = membership("fleet", "cid", "auto")
    fallback = chosen.fallback(NO_KIP848)
    assert fallback is not None and fallback.protocol == "classic"
    assert fallback.fallback(NO_KIP848) is None  # classic has nowhere to go


def test_an_explicit_protocol_or_another_error_does_not_fall_back() -> None:
    assert membership("fleet", "cid", "consumer").fallback(NO_KIP848) is None
    other = KafkaError(KafkaError._UNSUPPORTED_FEATURE, "Broker does not support SASL")
    assert membership("fleet", "cid", "auto").fallback(other) is None
    refused = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "ConsumerGroupHeartbeat")
    assert membership("fleet", "cid", "auto").fallback(refused) is None


def test_auto_joins_classic_where_the_coordinator_runs_no_kip848_groups() -> None:
    """3.9's early-access heartbeat gives no error to fall back on: the broker's setting
    decides first."""
    auto = membership("fleet", "cid", "auto")
    on_39 = auto.for_broker(rebalance_protocols("classic"))
    assert on_39.protocol == "classic" and not on_39.may_fall_back
    assert auto.for_broker(rebalance_protocols("classic,consumer")) is auto
    assert auto.for_broker(rebalance_protocols(" classic , consumer , streams ")) is auto
    assert auto.for_broker(None) is auto  # not known: the error decides
    assert auto.for_broker(rebalance_protocols("")) is auto
    # a protocol the user chose is kept, whatever the broker says
    chosen = membership("fleet", "cid", "consumer")
    assert chosen.for_broker(frozenset({"classic"})) is chosen
