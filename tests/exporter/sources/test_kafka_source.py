"""OffsetsTopicSource against librdkafka's mock cluster (see tests/kafka_fixtures.py for what
the mock can and cannot do)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from offsetwatch.exporter.kafka_clients import REDACTED, redact
from offsetwatch.exporter.sources.kafka_source import (
    ClusterChanged,
    OffsetOutOfRange,
    OffsetsTopicSource,
    PartitionEof,
    PartitionsAssigned,
    RawRecord,
    SourceBatch,
    SourceError,
    SourceEvent,
    consumer_config,
)
from tests.kafka_fixtures import (
    OFFSETS_TOPIC,
    ChildMockCluster,
    MockCluster,
    MockClusterError,
    TcpForwarder,
    mock_cluster,
    produce_raw,
)

# Fast reactions for tests: the mock holds an empty fetch for the whole fetch.wait.max.ms.
FAST = {"fetch.wait.max.ms": 50, "log_level": 3}


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        yield mock


def _source(
    bootstrap: str,
    start_positions: Mapping[int, int] | None = None,
    *,
    metadata_refresh_s: float = 30.0,
    config: Mapping[str, object] | None = None,
) -> OffsetsTopicSource:
    merged: dict[str, object] = {"bootstrap.servers": bootstrap, **FAST, **(config or {})}
    return OffsetsTopicSource(
        merged, start_positions=start_positions, metadata_refresh_s=metadata_refresh_s
    )


def _read_until(
    source: OffsetsTopicSource,
    done: object = None,
    timeout_s: float = 20.0,
) -> tuple[list[RawRecord], list[SourceEvent]]:
    """Poll until `done(records, events)` (default: caught up) or timeout."""
    records: list[RawRecord] = []
    events: list[SourceEvent] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = source.poll_batch(5000, 0.1)
        records.extend(batch.records())
        events.extend(batch.events)
        finished = done(records, events) if callable(done) else source.caught_up()
        if finished:
            break
    return records, events


def _payload(partition: int, i: int) -> tuple[int, bytes | None, bytes | None]:
    # Every fifth record is a tombstone: null values must come through as None.
    value = None if i % 5 == 4 else b"value-%d-%d" % (partition, i)
    return partition, b"key-%d-%d" % (partition, i), value


# --------------------------------------------------------------------------------------------
# Config and secrets (no Kafka)
# --------------------------------------------------------------------------------------------


def test_redact_masks_secrets_and_callables() -> None:
    config = {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.username": "svc",
        "sasl.password": "hunter2",
        "ssl.key.password": "pw",
        "ssl.keystore.password": "pw",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
        "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.config": "clientSecret=s",
        "error_cb": print,
    }
    safe = redact(config)
    assert safe["bootstrap.servers"] == "b:9092"
    assert safe["sasl.username"] == "svc"
    for key in (
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
    ):
        assert safe[key] == REDACTED
    assert "hunter2" not in repr(safe)
    assert safe["error_cb"] == "<builtin_function_or_method>"
    assert config["sasl.password"] == "hunter2"  # the input is not modified


def test_consumer_config_never_commits() -> None:
    merged = consumer_config(
        {
            "bootstrap.servers": "x:1",
            "enable.auto.commit": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 10,
        }
    )
    assert merged["enable.auto.commit"] is False
    assert merged["enable.auto.offset.store"] is False
    assert merged["auto.offset.reset"] == "error"
    assert merged["enable.partition.eof"] is True
    assert merged["isolation.level"] == "read_uncommitted"  # overridable on purpose
    assert merged["fetch.wait.max.ms"] == 10
    assert str(merged["group.id"]).startswith("offsetwatch-exporter-")
    assert consumer_config({})["group.id"] != merged["group.id"]


def test_statistics_stay_on(caplog: pytest.LogCaptureFixture) -> None:
    """source_up() sees a quiet cluster back after an outage through the statistics only."""
    assert consumer_config({"statistics.interval.ms": 1000})["statistics.interval.ms"] == 1000
    with caplog.at_level("WARNING", logger="offsetwatch.exporter.sources.kafka_source"):
        assert consumer_config({"statistics.interval.ms": "0"})["statistics.interval.ms"] == 5000
    assert ["ignoring statistics.interval.ms='0'" in r.getMessage() for r in caplog.records] == [
        True
    ]


def test_source_config_is_logged_redacted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="offsetwatch.exporter.sources.kafka_source")
    source = OffsetsTopicSource(
        {"bootstrap.servers": "127.0.0.1:1", "sasl.password": "hunter2", "log_level": 0}
    )
    try:
        assert "hunter2" not in caplog.text
        assert source.config_for_logging["sasl.password"] == REDACTED
        assert source.config_for_logging["isolation.level"] == "read_committed"
        assert not source.source_up()  # nothing answered yet
        assert not source.caught_up()
    finally:
        source.close()


def test_next_positions_of_a_batch() -> None:
    class Fake:
        def __init__(self, partition: int, offset: int) -> None:
            self._p, self._o = partition, offset

        def partition(self) -> int:
            return self._p

        def offset(self) -> int:
            return self._o

        def timestamp(self) -> tuple[int, int]:
            return (1, 99)

        def key(self) -> bytes:
            return b"k"

        def value(self) -> None:
            return None

    batch = SourceBatch([Fake(0, 4), Fake(0, 5), Fake(1, 0)], [PartitionEof(0, 8)])
    assert batch.next_positions() == {0: 8, 1: 1}
    assert batch.records()[0] == RawRecord(0, 4, 99, b"k", None)


# --------------------------------------------------------------------------------------------
# The fixtures themselves
# --------------------------------------------------------------------------------------------


@pytest.mark.kafka
def test_mock_cluster_context_manager_and_topic_control() -> None:
    with mock_cluster(topics={"three": 3}) as bootstrap:
        assert bootstrap.startswith("127.0.0.1:")
        producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
        producer.produce("auto-created", b"v")
        assert producer.flush(10) == 0
        topics = producer.list_topics(timeout=10).topics
        assert len(topics["three"].partitions) == 3
        assert len(topics["auto-created"].partitions) == 4  # the mock's default


@pytest.mark.kafka
def test_child_cluster_and_forwarder() -> None:
    with TcpForwarder() as forwarder:
        with ChildMockCluster(advertise_port=forwarder.port) as child:
            forwarder.retarget(child.address)
            child.create_topic("t", 2)
            with pytest.raises(MockClusterError):
                child.create_topic("t", 2)  # already exists: the child reports the error
            produce_raw(forwarder.address, [(1, b"k", b"v")], topic="t")
            consumer = Consumer({"bootstrap.servers": forwarder.address, "group.id": "g"})
            metadata = consumer.list_topics("t", timeout=10)
            # The broker advertises the forwarder, so clients never bypass it.
            assert [(b.host, b.port) for b in metadata.brokers.values()] == [
                ("127.0.0.1", forwarder.port)
            ]
            assert consumer.get_watermark_offsets(TopicPartition("t", 1), timeout=10) == (0, 1)
            consumer.close()
            pid = child.pid
        assert not child.alive()
        refused_before = forwarder.refused
        with socket_to(forwarder.port) as sock:  # nothing behind it: closed at once
            assert sock.recv(1) == b""
        assert forwarder.refused >= refused_before + 1
        assert pid > 0


@contextlib.contextmanager
def socket_to(port: int) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        yield sock
    finally:
        sock.close()


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@pytest.mark.kafka
def test_reads_everything_from_the_beginning(cluster: MockCluster) -> None:
    cluster.create_topic(OFFSETS_TOPIC, 4)  # partition 3 stays empty
    counts = {0: 300, 1: 7, 2: 1200}
    written = [_payload(p, i) for p, n in counts.items() for i in range(n)]
    produce_raw(cluster.bootstrap_servers, written)

    with _source(cluster.bootstrap_servers) as source:
        assert source.start()
        assert source.source_up()
        records, events = _read_until(source)
        assert source.caught_up()
        assert [(r.partition, r.key, r.value) for r in records if r.partition == 2] == [
            w for w in written if w[0] == 2
        ]
        got = sorted((r.partition, r.offset, r.key, r.value) for r in records)
        want = sorted(
            (p, i, key, value)
            for p in counts
            for i, (_, key, value) in enumerate(w for w in written if w[0] == p)
        )
        assert got == want
        assert all(r.timestamp_ms > 0 for r in records)
        assert PartitionsAssigned((0, 1, 2, 3)) in events
        # a partition with records is caught up once its last record reaches the high
        # watermark, often before its PARTITION_EOF arrives (the read stops there); the empty
        # partition only by its EOF
        ends = {0: 300, 1: 7, 2: 1200, 3: 0}
        eofs = {e.partition: e.offset for e in events if isinstance(e, PartitionEof)}
        assert eofs[3] == 0 and all(ends[p] == offset for p, offset in eofs.items()), eofs
        assert source.positions() == {0: 300, 1: 7, 2: 1200, 3: 0}
        assert source.end_offsets() == {0: 300, 1: 7, 2: 1200, 3: 0}
        assert source.lag() == {0: 0, 1: 0, 2: 0, 3: 0}
        assert source.lag({0: 100, 1: 7, 2: 0, 3: 0}) == {0: 200, 1: 0, 2: 1200, 3: 0}
        group_id = str(source.config_for_logging["group.id"])

    # The source never committed anything under its group id.
    checker = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group_id})
    committed = checker.committed([TopicPartition(OFFSETS_TOPIC, p) for p in range(4)], 10)
    assert all(tp.offset < 0 for tp in committed)
    checker.close()


@pytest.mark.kafka
def test_empty_topic_is_caught_up(cluster: MockCluster) -> None:
    cluster.create_topic(OFFSETS_TOPIC, 3)
    with _source(cluster.bootstrap_servers) as source:
        records, _ = _read_until(source, timeout_s=10)
        assert records == []
        assert source.caught_up()
        assert source.positions() == {0: 0, 1: 0, 2: 0}


@pytest.mark.kafka
def test_missing_topic_is_reported_not_raised(cluster: MockCluster) -> None:
    with _source(cluster.bootstrap_servers) as source:
        assert not source.start()
        batch = source.poll_batch(10, 0.1)
        assert any(
            isinstance(e, SourceError) and "not available" in e.message for e in batch.events
        )
        assert not source.caught_up()
        assert source.assigned_partitions() == set()


@pytest.mark.kafka
def test_resumes_from_given_positions(cluster: MockCluster) -> None:
    cluster.create_topic(OFFSETS_TOPIC, 4)
    produce_raw(cluster.bootstrap_servers, [_payload(p, i) for p in range(3) for i in range(10)])
    start = {0: 3, 1: 10, 2: 0}  # 1 is at its end; 3 is not given: from the beginning
    with _source(cluster.bootstrap_servers, start) as source:
        assert source.positions() == {}
        records, events = _read_until(source)
        got = {(r.partition, r.offset) for r in records}
        assert got == {(0, o) for o in range(3, 10)} | {(2, o) for o in range(10)}
        assert not [e for e in events if isinstance(e, OffsetOutOfRange)]
        assert source.positions() == {0: 10, 1: 10, 2: 10, 3: 0}


@pytest.mark.kafka
def test_out_of_range_positions_are_reported_then_rebuilt(cluster: MockCluster) -> None:
    cluster.create_topic(OFFSETS_TOPIC, 3)
    produce_raw(cluster.bootstrap_servers, [_payload(p, i) for p in range(3) for i in range(10)])
    cluster.delete_records(OFFSETS_TOPIC, 0, 6)  # retention moved partition 0's start to 6
    start = {0: 2, 1: 25, 2: 4, 7: 1}  # 0 behind the log start, 1 past the end, 7 missing

    with _source(cluster.bootstrap_servers, start) as source:
        records, events = _read_until(
            source, done=lambda r, e: len(r) >= 6 and source.assigned_partitions() == {0, 1, 2}
        )
        problems = {e.partition: e for e in events if isinstance(e, OffsetOutOfRange)}
        assert problems[0] == OffsetOutOfRange(0, 2, 6, 10, "before-log-start")
        assert problems[1] == OffsetOutOfRange(1, 25, 0, 10, "after-log-end")
        assert problems[7] == OffsetOutOfRange(7, 1, None, None, "partition-missing")
        assert {(r.partition, r.offset) for r in records} == {(2, o) for o in range(4, 10)}
        assert source.out_of_range_partitions() == {0, 1}
        assert not source.caught_up()  # never ready while a partition waits for a rebuild
        assert set(source.positions()) == {2}

        source.restart_from_beginning([0, 1])
        records, _ = _read_until(source)
        assert source.caught_up()
        got = {(r.partition, r.offset) for r in records}
        assert got == {(0, o) for o in range(6, 10)} | {(1, o) for o in range(10)}
        assert source.out_of_range_partitions() == set()
        assert source.positions() == {0: 10, 1: 10, 2: 10}


@pytest.mark.kafka
def test_position_lost_while_reading_is_reported(cluster: MockCluster) -> None:
    """The broker's own out-of-range answer (auto.offset.reset=error), not the pre-check."""
    cluster.create_topic(OFFSETS_TOPIC, 1)
    produce_raw(cluster.bootstrap_servers, [_payload(0, i) for i in range(10)])
    with _source(cluster.bootstrap_servers) as source:
        _read_until(source)
        cluster.delete_records(OFFSETS_TOPIC, 0, 5)
        source.seek({0: 2})  # e.g. re-reading a range that retention has deleted meanwhile
        records, events = _read_until(
            source, done=lambda r, e: any(isinstance(x, OffsetOutOfRange) for x in e)
        )
        assert records == []
        [problem] = [e for e in events if isinstance(e, OffsetOutOfRange)]
        assert (problem.partition, problem.requested_offset, problem.reason) == (0, 2, "fetch")
        assert problem.log_start_offset == 5
        assert source.out_of_range_partitions() == {0}
        assert not source.caught_up()
        source.restart_from_beginning([0])
        records, _ = _read_until(source)
        assert [r.offset for r in records] == [5, 6, 7, 8, 9]
        assert source.caught_up()


