"""Rolling archive files of canonical records: the input of the Spark jobs.

Layout and guarantees are the contract documented in docs/archive-format.md:

    <dir>/date=YYYY-MM-DD/hour=HH/offsetwatch-<first ts>-<seq>.jsonl[.gz] | .avro

* `date`/`hour` are the UTC date and hour of the record's timestamp (its position in
  `__consumer_offsets`), so every file holds the records of one hour; several files of the
  same hour can be open at once (bounded by `max_open_files`, the least recently written one
  is rolled first), which keeps replays of old data in the right partitions.
* `<first ts>` is the timestamp (epoch ms, 13 digits) of the file's first record and `<seq>` a
  6-digit sequence number, so names sort by time within an hour.
* A file is written as a hidden `.offsetwatch-...inprogress` file (Hadoop and Spark skip
  names starting with `.`) and renamed to its final name when rolled: by size (`roll_bytes`,
  default 128 MiB), by age (`roll_seconds`, default 10 min, checked on every write and by
  `roll_expired()`), at `roll()` and at `close()`. Readers never see half-written files.
* JSON lines: one `offsetwatch.decoder.canonical.dumps(record)` per line, UTF-8, optionally gzipped.
  Avro: object container files of `offsetwatch.decoder.avro`'s schema (embedded in each file)
  written
  block by block with `AvroCodec.encode`, codec deflate (default), snappy or null.

Nothing buffered counts as written: a file's bytes stay in the writer until the OS took them
(`os.write`), so a full disk loses none of them, and a failed write, flush or roll leaves the
file open with its bytes, tried again later; every error names the file. `durable_positions`
caps checkpoint positions at the first record (per `__consumer_offsets` partition) written
since its file's last fsync, so a checkpoint never passes a record that is not on disk.

Batches: `write_encoded` takes the ingest's encoded commits (their canonical JSON already
bytes, exporter/state/ingest.py; for an Avro archive their Avro bodies,
`EncodedBatch.avro_items`) a block at a time: the lines (bodies) of consecutive records of
one file joined in one buffer and handed to the file (and its compressor) in one call, with
the same checks as `write` before each block (a roll that is due, the bytes to the OS). A
plain file and an Avro file roll by size exactly where `write` would roll them, and an Avro
file's blocks end after the same records; a gzip file checks its size once per block (at
most `ENCODED_BLOCK_BYTES` of lines), so it may pass `roll_bytes` by one block's compressed
bytes.

Compression: a gzip file's blocks and a deflate Avro file's are compressed on the writer's
compressor thread (exporter/sinks/archive_blocks.py: zlib releases the GIL), in order, while
the main loop goes on; a flush, fsync, roll or close waits for them first, and a size check
waits only when they could take the file to `roll_bytes`, so the files (and where they roll)
are those of compressing on the spot (`compress_on_thread=False`).

Crash safety: at start, hidden in-progress files left by a crash are salvaged (every complete
record kept) and published under their final names. Records after the
checkpoint are read again after a restart; the daemon skips those the files already hold
(exporter/sinks/resume_dedup.py reads back the files modified since the checkpoint's time bound), so
a restart from a checkpoint archives nothing twice; a full rebuild archives everything again:
readers still deduplicate on (partition, offset). One writer per directory.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from offsetwatch.core.atomic import fsync_directory
from offsetwatch.decoder import contract
from offsetwatch.decoder.canonical import dumps
from offsetwatch.exporter.sinks.archive_blocks import BlockQueue, Compressor
from offsetwatch.exporter.sinks.sink_guard import PartialWrite
from offsetwatch.exporter.state.ingest import Encoded, ingest_accelerator

ArchiveFormat = Literal["jsonl", "avro"]
AvroBlockCodec = Literal["null", "deflate", "snappy"]

DEFAULT_ROLL_BYTES: Final = 128 * 1024 * 1024
DEFAULT_ROLL_SECONDS: Final = 600.0
DEFAULT_MAX_OPEN_FILES: Final = 4
#: uncompressed bytes gathered before an Avro block is written
AVRO_BLOCK_BYTES: Final = 256 * 1024
PREFIX: Final = "offsetwatch-"
INPROGRESS: Final = ".inprogress"
_SALVAGE: Final = ".salvage"
_HOUR_MS: Final = 3_600_000
_AVRO_MAGIC: Final = b"Obj\x01"
_SYNC_SIZE: Final = 16
#: bytes handed to one os.write
_WRITE_CHUNK: Final = 1 << 20
#: a file's bytes not yet given to the OS before a write drains them first
_DRAIN_BYTES: Final = 1 << 20
#: lines of encoded records handed to a file (and its compressor) in one call, at most
ENCODED_BLOCK_BYTES: Final = 256 * 1024


def _join_lines() -> Callable[..., tuple[int, bytes]] | None:
    module, _why = ingest_accelerator()
    return None if module is None else getattr(module, "join_lines", None)


class ArchiveError(Exception):
    """Misuse of the writer (closed, bad format) or a record that cannot be archived."""


def partition_of(timestamp_ms: int) -> tuple[str, str]:
    """('YYYY-MM-DD', 'HH') of a timestamp, UTC."""
    moment = time.gmtime(timestamp_ms // 1000)
    return time.strftime("%Y-%m-%d", moment), f"{moment.tm_hour:02d}"


def file_name(first_ts: int, seq: int, extension: str) -> str:
    return f"{PREFIX}{max(first_ts, 0):013d}-{seq:06d}.{extension}"


# ---------------------------------------------------------------------------------------------
# Sinks: one open file of one format


class _Sink:
    out: _FileOut

    def write(self, canonical: dict[str, Any]) -> None:
        raise NotImplementedError

    def write_lines(self, data: bytes) -> None:
        """Complete JSON lines (jsonl sinks only)."""
        raise NotImplementedError

    def size(self) -> int:
        """Bytes the file will have once closed (close estimate for compressed data)."""
        raise NotImplementedError

    def size_bound(self) -> int:
        """At least `size()`, without waiting for blocks being compressed."""
        return self.size()

    def submit(self) -> None:
        """Hand the finished blocks to the compressor (the end of a batch)."""

    def flush(self, fsync: bool) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _FileOut:
    """The bytes of one file on their way to the OS, kept here until `os.write` took them.

    A failed write (a full disk) therefore loses nothing: the bytes stay, and the next drain
    writes them, in order. An error names the file. Compressors and encoders write here,
    never to the file, so none of them can be left half-written by a failure."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._pending = bytearray()
        self._written = 0
        self._closed = False

    def __del__(self) -> None:
        # dropped without close (a test's crashed writer): the descriptor, not the bytes
        if not getattr(self, "_closed", True):
            os.close(self._fd)

    def write(self, data: bytes) -> int:
        self._pending += data
        return len(data)

    def flush(self) -> None:
        """What GzipFile calls: draining is the sink's decision (`drain`)."""

    def tell(self) -> int:
        return self._written + len(self._pending)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def drain(self) -> None:
        pending = self._pending
        try:
            while pending:
                with memoryview(pending) as view:
                    taken = os.write(self._fd, view[:_WRITE_CHUNK])
                del pending[:taken]
                self._written += taken
        except OSError as error:
            raise OSError(error.errno, error.strerror, str(self.path)) from None

    def sync(self) -> None:
        self.drain()
        try:
            os.fsync(self._fd)
        except OSError as error:
            raise OSError(error.errno, error.strerror, str(self.path)) from None

    def close(self) -> None:
        """Drain, fsync and close; raises (the bytes kept) while they cannot be written."""
        if self._closed:
            return
        self.sync()
        os.close(self._fd)
        self._closed = True


