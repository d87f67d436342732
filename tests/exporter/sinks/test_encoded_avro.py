"""Avro republishing and the Avro archive over the C loop (exporter/state/_ingest_speedups.c
`encode_commits_avro`, `EncodedBatch.avro_items`) write what the Python path writes.

The C encoder's Avro body is compared byte for byte with `AvroCodec.encode` (fastavro's
schemaless writer) of the canonical dict of the record the Python path decodes from the same
message, bare and in Confluent's framing, on the inputs of the JSON encoder's tests
(tests/exporter/sinks/test_encoded_sinks.py): every conformance record, every release
capture, seeded random streams, strings of every troublesome kind. The union branches come
from the schema (`commit_branches`): a schema with the unions in another order gives other
numbers and the C encoder still writes what fastavro writes for it; a schema whose fields
differ leaves every record to the Python path. Then whole exporters' sinks - the Avro
archive (deflate and null blocks, small roll sizes) and the Avro publish topic (through a
producer double) - are fed the same batches on both paths: the same files and the same
produced records in the same order; a record the C encoder does not take goes through the
Python path alone.

Under CI=true the accelerator must be active; locally a failed build only skips.
"""

from __future__ import annotations

import copy
import io
import os
import random
from pathlib import Path
from typing import Any

import fastavro
import pytest

from offsetwatch.decoder.avro import AvroCodec, commit_branches, confluent_header
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.records import AnyRecord, Record
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.sinks import archive as archive_module
from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.exporter.sinks.record_sinks import RecordSinks
from offsetwatch.exporter.state import ingest as ingest_module
from offsetwatch.exporter.state.ingest import AvroForm, EncodedBatch, Ingestor
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import PipelineStats
from tests.exporter.sinks.encoded_harness import (
    BAD,
    CODEC,
    PIECES,
    RELEASE_CAPTURES,
    T0,
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
AVRO = AvroCodec()
SPEC = commit_branches()
SCHEMA_ID = 4242


def _check_avro(module: Any, messages: list[Message], spec: Any = SPEC, parsed: Any = None) -> int:
    """Every message the encoders take gives the Python path's Avro bytes, bare and framed
    (with `parsed`: what fastavro writes with that parsed schema); returns how many."""
    assert spec is not None
    taken = 0
    for chunk, items in encoded_runs(module, messages):
        for header in (b"", confluent_header(SCHEMA_ID)):
            out: list[Any] = []
            assert module.encode_commits_avro(chunk, items, 0, spec, header, out) == len(items)
            for k, (item, encoded) in enumerate(zip(items, out, strict=True)):
                assert encoded[:4] == item[:4]
                record = decoded(chunk[k])
                assert type(record) is Record
                canonical = CANONICAL.to_dict(record)
                if parsed is not None:
                    buffer = io.BytesIO()
                    fastavro.schemaless_writer(buffer, parsed, AVRO.to_avro_dict(canonical))
                    expected = header + buffer.getvalue()
                elif header:
                    expected = AVRO.encode_confluent(canonical, SCHEMA_ID)
                else:
                    expected = AVRO.encode(canonical)
                assert encoded[4] == expected, (chunk[k], canonical)
        taken += len(chunk)
    return taken


def test_every_real_record_encodes_as_fastavro(conformance_dir: Path) -> None:
    module = accelerator()
    messages = real_messages(conformance_dir)
    assert _check_avro(module, messages) > 0


@pytest.mark.parametrize(
    "release", sorted(p.name for p in RELEASE_CAPTURES.iterdir() if p.is_dir())
)
def test_every_release_capture_encodes_as_fastavro(release: str) -> None:
    module = accelerator()
    messages = release_messages(release)
    assert _check_avro(module, messages) == count_commits(messages) > 0


@pytest.mark.parametrize("seed", range(3))
def test_random_streams_encode_as_fastavro(seed: int) -> None:
    module = accelerator()
    messages = [m for batch in _random_stream(seed) for m in batch]
    assert _check_avro(module, messages) > 0


def test_strings_of_every_kind_encode_as_fastavro() -> None:
    """Group ids, topics and metadata of escapes, control characters, every UTF-8 length
    (Avro writes them as they are: the lengths are of the UTF-8 bytes), long enough for
    multi-byte length varints; bytes that are not UTF-8 are not taken."""
    module = accelerator()
    rng = random.Random(7)
    messages = []
    for n in range(1500):
        parts = []
        for _ in range(3):
            text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 40))).encode()
            if rng.random() < 0.1:
                text += rng.choice(BAD)
            parts.append(text[: rng.choice((10, 63, 64, 100, 120))])
        key, value = raw_commit(parts[0], parts[1], parts[2], rng.choice((0, 1, 2, 3, 4)))
        messages.append(Message(n % 3, n * 1000, T0 + n, key, value))
    assert _check_avro(module, messages) > 500


