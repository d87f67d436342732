"""RecordPublisher and its delivery watermark: unit tests, then against the mock cluster."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetwatch.exporter.sinks.publisher import (
    FATAL_RETRY_S,
    HEADER_ERROR,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
    RETIRE_DRAIN_S,
    DeliveryToken,
    DeliveryTracker,
    OutputRecord,
    RecordPublisher,
    producer_config,
)
from tests.kafka_fixtures import ChildMockCluster, MockCluster, TcpForwarder, wait_until

# --------------------------------------------------------------------------------------------
# DeliveryTracker (no Kafka)
# --------------------------------------------------------------------------------------------


def test_watermark_waits_for_the_oldest_record() -> None:
    tracker = DeliveryTracker()
    t10 = tracker.register(0, 10, 1)
    t11 = tracker.register(0, 11, 1)
    t13 = tracker.register(0, 13, 2)  # gap at 12: a control record, never registered
    assert tracker.confirmed() == {0: 10}
    tracker.complete(t11, True)
    tracker.complete(t13, True)
    assert tracker.confirmed() == {0: 10}  # 10 still in flight: nothing after it counts
    tracker.complete(t10, True)
    assert tracker.confirmed() == {0: 13}  # 13 has one of two outputs left
    tracker.complete(t13, True)
    assert tracker.confirmed() == {0: 14}
    assert tracker.in_flight == 0


def test_records_without_output_are_done_at_once() -> None:
    tracker = DeliveryTracker()
    tracker.register(3, 0, 0)
    tracker.register(3, 1, 0)
    assert tracker.confirmed() == {3: 2}


def test_failure_pins_the_watermark() -> None:
    tracker = DeliveryTracker()
    a = tracker.register(0, 1, 1)
    b = tracker.register(0, 2, 1)
    tracker.complete(a, False)
    tracker.complete(b, True)
    tracker.register(0, 3, 0)
    assert tracker.confirmed() == {0: 1}
    assert tracker.failed_positions() == {0: 1}


def test_going_back_starts_a_new_generation() -> None:
    """A rebuild re-reads a partition from its start: tracking restarts, stale callbacks of
    the old generation are ignored, and the watermark only moves back."""
    tracker = DeliveryTracker()
    tracker.register(0, 5, 0)
    old = tracker.register(0, 6, 1)
    assert tracker.confirmed() == {0: 6}
    first = tracker.register(0, 0, 1)
    assert tracker.confirmed() == {0: 0}
    tracker.complete(old, True)  # late callback of the abandoned generation
    assert tracker.confirmed() == {0: 0}
    tracker.complete(first, True)
    assert tracker.confirmed() == {0: 1}
    assert tracker.in_flight == 0


def test_reset_ignores_callbacks_of_the_old_generation() -> None:
    tracker = DeliveryTracker()
    old = tracker.register(0, 7, 1)
    tracker.reset(0)
    new = tracker.register(0, 0, 1)
    tracker.complete(old, True)  # late callback from before the reset
    assert tracker.confirmed() == {0: 0}
    tracker.complete(new, True)
    assert tracker.confirmed() == {0: 1}
    assert tracker.in_flight == 0


def test_unregister_forgets_a_record_that_was_never_produced() -> None:
    tracker = DeliveryTracker()
    tracker.register(0, 1, 0)
    token = tracker.register(0, 2, 1)
    tracker.unregister(token, 1)
    assert tracker.confirmed() == {0: 2}
    again = tracker.register(0, 2, 1)  # the retry
    assert tracker.confirmed() == {0: 2}
    tracker.complete(again, True)
    assert tracker.confirmed() == {0: 3}


@settings(max_examples=200, deadline=None)
@given(
    plan=st.lists(
        st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(0, 3)),
        min_size=1,
        max_size=40,
    ),
    seed=st.integers(0, 2**32 - 1),
    fail_rate=st.sampled_from([0.0, 0.1]),
)
def test_watermark_matches_a_reference_model(
    plan: list[tuple[int, int, int]], seed: int, fail_rate: float
) -> None:
    """Out-of-order callbacks: the watermark is always the oldest not-fully-delivered record."""
    rng = random.Random(seed)
    tracker = DeliveryTracker()
    next_offset = {0: 0, 1: 0, 2: 0}
    order: dict[int, list[int]] = {0: [], 1: [], 2: []}
    left: dict[tuple[int, int], int] = {}
    failed: set[tuple[int, int]] = set()
    pending: list[tuple[int, int, DeliveryToken]] = []
    for partition, step, outputs in plan:
        offset = next_offset[partition] + step - 1
        next_offset[partition] = offset + 1
        token = tracker.register(partition, offset, outputs)
        order[partition].append(offset)
        left[(partition, offset)] = outputs
        pending.extend((partition, offset, token) for _ in range(outputs))
    rng.shuffle(pending)

    def expected() -> dict[int, int]:
        out: dict[int, int] = {}
        for p, offsets in order.items():
            if offsets:
                blocked = [o for o in offsets if left[(p, o)] > 0 or (p, o) in failed]
                out[p] = blocked[0] if blocked else offsets[-1] + 1
        return out

    assert tracker.confirmed() == expected()
    for partition, offset, token in pending:
        ok = rng.random() >= fail_rate
        tracker.complete(token, ok)
        left[(partition, offset)] -= 1
        if not ok:
            failed.add((partition, offset))
        assert tracker.confirmed() == expected()
    assert tracker.in_flight == 0


def test_producer_config_forces_idempotence() -> None:
    merged = producer_config({"acks": "1", "enable.idempotence": False, "linger.ms": 5})
    assert merged["enable.idempotence"] is True
    assert merged["acks"] == "all"
    assert merged["linger.ms"] == 5


def test_disabled_publisher_marks_everything_done() -> None:
    publisher = RecordPublisher(None, output_topic="out", dlq_topic="dlq", enabled=False)
    publisher.publish(0, 0, b"k", b"v")
    publisher.publish_many(0, 1, [OutputRecord(b"a", b"b"), OutputRecord(b"c", None)])
    publisher.dead_letter(0, 2, b"bad", b"bytes", "truncated")
    publisher.mark_done(1, 9)
    assert publisher.confirmed_positions() == {0: 3, 1: 10}
    assert publisher.stats().dropped == 1
    assert publisher.flush(0.1) == 0


class _HeldProducer:
    """Holds every record until `deliver()`; `purge` fails what it holds at the next poll."""

    def __init__(self, config: dict[str, object]) -> None:
        self.config = config
        self.held: list[Callable[[KafkaError | None, object], None]] = []
        self.purged: list[Callable[[KafkaError | None, object], None]] = []

    def produce(self, topic: str, **kwargs: Any) -> None:
        self.held.append(kwargs["on_delivery"])

    def purge(self, **_: bool) -> None:
        self.purged, self.held = self.held, []

    def poll(self, timeout: float = 0.0) -> int:
        failed, self.purged = self.purged, []
        for callback in failed:
            callback(KafkaError(KafkaError._PURGE_QUEUE), None)
        return len(failed)

    def flush(self, timeout: float = 0.0) -> int:
        self.poll()
        return len(self.held)

    def deliver(self) -> None:
        delivered, self.held = self.held, []
        for callback in delivered:
            callback(None, None)

    def __len__(self) -> int:
        return len(self.held) + len(self.purged)


def test_a_producer_left_without_a_broker_address_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two statistics reports without a broker address (exporter/kafka_clients.py): the
    next poll purges what the producer holds (failed deliveries, which pin the watermark
    so that a restart publishes them) and publishes through a new producer."""
    producers: list[_HeldProducer] = []

    def factory(config: dict[str, object]) -> _HeldProducer:
        producers.append(_HeldProducer(config))
        return producers[-1]

    publisher = RecordPublisher({}, output_topic="out", producer_factory=factory)
    publisher.publish(0, 0, b"k", b"v")
    publisher.publish(0, 1, b"k", b"v")
    on_stats = producers[0].config["stats_cb"]
    assert callable(on_stats)
    on_stats(json.dumps({"brokers": {}}))
    publisher.poll(0)
    assert len(producers) == 1
    on_stats(json.dumps({"brokers": {}}))
    with caplog.at_level(logging.WARNING):
        publisher.poll(0)
    assert len(producers) == 2 and publisher.producers_replaced == 1
    assert "no broker address for 2 statistics reports" in caplog.text
    assert publisher.stats().failed == 2
    publisher.publish(0, 2, b"k", b"v")
    assert len(producers[1].held) == 1
    producers[1].deliver()
    assert publisher.stats().records_delivered == 1
    assert publisher.confirmed_positions() == {0: 0}
    assert publisher.failed_positions() == {0: 0}
    on_stats(json.dumps({"brokers": {}}))  # the old producer's reports no longer count
    on_stats(json.dumps({"brokers": {}}))
    publisher.poll(0)
    assert len(producers) == 2


