"""AdminBroker against librdkafka's mock cluster: what the mock answers, and what it cannot."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from offsetwatch.mock_cluster import MockCluster
from offsetwatch.offset_ops.admin import AdminBroker
from offsetwatch.offset_ops.broker import EARLIEST, LATEST
from offsetwatch.offset_ops.model import Committed, OffsetOpsError, Unsupported
from tests.kafka_fixtures import create_data_topic

pytestmark = pytest.mark.kafka


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as cluster:
        create_data_topic(cluster, "orders", [10, 20, 30])
        yield cluster


def _string(data: bytes) -> bytes:
    return struct.pack(">h", len(data)) + data


def raw_offset_commit(bootstrap: str, group: str, topic: str, offset: int, metadata: bytes) -> None:
    """OffsetCommit v2 for partition 0 with metadata bytes confluent-kafka cannot send."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    body = _string(group.encode()) + struct.pack(">i", -1) + _string(b"") + struct.pack(">q", -1)
    body += struct.pack(">i", 1) + _string(topic.encode()) + struct.pack(">i", 1)
    body += struct.pack(">iq", 0, offset) + _string(metadata)
    request = struct.pack(">hhi", 8, 2, 1) + _string(b"test") + body
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", sock.recv(4))[0]
        answer = b""
        while len(answer) < size:
            answer += sock.recv(size - len(answer))
    assert answer[-2:] == b"\0\0", "OffsetCommit failed"


def test_offsets_round_trip_with_metadata(cluster: MockCluster) -> None:
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    broker.alter("g", {("orders", 0): Committed(3, "replay-7"), ("orders", 2): Committed(30)})
    # Naming no partitions: the mock answers nothing, so the broker asks again by name.
    found = broker.committed({"g": None, "none": None})
    assert {k: (c.offset, c.metadata) for k, c in found["g"].items()} == {
        ("orders", 0): (3, "replay-7"),
        ("orders", 2): (30, ""),
    }
    assert found["none"] == {}
    named = broker.committed({"g": [("orders", 1), ("orders", 2)]})["g"]
    assert list(named) == [("orders", 2)]  # no commit on orders:1: left out


def test_log_offsets(cluster: MockCluster) -> None:
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    partitions = [("orders", p) for p in range(3)]
    cluster.delete_records("orders", 1, 5)
    assert broker.list_offsets(partitions, EARLIEST) == dict(
        zip(partitions, [0, 5, 0], strict=True)
    )
    assert broker.list_offsets(partitions, LATEST) == dict(
        zip(partitions, [10, 20, 30], strict=True)
    )
    assert broker.partition_counts() == {"orders": 3}


def test_what_the_mock_cannot_answer(cluster: MockCluster) -> None:
    """librdkafka 2.16's mock has no ListGroups, DescribeGroups or ConsumerGroupDescribe and
    answers every ListOffsets by timestamp with -1: those parts are tested with recorded
    Kafka 4.0 answers (doubles.py)."""
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    with pytest.raises(Unsupported, match="ListGroups"):
        broker.list_groups()
    with pytest.raises(Unsupported, match="DescribeGroups"):
        broker.describe_groups(["g"])
    now_ms = int(time.time() * 1000)
    assert set(broker.list_offsets([("orders", 0)], now_ms - 3_600_000).values()) == {-1}


def test_metadata_that_is_not_utf8_is_read_exactly(cluster: MockCluster) -> None:
    raw_offset_commit(cluster.bootstrap_servers, "g", "orders", 4, b"bad-\xff-meta")
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    committed = broker.committed({"g": [("orders", 0)]})["g"][("orders", 0)]
    assert committed.offset == 4
    # The bytes come through, but confluent-kafka 2.16.1 reads non-UTF-8 metadata as a C
    # string, so it can also return a few bytes of whatever follows it in librdkafka's buffer
    # (seen once in four full runs on the mock: b"...\x02\xd8[\x7f"). The README's known
    # limits say so; `offsetwatch decode` reads the exact bytes from __consumer_offsets.
    assert committed.metadata.encode("utf-8", "surrogateescape").startswith(b"bad-\xff-meta")
    with pytest.raises(OffsetOpsError, match="metadata of orders:0 is not UTF-8"):
        broker.alter("copy", {("orders", 0): committed})
    assert broker.committed({"copy": [("orders", 0)]})["copy"] == {}


def test_kip848_consumer_commits_are_seen(cluster: MockCluster) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "kip848",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the KIP-848 consumer got no assignment from the mock"
        consumer.commit(offsets=[TopicPartition("orders", 1, 12)], asynchronous=False)
    finally:
        consumer.close()
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    assert broker.committed({"kip848": None})["kip848"][("orders", 1)].offset == 12


def test_unknown_topic_in_alter_names_it(cluster: MockCluster) -> None:
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    with pytest.raises(OffsetOpsError, match="nosuch"):
        broker.alter("g", {("nosuch", 0): Committed(1)})


def test_metadata_with_a_trailing_nul(cluster: MockCluster) -> None:
    """Kafka's conformance run has `admin-reset\\0` metadata; confluent-kafka 2.16 reads C
    strings, so the NUL and anything after it are not seen (no exception)."""
    raw_offset_commit(cluster.bootstrap_servers, "g", "orders", 2, b"admin-reset\x00")
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    assert broker.committed({"g": None})["g"] == {("orders", 0): Committed(2, "admin-reset", 0)}


class _LeaderMoving:
    """An AdminClient whose ListOffsets answers NOT_LEADER_FOR_PARTITION `failures` times."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def list_offsets(
        self, request: dict[TopicPartition, object], **_: object
    ) -> dict[object, object]:
        from concurrent.futures import Future
        from types import SimpleNamespace

        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        out: dict[object, object] = {}
        for tp in request:
            future: Future[object] = Future()
            if self.calls <= self.failures:
                error = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, retriable=True)
                future.set_exception(KafkaException(error))
            else:
                future.set_result(SimpleNamespace(offset=7))
            out[tp] = future
        return out


def test_a_leader_moving_is_asked_again_as_kafkas_tools_do(cluster: MockCluster) -> None:
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    moving = _LeaderMoving(failures=2)
    broker._admin = moving  # type: ignore[assignment]
    assert broker.list_offsets([("orders", 0), ("orders", 1)], LATEST) == {
        ("orders", 0): 7,
        ("orders", 1): 7,
    }
    assert moving.calls == 3