def _line(canonical: dict[str, Any]) -> bytes:
    # canonical dumps is valid UTF-8; backslashreplace only guards stray lone surrogates, which
    # it turns into JSON \\udcXX escapes inside their string
    return (dumps(canonical) + "\n").encode("utf-8", "backslashreplace")


class _JsonlSink(_Sink):
    def __init__(self, out: _FileOut) -> None:
        self.out = out

    def write(self, canonical: dict[str, Any]) -> None:
        self.out.write(_line(canonical))

    def write_lines(self, data: bytes) -> None:
        self.out.write(data)

    def size(self) -> int:
        return self.out.tell()

    def flush(self, fsync: bool) -> None:
        if fsync:
            self.out.sync()
        else:
            self.out.drain()

    def close(self) -> None:
        self.out.close()


class _GzipJsonlSink(_Sink):
    """A gzip member written as `gzip.GzipFile(filename="", mtime=0)` writes it (the same
    header, deflate settings, sync flushes and trailer), its blocks deflated on the writer's
    compressor thread (exporter/sinks/archive_blocks.py)."""

    def __init__(self, out: _FileOut, level: int, compressor: Compressor | None) -> None:
        self.out = out
        # what GzipFile writes: no name or time in the header: same records, same bytes
        self._deflate = zlib.compressobj(
            level, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0
        )
        self._crc = 0
        self._length = 0
        self._ended = False
        extra_flags = b"\x02" if level == 9 else (b"\x04" if level == 1 else b"\x00")
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + extra_flags + b"\xff")
        self._blocks = BlockQueue(self._compress, out.write, compressor)

    def _compress(self, data: bytes, _count: int) -> bytes:
        deflated = self._deflate.compress(data)
        self._crc = zlib.crc32(data, self._crc)
        self._length += len(data)
        return deflated

    def write(self, canonical: dict[str, Any]) -> None:
        self._blocks.settle()
        self.out.write(self._compress(_line(canonical), 1))

    def write_lines(self, data: bytes) -> None:
        self._blocks.add(data, 0)

    def submit(self) -> None:
        self._blocks.submit()

    def size_bound(self) -> int:
        return self.out.tell() + self._blocks.outstanding()

    def size(self) -> int:
        self._blocks.settle()
        return self.out.tell()

    def flush(self, fsync: bool) -> None:
        self._blocks.settle()
        # a sync flush makes everything so far decodable (salvage after a crash)
        if not self._ended:
            self.out.write(self._deflate.flush(zlib.Z_SYNC_FLUSH))
        if fsync:
            self.out.sync()
        else:
            self.out.drain()

    def close(self) -> None:
        self._blocks.settle()
        if not self._ended:
            # the trailer goes to `out`: a retried close only drains
            self.out.write(
                self._deflate.flush()
                + struct.pack("<II", self._crc & 0xFFFFFFFF, self._length & 0xFFFFFFFF)
            )
            self._ended = True
        self.out.close()