@pytest.mark.kafka
def test_new_partitions_are_picked_up(cluster: MockCluster) -> None:
    """The mock has no CreatePartitions; growing an *empty* topic by delete + create is
    equivalent for the source (positions 0 stay valid)."""
    cluster.create_topic(OFFSETS_TOPIC, 2)
    with _source(cluster.bootstrap_servers, metadata_refresh_s=0.3) as source:
        _read_until(source)
        assert source.assigned_partitions() == {0, 1}
        cluster.recreate_topic(OFFSETS_TOPIC, 4)
        produce_raw(cluster.bootstrap_servers, [_payload(p, 0) for p in range(4)])
        records, events = _read_until(source, done=lambda r, e: len(r) == 4 and source.caught_up())
        assert source.assigned_partitions() == {0, 1, 2, 3}
        assert PartitionsAssigned((2, 3)) in events
        assert sorted((r.partition, r.offset) for r in records) == [(p, 0) for p in range(4)]


# --------------------------------------------------------------------------------------------
# Transactions (read_committed)
# --------------------------------------------------------------------------------------------


def _transactional_writes(bootstrap: str, commit: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-test"})
    producer.init_transactions(10)
    producer.begin_transaction()
    tag = b"committed" if commit else b"aborted"
    for i in range(3):
        producer.produce(OFFSETS_TOPIC, key=tag + b"-%d" % i, value=b"v", partition=0)
    producer.flush(10)
    if commit:
        producer.commit_transaction(10)
    else:
        producer.abort_transaction(10)


@pytest.mark.kafka
def test_committed_transaction_is_delivered_and_markers_skipped(cluster: MockCluster) -> None:
    cluster.create_topic(OFFSETS_TOPIC, 1)
    produce_raw(cluster.bootstrap_servers, [(0, b"plain", b"v")])
    _transactional_writes(cluster.bootstrap_servers, commit=True)
    with _source(cluster.bootstrap_servers) as source:
        records, _ = _read_until(source)
        assert [(r.offset, r.key) for r in records] == [
            (0, b"plain"),
            (1, b"committed-0"),
            (2, b"committed-1"),
            (3, b"committed-2"),
        ]
        # Offset 4 is the commit marker: never delivered, yet EOF moves the position past it,
        # so a checkpoint does not point at a control record.
        assert source.positions() == {0: 5}
        assert source.caught_up()


# Aborted and still-open transactions are never delivered: proven on a real broker, whose
# Fetch reports aborted transactions and the last stable offset (librdkafka's mock reports
# neither), with transactional commits of real clients:
# tests/exporter/test_real_broker.py::test_transactional_commits_only_committed_ones_show


# --------------------------------------------------------------------------------------------
# Broker down and back
# --------------------------------------------------------------------------------------------


class _Message:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class _Prefetched:
    """A consumer of one partition holding `fetched` records in its queue (the high
    watermark of its last fetch answer), handed out `per_call` at a time: a catch-up that
    goes on from the prefetch queue after the cluster died."""

    def __init__(self, fetched: int, per_call: int) -> None:
        self.high, self.per_call, self.next = fetched, per_call, 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        partitions = {0: SimpleNamespace(id=0)}
        md = SimpleNamespace(partitions=partitions, error=None)
        return SimpleNamespace(cluster_id="c1", topics={topic: md})

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        end = min(self.high, self.next + self.per_call)
        out = [_Message(0, o) for o in range(self.next, end)]
        self.next = end
        return out

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, self.high

    def close(self) -> None:
        pass


def test_every_broker_down_is_said_with_the_failure_behind_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ "1/1 brokers are down" alone says nothing of why: the line carries librdkafka's last
    connection failure (here plaintext spoken to a TLS listener), and does not claim that
    the brokers are down, only that no connection is up."""
    consumer = _Prefetched(fetched=10, per_call=10)
    source = OffsetsTopicSource({}, consumer_factory=lambda _config: consumer)
    source.poll_batch()
    hint = (
        "127.0.0.1:9093/bootstrap: Disconnected while requesting ApiVersion: might be caused "
        "by incorrect security.protocol configuration (connecting to a SSL listener?)"
    )
    source._on_error(KafkaError(KafkaError._TRANSPORT, hint))
    with caplog.at_level(logging.WARNING):
        source._on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert "no connection to any broker (librdkafka: 1/1 brokers are down)" in caplog.text
    assert "connecting to a SSL listener?" in caplog.text
    assert "all brokers down" not in caplog.text


def test_records_from_the_prefetch_queue_do_not_bring_the_source_back_up() -> None:
    """After "all brokers down", only a record or an end past what was fetched before says
    the cluster answers again (stats and metadata say so too)."""
    consumer = _Prefetched(fetched=1000, per_call=100)
    source = OffsetsTopicSource({}, consumer_factory=lambda _config: consumer)
    source.poll_batch()
    assert source.source_up()
    source._on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert not source.source_up()
    for _ in range(8):  # the rest of the queue: records 100..899
        assert len(source.poll_batch().messages) == 100
        assert not source.source_up()
    consumer.high = 1100  # a new fetch answer: records past the end known at the crash
    source.poll_batch()
    source.poll_batch()
    assert source.source_up()


def test_two_statistics_reports_without_a_connection_up_mean_down() -> None:
    """The second signal besides _ALL_BROKERS_DOWN: one report could fall in a reconnect."""
    source = OffsetsTopicSource({}, consumer_factory=lambda _config: _Prefetched(10, 10))
    source.poll_batch()

    def report(*states: str) -> None:
        brokers = {f"b{i}": {"state": state} for i, state in enumerate(states)}
        source._on_stats(json.dumps({"brokers": brokers}))

    report("UP", "INIT")
    report("CONNECT", "INIT")
    assert source.source_up()
    report("UP")
    report("CONNECT", "INIT")
    assert source.source_up()
    report("DOWN", "INIT")
    assert not source.source_up()
    report("UP", "INIT")
    assert source.source_up()


class _Unanswered(_Prefetched):
    """A consumer whose metadata requests fail from `failing` on (a client that does not
    connect again)."""

    def __init__(self) -> None:
        super().__init__(fetched=10, per_call=10)
        self.failing = False

    def list_topics(self, topic: str, timeout: float) -> Any:
        if self.failing:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
        return super().list_topics(topic, timeout)


def test_a_failed_probe_while_down_is_logged_with_the_broker_states_every_30_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While down the source probes the cluster every 5 s, silently; every 30 s one
    WARNING says how long, why the probe failed and what the client's connections were
    doing (the states of the last statistics report)."""
    now = [0.0]
    consumer = _Unanswered()
    source = OffsetsTopicSource({}, consumer_factory=lambda _config: consumer, clock=lambda: now[0])
    source.poll_batch()
    broker = {"nodename": "127.0.0.1:9092/1", "state": "APIVERSION_QUERY", "stateage": 4_000_000}
    source._on_stats(json.dumps({"brokers": {"127.0.0.1:9092/1": broker}}))
    source._on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    consumer.failing = True
    with caplog.at_level(logging.WARNING):
        for second in range(1, 96):
            now[0] = float(second)
            source.poll_batch()
    said = [r.getMessage() for r in caplog.records if "metadata probe failed" in r.getMessage()]
    # the first probe when the metadata refresh is due (30 s), then every 5 s, said every 30 s
    assert [m.split(" s, ")[0][-6:] for m in said] == ["for 30", "for 60", "for 90"], said
    assert said[0].endswith(
        "(Broker transport failure); the client's broker connections: "
        "127.0.0.1:9092/1 APIVERSION_QUERY (4 s)"
    ), said


class _Assigning(_Prefetched):
    """Records each assignment and whether it was closed."""

    def __init__(self) -> None:
        super().__init__(fetched=10, per_call=10)
        self.assigned: list[tuple[int, int]] = []
        self.closed = threading.Event()

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned += [(tp.partition, tp.offset) for tp in partitions]

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        pass

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("__consumer_offsets", p) for p, _offset in self.assigned]

    def close(self) -> None:
        self.closed.set()


