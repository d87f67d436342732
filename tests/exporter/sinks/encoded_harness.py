"""What the encoded-batch tests share (tests/exporter/sinks/test_encoded_sinks.py for JSON,
tests/exporter/sinks/test_encoded_avro.py for Avro): the accelerator, the inputs both feed
the C encoders (commits, raw commits of troublesome strings, real records, release
captures), the walk over the runs `encode_commits` takes, and a whole exporter's sinks over
a producer double, fed on either path. One copy, so that both formats are checked on the
same inputs and the same harness.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import AnyRecord, OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.decoder.segments import read_partition_dir
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.sinks.publisher import RecordPublisher
from offsetwatch.exporter.sinks.record_sinks import RecordSinks
from offsetwatch.exporter.state.ingest import Ingestor, ingest_accelerator
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import PipelineStats
from tests.conftest import require_accelerator
from tests.decoder.strategies import real_records
from tests.exporter.state.test_ingest_speedups import Message

T0 = 1_767_225_000_000
CODEC = Codec()
RELEASE_CAPTURES = Path(__file__).resolve().parents[2] / "data" / "releases"
ZERO_UUID = "A" * 22


def accelerator() -> Any:
    module = require_accelerator(ingest_accelerator(), "ingest accelerator")
    if not hasattr(module, "encode_commits"):
        pytest.fail("the ingest accelerator was built without encode_commits")
    return module


# -- inputs ---------------------------------------------------------------------------------


def decoded(message: Message) -> AnyRecord:
    """The record the Python path decodes from `message`."""
    return CODEC.decode(
        message.key(),
        message.value(),
        message.partition() or 0,
        message.offset() or 0,
        message.timestamp()[1],
    )


def real_messages(conformance_dir: Path) -> list[Message]:
    return [
        Message(r.partition, r.offset, r.timestamp, r.key, r.value)
        for r in real_records(conformance_dir)
    ]


def release_messages(release: str) -> list[Message]:
    """What the Kafka `release` wrote with real clients (its capture's partition 0)."""
    batches = read_partition_dir(RELEASE_CAPTURES / release / "__consumer_offsets-0")
    return [Message(0, r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records]


def count_commits(messages: list[Message]) -> int:
    """The offset commits among `messages` (key version 0 or 1, not a tombstone)."""
    return sum(1 for m in messages if (m.key() or b"")[:2] in (b"\0\0", b"\0\1") and m.value())


def commit_messages(n: int, partitions: int = 3, metadata: str = "") -> list[Message]:
    messages = []
    for i in range(n):
        record = Record(
            1,
            OffsetCommitKey("group-a", "orders", i % 7),
            3,
            OffsetCommitValue(i, 5, metadata, T0 + i, -1, ZERO_UUID),
        )
        key, value = CODEC.encode(record)
        messages.append(Message(i % partitions, i // partitions, T0 + i * 1000, key, value))
    return messages


#: text pieces JSON writers disagree on: escapes, control characters, U+007F, non-ASCII of
#: every UTF-8 length, U+2028, the highest code point
PIECES = (
    '"', "\\", "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f", "/",
    "\u00e9", "\u0800", "\u2028", "\ufeff", "\uffff", "\U0001f680", "\U0010ffff", "a", " ",
)  # fmt: skip
#: bytes that are not strict UTF-8: overlong forms, surrogates, above U+10FFFF, truncated
BAD = (b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8", b"\xff",
       b"\xe2\x82", b"\x80", b"\xc3", b"\xf0\x9f\x9a")  # fmt: skip


def raw_commit(group: bytes, topic: bytes, metadata: bytes, version: int) -> tuple[bytes, bytes]:
    key = struct.pack(">hh", 1, len(group)) + group + struct.pack(">h", len(topic)) + topic
    key += struct.pack(">i", 3)
    value = struct.pack(">hq", version, 42) + (struct.pack(">i", 7) if version >= 3 else b"")
    if version == 4:
        value += bytes([len(metadata) + 1]) if len(metadata) < 127 else b""
    else:
        value += struct.pack(">h", len(metadata))
    value += metadata + struct.pack(">q", T0) + (struct.pack(">q", T0 + 1) if version == 1 else b"")
    if version == 4:
        value += b"\x01\x00\x10" + bytes(range(200, 216))  # the topic id tag
    return key, value


def encoded_runs(module: Any, messages: list[Message]) -> Iterator[tuple[list[Message], list[Any]]]:
    """The runs of `messages` the C encoder takes, each with the items `encode_commits` made
    of it: a run ends at a message it leaves, which takes the Python path, and the next run
    starts after that one."""
    i = 0
    while i < len(messages):
        items: list[Any] = []
        end = module.encode_commits(messages, i, items)
        yield messages[i:end], items
        i = end + 1


# -- whole sinks, both paths ---------------------------------------------------------------


@dataclass
class _Delivered:
    _topic: str
    _key: bytes | None
    _value: bytes | None

    def topic(self) -> str:
        return self._topic


@dataclass
class FakeProducer:
    """A producer double: keeps what is produced; `poll` delivers it (or fails the records
    `fail` says, or refuses to queue the `refuse_at`-th produce call)."""

    config: dict[str, object]
    produced: list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]] = field(
        default_factory=list
    )
    pending: list[tuple[Callable[..., None], _Delivered]] = field(default_factory=list)
    fail: Callable[[bytes | None], bool] = lambda _value: False
    refuse_at: int = -1
    #: the produce calls that find the local queue full (BufferError) once
    full_at: set[int] = field(default_factory=set)
    calls: int = 0

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        on_delivery: Callable[..., None] | None = None,
    ) -> None:
        self.calls += 1
        if self.calls == self.refuse_at:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))
        if self.calls in self.full_at:
            raise BufferError("Local: Queue full")
        self.produced.append((topic, key, value, list(headers or ())))
        assert on_delivery is not None
        self.pending.append((on_delivery, _Delivered(topic, key, value)))

    def poll(self, _timeout: float = 0) -> int:
        pending, self.pending = self.pending, []
        for callback, message in pending:
            error = KafkaError(KafkaError._MSG_TIMED_OUT) if self.fail(message._value) else None
            callback(error, message)
        return len(pending)

    def flush(self, _timeout: float = 0) -> int:
        self.poll()
        return 0

    def __len__(self) -> int:
        return len(self.pending)


