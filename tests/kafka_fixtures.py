"""Kafka test fixtures built on librdkafka's mock cluster (no real broker can run here).

What the mock cluster of librdkafka 2.16 does and does not do (measured, see
`tests/exporter/sources/test_kafka_source.py` for the checks that pin it):

* It speaks Produce, Fetch, ListOffsets, Metadata, the group and offset-commit APIs and the
  transaction APIs. It has no CreateTopics / CreatePartitions / DeleteTopics / DeleteRecords
  handlers: `AdminClient.create_topics` never even gets sent (the mock reports controller id 0
  while its brokers are numbered from 1, so the admin client waits for a controller and
  times out). Topics are auto-created (4 partitions) by a Metadata request that allows it.
* The C API does everything the protocol does not: `rd_kafka_mock_topic_create`,
  `..._topic_delete`, `..._partition_delete_records` (moves the log start offset),
  `..._broker_set_down/up` and `..._broker_set_host_port` (what the broker advertises in
  Metadata). confluent-kafka does not wrap it, so `MockCluster` calls it with ctypes on the
  very librdkafka that confluent-kafka loaded. "Adding partitions" = delete + create with
  more partitions, which only keeps offsets meaningful when the old partitions were empty.
* Transactions: commit/abort work and write control records (they take an offset and are
  skipped by the client), but Fetch always answers `LastStableOffset = HighWatermark` and an
  empty AbortedTransactions list, so a `read_committed` consumer receives aborted records and
  records of still-open transactions. read_committed filtering cannot be tested here.
* A fetch returns at most one stored message set per partition and an empty fetch is held
  for the full `fetch.wait.max.ms` even if data arrives meanwhile: produce with big batches
  (linger) to get fast reads, and use a small `fetch.wait.max.ms` in tests.
* Retention is bounded: with ~80-byte records the log start moved after ~70k records per
  partition. Keep test data below that or expect the log start offset to move.
* Consumer groups and offset commits are served, but commits are kept in memory: nothing is
  written to `__consumer_offsets`. Tests write raw bytes there with `produce_raw`.
* The broker advertises `127.0.0.1:<its own port>`; clients connect to the advertised address
  after bootstrapping, so a TCP proxy in front of the bootstrap address alone would be bypassed.
  `ChildMockCluster(advertise_port=...)` makes the mock advertise the proxy's port instead, so
  every connection goes through `TcpForwarder` and survives a mock restart.
* Killing the broker: librdkafka 2.16 reports `_ALL_BROKERS_DOWN` once, drops the learned
  broker and retries the bootstrap address (re-bootstrap); a new cluster behind that address
  is used at once (with a warning that the cluster id changed). Consumers and idempotent
  producers both carry on; the new mock is empty, so old positions are out of range.

Pytest fixtures here (`kafka_cluster`, `kafka_bootstrap`) are not in a conftest: import them
into a test module (`from tests.kafka_fixtures import kafka_cluster  # noqa: F401`) or list
this module in `pytest_plugins`. `MockCluster` / `mock_cluster()` work without pytest.
"""

from __future__ import annotations

import contextlib
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import pytest
from confluent_kafka import Producer

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.mock_cluster import MockCluster, MockClusterError

REPO_ROOT = Path(__file__).resolve().parent.parent


# The mock cluster itself lives in the product (the demo uses it too).


class ClusterControl(Protocol):
    """What the produce/topic helpers need: both mock flavours (in-process, child) offer it."""

    @property
    def bootstrap_servers(self) -> str: ...

    def create_topic(self, topic: str, partitions: int) -> None: ...

    def delete_topic(self, topic: str) -> None: ...

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None: ...


@contextlib.contextmanager
def mock_cluster(num_brokers: int = 1, topics: Mapping[str, int] | None = None) -> Iterator[str]:
    """An in-process mock cluster; yields its bootstrap servers (topics: name -> partitions)."""
    with MockCluster(num_brokers) as cluster:
        for topic, partitions in (topics or {}).items():
            cluster.create_topic(topic, partitions)
        yield cluster.bootstrap_servers