# --------------------------------------------------------------------------------------------
# Against the mock cluster
# --------------------------------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        mock.create_topic("out", 3)
        mock.create_topic("dlq", 1)
        yield mock


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[object]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "publisher-test-reader",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[object] = []
    deadline = time.monotonic() + 15
    while len(got) < expected and time.monotonic() < deadline:
        got.extend(m for m in consumer.consume(1000, 0.2) if m.error() is None)
    consumer.close()
    return got


@pytest.mark.kafka
def test_positions_advance_only_after_delivery(cluster: MockCluster) -> None:
    # A long linger holds the records in the client: nothing is delivered until flush.
    publisher = RecordPublisher(
        {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 2000, "log_level": 3},
        output_topic="out",
        dlq_topic="dlq",
    )
    publisher.mark_done(0, 0)
    for offset in range(1, 6):
        publisher.publish(0, offset, b"key-%d" % offset, b"value", [("h", b"1")])
    publisher.publish_many(1, 40, [OutputRecord(b"a", b"1"), OutputRecord(b"b", None)])
    publisher.mark_done(1, 41)
    publisher.poll(0)
    assert publisher.confirmed_positions() == {0: 1, 1: 40}
    assert publisher.flush(10) == 0
    assert publisher.confirmed_positions() == {0: 6, 1: 42}
    stats = publisher.stats()
    assert (stats.produced, stats.delivered, stats.failed, stats.in_flight) == (7, 7, 0, 0)
    assert publisher.healthy()

    records = _read_all(cluster.bootstrap_servers, "out", 3, 7)
    keys = sorted(m.key() for m in records)  # type: ignore[attr-defined]
    assert keys == sorted([b"key-%d" % o for o in range(1, 6)] + [b"a", b"b"])
    tombstones = [m for m in records if m.value() is None]  # type: ignore[attr-defined]
    assert [m.key() for m in tombstones] == [b"b"]  # type: ignore[attr-defined]
    publisher.close()


