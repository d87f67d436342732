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

Crash safety: at start, hidden in-progress files left by a crash are salvaged (every complete
record kept) and published under their final names; call `flush(fsync=True)` before saving a
checkpoint so every record before the checkpointed positions is on disk. Records after the
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
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Literal

from offsetwatch.core.atomic import fsync_directory
from offsetwatch.decoder import contract
from offsetwatch.decoder.canonical import dumps

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
    def write(self, canonical: dict[str, Any]) -> None:
        raise NotImplementedError

    def size(self) -> int:
        """Bytes the file will have once closed (close estimate for compressed data)."""
        raise NotImplementedError

    def flush(self, fsync: bool) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def _fsync(raw: IO[bytes]) -> None:
    raw.flush()
    os.fsync(raw.fileno())


def _line(canonical: dict[str, Any]) -> bytes:
    # canonical dumps is valid UTF-8; backslashreplace only guards stray lone surrogates, which
    # it turns into JSON \\udcXX escapes inside their string
    return (dumps(canonical) + "\n").encode("utf-8", "backslashreplace")


class _JsonlSink(_Sink):
    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._size = 0

    def write(self, canonical: dict[str, Any]) -> None:
        line = _line(canonical)
        self._raw.write(line)
        self._size += len(line)

    def size(self) -> int:
        return self._size

    def flush(self, fsync: bool) -> None:
        if fsync:
            _fsync(self._raw)
        else:
            self._raw.flush()

    def close(self) -> None:
        _fsync(self._raw)
        self._raw.close()


class _GzipJsonlSink(_Sink):
    def __init__(self, raw: IO[bytes], level: int) -> None:
        self._raw = raw
        # no name or time in the header: same records, same bytes
        self._gzip = gzip.GzipFile(
            fileobj=raw, mode="wb", compresslevel=level, filename="", mtime=0
        )

    def write(self, canonical: dict[str, Any]) -> None:
        self._gzip.write(_line(canonical))

    def size(self) -> int:
        return self._raw.tell()

    def flush(self, fsync: bool) -> None:
        # a sync flush makes everything so far decodable (salvage after a crash)
        self._gzip.flush(zlib.Z_SYNC_FLUSH)
        if fsync:
            _fsync(self._raw)

    def close(self) -> None:
        self._gzip.close()
        _fsync(self._raw)
        self._raw.close()


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

    def __init__(self, raw: IO[bytes], avro: Any, codec: AvroBlockCodec) -> None:
        self._raw = raw
        self._avro = avro
        self._codec: AvroBlockCodec = codec
        self._sync = os.urandom(_SYNC_SIZE)
        self._block = bytearray()
        self._count = 0
        metadata = {
            "avro.schema": json.dumps(avro.schema, separators=(",", ":")).encode(),
            "avro.codec": codec.encode(),
        }
        header = bytearray(_AVRO_MAGIC)
        header += _long(len(metadata))
        for key, value in metadata.items():
            header += _long(len(key)) + key.encode() + _long(len(value)) + value
        header += _long(0) + self._sync
        raw.write(header)

    def write(self, canonical: dict[str, Any]) -> None:
        self._block += self._avro.encode(canonical)
        self._count += 1
        if len(self._block) >= AVRO_BLOCK_BYTES:
            self._write_block()

    def _write_block(self) -> None:
        if not self._count:
            return
        data = _compress_block(self._codec, bytes(self._block))
        self._raw.write(_long(self._count) + _long(len(data)) + data + self._sync)
        self._block.clear()
        self._count = 0

    def size(self) -> int:
        return self._raw.tell() + len(self._block)

    def flush(self, fsync: bool) -> None:
        self._write_block()
        if fsync:
            _fsync(self._raw)
        else:
            self._raw.flush()

    def close(self) -> None:
        self._write_block()
        _fsync(self._raw)
        self._raw.close()


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
        if format == "avro":
            from offsetwatch.decoder.avro import AvroCodec

            self._avro = AvroCodec()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.recovered: list[Path] = self.recover_inprogress() if recover else []

    # -- writing ---------------------------------------------------------------------------

    def write(self, canonical: dict[str, Any]) -> None:
        """Append one canonical record (a `Canonical.to_dict` result)."""
        if self._closed:
            raise ArchiveError("archive writer is closed")
        now = self.clock()
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
        if current is not None and now - current.opened_at >= self.roll_seconds:
            self._roll(current)
            current = None
        if current is None:
            current = self._start(partition, timestamp, now)
        current.sink.write(canonical)
        current.records += 1
        self._writes += 1
        current.last_write = self._writes
        self.records_written += 1
        if current.sink.size() >= self.roll_bytes:
            self._roll(current)
        if now >= self._next_expiry_check:
            self._next_expiry_check = now + 1.0
            self.roll_expired(now)

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
        raw = open(directory / f".{name}{INPROGRESS}", "xb")  # noqa: SIM115 - owned by the sink
        sink: _Sink
        if self.format == "avro":
            sink = _AvroSink(raw, self._avro, self.avro_codec)
        elif self.gzip:
            sink = _GzipJsonlSink(raw, self.gzip_level)
        else:
            sink = _JsonlSink(raw)
        opened = _OpenFile(partition, directory, name, sink, now)
        self._open[partition] = opened
        return opened

    def _roll(self, opened: _OpenFile) -> Path:
        del self._open[opened.partition]
        opened.sink.close()
        os.replace(opened.temp_path, opened.final_path)
        fsync_directory(opened.directory)
        self.files_completed += 1
        if self.on_roll is not None:
            self.on_roll(opened.final_path, opened.records)
        return opened.final_path

    # -- rolling and flushing ----------------------------------------------------------------

    def roll_expired(self, now: float | None = None) -> list[Path]:
        """Publish the open files older than roll_seconds (call it when idle, too)."""
        moment = self.clock() if now is None else now
        expired = [f for f in self._open.values() if moment - f.opened_at >= self.roll_seconds]
        return [self._roll(f) for f in expired]

    def roll(self) -> list[Path]:
        """Publish every open file now."""
        return [self._roll(f) for f in list(self._open.values())]

    def flush(self, fsync: bool = False) -> None:
        """Push buffered records to the OS (and to disk with fsync=True); rolls expired files.

        Flushed records are salvaged after a crash, so flush(fsync=True) before checkpointing.
        """
        self.roll_expired()
        for opened in self._open.values():
            opened.sink.flush(fsync)

    def close(self) -> None:
        """Publish every open file; the writer cannot be used afterwards."""
        if self._closed:
            return
        self.roll()
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
    """As much of a (possibly torn) gzip stream as decompresses."""
    out = bytearray()
    decompressor = zlib.decompressobj(wbits=31)
    try:
        position = 0
        while position < len(data):
            out += decompressor.decompress(data[position : position + 65536])
            position += 65536
    except zlib.error:
        pass
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
        with open(salvaged, "wb") as out:
            out.write(kept)
            _fsync(out)
    elif name.endswith(".jsonl.gz"):
        kept = _complete_lines(_gunzip_prefix(data))
        if not kept:
            temp.unlink()
            return False
        with open(salvaged, "wb") as raw:
            with gzip.GzipFile(
                fileobj=raw, mode="wb", compresslevel=writer.gzip_level, filename="", mtime=0
            ) as out:
                out.write(kept)
            _fsync(raw)
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
    with open(target, "wb") as raw:
        sink = _AvroSink(raw, avro, codec)
        for record in records:
            sink.write(record)
        sink.close()
    return True