def _reordered_schema() -> dict[str, Any]:
    """avro_schema() with every union the encoder writes a branch of in another order: the
    nullable fields' null last, and a record of no fields before the commit's key and value
    (fastavro writes the tuple notation's branch by name, so it needs no other change)."""
    schema = copy.deepcopy(AVRO.schema)
    fields = {f["name"]: f for f in schema["fields"]}
    for name in ("value_version", "group", "transaction"):
        fields[name]["type"] = fields[name]["type"][::-1]
        fields[name].pop("default", None)
    fields["key"]["type"].insert(0, {"type": "record", "name": "FirstKey", "fields": []})
    fields["value"]["type"].insert(1, {"type": "record", "name": "FirstValue", "fields": []})
    for value in fields["value"]["type"]:
        if isinstance(value, dict) and value.get("name") == "OffsetCommitValue":
            tags = next(f for f in value["fields"] if f["name"] == "unknown_tags")
            tags["type"] = tags["type"][::-1]
            tags.pop("default")
    return schema


def test_the_branches_come_from_the_schema() -> None:
    """Other union orders give other branch numbers, and the C encoder writes what fastavro
    writes with that schema."""
    module = accelerator()
    schema = _reordered_schema()
    spec = commit_branches(schema)
    assert spec == (b"offset_commit", 0, 0, 1, 2, 1, 1, 2) != SPEC
    parsed = fastavro.parse_schema(schema)
    messages = [m for batch in _random_stream(1) for m in batch]
    assert _check_avro(module, messages, spec, parsed) > 0


def test_a_schema_of_other_fields_leaves_every_record_to_the_python_path() -> None:
    schema = copy.deepcopy(AVRO.schema)
    for value in schema["fields"][10]["type"]:
        if isinstance(value, dict) and value.get("name") == "OffsetCommitValue":
            value["fields"].insert(2, {"name": "extra", "type": "int", "default": 0})
    assert commit_branches(schema) is None
    schema = copy.deepcopy(AVRO.schema)
    schema["fields"][6]["type"] = "int"  # offset as an int
    assert commit_branches(schema) is None
    schema = copy.deepcopy(AVRO.schema)
    schema["fields"].pop()  # no schema_version
    assert commit_branches(schema) is None


# -- EncodedBatch.avro_items: the Python path for what the C encoder does not take ---------


def _batch(module: Any, messages: list[Message]) -> EncodedBatch:
    items: list[Any] = []
    assert module.encode_commits(messages, 0, items) == len(messages)
    return EncodedBatch(items, list(messages), CODEC)


def _python_avro(header: bytes) -> Any:
    def encode(record: AnyRecord) -> bytes:
        calls.append(record)
        canonical = CANONICAL.to_dict(record)
        if header:
            return AVRO.encode_confluent(canonical, SCHEMA_ID)
        return AVRO.encode(canonical)

    calls: list[AnyRecord] = []
    return encode, calls


@pytest.mark.parametrize("header", [b"", confluent_header(SCHEMA_ID)])
def test_a_record_the_c_encoder_leaves_goes_alone_through_the_python_path(
    monkeypatch: pytest.MonkeyPatch, header: bytes
) -> None:
    module = accelerator()
    messages = commit_messages(40, metadata="m\u00e9ta")
    encode, calls = _python_avro(header)
    reference = [encode(decoded(m)) for m in messages]
    calls.clear()
    real = module.encode_commits_avro

    def every_third_left(messages: Any, items: Any, k: int, *rest: Any) -> int:
        # the C encoder stopping at k = 1, 4, 7, ...: each of those alone in Python
        while k < len(items) and k % 3 != 1:
            k = real(messages, items[: k + 1], k, *rest)
        return k

    monkeypatch.setattr(ingest_module, "_encode_avro", lambda: every_third_left)
    batch = _batch(module, messages)
    out = batch.avro_items(AvroForm(header, SPEC, encode))
    assert [item[4] for item in out] == reference
    assert [item[:4] for item in out] == [item[:4] for item in batch.items]
    assert [(r.partition, r.offset) for r in calls] == [
        (m.partition(), m.offset()) for k, m in enumerate(messages) if k % 3 == 1
    ]
    assert batch.avro_items(AvroForm(header, SPEC, encode)) is out  # made once per header
    # no spec (a schema the encoder cannot write): every record on the Python path
    calls.clear()
    plain = _batch(module, messages).avro_items(AvroForm(header, None, encode))
    assert [item[4] for item in plain] == reference and len(calls) == len(messages)