def _long(value: int) -> bytes:
    """Avro long: zigzag varint."""
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def _compress_block(codec: AvroBlockCodec, data: bytes) -> bytes:
    if codec == "null":
        return data
    if codec == "deflate":
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw deflate, as Avro specifies
        return compressor.compress(data) + compressor.flush()
    import cramjam

    # Avro's snappy: raw snappy, then the CRC-32 of the uncompressed data, big-endian
    return bytes(cramjam.snappy.compress_raw(data)) + struct.pack(">I", zlib.crc32(data))


class _AvroSink(_Sink):
    """An Avro object container file written block by block (spec 1.11, "Object Container
    Files"), each record encoded by `AvroCodec.encode`."""

    def __init__(
        self,
        out: _FileOut,
        avro: Any,
        codec: AvroBlockCodec,
        compressor: Compressor | None = None,
    ) -> None:
        self.out = out
        self._avro = avro
        self._codec: AvroBlockCodec = codec
        self._sync = os.urandom(_SYNC_SIZE)
        self._block = bytearray()
        self._count = 0
        # zlib releases the GIL: deflate blocks are made on the compressor thread; snappy
        # and null blocks on the spot
        self._blocks = BlockQueue(
            self._frame, out.write, compressor if codec == "deflate" else None
        )
        metadata = {
            "avro.schema": json.dumps(avro.schema, separators=(",", ":")).encode(),
            "avro.codec": codec.encode(),
        }
        header = bytearray(_AVRO_MAGIC)
        header += _long(len(metadata))
        for key, value in metadata.items():
            header += _long(len(key)) + key.encode() + _long(len(value)) + value
        header += _long(0) + self._sync
        out.write(bytes(header))

    def write(self, canonical: dict[str, Any]) -> None:
        self._block += self._avro.encode(canonical)
        self._count += 1
        if len(self._block) >= AVRO_BLOCK_BYTES:
            self._write_block()

    def write_bodies(self, data: bytes, count: int) -> None:
        """`count` records' Avro bodies, joined: what `write` of each does, the block ending
        after the record that takes it to AVRO_BLOCK_BYTES (the caller's `block_room`)."""
        self._block += data
        self._count += count
        if len(self._block) >= AVRO_BLOCK_BYTES:
            self._write_block()

    def block_room(self) -> int:
        """Bytes of bodies the current block takes before it is written."""
        return AVRO_BLOCK_BYTES - len(self._block)

    def _frame(self, block: bytes, count: int) -> bytes:
        data = _compress_block(self._codec, block)
        return _long(count) + _long(len(data)) + data + self._sync

    def _write_block(self) -> None:
        if not self._count:
            return
        self._blocks.add(bytes(self._block), self._count)
        self._block.clear()
        self._count = 0

    def submit(self) -> None:
        self._blocks.submit()

    def size_bound(self) -> int:
        return self.out.tell() + self._blocks.outstanding() + len(self._block)

    def size(self) -> int:
        self._blocks.settle()
        return self.out.tell() + len(self._block)

    def flush(self, fsync: bool) -> None:
        self._write_block()
        self._blocks.settle()
        if fsync:
            self.out.sync()
        else:
            self.out.drain()

    def close(self) -> None:
        self._write_block()
        self._blocks.settle()
        self.out.close()