@pytest.mark.kafka
def test_dead_letters_carry_the_source_and_the_reason(cluster: MockCluster) -> None:
    publisher = RecordPublisher(
        {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "log_level": 3},
        output_topic="out",
        dlq_topic="dlq",
    )
    publisher.dead_letter(7, 1234, b"\x00\x09bad", None, "truncated key at byte 2", [("x", b"y")])
    assert publisher.flush(10) == 0
    assert publisher.confirmed_positions() == {7: 1235}
    assert publisher.stats().dead_lettered == 1
    [message] = _read_all(cluster.bootstrap_servers, "dlq", 1, 1)
    assert message.key() == b"\x00\x09bad"  # type: ignore[attr-defined]
    assert message.value() is None  # type: ignore[attr-defined]
    headers = dict(message.headers())  # type: ignore[attr-defined]
    assert headers == {
        "x": b"y",
        HEADER_ERROR: b"truncated key at byte 2",
        HEADER_SOURCE_TOPIC: b"__consumer_offsets",
        HEADER_SOURCE_PARTITION: b"7",
        HEADER_SOURCE_OFFSET: b"1234",
    }
    publisher.close()


@pytest.mark.kafka
def test_delivery_failure_is_counted_and_never_passed(cluster: MockCluster) -> None:
    publisher = RecordPublisher(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "linger.ms": 5,
            "message.timeout.ms": 1500,
            "log_level": 0,
        },
        output_topic="out",
    )
    publisher.publish(0, 0, b"before", b"v")
    assert publisher.flush(10) == 0
    cluster.set_down()
    publisher.publish(0, 1, b"lost", b"v")  # will time out: the broker is unreachable
    publisher.mark_done(0, 2)
    assert wait_until(lambda: publisher.poll(0.1) >= 0 and publisher.delivery_failures == 1, 15)
    assert publisher.confirmed_positions() == {0: 1}
    assert publisher.failed_positions() == {0: 1}
    assert not publisher.healthy()
    assert publisher.stats().last_error is not None
    cluster.set_up()
    publisher.publish(0, 3, b"after", b"v")
    assert publisher.flush(10) == 0
    assert publisher.confirmed_positions() == {0: 1}  # still pinned at the failed record
    publisher.close()


@pytest.mark.kafka
def test_publisher_survives_a_broker_restart() -> None:
    """Broker killed (SIGKILL) and replaced by a new empty mock behind the same address.

    librdkafka 2.16: the producer reports _ALL_BROKERS_DOWN, keeps the records queued,
    re-bootstraps through the forwarder (warning that the cluster id changed) and delivers
    them to the new cluster; the idempotent producer is not fenced by the new mock.
    """
    with TcpForwarder() as forwarder:
        first = ChildMockCluster(advertise_port=forwarder.port)
        forwarder.retarget(first.address)
        first.create_topic("out", 1)
        publisher = RecordPublisher(
            {"bootstrap.servers": forwarder.address, "linger.ms": 5, "log_level": 0},
            output_topic="out",
        )
        publisher.publish(0, 0, b"a", b"1")
        assert publisher.flush(10) == 0
        first.kill()
        for offset in (1, 2, 3):
            publisher.publish(0, offset, b"k", b"v")
        publisher.flush(1.0)
        assert publisher.confirmed_positions() == {0: 1}
        with ChildMockCluster(advertise_port=forwarder.port) as second:
            second.create_topic("out", 1)
            forwarder.retarget(second.address)
            assert publisher.flush(20) == 0
            assert publisher.confirmed_positions() == {0: 4}
            assert publisher.delivery_failures == 0
            assert len(_read_all(forwarder.address, "out", 1, 3)) == 3
            publisher.close()