def test_a_client_left_without_a_broker_address_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After a hang, the broker leaves itself out of one metadata answer while its controller
    fences it; librdkafka forgets it, and a client left with only the coordinator's stand-in
    (no node name) never connects again. After two statistics reports like that the source
    opens a new client that reads on from the positions reached, closes the old one, counts
    it, and ignores what the old one still reports."""
    clients: list[_Assigning] = []
    configs: list[dict[str, object]] = []

    def factory(config: dict[str, object]) -> _Assigning:
        clients.append(_Assigning())
        configs.append(config)
        return clients[-1]

    source = OffsetsTopicSource({}, consumer_factory=factory)
    source.poll_batch()  # records 0..9: position 10
    assert source.positions() == {0: 10}
    addressless = {"GroupCoordinator": {"nodename": "", "state": "TRY_CONNECT"}}
    learned = {"127.0.0.1:9092/1": {"nodename": "127.0.0.1:9092", "state": "UP"}}

    def report(generation: int, brokers: dict[str, dict[str, str]]) -> None:
        on_stats = configs[generation]["stats_cb"]
        assert callable(on_stats)
        on_stats(json.dumps({"brokers": brokers}))

    report(0, addressless)
    report(0, {**addressless, **learned})  # one report alone is a moment, not a loss
    report(0, addressless)
    source.poll_batch()
    assert len(clients) == 1 and source.clients_replaced_total == 0
    report(0, addressless)
    assert not source.source_up()
    with caplog.at_level(logging.WARNING):
        source.poll_batch()
    assert len(clients) == 2 and source.clients_replaced_total == 1
    assert clients[1].assigned == [(0, 10)]
    assert clients[0].closed.wait(5)
    assert "no broker address for 2 statistics reports" in caplog.text
    assert "opening a new client" in caplog.text
    report(0, addressless)  # the old client, closing: no longer counts
    report(0, addressless)
    report(1, learned)
    assert source.source_up()
    source.poll_batch()
    assert len(clients) == 2
    # a partition with no position yet starts where it was asked to start
    source.seek({0: OFFSET_END})
    report(1, addressless)
    report(1, addressless)
    source.poll_batch()
    assert clients[2].assigned == [(0, OFFSET_END)]
    source.close()


class _Seeking(_Prefetched):
    def __init__(self) -> None:
        super().__init__(fetched=10, per_call=10)
        self.seeks: list[TopicPartition] = []

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append(tp)


@pytest.mark.parametrize("waiting", ["validate-epoch-wait", "offset-wait", "offset-query"])
def test_a_partition_left_waiting_before_a_fetch_is_read_again(
    waiting: str, caplog: pytest.LogCaptureFixture
) -> None:
    """librdkafka can leave a partition in `validate-epoch-wait` after a hung broker (or
    waiting for an offset lookup): after three statistics reports in such a state the source
    seeks it to its position, without a leader epoch, and says which state it was; not while
    the cluster is away, nor after a report or two (each normally takes one round trip)."""
    consumer = _Seeking()
    source = OffsetsTopicSource({}, consumer_factory=lambda _config: consumer)
    source.poll_batch()  # records 0..9 of partition 0: position 10

    def report(state: str) -> None:
        partitions = {"0": {"fetch_state": state}, "-1": {"fetch_state": state}}
        stats = {
            "brokers": {"b1": {"state": "UP"}},
            "topics": {"__consumer_offsets": {"partitions": partitions}},
        }
        source._on_stats(json.dumps(stats))

    report(waiting)
    report(waiting)
    report("active")  # answered: counting starts again
    report(waiting)
    report(waiting)
    source.poll_batch()
    assert consumer.seeks == []
    report(waiting)
    with caplog.at_level(logging.WARNING):
        source.poll_batch()
    assert [(tp.topic, tp.partition, tp.offset) for tp in consumer.seeks] == [
        ("__consumer_offsets", 0, 10)
    ]
    assert f"0 ({waiting}, 3 reports)" in caplog.text and "no rewind" in caplog.text
    assert consumer.seeks[0].leader_epoch in (None, -1)
    source.poll_batch()
    assert len(consumer.seeks) == 1

    source._on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    for _ in range(4):
        source._on_stats(
            json.dumps(
                {
                    "brokers": {"b1": {"state": "DOWN"}},
                    "topics": {
                        "__consumer_offsets": {"partitions": {"0": {"fetch_state": waiting}}}
                    },
                }
            )
        )
    source.poll_batch()
    assert len(consumer.seeks) == 1


def test_a_partition_without_a_leader_waits_rightly_and_is_left_alone() -> None:
    """A lost quorum leaves partitions without a leader while a broker still answers:
    waiting is all they can do, so they are never sought again (it looked like a rewind)."""
    consumer = _Seeking()
    source = OffsetsTopicSource({}, consumer_factory=lambda _config: consumer)
    source.poll_batch()
    for _ in range(5):
        partitions = {"0": {"fetch_state": "offset-query", "leader": -1}}
        source._on_stats(
            json.dumps(
                {
                    "brokers": {"b1": {"state": "UP"}},
                    "topics": {"__consumer_offsets": {"partitions": partitions}},
                }
            )
        )
        source.poll_batch()
    assert consumer.seeks == []


@pytest.mark.kafka
def test_broker_down_then_new_broker_behind_the_same_address() -> None:
    """What librdkafka 2.16 does when the only broker dies (SIGKILL) and a new one appears.

    * The forwarder accepts and closes at once while no broker is behind it: the consumer
      logs disconnects, raises _ALL_BROKERS_DOWN through error_cb, and consume() just
      returns nothing. The source reports down and never raises.
    * librdkafka forgets the learned broker and goes back to the bootstrap address
      (re-bootstrap), so a new cluster behind the same address is found; it warns that the
      cluster id changed. Stats show the broker UP again and the source reports up.
    * The new cluster has another cluster id: the source says so (ClusterChanged, noticed at
      the next metadata answer) and reads every partition of the new cluster from its start,
      partition 0 too, whose old position 3 is past the new, empty log's end. A fetch at that
      old position may still get there first and be reported out of range ("fetch"): the
      caller rebuilds either way.
    """
    with TcpForwarder() as forwarder:
        first = ChildMockCluster(advertise_port=forwarder.port)
        forwarder.retarget(first.address)
        first.create_topic(OFFSETS_TOPIC, 2)
        produce_raw(forwarder.address, [_payload(0, i) for i in range(3)])
        source = _source(
            forwarder.address,
            metadata_refresh_s=1.0,
            config={"statistics.interval.ms": 200, "log_level": 0},
        )
        records, _ = _read_until(source)
        assert len(records) == 3 and source.caught_up() and source.source_up()
        assert forwarder.accepted > 0  # every connection went through the forwarder

        first.kill()
        _, events = _read_until(source, done=lambda r, e: not source.source_up(), timeout_s=15)
        assert not source.source_up()
        assert any(isinstance(e, SourceError) and e.code == "_ALL_BROKERS_DOWN" for e in events)
        for _ in range(5):  # polling a dead cluster is quiet and harmless
            source.poll_batch(100, 0.1)
        assert source.down_for_s() > 0

        with ChildMockCluster(advertise_port=forwarder.port) as second:
            second.create_topic(OFFSETS_TOPIC, 2)
            forwarder.retarget(second.address)
            produce_raw(forwarder.address, [_payload(1, i) for i in range(4)])
            records, events = _read_until(
                source,
                done=lambda r, e: (
                    any(isinstance(x, ClusterChanged) for x in e)
                    and source.caught_up()
                    and source.positions() == {0: 0, 1: 4}
                ),
                timeout_s=30,
            )
            assert source.source_up()
            [changed] = [e for e in events if isinstance(e, ClusterChanged)]
            assert changed.previous != changed.current
            assert source.cluster_id == changed.current
            assert {(r.partition, r.offset) for r in records} == {(1, o) for o in range(4)}
            for lost in (e for e in events if isinstance(e, OffsetOutOfRange)):
                assert (lost.partition, lost.requested_offset, lost.reason) == (0, 3, "fetch")
            source.close()


@pytest.mark.kafka
def test_consume_rate(cluster: MockCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """Throughput of the source on the in-process mock (which shares the two cores)."""
    cluster.create_topic(OFFSETS_TOPIC, 4)
    # Shaped like offset commits: ~40-byte keys, ~30-byte values. The mock keeps ~70k such
    # records per partition, so stay below that.
    key = b"\x00\x01\x00\x0bsome-group-1\x00\x0csome-topic-a\x00\x00\x00\x05"
    value = b"\x00\x03" + bytes(30)
    per_partition = 50_000
    produce_raw(
        cluster.bootstrap_servers, ((p, key, value) for _ in range(per_partition) for p in range(4))
    )
    with _source(cluster.bootstrap_servers, config={"fetch.wait.max.ms": 500}) as source:
        source.start()
        started = time.perf_counter()
        count = 0
        while not source.caught_up() and time.perf_counter() - started < 60:
            count += len(source.poll_batch(10_000, 1.0).messages)
        elapsed = time.perf_counter() - started
    assert count == 4 * per_partition
    with capsys.disabled():
        print(f"\n  source read {count} records in {elapsed:.2f}s = {count / elapsed:,.0f}/s")
    assert count / elapsed > 10_000  # a floor far below the ~150k/s measured: CI is shared


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (ClusterChanged("old-id", "new-id"), "the cluster is now new-id, not old-id"),
        (
            OffsetOutOfRange(3, 120, 200, 900, "before-log-start"),
            "partition 3: position 120 is out of range (before-log-start; the log holds 200-900)",
        ),
    ],
)
def test_events_that_reach_a_log_line_read_as_sentences(event: object, said: str) -> None:
    """The share-state reader logs these events as they are: never a dataclass repr."""
    assert str(event) == said


def test_its_own_group_id_refused_is_no_error_on_either_path() -> None:
    """confluent-kafka makes a consumer take a group id; the source never joins it, so the
    broker's refusal to find its coordinator is nobody's problem, whether it comes through
    error_cb or in the consume queue, with no partition or with a fetched one's."""
    source = OffsetsTopicSource({}, consumer_factory=lambda _config: _Prefetched(10, 10))
    refused = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "FindCoordinator response error")
    events: list[Any] = []
    source._on_error(refused)
    source._partition_error(None, None, refused, events)
    source._partition_error(3, 120, refused, events)
    assert (events, source.errors_total) == ([], 0)
    batch = source.poll_batch()
    assert not any(isinstance(event, SourceError) for event in batch.events), batch.events


