"""librdkafka's built-in mock cluster, with its C control API, for the demo and the tests.

The mock speaks Produce, Fetch, ListOffsets, Metadata, the group, offset-commit and
transaction APIs, but has no CreateTopics/DeleteTopics/CreatePartitions handlers. Its C
control functions (`rd_kafka_mock_topic_create`, broker up/down, advertised address, ...)
fill the gap; confluent-kafka does not wrap them, so they are called through ctypes on the
very librdkafka copy confluent-kafka loaded. Known limits (librdkafka 2.16): Fetch always
reports LastStableOffset = HighWatermark and no aborted transactions, so read_committed does
not filter aborted records; ~180k records are kept per partition.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import os
from pathlib import Path

import confluent_kafka


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
        "rd_kafka_mock_broker_set_rtt": ([vp, i32, ctypes.c_int], ctypes.c_int),
        "rd_kafka_err2name": ([ctypes.c_int], cp),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype
    return lib


class MockClusterError(RuntimeError):
    """A mock-cluster C call returned an error code."""


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

    def set_rtt(self, rtt_ms: int, broker_id: int = -1) -> None:
        """Delay every response by rtt_ms (-1: every broker), like a network in between."""
        self._check(
            "broker rtt", self._lib.rd_kafka_mock_broker_set_rtt(self._mcluster, broker_id, rtt_ms)
        )

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