@pytest.fixture
def kafka_cluster() -> Iterator[MockCluster]:
    """A fresh in-process mock cluster with the control API."""
    with MockCluster() as cluster:
        yield cluster


@pytest.fixture
def kafka_bootstrap(kafka_cluster: MockCluster) -> str:
    """Bootstrap servers of a fresh in-process mock cluster."""
    return kafka_cluster.bootstrap_servers


# --------------------------------------------------------------------------------------------
# A mock cluster in a child process (so a test can kill the "broker")
# --------------------------------------------------------------------------------------------

_CHILD_CODE = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from tests.kafka_fixtures import _child_main; _child_main(sys.argv[2:])"
)


def _child_main(argv: Sequence[str]) -> None:
    """Child side of ChildMockCluster: a mock cluster driven by one-line commands on stdin.

    argv: [advertise_port]. Commands: `create TOPIC N`, `delete TOPIC`,
    `delete_records TOPIC P OFFSET`; each answers `ok` or `error MESSAGE`. EOF on stdin ends it.
    """
    advertise_port = int(argv[0]) if argv else 0
    with MockCluster() as cluster:
        if advertise_port:
            cluster.advertise(1, "127.0.0.1", advertise_port)
        print(f"ready {cluster.bootstrap_servers}", flush=True)
        for line in sys.stdin:
            words = line.split()
            try:
                if words[0] == "create":
                    cluster.create_topic(words[1], int(words[2]))
                elif words[0] == "delete":
                    cluster.delete_topic(words[1])
                elif words[0] == "delete_records":
                    cluster.delete_records(words[1], int(words[2]), int(words[3]))
                else:
                    raise ValueError(f"unknown command {words[0]!r}")
                print("ok", flush=True)
            except (MockClusterError, ValueError, IndexError) as exc:
                print(f"error {exc}", flush=True)