class _Refused(_Prefetched):
    """A cluster whose Metadata answer refuses the topic until `granted`."""

    def __init__(self) -> None:
        super().__init__(fetched=10, per_call=10)
        self.granted = False

    def list_topics(self, topic: str, timeout: float) -> Any:
        if self.granted:
            return super().list_topics(topic, timeout)
        refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed")
        md = SimpleNamespace(partitions={}, error=refused)
        return SimpleNamespace(cluster_id="c1", topics={topic: md})


@pytest.mark.parametrize("optional", [False, True])
def test_a_refused_topic_is_said_once_with_the_grant_never_taken_for_absent(
    optional: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Without Describe on the topic the broker refuses it by name: an optional topic
    (`__share_group_state`) refused is not "no share groups yet". One WARNING naming the
    kafka-acls.sh grant, `refused` while it lasts, one INFO once it can be read."""
    now = [0.0]
    consumer = _Refused()
    source = OffsetsTopicSource(
        {"bootstrap.servers": "k:9092", "sasl.username": "monitor", "sasl.password": "s3cret"},
        topic="__share_group_state",
        optional=optional,
        consumer_factory=lambda _config: consumer,
        clock=lambda: now[0],
    )
    with caplog.at_level(logging.INFO, logger="offsetwatch.exporter.sources.kafka_source"):
        for _ in range(4):
            source.poll_batch()
            now[0] += 6.0
        assert source.refused is not None and "TOPIC_AUTHORIZATION_FAILED" in source.refused
        assert source.source_up()  # the cluster answers: it is the grant that is missing
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert (
            "kafka-acls.sh --bootstrap-server k:9092 --add --allow-principal User:monitor "
            "--operation Read --topic '__share_group_state'" in warnings[0]
        )
        assert "s3cret" not in caplog.text
        consumer.granted = True
        now[0] += 60.0
        source.poll_batch()
    assert source.refused is None
    assert "can be read again" in caplog.text


# --------------------------------------------------------------------------------------------
# As a member of a fleet's group: a revocation in the middle of a poll (no Kafka)
# --------------------------------------------------------------------------------------------


class _Eof(_Message):
    """A PARTITION_EOF as the client delivers it: an error message."""

    def error(self) -> KafkaError:  # type: ignore[override]
        return KafkaError(KafkaError._PARTITION_EOF, "end")


class _Member(_Prefetched):
    """A fleet member's consumer of partitions 0 and 1 whose consume() runs the rebalance
    callbacks `script` says after it has put the records of `batch` in its answer: records
    collected before the callback, as librdkafka's batch consume does."""

    def __init__(self) -> None:
        super().__init__(fetched=100, per_call=0)
        self.callbacks: dict[str, Any] = {}
        self.assigned: list[tuple[int, int]] = []
        self.unassigned: list[int] = []
        self.script: list[tuple[str, list[int]]] = []
        self.batch: list[_Message] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        partitions = {0: SimpleNamespace(id=0), 1: SimpleNamespace(id=1)}
        md = SimpleNamespace(partitions=partitions, error=None)
        return SimpleNamespace(cluster_id="c1", topics={topic: md})

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.callbacks = callbacks

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned += [(tp.partition, tp.offset) for tp in partitions]

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self.unassigned += [tp.partition for tp in partitions]

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(OFFSETS_TOPIC, p) for p in (0, 1)]

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        out, self.batch = self.batch, []
        for which, partitions in self.script:
            self.callbacks[f"on_{which}"](
                self, [TopicPartition(OFFSETS_TOPIC, p) for p in partitions]
            )
        self.script = []
        return out


