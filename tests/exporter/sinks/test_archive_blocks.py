"""Compressed archive blocks made on the writer's compressor thread (archive_blocks.py): the
files are byte for byte the inline path's, rolls fall after the same records, a flush waits
for every block, and a failed compression loses nothing."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Any

import fastavro
import pytest

from offsetwatch.decoder import Canonical
from offsetwatch.decoder.avro import AvroCodec
from offsetwatch.decoder.canonical import dumps
from offsetwatch.exporter.sinks import archive as archive_module
from offsetwatch.exporter.sinks.archive import ArchiveWriter, _FileOut, _GzipJsonlSink
from offsetwatch.exporter.sinks.archive_blocks import BlockQueue, Compressor
from offsetwatch.exporter.state.ingest import Encoded
from tests.conformance_data import decode_run

Canon = dict[str, Any]
START_MS = 1_767_225_000_000


@pytest.fixture(scope="module")
def canon(conformance_dir: Path) -> list[Canon]:
    canonical = Canonical()
    records = [canonical.to_dict(record) for record in decode_run(conformance_dir)]
    # enough records for many blocks, a few minutes apart: several files and hours
    out: list[Canon] = []
    for i in range(6000):
        record = dict(records[i % len(records)])
        record["timestamp"] = START_MS + i * 2_000
        record["partition"] = i % 7
        record["offset"] = i
        out.append(record)
    return out


def _items(records: list[Canon], avro: bool) -> list[Encoded]:
    codec = AvroCodec() if avro else None
    items: list[Encoded] = []
    for record in records:
        body = codec.encode(record) if codec is not None else dumps(record).encode()
        items.append((record["partition"], record["offset"], record["timestamp"], b"k", body))
    return items


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _write(
    directory: Path, records: list[Canon], *, fmt: str, on_thread: bool, roll_bytes: int
) -> ArchiveWriter:
    """Batches of every size, a record now and then on the per-record path, flushes and
    fsyncs between them, as the daemon gives them."""
    avro = fmt == "avro"
    clock = Clock()
    writer = ArchiveWriter(
        directory,
        "avro" if avro else "jsonl",
        gzip=not avro,
        roll_bytes=roll_bytes,
        clock=clock,
        compress_on_thread=on_thread,
    )
    items = _items(records, avro)
    at = 0
    step = 0
    while at < len(items):
        size = (1, 37, 900, 2500)[step % 4]
        if step % 5 == 4:
            writer.write(records[at], (records[at]["partition"], records[at]["offset"]))
            at += 1
        else:
            writer.write_encoded(items[at : at + size])
            at += size
        if step % 3 == 2:
            writer.flush(fsync=step % 2 == 0)
        clock.now += 0.5
        step += 1
    return writer


@pytest.fixture
def fixed_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """One Avro sync marker for every file, so that two runs can be compared byte for byte."""
    monkeypatch.setattr(archive_module.os, "urandom", lambda n: b"\x5a" * n)


@pytest.mark.parametrize("fmt", ["gzip", "avro"])
@pytest.mark.parametrize("roll_bytes", [20_000, 150_000, 128 * 1024 * 1024])
def test_files_on_the_thread_are_the_inline_files(
    tmp_path: Path, canon: list[Canon], fmt: str, roll_bytes: int, fixed_sync: None
) -> None:
    results = []
    for on_thread in (False, True):
        directory = tmp_path / str(on_thread)
        writer = _write(directory, canon, fmt=fmt, on_thread=on_thread, roll_bytes=roll_bytes)
        writer.close()
        results.append(_files(directory))
    assert results[0] == results[1]
    if roll_bytes < 1_000_000:
        assert len(results[1]) > 3  # rolls by size did happen


def test_what_the_files_hold(tmp_path: Path, canon: list[Canon]) -> None:
    gz = _write(tmp_path / "gz", canon, fmt="gzip", on_thread=True, roll_bytes=150_000)
    gz.close()
    lines = b"".join(gzip.decompress(data) for data in _files(tmp_path / "gz").values())
    assert sorted(lines.splitlines()) == sorted(dumps(r).encode() for r in canon)
    av = _write(tmp_path / "av", canon, fmt="avro", on_thread=True, roll_bytes=150_000)
    av.close()
    offsets = [
        record["offset"]
        for data in _files(tmp_path / "av").values()
        for record in fastavro.reader(io.BytesIO(data))
    ]
    assert sorted(offsets) == [r["offset"] for r in canon]


@pytest.mark.parametrize("level", [1, 6, 9])
def test_a_gzip_member_is_what_gzipfile_writes(tmp_path: Path, level: int) -> None:
    chunks = [
        b"".join(b'{"n":%d}\n' % i for i in range(k, k + 3000)) for k in range(0, 30000, 3000)
    ]
    expected = io.BytesIO()
    reference = gzip.GzipFile(
        fileobj=expected, mode="wb", compresslevel=level, filename="", mtime=0
    )
    compressor = Compressor()
    sink = _GzipJsonlSink(_FileOut(tmp_path / "f.gz"), level, compressor)
    for i, chunk in enumerate(chunks):
        reference.write(chunk)
        sink.write_lines(chunk)
        sink.submit()
        if i % 4 == 3:
            reference.flush(zlib.Z_SYNC_FLUSH)
            sink.flush(fsync=False)
    reference.close()
    sink.close()
    compressor.close()
    assert (tmp_path / "f.gz").read_bytes() == expected.getvalue()


def test_a_flush_waits_for_every_block(tmp_path: Path, canon: list[Canon]) -> None:
    writer = ArchiveWriter(tmp_path, gzip=True)
    writer.write_encoded(_items(canon, avro=False))
    writer.flush(fsync=True)
    positions = {p: 10**9 for p in range(7)}
    assert writer.durable_positions(positions) == positions
    # the open files' too: a sync flush makes everything so far decodable, before the trailer
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    lines = [
        line
        for path in files
        for line in zlib.decompressobj(wbits=31).decompress(path.read_bytes()).splitlines()
    ]
    assert sorted(lines) == sorted(dumps(r).encode() for r in canon)
    writer.close()


def test_a_failed_compression_loses_nothing_and_writes_nothing_twice() -> None:
    written: list[bytes] = []
    failures = {b"block-2"}

    def compress(data: bytes, count: int) -> bytes:
        if data in failures:
            failures.discard(data)
            raise MemoryError("no room to compress")
        return data.upper()

    compressor = Compressor()
    blocks = BlockQueue(compress, written.append, compressor)
    for i in range(5):
        blocks.add(b"block-%d" % i, 1)
    blocks.submit()
    blocks.add(b"block-5", 1)
    blocks.submit()
    with pytest.raises(MemoryError):
        blocks.settle()
    assert written == [b"BLOCK-0", b"BLOCK-1"]
    assert blocks.outstanding() > 0
    blocks.settle()
    assert written == [b"BLOCK-%d" % i for i in range(6)]
    assert blocks.outstanding() == 0
    compressor.close()


def test_the_size_bound_is_never_below_the_size(tmp_path: Path) -> None:
    compressor = Compressor()
    sink = _GzipJsonlSink(_FileOut(tmp_path / "f.gz"), 6, compressor)
    incompressible = zlib.compress(bytes(range(256)) * 4000)  # deflate cannot shrink it
    for _ in range(20):
        sink.write_lines(incompressible)
        sink.submit()
        bound = sink.size_bound()
        assert bound >= sink.size()
    sink.close()
    compressor.close()
