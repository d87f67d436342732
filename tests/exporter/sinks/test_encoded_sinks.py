"""Republishing and archiving over the C loop (exporter/state/_ingest_speedups.c
`encode_commits`, the sinks' encoded batches) write what the Python path writes.

The C encoder's canonical JSON and identity key are compared byte for byte with
`Canonical.to_json` / `identity_key` of the record the Python path decodes from the same
message, on every conformance record, every release capture, seeded random streams and
strings of every troublesome kind (quotes, backslashes, control characters, non-ASCII, bytes
that are not UTF-8, which must fall back). Then whole exporters' sinks - the archive (JSON
lines, plain and gzip) and the publish topic (through a producer double) - are fed the same
batches on both paths: the same files, the same produced records with the same headers, in
the same order; and the guarantees hold on the batched path: a failure part-way through a
batch keeps the rest (the checkpoint stays before it) and writes it later, exactly once; what
a crashed run already wrote is skipped; a run of records is confirmed only once all of it is
delivered.

Under CI=true the accelerator must be active; locally a failed build only skips.
"""

from __future__ import annotations

import gzip
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from offsetwatch.decoder.canonical import Canonical, identity_key
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.decoder.segments import read_partition_dir
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.sinks.publisher import RecordPublisher
from offsetwatch.exporter.sinks.record_sinks import RecordSinks
from offsetwatch.exporter.sinks.resume_dedup import SkipSet
from offsetwatch.exporter.sinks.sink_guard import GuardedSink
from offsetwatch.exporter.state.ingest import Ingestor, ingest_accelerator
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import PipelineStats
from tests.conftest import require_accelerator
from tests.decoder.strategies import real_records
from tests.exporter.state.test_ingest_speedups import Message, _random_stream

T0 = 1_767_225_000_000
CODEC = Codec()
CANONICAL = Canonical()
RELEASE_CAPTURES = Path(__file__).resolve().parents[2] / "data" / "releases"
ZERO_UUID = "A" * 22


def _accelerator() -> Any:
    module = require_accelerator(ingest_accelerator(), "ingest accelerator")
    if not hasattr(module, "encode_commits"):
        pytest.fail("the ingest accelerator was built without encode_commits")
    return module


def _check_encoded(module: Any, messages: list[Message]) -> int:
    """Every message the encoder takes gives the Python path's bytes; returns how many."""
    taken = 0
    i = 0
    while i < len(messages):
        out: list[Any] = []
        end = module.encode_commits(messages, i, out)
        assert len(out) == end - i
        for k, (partition, offset, timestamp, key, body) in enumerate(out):
            message = messages[i + k]
            record = CODEC.decode(
                message.key(),
                message.value(),
                message.partition() or 0,
                message.offset() or 0,
                message.timestamp()[1],
            )
            assert type(record) is Record
            assert body == CANONICAL.to_json(record).encode("utf-8")
            assert key == identity_key(record)
            assert (partition, offset, timestamp) == (
                record.partition,
                record.offset,
                record.timestamp,
            )
        taken += end - i
        i = end + 1  # the one it stopped at takes the Python path
    return taken


def test_every_real_record_encodes_as_the_python_path(conformance_dir: Path) -> None:
    module = _accelerator()
    messages = [
        Message(r.partition, r.offset, r.timestamp, r.key, r.value)
        for r in real_records(conformance_dir)
    ]
    commits = sum(1 for m in messages if (m.key() or b"")[:2] in (b"\0\0", b"\0\1") and m.value())
    assert _check_encoded(module, messages) == commits > 0