# -- whole sinks, both paths ---------------------------------------------------------------


def _avro_exporter(
    tmp_path: Path, accelerate: bool, *, schema_id: int | None = SCHEMA_ID,
    publish: bool = True, archive: bool = True, publish_format: str = "avro",
    archive_format: str = "avro", roll_bytes: int = 128 * 1024 * 1024,
) -> tuple[Ingestor, RecordSinks, FakeProducer | None]:  # fmt: skip
    config = ExporterConfig(
        bootstrap_servers="127.0.0.1:9",
        archive_dir=path_dir(tmp_path, accelerate) if archive else None,
        archive_format=archive_format,  # type: ignore[arg-type]
        archive_roll_bytes=roll_bytes,
        publish_topic="offsets-avro" if publish else None,
        publish_dlq_topic="offsets-dlq" if publish else None,
        publish_format=publish_format,  # type: ignore[arg-type]
        publish_schema_id=schema_id,
    )
    return open_exporter(config, accelerate)


@pytest.fixture
def fixed_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Avro files' sync markers are random: the same 16 bytes on both paths."""
    monkeypatch.setattr(archive_module.os, "urandom", lambda n: bytes(range(n)))
    assert os.urandom(4) == b"\0\1\2\3"


@pytest.mark.parametrize(
    ("schema_id", "publish_format", "archive_format"),
    [(SCHEMA_ID, "avro", "avro"), (None, "avro", "jsonl"), (None, "json", "avro")],
)
@pytest.mark.parametrize("seed", range(2))
def test_both_avro_sinks_write_what_the_python_path_writes(
    tmp_path: Path, fixed_sync: None, seed: int, schema_id: int | None, publish_format: str,
    archive_format: str,
) -> None:  # fmt: skip
    """Random streams (commits of every version, tombstones, group metadata, undecodable
    bytes for the dead-letter topic): the same archive files, byte for byte, the same
    produced records in the same order, the same checkpoint; and the batches took the C
    path."""
    accelerator()
    batches = _random_stream(seed)
    results = []
    for accelerate in (True, False):
        ingestor, sinks, producer = _avro_exporter(
            tmp_path / f"{seed}-{publish_format}-{archive_format}", accelerate,
            schema_id=schema_id, publish_format=publish_format, archive_format=archive_format,
        )  # fmt: skip
        assert all(guard.takes_encoded for guard in sinks.guards)
        feed(ingestor, sinks, batches)
        positions = sinks.checkpoint_positions(dict(ingestor.positions))
        assert sinks.drain()
        assert producer is not None
        root = tmp_path / f"{seed}-{publish_format}-{archive_format}"
        root = path_dir(root, accelerate)
        results.append(
            (archived_files(root), producer.produced, positions, sinks.stats.archive_records_total)
        )
        if accelerate:
            assert ingestor.stats.fast_path_records_total > 0
            # every sink Avro: the batches after the first were encoded without JSON
            assert ingestor.encodes_json == ("json" in (publish_format, archive_format[:4]))
    assert results[0] == results[1]
    files = results[0][0]
    if archive_format == "avro":
        assert files and all(name.endswith(".avro") for name in files)
        records = [r for data in files.values() for r in AVRO.read_container(io.BytesIO(data))]
        assert len(records) == results[0][3]
    if publish_format == "avro":
        values = [v for t, _k, v, _h in results[0][1] if t == "offsets-avro" and v is not None]
        assert values
        if schema_id is None:
            assert all(AVRO.decode(v)["type"] for v in values)
        else:
            assert all(AVRO.decode_confluent(v)[0] == schema_id for v in values)


def test_real_records_are_archived_and_published_as_avro_as_the_python_path(
    tmp_path: Path, conformance_dir: Path, fixed_sync: None
) -> None:
    accelerator()
    messages = real_messages(conformance_dir)
    batches = [messages[i : i + 97] for i in range(0, len(messages), 97)]
    results = []
    for accelerate in (True, False):
        ingestor, sinks, producer = _avro_exporter(tmp_path, accelerate, schema_id=None)
        feed(ingestor, sinks, batches)
        assert sinks.drain() and producer is not None
        results.append((archived_files(path_dir(tmp_path, accelerate)), producer.produced))
    assert results[0] == results[1]