def _member_source() -> tuple[OffsetsTopicSource, _Member]:
    from offsetwatch.exporter.fleet.membership import membership

    consumer = _Member()
    source = OffsetsTopicSource(
        {},
        consumer_factory=lambda _config: consumer,
        membership=membership("fleet", "offsetwatch-fleet|r0|", "classic"),
    )
    consumer.script = [("assign", [0, 1])]
    consumer.batch = []
    first = source.poll_batch()
    assert first.events == [PartitionsAssigned((0, 1))]
    consumer.batch = [_Message(p, o) for o in range(5) for p in (0, 1)]
    source.poll_batch()
    assert source.positions() == {0: 5, 1: 5}
    return source, consumer


def test_records_of_a_partition_revoked_inside_the_poll_are_left_out() -> None:
    """The revocation's callback runs inside consume(), after records of that partition were
    put in the batch (and its end): the batch says PartitionsRevoked and holds none of them,
    so the daemon, which drops the partition first, cannot bring part of a group back."""
    from offsetwatch.exporter.sources.kafka_source import PartitionsRevoked

    source, consumer = _member_source()
    consumer.batch = [_Message(0, 5), _Message(1, 5), _Message(1, 6), _Eof(1, 7), _Message(0, 6)]
    consumer.script = [("revoke", [1])]
    batch = source.poll_batch()
    assert [(m.partition(), m.offset()) for m in batch.messages] == [(0, 5), (0, 6)]
    assert batch.events == [PartitionsRevoked((1,))]
    assert batch.next_positions() == {0: 7}
    assert source.positions() == {0: 7}
    assert source.assigned_partitions() == {0}
    assert consumer.unassigned == [1]
    # records of it still in the client's queue later are not delivered either
    consumer.batch = [_Message(1, 7), _Message(0, 7)]
    later = source.poll_batch()
    assert [(m.partition(), m.offset()) for m in later.messages] == [(0, 7)]
    assert source.positions() == {0: 8}
    source.close()