@pytest.mark.parametrize(
    "release", sorted(p.name for p in RELEASE_CAPTURES.iterdir() if p.is_dir())
)
def test_every_release_capture_encodes_as_the_python_path(release: str) -> None:
    """What each supported Kafka wrote with real clients: every commit is encoded (v3 up to
    4.0, v4 with its topic id from 4.1), the same bytes as the Python path."""
    module = _accelerator()
    batches = read_partition_dir(RELEASE_CAPTURES / release / "__consumer_offsets-0")
    messages = [
        Message(0, r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records
    ]
    commits = sum(1 for m in messages if (m.key() or b"")[:2] in (b"\0\0", b"\0\1") and m.value())
    assert _check_encoded(module, messages) == commits > 0


# six streams of every record kind and version each (1.5 CPU s a stream): more seeds cost
# make test's time without reaching a kind these do not
@pytest.mark.parametrize("seed", range(6))
def test_random_streams_encode_as_the_python_path(seed: int) -> None:
    module = _accelerator()
    messages = [m for batch in _random_stream(seed) for m in batch]
    assert _check_encoded(module, messages) > 0


#: text pieces JSON writers disagree on: escapes, control characters, U+007F, non-ASCII of
#: every UTF-8 length, U+2028, the highest code point
_PIECES = (
    '"', "\\", "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f", "/",
    "\u00e9", "\u0800", "\u2028", "\ufeff", "\uffff", "\U0001f680", "\U0010ffff", "a", " ",
)  # fmt: skip
#: bytes that are not strict UTF-8: overlong forms, surrogates, above U+10FFFF, truncated
_BAD = (b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8", b"\xff",
        b"\xe2\x82", b"\x80", b"\xc3", b"\xf0\x9f\x9a")  # fmt: skip


def _raw_commit(group: bytes, topic: bytes, metadata: bytes, version: int) -> tuple[bytes, bytes]:
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


def test_strings_of_every_kind_encode_as_the_python_path() -> None:
    """Group ids, topics and metadata made of the pieces above and of bad bytes: strict
    UTF-8 is encoded with the Python path's escapes, anything else falls back (the Python
    path writes U+FFFD where the bytes were)."""
    module = _accelerator()
    rng = random.Random(5)
    messages = []
    expect_encoded = []
    for n in range(3000):
        parts = []
        good = True
        for _ in range(3):
            text = "".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 6))).encode()
            if rng.random() < 0.1:
                at = rng.randrange(len(text) + 1)
                text = text[:at] + rng.choice(_BAD) + text[at:]
                good = False
            parts.append(text[:100])
        key, value = _raw_commit(parts[0], parts[1], parts[2], rng.choice((0, 1, 2, 3, 4)))
        messages.append(Message(n % 3, n, T0 + n, key, value))
        expect_encoded.append(good)
    for i, message in enumerate(messages):
        out: list[Any] = []
        taken = module.encode_commits([message], 0, out)
        if expect_encoded[i]:
            # a piece may have been cut mid-character by the 100-byte bound
            strict = all(_strict(p) for p in _strings_of(message))
            assert taken == int(strict), message
        else:
            assert taken == 0, message
        _check_encoded(module, [message])


def _strings_of(message: Message) -> list[bytes]:
    key = message.key() or b""
    group_len = struct.unpack_from(">h", key, 2)[0]
    topic_len = struct.unpack_from(">h", key, 4 + group_len)[0]
    return [key[4 : 4 + group_len], key[6 + group_len : 6 + group_len + topic_len]]


def _strict(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_the_utf8_check_is_pythons_strict_decoder() -> None:
    """decoder/_wire.h `is_strict_utf8` against bytes.decode on random short byte strings
    (seen through the metadata, the string the encoder checks last)."""
    module = _accelerator()
    rng = random.Random(11)
    alphabet = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]  # fmt: skip
    for n in range(20000):
        metadata = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 6)))
        key, value = _raw_commit(b"g", b"t", metadata, 3)
        out: list[Any] = []
        assert module.encode_commits([Message(0, n, T0, key, value)], 0, out) == int(
            _strict(metadata)
        ), metadata