@pytest.mark.parametrize("join", ["c", "python"])
@pytest.mark.parametrize("roll_bytes", [60_000, 700_000])
def test_avro_files_roll_and_end_blocks_where_the_python_path_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixed_sync: None, join: str,
    roll_bytes: int,
) -> None:  # fmt: skip
    """Blocks joined by the C join_lines (no newline) or by write_encoded's Python loop: the
    files of per-record writes, byte for byte - the same rolls by size (60 kB, past the
    header's 20 kB of schema: ~40 kB of records in each of many files; 700 kB: several
    256 KiB blocks in a file)."""
    accelerator()
    if join == "python":
        monkeypatch.setattr(archive_module, "_join_lines", lambda: None)
    messages = commit_messages(12_000, metadata="m" * 100)
    batches = [messages[i : i + 1500] for i in range(0, len(messages), 1500)]
    results = []
    for accelerate in (True, False):
        ingestor, sinks, _ = _avro_exporter(
            tmp_path / str(roll_bytes), accelerate, publish=False, roll_bytes=roll_bytes
        )
        feed(ingestor, sinks, batches)
        assert sinks.drain()
        root = path_dir(tmp_path / str(roll_bytes), accelerate)
        results.append(archived_files(root))
    assert len(results[0]) > (20 if roll_bytes < 100_000 else 0)
    assert results[0] == results[1]


def test_an_avro_archive_writer_takes_encoded_bodies(tmp_path: Path) -> None:
    module = accelerator()
    messages = commit_messages(10)
    batch = _batch(module, messages)
    writer = ArchiveWriter(tmp_path, "avro")
    writer.write_encoded(batch.avro_items(AvroForm(b"", SPEC, lambda _r: b"")))
    writer.close()
    (path,) = tmp_path.rglob("offsetwatch-*.avro")
    read = list(AVRO.read_container(path))
    assert read == [CANONICAL.to_dict(decoded(m)) for m in messages]


# -- batches without their JSON (every sink Avro) -------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_the_encoder_covers_the_same_messages_without_the_json(seed: int) -> None:
    """Random streams and the release captures: encode_commits(..., False) stops where it
    stops with the JSON, with the same partitions, offsets, timestamps and keys, and b''."""
    module = accelerator()
    streams = [[m for batch in _random_stream(seed) for m in batch]]
    streams += (
        [release_messages(p.name) for p in sorted(RELEASE_CAPTURES.iterdir()) if p.is_dir()]
        if seed == 0
        else []
    )
    for messages in streams:
        i = 0
        while i < len(messages):
            full: list[Any] = []
            keyed: list[Any] = []
            end = module.encode_commits(messages, i, full)
            assert module.encode_commits(messages, i, keyed, False) == end
            assert [item[:4] for item in keyed] == [item[:4] for item in full]
            assert all(item[4] == b"" for item in keyed)
            i = end + 1


def test_a_batch_without_json_builds_it_once_when_a_sink_asks() -> None:
    module = accelerator()
    messages = commit_messages(40, metadata="m\u00e9ta")
    full: list[Any] = []
    keyed: list[Any] = []
    assert module.encode_commits(messages, 0, full) == len(messages)
    assert module.encode_commits(messages, 0, keyed, False) == len(messages)
    encode, _calls = _python_avro(b"")
    form = AvroForm(b"", SPEC, encode)
    reference = EncodedBatch(full, list(messages), CODEC).avro_items(form)
    batch = EncodedBatch(keyed, list(messages), CODEC, False)
    assert len(batch) == len(messages)
    assert batch.avro_items(form) == reference  # the Avro bodies need no JSON
    assert not batch.json_asked
    assert batch.items == full and batch.json_asked
    assert batch.items is batch.items  # built once


class _Taker:
    """An encoded sink that reads the JSON (`json`) or only the Avro bodies."""

    def __init__(self) -> None:
        self.json = False
        self.seen: list[list[Any]] = []

    takes_encoded = True

    def __call__(self, record: AnyRecord) -> None:
        raise AssertionError("commits come in batches here")

    def take_encoded(self, batch: EncodedBatch) -> None:
        if self.json:
            self.seen.append(list(batch.items))
        else:
            batch.avro_items(AvroForm(b"", SPEC, lambda record: b""))


def test_the_json_comes_back_when_a_sink_asks_for_it_again() -> None:
    """While no sink reads the JSON the ingest leaves it out; the first batch a sink reads
    it from gets it all the same (built from the messages), and the next ones again from
    the encoder."""
    module = accelerator()
    messages = commit_messages(90)
    taker = _Taker()
    ingestor = Ingestor(OffsetState(), PipelineStats(), CODEC)
    ingestor.sinks.append(taker)
    assert ingestor.encodes_json
    ingestor.ingest(messages[:30])
    assert not ingestor.encodes_json
    taker.json = True
    ingestor.ingest(messages[30:60])
    assert ingestor.encodes_json
    ingestor.ingest(messages[60:])
    expected: list[Any] = []
    module.encode_commits(messages[30:], 0, expected)
    assert [item for batch in taker.seen for item in batch] == expected
