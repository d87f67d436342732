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

import random
import struct
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.decoder.canonical import Canonical, identity_key
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.sinks.record_sinks import RecordSinks
from offsetwatch.exporter.sinks.resume_dedup import SkipSet
from offsetwatch.exporter.sinks.sink_guard import GuardedSink
from offsetwatch.exporter.state.ingest import Ingestor
from tests.exporter.sinks.encoded_harness import (
    BAD,
    CODEC,
    PIECES,
    RELEASE_CAPTURES,
    T0,
    ZERO_UUID,
    FakeProducer,
    accelerator,
    archived_files,
    commit_messages,
    count_commits,
    decoded,
    encoded_runs,
    feed,
    open_exporter,
    path_dir,
    raw_commit,
    real_messages,
    release_messages,
)
from tests.exporter.state.test_ingest_speedups import Message, _random_stream

CANONICAL = Canonical()


def _check_encoded(module: Any, messages: list[Message]) -> int:
    """Every message the encoder takes gives the Python path's bytes; returns how many."""
    taken = 0
    for chunk, out in encoded_runs(module, messages):
        assert len(out) == len(chunk)
        for message, (partition, offset, timestamp, key, body) in zip(chunk, out, strict=True):
            record = decoded(message)
            assert type(record) is Record
            assert body == CANONICAL.to_json(record).encode("utf-8")
            assert key == identity_key(record)
            assert (partition, offset, timestamp) == (
                record.partition,
                record.offset,
                record.timestamp,
            )
        taken += len(chunk)
    return taken


def test_every_real_record_encodes_as_the_python_path(conformance_dir: Path) -> None:
    module = accelerator()
    messages = real_messages(conformance_dir)
    assert _check_encoded(module, messages) == count_commits(messages) > 0


@pytest.mark.parametrize(
    "release", sorted(p.name for p in RELEASE_CAPTURES.iterdir() if p.is_dir())
)
def test_every_release_capture_encodes_as_the_python_path(release: str) -> None:
    """What each supported Kafka wrote with real clients: every commit is encoded (v3 up to
    4.0, v4 with its topic id from 4.1), the same bytes as the Python path."""
    module = accelerator()
    messages = release_messages(release)
    assert _check_encoded(module, messages) == count_commits(messages) > 0


# six streams of every record kind and version each (1.5 CPU s a stream): more seeds cost
# make test's time without reaching a kind these do not
@pytest.mark.parametrize("seed", range(6))
def test_random_streams_encode_as_the_python_path(seed: int) -> None:
    module = accelerator()
    messages = [m for batch in _random_stream(seed) for m in batch]
    assert _check_encoded(module, messages) > 0


def test_strings_of_every_kind_encode_as_the_python_path() -> None:
    """Group ids, topics and metadata made of the pieces above and of bad bytes: strict
    UTF-8 is encoded with the Python path's escapes, anything else falls back (the Python
    path writes U+FFFD where the bytes were)."""
    module = accelerator()
    rng = random.Random(5)
    messages = []
    expect_encoded = []
    for n in range(3000):
        parts = []
        good = True
        for _ in range(3):
            text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 6))).encode()
            if rng.random() < 0.1:
                at = rng.randrange(len(text) + 1)
                text = text[:at] + rng.choice(BAD) + text[at:]
                good = False
            parts.append(text[:100])
        key, value = raw_commit(parts[0], parts[1], parts[2], rng.choice((0, 1, 2, 3, 4)))
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
    module = accelerator()
    rng = random.Random(11)
    alphabet = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]  # fmt: skip
    for n in range(20000):
        metadata = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 6)))
        key, value = raw_commit(b"g", b"t", metadata, 3)
        out: list[Any] = []
        assert module.encode_commits([Message(0, n, T0, key, value)], 0, out) == int(
            _strict(metadata)
        ), metadata


def test_what_the_encoder_leaves_to_the_python_path() -> None:
    """A tombstone, a v4 tag other than the topic id, a second topic id, trailing bytes, a
    key of another type: not encoded (the Python path writes those records)."""
    module = accelerator()
    key, value = raw_commit(b"g", b"t", b"m", 4)
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


def _exporter(
    tmp_path: Path, accelerate: bool, *, gzip_archive: bool = False, publish: bool = True,
    archive: bool = True, roll_bytes: int = 128 * 1024 * 1024,
) -> tuple[Ingestor, RecordSinks, FakeProducer | None]:  # fmt: skip
    config = ExporterConfig(
        bootstrap_servers="127.0.0.1:9",
        archive_dir=path_dir(tmp_path, accelerate) if archive else None,
        archive_gzip=gzip_archive,
        archive_roll_bytes=roll_bytes,
        publish_topic="offsets-json" if publish else None,
        publish_dlq_topic="offsets-dlq" if publish else None,
    )
    return open_exporter(config, accelerate)