def test_what_the_encoder_leaves_to_the_python_path() -> None:
    """A tombstone, a v4 tag other than the topic id, a second topic id, trailing bytes, a
    key of another type: not encoded (the Python path writes those records)."""
    module = _accelerator()
    key, value = _raw_commit(b"g", b"t", b"m", 4)
    cases = [
        (key, None),
        (key, value[:-1]),
        (key, value + b"\0"),
        (key, value[:-19] + b"\x02\x00\x10" + bytes(16) + b"\x05\x01\x00"),
        (key, value[:-19] + b"\x02\x00\x10" + bytes(16) + b"\x00\x10" + bytes(16)),
        (b"\x00\x02" + key[2:], value),
    ]
    for k, v in cases:
        assert module.encode_commits([Message(0, 1, T0, k, v)], 0, []) == 0, (k, v)
    assert module.encode_commits([Message(0, 1, T0, key, value)], 0, []) == 1


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


def _exporter(
    tmp_path: Path, accelerate: bool, *, gzip_archive: bool = False, publish: bool = True,
    archive: bool = True, roll_bytes: int = 128 * 1024 * 1024,
) -> tuple[Ingestor, RecordSinks, FakeProducer | None]:  # fmt: skip
    config = ExporterConfig(
        bootstrap_servers="127.0.0.1:9",
        archive_dir=tmp_path / ("fast" if accelerate else "slow") if archive else None,
        archive_gzip=gzip_archive,
        archive_roll_bytes=roll_bytes,
        publish_topic="offsets-json" if publish else None,
        publish_dlq_topic="offsets-dlq" if publish else None,
    )
    stats = PipelineStats()
    sinks = RecordSinks(config, stats)
    sinks.open({"bootstrap.servers": "127.0.0.1:9"})
    producer = None
    if publish:
        assert sinks.publisher is not None
        sinks.publisher.close(0)
        holder: list[FakeProducer] = []

        def factory(cfg: dict[str, object]) -> FakeProducer:
            holder.append(FakeProducer(cfg))
            return holder[-1]

        sinks.publisher = RecordPublisher(
            {}, output_topic="offsets-json", dlq_topic="offsets-dlq", producer_factory=factory
        )
        sinks.publisher.source_cluster_id = "cluster-1"
        producer = holder[0]
    ingestor = Ingestor(OffsetState(), stats, Codec(), accelerate=accelerate)
    ingestor.sinks.extend(sinks.guards)
    ingestor.quarantine.append(sinks.on_quarantined)
    return ingestor, sinks, producer


