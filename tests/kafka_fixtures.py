"""Kafka test fixtures built on librdkafka's mock cluster (no real broker can run here).

What the mock cluster of librdkafka 2.16 does and does not do (measured, see
`tests/exporter/test_kafka_source.py` for the checks that pin it):

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
import ctypes
import ctypes.util
import glob
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import confluent_kafka
import pytest
from confluent_kafka import Producer

REPO_ROOT = Path(__file__).resolve().parent.parent

OFFSETS_TOPIC = "__consumer_offsets"


# --------------------------------------------------------------------------------------------
# librdkafka's mock-cluster C API through ctypes
# --------------------------------------------------------------------------------------------


def _librdkafka_path() -> str:
    """The librdkafka shared object that confluent-kafka itself uses.

    Using the same copy matters only for consistency (same mock implementation as the
    clients under test); a different copy would still serve the same protocol over TCP.
    """
    # The loaded copy is the truth: wheels ship a renamed librdkafka-<hash>.so, source builds
    # link the system one.
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = line.rsplit(" ", 1)[-1].strip()
            if "librdkafka" in os.path.basename(path) and os.path.exists(path):
                return path
    package_dir = Path(confluent_kafka.__file__).resolve().parent
    for pattern in ("confluent_kafka.libs/librdkafka*.so*", ".dylibs/librdkafka*.dylib"):
        found = sorted(glob.glob(str(package_dir.parent / pattern)))
        found += sorted(glob.glob(str(package_dir / pattern)))
        if found:
            return found[0]
    name = ctypes.util.find_library("rdkafka")
    if name is None:
        raise RuntimeError("cannot locate the librdkafka shared library used by confluent-kafka")
    return name


def _load_mock_api() -> ctypes.CDLL:
    lib = ctypes.CDLL(_librdkafka_path())
    vp, cp, i32, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64
    signatures: dict[str, tuple[list[type], type | None]] = {
        "rd_kafka_conf_new": ([], vp),
        "rd_kafka_conf_set": ([vp, cp, cp, cp, ctypes.c_size_t], ctypes.c_int),
        "rd_kafka_new": ([ctypes.c_int, vp, cp, ctypes.c_size_t], vp),
        "rd_kafka_destroy": ([vp], None),
        "rd_kafka_mock_cluster_new": ([vp, ctypes.c_int], vp),
        "rd_kafka_mock_cluster_destroy": ([vp], None),
        "rd_kafka_mock_cluster_bootstraps": ([vp], cp),
        "rd_kafka_mock_topic_create": ([vp, cp, ctypes.c_int, ctypes.c_int], ctypes.c_int),
        "rd_kafka_mock_topic_delete": ([vp, cp], ctypes.c_int),
        "rd_kafka_mock_partition_delete_records": ([vp, cp, i32, i64], ctypes.c_int),
        "rd_kafka_mock_broker_set_down": ([vp, i32], ctypes.c_int),
        "rd_kafka_mock_broker_set_up": ([vp, i32], ctypes.c_int),
        "rd_kafka_mock_broker_set_host_port": ([vp, i32, cp, ctypes.c_int], None),
        "rd_kafka_err2name": ([ctypes.c_int], cp),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype
    return lib


class MockClusterError(RuntimeError):
    """A mock-cluster C call returned an error code."""


class ClusterControl(Protocol):
    """What the produce/topic helpers need: both mock flavours (in-process, child) offer it."""

    @property
    def bootstrap_servers(self) -> str: ...

    def create_topic(self, topic: str, partitions: int) -> None: ...

    def delete_topic(self, topic: str) -> None: ...

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None: ...


class MockCluster:
    """An in-process librdkafka mock cluster with the C control API.

    Unlike `{"test.mock.num.brokers": N}` on a client (which hides the cluster inside that
    client), this cluster belongs to a private rd_kafka_t and outlives any client, and it
    can create topics with a chosen partition count, move log start offsets and take
    brokers down.
    """

    def __init__(self, num_brokers: int = 1) -> None:
        self._lib = _load_mock_api()
        errstr = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        # The hosting handle only does book-keeping; keep its own logging quiet.
        self._lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr))
        self._rk = self._lib.rd_kafka_new(0, conf, errstr, len(errstr))  # 0 = producer
        if not self._rk:
            raise MockClusterError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._mcluster = self._lib.rd_kafka_mock_cluster_new(self._rk, num_brokers)
        if not self._mcluster:
            self._lib.rd_kafka_destroy(self._rk)
            raise MockClusterError("rd_kafka_mock_cluster_new failed")
        self._bootstrap: str = self._lib.rd_kafka_mock_cluster_bootstraps(self._mcluster).decode()
        self.num_brokers = num_brokers

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def _check(self, what: str, code: int) -> None:
        if code != 0:
            name = self._lib.rd_kafka_err2name(code).decode()
            raise MockClusterError(f"{what}: {name} ({code})")

    def create_topic(self, topic: str, partitions: int) -> None:
        self._check(
            f"create topic {topic}",
            self._lib.rd_kafka_mock_topic_create(self._mcluster, topic.encode(), partitions, 1),
        )

    def delete_topic(self, topic: str) -> None:
        self._check(
            f"delete topic {topic}",
            self._lib.rd_kafka_mock_topic_delete(self._mcluster, topic.encode()),
        )

    def recreate_topic(self, topic: str, partitions: int) -> None:
        """Stand-in for CreatePartitions, which the mock lacks: all data of `topic` is lost."""
        self.delete_topic(topic)
        self.create_topic(topic, partitions)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Move the log start offset, as retention or DeleteRecords would."""
        self._check(
            f"delete records {topic}[{partition}] < {before_offset}",
            self._lib.rd_kafka_mock_partition_delete_records(
                self._mcluster, topic.encode(), partition, before_offset
            ),
        )

    def set_down(self, broker_id: int = -1) -> None:
        """Disconnect clients and refuse connections (-1: every broker)."""
        self._check(
            "broker down", self._lib.rd_kafka_mock_broker_set_down(self._mcluster, broker_id)
        )

    def set_up(self, broker_id: int = -1) -> None:
        self._check("broker up", self._lib.rd_kafka_mock_broker_set_up(self._mcluster, broker_id))

    def advertise(self, broker_id: int, host: str, port: int) -> None:
        """Make Metadata/FindCoordinator answers point clients at host:port for this broker."""
        self._lib.rd_kafka_mock_broker_set_host_port(self._mcluster, broker_id, host.encode(), port)

    def close(self) -> None:
        if self._mcluster:
            self._lib.rd_kafka_mock_cluster_destroy(self._mcluster)
            self._mcluster = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