# ---------------------------------------------------------------------------------------------
# The writer


@dataclass(slots=True)
class _OpenFile:
    partition: tuple[str, str]
    directory: Path
    name: str
    sink: _Sink
    opened_at: float
    records: int = 0
    last_write: int = 0
    #: per `__consumer_offsets` partition, the offset of the file's first record since its
    #: last fsync: from there on, the records are not surely on disk yet
    unsynced: dict[int, int] = field(default_factory=dict)

    @property
    def temp_path(self) -> Path:
        return self.directory / f".{self.name}{INPROGRESS}"

    @property
    def final_path(self) -> Path:
        return self.directory / self.name


class ArchiveWriter:
    """Writes canonical dicts to rolling, time-partitioned archive files (module docs).

    Not thread-safe: one thread writes. `records_written` counts the records accepted,
    `files_completed` the files published under their final names (salvaged ones included).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        format: ArchiveFormat = "jsonl",
        *,
        gzip: bool = False,
        gzip_level: int = 6,
        avro_codec: AvroBlockCodec = "deflate",
        roll_bytes: int = DEFAULT_ROLL_BYTES,
        roll_seconds: float = DEFAULT_ROLL_SECONDS,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
        clock: Callable[[], float] = time.time,
        on_roll: Callable[[Path, int], None] | None = None,
        recover: bool = True,
        compress_on_thread: bool = True,
    ) -> None:
        if format not in ("jsonl", "avro"):
            raise ArchiveError(f"archive format must be jsonl or avro (got {format!r})")
        if gzip and format != "jsonl":
            raise ArchiveError("gzip applies to the jsonl format only (Avro compresses blocks)")
        if avro_codec not in ("null", "deflate", "snappy"):
            raise ArchiveError(f"Avro codec must be null, deflate or snappy (got {avro_codec!r})")
        if roll_bytes <= 0 or roll_seconds <= 0 or max_open_files <= 0:
            raise ArchiveError("roll_bytes, roll_seconds and max_open_files must be positive")
        self.directory = Path(directory)
        self.format: ArchiveFormat = format
        self.gzip = gzip
        self.gzip_level = gzip_level
        self.avro_codec: AvroBlockCodec = avro_codec
        self.roll_bytes = roll_bytes
        self.roll_seconds = roll_seconds
        self.max_open_files = max_open_files
        self.clock = clock
        self.on_roll = on_roll
        self.records_written = 0
        self.files_completed = 0
        self.extension = "avro" if format == "avro" else ("jsonl.gz" if gzip else "jsonl")
        self._open: dict[tuple[str, str], _OpenFile] = {}
        self._partitions: dict[int, tuple[str, str]] = {}
        self._seq = 0
        self._writes = 0
        self._next_expiry_check = 0.0
        self._closed = False
        self._avro: Any = None
        #: the compressed formats' blocks are made on its thread (archive_blocks.py)
        self._compressor = Compressor() if compress_on_thread else None
        if format == "avro":
            from offsetwatch.decoder.avro import AvroCodec

            self._avro = AvroCodec()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.recovered: list[Path] = self.recover_inprogress() if recover else []

    # -- writing ---------------------------------------------------------------------------

    def write(self, canonical: dict[str, Any], source: tuple[int, int] | None = None) -> None:
        """Append one canonical record (a `Canonical.to_dict` result); `source` is its
        (partition, offset) in `__consumer_offsets`, for `durable_positions`.

        Whatever can fail (a roll that is due, the file's bytes to the OS) is done before
        the record is taken: when this raises, the record is not in the archive, and the
        caller keeps it; when it returns, the record is, and stays, in its file's bytes."""
        if self._closed:
            raise ArchiveError("archive writer is closed")
        now = self.clock()
        if now >= self._next_expiry_check:
            self.roll_expired(now)
            self._next_expiry_check = now + 1.0
        timestamp = canonical.get(contract.TIMESTAMP)
        if not isinstance(timestamp, int) or timestamp < 0:
            timestamp = int(now * 1000)  # unknown position time: file it under "now"
        bucket = timestamp // _HOUR_MS
        partition = self._partitions.get(bucket)
        if partition is None:
            if len(self._partitions) > 10_000:
                self._partitions.clear()
            partition = self._partitions[bucket] = partition_of(timestamp)
        current = self._open.get(partition)
        if current is not None and self._due(current, now):
            self._roll(current)
            current = None
        if current is None:
            current = self._start(partition, timestamp, now)
        elif current.sink.out.pending >= _DRAIN_BYTES:
            current.sink.out.drain()
        current.sink.write(canonical)
        current.sink.submit()
        current.records += 1
        self._writes += 1
        current.last_write = self._writes
        self.records_written += 1
        if source is not None and source[0] >= 0:
            current.unsynced.setdefault(source[0], source[1])

    def write_encoded(self, items: list[Encoded]) -> None:
        """Append encoded records (partition, offset, timestamp, identity key, canonical
        JSON), in order: what `write` of each record's canonical dict with its source
        position does, in blocks (module doc). Raises PartialWrite saying how many of
        `items` were taken when a roll or a drain before a block failed. An Avro archive's
        items hold the records' Avro bodies (`EncodedBatch.avro_items`), not their JSON."""
        if self._closed:
            raise PartialWrite(0, ArchiveError("archive writer is closed"))
        now = self.clock()
        taken = 0
        n = len(items)
        avro = self.format == "avro"
        plain = not self.gzip
        # a block's lines joined in C (exporter/state/_ingest_speedups.c join_lines) where
        # it is built, else by the loop below
        join = _join_lines()
        try:
            if now >= self._next_expiry_check:
                self.roll_expired(now)
                self._next_expiry_check = now + 1.0
            while taken < n:
                timestamp = items[taken][2]
                if timestamp < 0:
                    timestamp = int(now * 1000)
                bucket = timestamp // _HOUR_MS
                partition = self._partitions.get(bucket)
                if partition is None:
                    if len(self._partitions) > 10_000:
                        self._partitions.clear()
                    partition = self._partitions[bucket] = partition_of(timestamp)
                current = self._open.get(partition)
                if current is not None and self._due(current, now):
                    self._roll(current)
                    current = None
                if current is None:
                    current = self._start(partition, timestamp, now)
                elif current.sink.out.pending >= _DRAIN_BYTES:
                    current.sink.out.drain()
                # the block: records of this hour, up to ENCODED_BLOCK_BYTES of lines, and
                # for a plain file up to the record that takes it to roll_bytes (where
                # `write` would roll it next)
                room = self.roll_bytes - current.sink.size() if plain else ENCODED_BLOCK_BYTES
                sink = current.sink
                if isinstance(sink, _AvroSink):
                    # up to the record that fills the Avro block, where `write` writes it
                    limit = min(room, sink.block_room())
                else:
                    limit = min(room, ENCODED_BLOCK_BYTES)
                unsynced = current.unsynced
                if join is not None and type(items) is list:
                    end, data = join(items, taken, bucket, _HOUR_MS, int(now * 1000), limit,
                                     unsynced, not avro)  # fmt: skip
                else:
                    lines: list[bytes] = []
                    size = 0
                    end = taken
                    while end < n:
                        source, offset, ts, _key, body = items[end]
                        if ts < 0:
                            ts = int(now * 1000)
                        if ts // _HOUR_MS != bucket:
                            break
                        lines.append(body)
                        size += len(body) + (0 if avro else 1)
                        if source >= 0 and source not in unsynced:
                            unsynced[source] = offset
                        end += 1
                        if size >= limit:
                            break
                    if not avro:
                        lines.append(b"")
                    data = (b"" if avro else b"\n").join(lines)
                if isinstance(sink, _AvroSink):
                    sink.write_bodies(data, end - taken)
                else:
                    sink.write_lines(data)
                count = end - taken
                current.records += count
                self._writes += 1
                current.last_write = self._writes
                self.records_written += count
                taken = end
        except Exception as error:
            raise PartialWrite(taken, error) from error
        finally:
            # the batch's blocks go to the compressor while the main loop goes on
            for opened in self._open.values():
                opened.sink.submit()

    def _due(self, opened: _OpenFile, now: float) -> bool:
        if now - opened.opened_at >= self.roll_seconds:
            return True
        # the exact size waits for the file's blocks being compressed: asked only when
        # they could take it to roll_bytes
        sink = opened.sink
        return sink.size_bound() >= self.roll_bytes and sink.size() >= self.roll_bytes

    def _start(self, partition: tuple[str, str], first_ts: int, now: float) -> _OpenFile:
        if len(self._open) >= self.max_open_files:
            self._roll(min(self._open.values(), key=lambda f: f.last_write))
        directory = self.directory / f"date={partition[0]}" / f"hour={partition[1]}"
        directory.mkdir(parents=True, exist_ok=True)
        while True:
            name = file_name(first_ts, self._seq, self.extension)
            self._seq = (self._seq + 1) % 1_000_000
            if (
                not (directory / name).exists()
                and not (directory / f".{name}{INPROGRESS}").exists()
            ):
                break
        out = _FileOut(directory / f".{name}{INPROGRESS}")
        sink: _Sink
        if self.format == "avro":
            sink = _AvroSink(out, self._avro, self.avro_codec, self._compressor)
        elif self.gzip:
            sink = _GzipJsonlSink(out, self.gzip_level, self._compressor)
        else:
            sink = _JsonlSink(out)
        opened = _OpenFile(partition, directory, name, sink, now)
        self._open[partition] = opened
        return opened

    def _roll(self, opened: _OpenFile) -> Path:
        """Close the file and publish it under its final name. Until every step succeeded
        the file stays open with its bytes (a full disk): the next roll tries again."""
        opened.sink.close()
        if opened.temp_path.exists():
            os.replace(opened.temp_path, opened.final_path)
        fsync_directory(opened.directory)
        del self._open[opened.partition]
        self.files_completed += 1
        if self.on_roll is not None:
            self.on_roll(opened.final_path, opened.records)
        return opened.final_path

    def _roll_each(self, files: list[_OpenFile]) -> list[Path]:
        """Roll every file of `files`; the first failure is raised after all were tried."""
        rolled: list[Path] = []
        failure: OSError | None = None
        for opened in files:
            try:
                rolled.append(self._roll(opened))
            except OSError as error:
                failure = failure or error
        if failure is not None:
            raise failure
        return rolled

    # -- rolling and flushing ----------------------------------------------------------------

    def roll_expired(self, now: float | None = None) -> list[Path]:
        """Publish the open files older than roll_seconds or past roll_bytes (call it when
        idle, too)."""
        moment = self.clock() if now is None else now
        return self._roll_each([f for f in self._open.values() if self._due(f, moment)])

    def roll(self) -> list[Path]:
        """Publish every open file now."""
        return self._roll_each(list(self._open.values()))

    def flush(self, fsync: bool = False) -> None:
        """Give every file's bytes to the OS (and to disk with fsync=True); rolls the files
        that are due. Raises the first failure (naming its file) after trying every file.

        Flushed records are salvaged after a crash; `durable_positions` says how far the
        records are on disk."""
        failure: OSError | None = None
        try:
            self.roll_expired()
        except OSError as error:
            failure = error
        for opened in self._open.values():
            try:
                opened.sink.flush(fsync)
            except OSError as error:
                failure = failure or error
                continue
            if fsync:
                opened.unsynced.clear()
        if failure is not None:
            raise failure

    def durable_positions(self, positions: dict[int, int]) -> dict[int, int]:
        """`positions` capped at the first record (per partition) not yet surely on disk: the
        records written since an open file's last fsync."""
        first: dict[int, int] = {}
        for opened in self._open.values():
            for partition, offset in opened.unsynced.items():
                if offset < first.get(partition, offset + 1):
                    first[partition] = offset
        if not first:
            return positions
        return {p: min(pos, first.get(p, pos)) for p, pos in positions.items()}

    def close(self) -> None:
        """Publish every open file; the writer cannot be used afterwards. Raises (every
        file still open, its bytes kept) while a file cannot be written."""
        if self._closed:
            return
        self.roll()
        if self._compressor is not None:
            self._compressor.close()
        self._closed = True

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def open_files(self) -> int:
        return len(self._open)

    # -- crash recovery ----------------------------------------------------------------------

    def recover_inprogress(self) -> list[Path]:
        """Salvage the hidden in-progress files a crash left behind; returns the files published.

        Every complete record is kept (a torn last line, gzip member or Avro block is
        dropped); a file with no complete record is deleted.
        """
        recovered = []
        for partial in self.directory.glob(f"date=*/hour=*/.{PREFIX}*{_SALVAGE}"):
            partial.unlink()  # a salvage interrupted by another crash: redone from the source
        for temp in sorted(self.directory.glob(f"date=*/hour=*/.{PREFIX}*{INPROGRESS}")):
            if any(f.temp_path == temp for f in self._open.values()):
                continue
            final = temp.with_name(temp.name[1 : -len(INPROGRESS)])
            if _salvage(temp, final, self):
                recovered.append(final)
                self.files_completed += 1
        return recovered


def _complete_lines(data: bytes) -> bytes:
    """The leading complete lines that are JSON objects (a crash can leave a torn line, or
    zero-filled blocks, or bytes decompressed from a torn gzip tail)."""
    kept = 0
    while True:
        end = data.find(b"\n", kept)
        if end < 0:
            break
        try:
            if not isinstance(json.loads(data[kept:end]), dict):
                break
        except ValueError:
            break
        kept = end + 1
    return data[:kept]


def _gunzip_prefix(data: bytes) -> bytes:
    """As much of a (possibly torn) gzip stream as decompresses: up to the byte where it
    stops making sense (a chunk that fails is tried again in halves, down to one byte, so a
    torn tail costs only itself, never the good data in its chunk)."""
    out = bytearray()
    decompressor = zlib.decompressobj(wbits=31)
    position, step = 0, 65536
    while position < len(data) and not decompressor.eof:
        piece = data[position : position + step]
        trial = decompressor.copy()
        try:
            produced = trial.decompress(piece)
        except zlib.error:
            if step == 1:
                break
            step //= 2
            continue
        out += produced
        decompressor = trial
        position += len(piece)
    return bytes(out)


def _salvage(temp: Path, final: Path, writer: ArchiveWriter) -> bool:
    data = temp.read_bytes()
    name = final.name
    salvaged = temp.with_name(f".{name}{_SALVAGE}")
    if name.endswith(".jsonl"):
        kept = _complete_lines(data)
        if not kept:
            temp.unlink()
            return False
        out = _FileOut(salvaged)
        out.write(kept)
        out.close()
    elif name.endswith(".jsonl.gz"):
        kept = _complete_lines(_gunzip_prefix(data))
        if not kept:
            temp.unlink()
            return False
        raw = _FileOut(salvaged)
        with gzip.GzipFile(
            fileobj=raw,
            mode="wb",
            compresslevel=writer.gzip_level,
            filename="",
            mtime=0,
        ) as compressed:
            compressed.write(kept)
        raw.close()
    elif name.endswith(".avro"):
        if not _salvage_avro(data, salvaged, writer):
            temp.unlink()
            return False
    else:
        return False
    os.replace(salvaged, final)
    temp.unlink()
    fsync_directory(final.parent)
    return True


def _salvage_avro(data: bytes, target: Path, writer: ArchiveWriter) -> bool:
    from offsetwatch.decoder.avro import AvroCodec

    avro = writer._avro if writer._avro is not None else AvroCodec()
    records: list[dict[str, Any]] = []
    try:
        for record in avro.read_container(io.BytesIO(data)):
            records.append(record)
    except Exception:  # a torn block (any error of the reader): keep the records before it
        pass
    if not records:
        return False
    codec: AvroBlockCodec = writer.avro_codec
    sink = _AvroSink(_FileOut(target), avro, codec)
    for record in records:
        sink.write(record)
    sink.close()
    return True