def _archived(directory: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted(directory.rglob("offsetwatch-*")):
        data = path.read_bytes()
        files[str(path.relative_to(directory))] = (
            gzip.decompress(data) if path.name.endswith(".gz") else data
        )
    return files


def _feed(ingestor: Ingestor, sinks: RecordSinks, batches: list[list[Message]]) -> None:
    for batch in batches:
        assert ingestor.ingest(list(batch)) == len(batch)
        sinks.poll()


@pytest.mark.parametrize("gzip_archive", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_both_sinks_write_what_the_python_path_writes(
    tmp_path: Path, seed: int, gzip_archive: bool
) -> None:
    """Random streams (commits of every version, tombstones, group metadata, undecodable
    bytes for the dead-letter topic): the same archive files, byte for byte, the same
    produced records, keys, values and headers in the same order, the same checkpoint."""
    _accelerator()
    batches = _random_stream(seed)
    results = []
    for accelerate in (True, False):
        ingestor, sinks, producer = _exporter(tmp_path, accelerate, gzip_archive=gzip_archive)
        _feed(ingestor, sinks, batches)
        positions = sinks.checkpoint_positions(dict(ingestor.positions))
        assert sinks.drain()
        assert producer is not None
        root = tmp_path / ("fast" if accelerate else "slow")
        results.append(
            (_archived(root), producer.produced, positions, sinks.stats.archive_records_total)
        )
        if accelerate:
            assert ingestor.stats.fast_path_records_total > 0
    assert results[0] == results[1]


def test_real_records_are_archived_and_published_as_the_python_path(
    tmp_path: Path, conformance_dir: Path
) -> None:
    _accelerator()
    messages = [
        Message(r.partition, r.offset, r.timestamp, r.key, r.value)
        for r in real_records(conformance_dir)
    ]
    batches = [messages[i : i + 97] for i in range(0, len(messages), 97)]
    results = []
    for accelerate in (True, False):
        ingestor, sinks, producer = _exporter(tmp_path, accelerate)
        _feed(ingestor, sinks, batches)
        assert sinks.drain() and producer is not None
        results.append(
            (_archived(tmp_path / ("fast" if accelerate else "slow")), producer.produced)
        )
    assert results[0] == results[1]


def _commits(n: int, partitions: int = 3, metadata: str = "") -> list[Message]:
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


@pytest.mark.parametrize("join", ["c", "python"])
def test_plain_files_roll_where_the_python_path_rolls_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, join: str
) -> None:
    """Blocks joined by the C join_lines or by write_encoded's Python loop: the files of
    per-record writes, byte for byte."""
    _accelerator()
    if join == "python":
        from offsetwatch.exporter.sinks import archive as archive_module

        monkeypatch.setattr(archive_module, "_join_lines", lambda: None)
    batches = [_commits(3000, metadata="m" * 100)[i : i + 500] for i in range(0, 3000, 500)]
    results = []
    for accelerate in (True, False):
        ingestor, sinks, _ = _exporter(tmp_path, accelerate, publish=False, roll_bytes=20_000)
        _feed(ingestor, sinks, batches)
        assert sinks.drain()
        results.append(_archived(tmp_path / ("fast" if accelerate else "slow")))
    assert len(results[0]) > 10
    assert results[0] == results[1]


def test_a_publish_failure_in_a_batch_keeps_the_rest_and_writes_it_once(tmp_path: Path) -> None:
    """The producer refuses a record mid-batch: what came before is out, the record and the
    rest are kept (decoded on the Python path) and the checkpoint stays before the first of
    them; the retry publishes them, each once, and the checkpoint reaches the end."""
    _accelerator()
    messages = _commits(300)
    ingestor, sinks, producer = _exporter(tmp_path, True, archive=False)
    assert producer is not None
    publisher = sinks.publisher
    assert publisher is not None
    publisher._queue_full_timeout_s = 0
    producer.refuse_at = 120
    ingestor.ingest(list(messages))
    sinks.poll()
    guard = sinks.guard("publish")
    assert guard.health.failing_since_ms and guard.health.backlog == 300 - 119
    first_kept = messages[119]
    positions = sinks.checkpoint_positions(dict(ingestor.positions))
    assert positions[first_kept.partition() or 0] <= (first_kept.offset() or 0)
    for partition, position in positions.items():
        produced = {
            int(dict(h)["offsetwatch.source.offset"])
            for _t, _k, _v, h in producer.produced
            if int(dict(h)["offsetwatch.source.partition"]) == partition
        }
        assert set(range(min(m.offset() or 0 for m in messages), position)) <= produced
    sinks.every_second()  # the retry
    sinks.poll()
    assert not guard.health.backlog
    assert sinks.checkpoint_positions(dict(ingestor.positions)) == dict(ingestor.positions)
    offsets = [(dict(h)["offsetwatch.source.partition"], dict(h)["offsetwatch.source.offset"])
               for _t, _k, _v, h in producer.produced]  # fmt: skip
    assert len(offsets) == len(set(offsets)) == 300
    # the kept ones went out as the Python path writes them: the same bytes
    values = {o: v for o, (_t, _k, v, _h) in zip(offsets, producer.produced, strict=True)}
    slow, slow_sinks, slow_producer = _exporter(tmp_path, False, archive=False)
    slow.ingest(list(messages))
    slow_sinks.poll()
    assert slow_producer is not None
    assert {
        (dict(h)["offsetwatch.source.partition"], dict(h)["offsetwatch.source.offset"]): v
        for _t, _k, v, h in slow_producer.produced
    } == values


def test_a_full_local_queue_is_waited_out_in_the_batch(tmp_path: Path) -> None:
    """produce() finding librdkafka's queue full mid-batch (BufferError): the publisher
    serves delivery reports and produces that record again, then goes on with the batch:
    every record once, in order, and the checkpoint reaches the end."""
    _accelerator()
    messages = _commits(300)
    ingestor, sinks, producer = _exporter(tmp_path, True, archive=False)
    assert producer is not None
    producer.full_at = {1, 57, 58, 300}
    ingestor.ingest(list(messages))
    sinks.poll()
    assert not sinks.guard("publish").health.failing_since_ms
    offsets = [
        (int(dict(h)["offsetwatch.source.partition"]), int(dict(h)["offsetwatch.source.offset"]))
        for _t, _k, _v, h in producer.produced
    ]
    assert offsets == [(m.partition() or 0, m.offset() or 0) for m in messages]
    assert sinks.checkpoint_positions(dict(ingestor.positions)) == dict(ingestor.positions)
    stats = sinks.publisher.stats() if sinks.publisher is not None else None
    assert stats is not None and stats.produced == stats.records_delivered == 300
    assert stats.in_flight == 0


def test_a_failed_delivery_in_a_run_holds_the_checkpoint_at_the_run(tmp_path: Path) -> None:
    """One token per run of a partition's records: a failed delivery of any of them pins the
    checkpoint at (or before) that record, never after it."""
    _accelerator()
    messages = _commits(90, partitions=1)
    ingestor, sinks, producer = _exporter(tmp_path, True, archive=False)
    assert producer is not None
    bad = messages[50]
    expected = CANONICAL.to_json(
        CODEC.decode(bad.key(), bad.value(), 0, bad.offset() or 0, bad.timestamp()[1])
    ).encode()
    producer.fail = lambda value: value == expected
    ingestor.ingest(list(messages))
    sinks.poll()
    assert sinks.checkpoint_positions(dict(ingestor.positions))[0] <= (bad.offset() or 0)
    producer.fail = lambda _value: False
    ingestor.ingest(_commits(180, partitions=1)[90:])
    sinks.poll()
    assert sinks.checkpoint_positions(dict(ingestor.positions))[0] <= (bad.offset() or 0)


def test_a_full_archive_mid_batch_keeps_the_rest_and_writes_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive's drain fails (a full disk) before a block: the records before it are in
    the file's bytes, the rest kept; the checkpoint never passes a record not on disk; once
    the disk takes bytes again every record is archived exactly once, as the Python path
    archives them."""
    _accelerator()
    from offsetwatch.exporter.sinks import archive as archive_module

    messages = _commits(20_000, metadata="x" * 100)
    ingestor, sinks, _ = _exporter(tmp_path, True, publish=False)
    full = {"on": True}
    real_drain = archive_module._FileOut.drain

    def drain(self: Any) -> None:
        if full["on"]:
            raise OSError(28, "No space left on device")
        real_drain(self)

    monkeypatch.setattr(archive_module._FileOut, "drain", drain)
    ingestor.ingest(list(messages))
    guard = sinks.guard("archive")
    assert guard.health.failing_since_ms and 0 < guard.health.backlog < len(messages)
    positions = sinks.checkpoint_positions(dict(ingestor.positions))
    assert all(positions[p] <= min(m.offset() or 0 for m in messages if m.partition() == p)
               for p in positions)  # fmt: skip
    full["on"] = False
    sinks.every_second()
    sinks.every_second()
    assert not guard.health.backlog and not guard.health.failing_since_ms
    assert sinks.checkpoint_positions(dict(ingestor.positions)) == dict(ingestor.positions)
    assert sinks.drain()
    slow, slow_sinks, _ = _exporter(tmp_path, False, publish=False)
    slow.ingest(list(messages))
    assert slow_sinks.drain()
    lines = sorted(b"".join(_archived(tmp_path / "fast").values()).splitlines())
    assert lines == sorted(b"".join(_archived(tmp_path / "slow").values()).splitlines())
    assert len(lines) == len(messages)


def test_what_a_crashed_run_wrote_is_skipped_on_the_batched_path(tmp_path: Path) -> None:
    """The resume marks (exporter/sinks/resume_dedup.py) apply to encoded batches too: the
    positions the read-back found are neither published nor archived again, and count as
    done for the checkpoint."""
    _accelerator()
    messages = _commits(60, partitions=2)
    ingestor, sinks, producer = _exporter(tmp_path, True)
    assert producer is not None
    already = {(m.partition() or 0, m.offset() or 0) for m in messages[10:30]}
    sinks._published_skip = SkipSet.of(already)
    sinks._archived_skip = SkipSet.of(already)
    ingestor.ingest(list(messages))
    sinks.poll()
    published = {
        (int(dict(h)["offsetwatch.source.partition"]), int(dict(h)["offsetwatch.source.offset"]))
        for _t, _k, _v, h in producer.produced
    }
    everything = {(m.partition() or 0, m.offset() or 0) for m in messages}
    assert published == everything - already
    assert sinks.checkpoint_positions(dict(ingestor.positions)) == dict(ingestor.positions)
    assert sinks.drain()
    archived = {
        (int(line.split(b'"partition":')[1].split(b",")[0]),
         int(line.split(b'"offset":')[1].split(b",")[0]))
        for line in b"".join(_archived(tmp_path / "fast").values()).splitlines()
    }  # fmt: skip
    assert archived == everything - already


def test_a_sink_that_takes_records_one_by_one_keeps_the_python_path(tmp_path: Path) -> None:
    """The live stream while watched (a plain callable): every record reaches every sink
    through the Python path, and the guards see the same as with the batches."""
    _accelerator()
    messages = _commits(50)
    ingestor, _sinks, producer = _exporter(tmp_path, True, archive=False)
    seen: list[Any] = []
    ingestor.sinks.append(seen.append)
    ingestor.ingest(list(messages))
    assert len(seen) == 50 and ingestor.stats.fast_path_records_total == 0
    assert producer is not None and len(producer.produced) == 50


def test_a_guard_without_a_batch_writer_does_not_take_batches() -> None:
    assert not GuardedSink("x", lambda _r: None).takes_encoded


def test_what_the_c_loop_applied_before_it_raised_reaches_the_sinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apply_commits raising part-way (here: the second new group cannot be made): what it
    applied is in the positions, so the sinks get it too, and nothing after it."""
    _accelerator()
    from offsetwatch.exporter.state import ingest as ingest_module
    from offsetwatch.exporter.state.offset_state import GroupState

    made: list[str] = []

    def new_group(group_id: str) -> GroupState:
        if made:
            raise MemoryError("no room for a second group")
        made.append(group_id)
        return GroupState(group_id)

    monkeypatch.setattr(ingest_module, "GroupState", new_group)
    messages = []
    for i, group in enumerate(["a"] * 5 + ["b"] * 5):
        key, value = CODEC.encode(
            Record(
                1, OffsetCommitKey(group, "t", i), 3, OffsetCommitValue(i, 5, "", T0, -1, ZERO_UUID)
            )
        )
        messages.append(Message(0, i, T0 + i, key, value))
    ingestor, _sinks, producer = _exporter(tmp_path, True, archive=False)
    assert producer is not None
    with pytest.raises(MemoryError):
        ingestor.ingest(list(messages))
    assert ingestor.positions == {0: 5}
    sources = [int(dict(h)["offsetwatch.source.offset"]) for _t, _k, _v, h in producer.produced]
    assert sources == [0, 1, 2, 3, 4]