class ChildMockCluster:
    """A mock cluster hosted by a child Python process, so it can be killed like a broker.

    With `advertise_port` set (normally a `TcpForwarder`'s port), the mock tells clients to
    connect to 127.0.0.1:advertise_port, i.e. through the forwarder, never to itself. A new
    ChildMockCluster started later is a *new, empty* cluster (the mock keeps nothing on disk).
    """

    def __init__(self, advertise_port: int = 0, start_timeout_s: float = 20.0) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_CODE, str(REPO_ROOT), str(advertise_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._lock = threading.Lock()
        line = self._read_line(start_timeout_s)
        if not line.startswith("ready "):
            self.kill()
            raise MockClusterError(f"mock child did not start: {line!r}")
        self._bootstrap = line.split(" ", 1)[1].strip()

    @property
    def bootstrap_servers(self) -> str:
        """The child's real listener (clients should use the forwarder instead)."""
        return self._bootstrap

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._bootstrap.split(",")[0].rsplit(":", 1)
        return host, int(port)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read_line(self, timeout_s: float) -> str:
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        if not ready:
            raise MockClusterError("mock child did not answer in time")
        return self._proc.stdout.readline()

    def _command(self, command: str) -> None:
        with self._lock:
            assert self._proc.stdin is not None
            self._proc.stdin.write(command + "\n")
            self._proc.stdin.flush()
            answer = self._read_line(10.0).strip()
        if answer != "ok":
            raise MockClusterError(f"{command}: {answer}")

    def create_topic(self, topic: str, partitions: int) -> None:
        self._command(f"create {topic} {partitions}")

    def delete_topic(self, topic: str) -> None:
        self._command(f"delete {topic}")

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        self._command(f"delete_records {topic} {partition} {before_offset}")

    def alive(self) -> bool:
        return self._proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the broker vanishes without closing anything cleanly."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait(timeout=10)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def __enter__(self) -> ChildMockCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


# --------------------------------------------------------------------------------------------
# A re-pointable TCP forwarder
# --------------------------------------------------------------------------------------------


class TcpForwarder:
    """A threaded TCP proxy on a fixed 127.0.0.1 port to a target that can be changed.

    Each accepted connection is paired with a fresh connection to the target of that moment;
    when the target refuses, the client connection is closed at once (what a client sees of
    a dead broker). `retarget()` affects new connections; `drop_connections()` cuts the
    existing ones.
    """

    def __init__(self, target: tuple[str, int] | None = None, port: int = 0) -> None:
        self._target = target
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._closed = threading.Event()
        self.accepted = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-forwarder", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def retarget(self, target: tuple[str, int] | None) -> None:
        with self._lock:
            self._target = target

    def drop_connections(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                _close_quietly(sock)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                target = self._target
            upstream: socket.socket | None = None
            if target is not None:
                try:
                    upstream = socket.create_connection(target, timeout=2.0)
                    upstream.settimeout(None)
                except OSError:
                    upstream = None
            if upstream is None:
                self.refused += 1
                _close_quietly(client)
                continue
            self.accepted += 1
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(
                target=self._pump, args=(client, upstream), name="tcp-forwarder-pump", daemon=True
            ).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        # One thread per connection pair moving bytes both ways; either side closing ends both.
        peers = {a: b, b: a}
        try:
            while not self._closed.is_set():
                readable, _, _ = select.select([a, b], [], [], 0.5)
                for sock in readable:
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            _close_quietly(a)
            _close_quietly(b)
            with self._lock:
                if (a, b) in self._pairs:
                    self._pairs.remove((a, b))

    def close(self) -> None:
        self._closed.set()
        _close_quietly(self._listener)
        self.drop_connections()
        self._thread.join(timeout=5)

    def __enter__(self) -> TcpForwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


# --------------------------------------------------------------------------------------------
# Writing test data
# --------------------------------------------------------------------------------------------


def fast_producer(bootstrap_servers: str, **extra: object) -> Producer:
    """A producer that packs many records per batch (the mock returns one batch per fetch)."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap_servers,
        "linger.ms": 20,
        "batch.num.messages": 100_000,
        "batch.size": 8_000_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_000_000,
        "log_level": 3,
    }
    config.update(extra)
    return Producer(config)


def produce_raw(
    bootstrap_servers: str,
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    topic: str = OFFSETS_TOPIC,
    timeout_s: float = 30.0,
) -> int:
    """Write (partition, key, value) byte records as they are; returns how many were written.

    Raises if any record was not delivered, so a test never reads a half-written topic.
    """
    producer = fast_producer(bootstrap_servers)
    # Learn the partition count first: produce() to an unknown partition fails at once.
    producer.list_topics(topic, timeout=10)
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    count = 0
    for partition, key, value in records:
        while True:
            try:
                producer.produce(
                    topic, value=value, key=key, partition=partition, on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 50_000 == 0:
            producer.poll(0)
    remaining = producer.flush(timeout_s)
    if remaining or failures:
        raise RuntimeError(f"produce_raw: {remaining} undelivered, errors: {failures[:3]}")
    return count


def fill_partitions(
    bootstrap_servers: str,
    topic: str,
    counts: Mapping[int, int],
    key: bytes = b"k",
    value: bytes = b"v",
) -> None:
    """Write counts[partition] small records to each partition (to set log-end offsets)."""
    produce_raw(
        bootstrap_servers,
        ((partition, key, value) for partition, n in counts.items() for _ in range(n)),
        topic=topic,
    )


def create_data_topic(
    cluster: ClusterControl, topic: str, messages_per_partition: Sequence[int]
) -> None:
    """Create `topic` with len(messages_per_partition) partitions and fill them.

    Afterwards the log-end offset of partition p is messages_per_partition[p].
    """
    cluster.create_topic(topic, len(messages_per_partition))
    fill_partitions(
        cluster.bootstrap_servers,
        topic,
        {p: n for p, n in enumerate(messages_per_partition) if n},
    )


def wait_until(
    predicate: Callable[[], object], timeout_s: float = 10.0, interval_s: float = 0.05
) -> bool:
    """Poll `predicate()` until true or timeout; returns its last truth value."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