def test_a_partition_lost_and_given_back_inside_one_poll_is_read_again_from_its_start() -> None:
    """Taken and given back within one consume(): the batch's records of it may be from the
    old assignment (fetched before the revocation); none is delivered, and it is read again
    from where the new assignment starts it, as the daemon expects of a partition gained."""
    from confluent_kafka import OFFSET_BEGINNING

    from offsetwatch.exporter.sources.kafka_source import PartitionsRevoked

    source, consumer = _member_source()
    consumer.batch = [_Message(1, 5), _Message(0, 5)]
    consumer.script = [("lost", [1]), ("assign", [1])]
    assigned_before = len(consumer.assigned)
    batch = source.poll_batch()
    assert [(m.partition(), m.offset()) for m in batch.messages] == [(0, 5)]
    assert batch.events == [PartitionsRevoked((1,), lost=True), PartitionsAssigned((1,))]
    # assigned by the callback, then once more from its start after the batch was cut
    assert consumer.assigned[assigned_before:] == [(1, OFFSET_BEGINNING), (1, OFFSET_BEGINNING)]
    assert source.positions() == {0: 6}
    assert source.assigned_partitions() == {0, 1}
    assert not source.caught_up()
    source.close()


def test_a_fleet_replica_refused_its_group_says_so_once_with_the_grant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """In a fleet the group id is the fleet's, not an unused one: its refusal is the
    replica's problem, said once with the grant, whichever path and partition it takes."""
    from offsetwatch.exporter.fleet.membership import membership

    source = OffsetsTopicSource(
        {"bootstrap.servers": "k:9092", "sasl.username": "monitor"},
        consumer_factory=lambda _config: _Prefetched(10, 10),
        membership=membership("prod", "offsetwatch-fleet|a|http://a:1", "classic"),
    )
    refused = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "JoinGroup: denied")
    events: list[Any] = []
    with caplog.at_level(logging.WARNING):
        source._on_error(refused)
        source._partition_error(0, None, refused, events)
    assert source.refused_group is not None and "GROUP_AUTHORIZATION_FAILED" in source.refused_group
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "--allow-principal User:monitor --operation Read --group 'prod'" in warnings[0]


