"""The `archive` source: the exporter's archive files (docs/archive-format.md).

    spark.read.format("offsetwatch").option("source", "archive").load("/data/archive")

Paths may be archive directories (the `date=/hour=` partition directories are walked, hidden
files such as `.offsetwatch-...inprogress` skipped) or files. One Spark partition per file.
Avro container files are decoded with fastavro in the executors, block by block: a corrupt
block is quarantined (`bad_avro_block`) and reading goes on at the next block, found again by
the file's sync marker when the block's framing itself is broken. JSON lines (and .jsonl.gz)
are parsed in Python here; `read_records` reads them with Spark's native JSON reader instead,
which is much faster, and uses this source for the Avro files and for quarantine.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final, cast

import fastavro
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from offsetwatch.decoder.avro import AvroCodec
from offsetwatch.decoder.avro_wire import Truncated, read_long
from offsetwatch.spark_jobs.sources import (
    OUTPUT_QUARANTINE,
    Collector,
    FileSplit,
    InputError,
    RecordSink,
    output_of,
    parse_line,
    paths_of,
    require_exists,
    walk_files,
)
from offsetwatch.spark_jobs.sources.lake_input import (
    OUTPUT_LAKE,
    LakeCollector,
    read_jsonl_lake,
)

SOURCE: Final = "archive"
JSONL_SUFFIXES: Final = (".jsonl", ".jsonl.gz")
AVRO_SUFFIX: Final = ".avro"
_AVRO_MAGIC: Final = b"Obj\x01"
_SYNC_SIZE: Final = 16


def is_jsonl(path: str | Path) -> bool:
    return str(path).endswith(JSONL_SUFFIXES)


def is_avro(path: str | Path) -> bool:
    return str(path).endswith(AVRO_SUFFIX)


def archive_files(paths: list[str]) -> list[Path]:
    """The archive files (JSON lines, gzipped JSON lines, Avro) under the paths; InputError
    when a path is missing or none holds any."""
    files = [
        f for root in require_exists(paths, SOURCE) for f in walk_files(root) if _is_archive(f)
    ]
    if not files:
        raise InputError(f"no archive files (*.jsonl, *.jsonl.gz, *.avro) under {', '.join(paths)}")
    return files


def _is_archive(path: Path) -> bool:
    return is_jsonl(path) or is_avro(path)


class ArchiveReader(DataSourceReader):
    """Batch reader of archive files (pickled to the executors: plain attributes only)."""

    def __init__(self, schema: StructType, options: Mapping[str, str]) -> None:
        self.schema = schema
        self.lake = options.get("output") == OUTPUT_LAKE
        self.quarantine = not self.lake and output_of(options) == OUTPUT_QUARANTINE
        self.files = [str(f) for f in archive_files(paths_of(options, SOURCE))]

    def partitions(self) -> list[FileSplit]:
        return [FileSplit((file,)) for file in self.files]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, FileSplit)
        file = partition.files[0]
        if self.lake:
            lake = LakeCollector(SOURCE)
            yield from read_avro(file, lake) if is_avro(file) else read_jsonl_lake(file, lake)
            return
        collector = Collector.of(self.schema, SOURCE, self.quarantine)
        if is_avro(file):
            yield from read_avro(file, collector)
        else:
            yield from read_jsonl(file, collector)


# ---------------------------------------------------------------------------------------------
# JSON lines


def _open_text(path: str) -> IO[bytes] | gzip.GzipFile:
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_jsonl(file: str, collector: RecordSink) -> Iterator[Any]:
    try:
        with _open_text(file) as lines:
            for number, line in enumerate(lines, 1):
                if line.isspace():
                    continue
                canonical = parse_line(line, file, number, collector)
                if canonical is not None:
                    collector.add(canonical, file, number)
                if collector.full:
                    yield from collector.drain()
    except (OSError, EOFError) as error:  # a torn gzip stream: keep what came before
        collector.bad_input(file, None, "bad_file", f"{type(error).__name__}: {error}")
    yield from collector.drain()


# ---------------------------------------------------------------------------------------------
# Avro container files


def _header_end(data: bytes) -> int:
    """Where the first block starts (after the metadata map and the sync marker)."""
    if data[:4] != _AVRO_MAGIC:
        raise ValueError("not an Avro object container file (bad magic)")
    position = 4
    while True:
        count, position = read_long(data, position)
        if count == 0:
            break
        if count < 0:
            count = -count
            _size, position = read_long(data, position)
        for _ in range(count * 2):  # key and value, both length-prefixed
            length, position = read_long(data, position)
            position += length
    position += _SYNC_SIZE
    if position > len(data):
        raise Truncated
    return position


def _read_avro_blocks(
    data: bytes, file: str, collector: RecordSink, codec: AvroCodec
) -> Generator[Any, None, int]:
    """The fast way through a container file: one fastavro block reader (the header parsed
    once, not once a block). Returns where it stopped: the end of the data, the first block
    it could not read, or the first block when the file's schema is not the codec's own; the
    careful block-by-block loop of `read_avro` goes on from there."""
    start = _header_end(data)
    position = start
    try:
        blocks = fastavro.block_reader(io.BytesIO(data))
        if not codec.writes_like(blocks.writer_schema):
            return start
        for block in blocks:
            records = [codec.from_avro_dict(cast(dict[str, Any], r)) for r in block]  # all or none
            for record in records:
                collector.add(record, file, block.offset)
            position = block.offset + block.size
            if collector.full:
                yield from collector.drain()
    except Exception:
        pass
    return position


def read_avro(file: str, collector: RecordSink) -> Iterator[Any]:
    data = Path(file).read_bytes()
    try:
        start = _header_end(data)
    except (ValueError, Truncated) as error:
        collector.bad_input(file, 0, "bad_avro_header", str(error) or "truncated header")
        yield from collector.drain()
        return
    header, sync = data[:start], data[start - _SYNC_SIZE : start]
    codec = AvroCodec()
    position = yield from _read_avro_blocks(data, file, collector, codec)
    while position < len(data):
        try:
            count, body = read_long(data, position)
            size, body = read_long(data, body)
            end = body + size
            if count < 0 or size < 0 or data[end : end + _SYNC_SIZE] != sync:
                raise ValueError("block framing broken (count, size or sync marker)")
        except (ValueError, Truncated) as error:
            found = data.find(sync, position + 1)
            reason = "truncated" if found < 0 else "bad_avro_block"
            collector.bad_input(file, position, reason, str(error) or "data ends inside a block")
            if found < 0:
                break
            position = found + _SYNC_SIZE
            continue
        block_end = end + _SYNC_SIZE
        try:
            records = list(codec.read_container(io.BytesIO(header + data[position:block_end])))
        except Exception as error:  # fastavro raises many types for a corrupt block
            collector.bad_input(
                file, position, "bad_avro_block", f"{type(error).__name__}: {error}"
            )
        else:
            for record in records:
                collector.add(record, file, position)
        if collector.full:
            yield from collector.drain()
        position = block_end
    yield from collector.drain()