def path_dir(root: Path, accelerate: bool) -> Path:
    """Where a run on the C path (`fast`) or the Python path (`slow`) archives under `root`."""
    return root / ("fast" if accelerate else "slow")


def open_exporter(
    config: ExporterConfig, accelerate: bool
) -> tuple[Ingestor, RecordSinks, FakeProducer | None]:
    """An exporter's ingestor and sinks of `config`, on the C path or not; its publisher (if
    `config` publishes) produces to a FakeProducer, returned beside them."""
    stats = PipelineStats()
    sinks = RecordSinks(config, stats)
    sinks.open({"bootstrap.servers": "127.0.0.1:9"})
    producer = None
    if config.publish_topic is not None:
        assert sinks.publisher is not None
        sinks.publisher.close(0)
        holder: list[FakeProducer] = []

        def factory(cfg: dict[str, object]) -> FakeProducer:
            holder.append(FakeProducer(cfg))
            return holder[-1]

        sinks.publisher = RecordPublisher(
            {},
            output_topic=config.publish_topic,
            dlq_topic=config.publish_dlq_topic,
            producer_factory=factory,
            header_form=config.publish_headers,
        )
        sinks.publisher.source_cluster_id = "cluster-1"
        producer = holder[0]
    ingestor = Ingestor(OffsetState(), stats, Codec(), accelerate=accelerate)
    ingestor.sinks.extend(sinks.guards)
    ingestor.quarantine.append(sinks.on_quarantined)
    return ingestor, sinks, producer


def archived_files(directory: Path) -> dict[str, bytes]:
    """Every archive file under `directory` by its relative name, gzip decompressed."""
    files = {}
    for path in sorted(directory.rglob("offsetwatch-*")):
        data = path.read_bytes()
        files[str(path.relative_to(directory))] = (
            gzip.decompress(data) if path.name.endswith(".gz") else data
        )
    return files


def feed(ingestor: Ingestor, sinks: RecordSinks, batches: list[list[Message]]) -> None:
    for batch in batches:
        assert ingestor.ingest(list(batch)) == len(batch)
        sinks.poll()