class _CommittingMember(_Member):
    """A member whose group holds `held` (partition -> (offset, metadata)) and that records
    its commits (and in which order against the unassignments)."""

    def __init__(self, held: dict[int, tuple[int, str | None]]) -> None:
        super().__init__()
        self.held = held
        self.calls: list[Any] = []

    def committed(self, partitions: list[TopicPartition], timeout: float) -> Any:
        out = []
        for tp in partitions:
            offset, metadata = self.held.get(tp.partition, (-1001, None))
            if metadata is None:
                out.append(TopicPartition(tp.topic, tp.partition, offset))
            else:
                out.append(TopicPartition(tp.topic, tp.partition, offset, metadata))
        return out

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> Any:
        self.calls.append(("commit", [(tp.partition, tp.offset) for tp in offsets], asynchronous))
        return None if asynchronous else offsets

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("unassign", [tp.partition for tp in partitions]))
        super().incremental_unassign(partitions)


def test_a_fleet_replica_with_sinks_reads_the_commits_of_what_it_gains() -> None:
    """A gained partition comes with its sink commit; one with none of ours (an application's
    metadata counts as none) is committed at 0 at once, before anything of it is read."""
    from offsetwatch.exporter.fleet.membership import membership
    from offsetwatch.exporter.fleet.sink_commits import RevokeHandshake, SinkCommit

    consumer = _CommittingMember({0: (40, "offsetwatch-sinks/1 since_ms=7"), 1: (3, "app")})
    source = OffsetsTopicSource(
        {},
        consumer_factory=lambda _config: consumer,
        membership=membership("fleet", "offsetwatch-fleet|r0|", "classic"),
    )
    source.sink_commits = RevokeHandshake(wait_s=0.01)
    consumer.script = [("assign", [0, 1])]
    (event,) = source.poll_batch().events
    assert isinstance(event, PartitionsAssigned) and event.partitions == (0, 1)
    assert event.committed[0] == SinkCommit(0, 40, 7)
    assert (event.committed[1].partition, event.committed[1].offset) == (1, 0)
    assert consumer.calls == [("commit", [(1, 0)], False)]
    # still read from the log start: the state needs every record
    assert [offset for _p, offset in consumer.assigned] == [-2, -2]

    # periodic commits go at the reader's next poll, of partitions still held
    source.request_commit([SinkCommit(0, 50, 8), SinkCommit(9, 1, 1)])
    source.poll_batch()
    assert consumer.calls[-1] == ("commit", [(0, 50)], True)
    source.close()