def test_a_fatal_producer_is_replaced_so_a_grant_is_picked_up(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fatal error (Write refused to the idempotent producer) stops that producer for
    good: its records count as failed deliveries, and after FATAL_RETRY_S a new producer
    takes over, so an ACL granted meanwhile is picked up without a restart."""
    producers: list[_HeldProducer] = []

    def factory(config: dict[str, object]) -> _HeldProducer:
        producers.append(_HeldProducer(config))
        return producers[-1]

    clock = [1000.0]
    monkeypatch.setattr("offsetwatch.exporter.sinks.publisher.time.monotonic", lambda: clock[0])
    publisher = RecordPublisher(
        {"bootstrap.servers": "kafka:9092"}, output_topic="out", producer_factory=factory
    )
    publisher.publish(0, 0, b"k", b"v")
    on_error = producers[0].config["error_cb"]
    assert callable(on_error)
    with caplog.at_level(logging.WARNING):
        on_error(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied", fatal=True))
    assert not publisher.healthy()
    assert "kafka-acls.sh --bootstrap-server kafka:9092 --add" in caplog.text
    assert "--operation Write --topic 'out'" in caplog.text
    publisher.poll(0)
    assert len(producers) == 1  # not before the retry time
    clock[0] += FATAL_RETRY_S
    publisher.poll(0)
    assert len(producers) == 2 and publisher.producers_replaced == 1
    assert publisher.stats().failed == 1 and publisher.failed_positions() == {0: 0}
    publisher.publish(0, 1, b"k", b"v")
    producers[1].deliver()
    assert publisher.stats().records_delivered == 1


def test_a_producer_replaced_on_rotation_delivers_what_it_holds_then_fails_the_rest(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials rotated (`reconfigure`): the next poll publishes through a new producer of
    the new settings, while the old one keeps what it holds and still delivers it; past
    RETIRE_DRAIN_S what it holds is purged, each record a failed delivery that pins the
    watermark (a restart publishes it again), and the old producer is let go."""
    producers: list[_HeldProducer] = []

    def factory(config: dict[str, object]) -> _HeldProducer:
        producers.append(_HeldProducer(config))
        return producers[-1]

    clock = [1000.0]
    monkeypatch.setattr("offsetwatch.exporter.sinks.publisher.time.monotonic", lambda: clock[0])
    publisher = RecordPublisher(
        {"sasl.password": "old"}, output_topic="out", producer_factory=factory
    )
    for offset in range(3):
        publisher.publish(0, offset, b"k", b"v")
    publisher.reconfigure({"sasl.password": "new"})
    assert len(producers) == 1  # the swap happens on the poll thread
    with caplog.at_level(logging.INFO):
        publisher.poll(0)
    assert len(producers) == 2 and publisher.producers_replaced == 1
    assert producers[1].config["sasl.password"] == "new"
    assert "delivers what it holds for up to 30 s" in caplog.text
    assert "new" not in caplog.text.replace("a new producer", "")  # no secret in the line
    old = producers[0]
    # the old producer delivers two of its three while the new one publishes on
    first_two, old.held = old.held[:2], old.held[2:]
    for callback in first_two:
        callback(None, None)
    publisher.publish(0, 3, b"k", b"v")
    producers[1].deliver()
    publisher.poll(0)
    assert publisher.stats().records_delivered == 3
    assert publisher.confirmed_positions() == {0: 2}  # offset 2 still held by the old one
    assert publisher.stats().failed == 0
    clock[0] += RETIRE_DRAIN_S - 1
    publisher.poll(0)
    assert publisher.stats().failed == 0 and len(old) == 1
    clock[0] += 1
    publisher.poll(0)
    assert publisher.stats().failed == 1 and len(old) == 0
    assert publisher.failed_positions() == {0: 2}
    assert publisher.confirmed_positions() == {0: 2}  # never past the failed record
    assert publisher._retiring == []
    assert publisher.flush(0.1) == 0