@pytest.mark.parametrize("gzip_archive", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_both_sinks_write_what_the_python_path_writes(
    tmp_path: Path, seed: int, gzip_archive: bool
) -> None:
    """Random streams (commits of every version, tombstones, group metadata, undecodable
    bytes for the dead-letter topic): the same archive files, byte for byte, the same
    produced records, keys, values and headers in the same order, the same checkpoint."""
    accelerator()
    batches = _random_stream(seed)
    results = []
    for accelerate in (True, False):
        ingestor, sinks, producer = _exporter(tmp_path, accelerate, gzip_archive=gzip_archive)
        feed(ingestor, sinks, batches)
        positions = sinks.checkpoint_positions(dict(ingestor.positions))
        assert sinks.drain()
        assert producer is not None
        root = path_dir(tmp_path, accelerate)
        results.append(
            (archived_files(root), producer.produced, positions, sinks.stats.archive_records_total)
        )
        if accelerate:
            assert ingestor.stats.fast_path_records_total > 0
    assert results[0] == results[1]


def test_real_records_are_archived_and_published_as_the_python_path(
    tmp_path: Path, conformance_dir: Path
) -> None:
    accelerator()
    messages = real_messages(conformance_dir)
    batches = [messages[i : i + 97] for i in range(0, len(messages), 97)]
    results = []
    for accelerate in (True, False):
        ingestor, sinks, producer = _exporter(tmp_path, accelerate)
        feed(ingestor, sinks, batches)
        assert sinks.drain() and producer is not None
        results.append((archived_files(path_dir(tmp_path, accelerate)), producer.produced))
    assert results[0] == results[1]


@pytest.mark.parametrize("join", ["c", "python"])
def test_plain_files_roll_where_the_python_path_rolls_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, join: str
) -> None:
    """Blocks joined by the C join_lines or by write_encoded's Python loop: the files of
    per-record writes, byte for byte."""
    accelerator()
    if join == "python":
        from offsetwatch.exporter.sinks import archive as archive_module

        monkeypatch.setattr(archive_module, "_join_lines", lambda: None)
    batches = [commit_messages(3000, metadata="m" * 100)[i : i + 500] for i in range(0, 3000, 500)]
    results = []
    for accelerate in (True, False):
        ingestor, sinks, _ = _exporter(tmp_path, accelerate, publish=False, roll_bytes=20_000)
        feed(ingestor, sinks, batches)
        assert sinks.drain()
        results.append(archived_files(path_dir(tmp_path, accelerate)))
    assert len(results[0]) > 10
    assert results[0] == results[1]


def test_a_publish_failure_in_a_batch_keeps_the_rest_and_writes_it_once(tmp_path: Path) -> None:
    """The producer refuses a record mid-batch: what came before is out, the record and the
    rest are kept (decoded on the Python path) and the checkpoint stays before the first of
    them; the retry publishes them, each once, and the checkpoint reaches the end."""
    accelerator()
    messages = commit_messages(300)
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
    accelerator()
    messages = commit_messages(300)
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
    accelerator()
    messages = commit_messages(90, partitions=1)
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
    ingestor.ingest(commit_messages(180, partitions=1)[90:])
    sinks.poll()
    assert sinks.checkpoint_positions(dict(ingestor.positions))[0] <= (bad.offset() or 0)


def test_a_full_archive_mid_batch_keeps_the_rest_and_writes_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive's drain fails (a full disk) before a block: the records before it are in
    the file's bytes, the rest kept; the checkpoint never passes a record not on disk; once
    the disk takes bytes again every record is archived exactly once, as the Python path
    archives them."""
    accelerator()
    from offsetwatch.exporter.sinks import archive as archive_module

    messages = commit_messages(20_000, metadata="x" * 100)
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
    lines = sorted(b"".join(archived_files(tmp_path / "fast").values()).splitlines())
    assert lines == sorted(b"".join(archived_files(tmp_path / "slow").values()).splitlines())
    assert len(lines) == len(messages)


def test_what_a_crashed_run_wrote_is_skipped_on_the_batched_path(tmp_path: Path) -> None:
    """The resume marks (exporter/sinks/resume_dedup.py) apply to encoded batches too: the
    positions the read-back found are neither published nor archived again, and count as
    done for the checkpoint."""
    accelerator()
    messages = commit_messages(60, partitions=2)
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
        for line in b"".join(archived_files(tmp_path / "fast").values()).splitlines()
    }  # fmt: skip
    assert archived == everything - already


def test_a_sink_that_takes_records_one_by_one_keeps_the_python_path(tmp_path: Path) -> None:
    """The live stream while watched (a plain callable): every record reaches every sink
    through the Python path, and the guards see the same as with the batches."""
    accelerator()
    messages = commit_messages(50)
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
    accelerator()
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


@pytest.mark.parametrize(("level", "flag"), [(1, 4), (6, 0), (9, 2)])
def test_the_gzip_level_setting_reaches_the_files(tmp_path: Path, level: int, flag: int) -> None:
    """--archive-gzip-level: the member's XFL byte says the level (RFC 1952: 4 fastest, 2
    best), and the lines are the same at every level."""
    accelerator()
    config = ExporterConfig(
        bootstrap_servers="127.0.0.1:9",
        archive_dir=tmp_path,
        archive_gzip=True,
        archive_gzip_level=level,
    )
    messages = commit_messages(300)
    ingestor, sinks, _producer = open_exporter(config, True)
    feed(ingestor, sinks, [messages])
    assert sinks.drain()
    files = sorted(tmp_path.rglob("offsetwatch-*.jsonl.gz"))
    assert files and all(path.read_bytes()[8] == flag for path in files)
    lines = b"".join(archived_files(tmp_path).values()).splitlines()
    assert len(lines) == len(messages)