def test_a_revocation_commits_the_main_loop_s_answer_before_the_partition_goes() -> None:
    from offsetwatch.exporter.fleet.membership import membership
    from offsetwatch.exporter.fleet.sink_commits import RevokeHandshake, SinkCommit
    from offsetwatch.exporter.sources.kafka_source import PartitionsRevoked

    consumer = _CommittingMember({})
    source = OffsetsTopicSource(
        {},
        consumer_factory=lambda _config: consumer,
        membership=membership("fleet", "offsetwatch-fleet|r0|", "classic"),
    )
    handshake = source.sink_commits = RevokeHandshake(wait_s=30)
    consumer.script = [("assign", [0, 1])]
    source.poll_batch()
    main_loop = threading.Thread(
        target=lambda: _answer_when_asked(handshake, [SinkCommit(1, 12, 5)]), daemon=True
    )
    main_loop.start()
    consumer.script = [("revoke", [1])]
    batch = source.poll_batch()
    main_loop.join(30)
    assert batch.events == [PartitionsRevoked((1,))]
    assert consumer.calls[-2:] == [("commit", [(1, 12)], False), ("unassign", [1])]
    # a lost partition commits nothing: the main loop only stops writing it
    consumer.script = [("lost", [0])]
    source.poll_batch()
    assert consumer.calls[-1] == ("unassign", [0])
    assert handshake.take_lost() == {0}
    source.close()


def _answer_when_asked(handshake: Any, commits: list[Any]) -> None:
    while handshake.pending() is None:
        threading.Event().wait(0.01)
    handshake.answer(commits)
