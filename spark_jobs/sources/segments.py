"""The `segments` source: raw `__consumer_offsets` log segment files, decoded in the executors.

    spark.read.format("offsetwatch").option("source", "segments").load("/var/kafka-logs")

Paths may be `.log` files, `__consumer_offsets-<p>` partition directories or a Kafka log
directory holding them (as `offsetwatch decode --segments` takes). The canonical `partition`
is the number in the directory name (-1 for a directory not named so).

Planning (on the driver, reading only the 61-byte batch headers): a partition whose segments
hold no transactional batch gets one Spark partition per segment file, or per byte range of
about `splitBytes` (default 16 MiB) cut at batch boundaries, so one big segment still keeps
every core busy. A partition holding transactions is read whole, in one Spark partition, in
file order: a transaction's records are resolved by its marker, which may sit in a later
batch or a later file (`decoder.segments.TransactionResolver`, as `offsetwatch decode` does);
`txn` then says committed / aborted / pending, and "none" for plain records.

Decoding: runs of plain batches (uncompressed, non-transactional v2 holding offset commits,
nearly all of a real log) go straight to Arrow columns (`segment_columns`, numpy over many
batches at once); every other batch - and any run with something unusual inside - takes the
record path (`decoder.segments` + `Codec.decode_many` + `columns.flat_batches`), which gives
the same rows.

Bad input goes on: a batch whose header or compression is broken is quarantined
(`bad_batch`) and skipped; framing broken for good (`bad_segment_tail`) ends that file; a
record whose key or value does not decode is quarantined alone (`bad_record`); a CRC mismatch
is quarantined (`crc_mismatch`) but its records are kept, as `offsetwatch decode` does.
"""

from __future__ import annotations

import mmap
import struct
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.codec import Message
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.spark_jobs.schema import CanonicalRows
from offsetwatch.spark_jobs.sources import (
    BATCH_RECORDS,
    OUTPUT_QUARANTINE,
    Collector,
    FileSplit,
    InputError,
    output_of,
    paths_of,
    require_exists,
)
from offsetwatch.spark_jobs.sources.columns import decode_records
from offsetwatch.spark_jobs.sources.segment_columns import Run, decode_run, runs

SOURCE: Final = "segments"
DEFAULT_SPLIT_BYTES: Final = 16 * 1024 * 1024
#: batch header: base offset (8), length (4), leader epoch (4), magic (1), crc (4), attributes (2)
_HEADER: Final = struct.Struct(">qiibIh")
_LOG_OVERHEAD: Final = 12
_TRANSACTIONAL: Final = 0x10


@dataclass(slots=True)
class _Partition:
    number: int
    files: list[Path] = field(default_factory=list)


def _base_offset(path: Path) -> tuple[int, str]:
    return (int(path.stem), path.name) if path.stem.isdigit() else (-1, path.name)


def _log_files(directory: Path) -> list[Path]:
    return [p for p in directory.glob("*.log") if p.is_file() and not p.name.startswith(".")]


def _is_offsets_dir(path: Path) -> bool:
    prefix = OFFSETS_TOPIC + "-"
    return path.is_dir() and path.name.startswith(prefix) and path.name[len(prefix) :].isdigit()


def segment_partitions(paths: list[str]) -> list[_Partition]:
    """The segment files under the paths, grouped by partition directory, in base-offset order."""
    from offsetwatch.decoder.segments import partition_of_dir

    groups: dict[Path, _Partition] = {}

    def group(directory: Path) -> _Partition:
        found = groups.get(directory)
        if found is None:
            number = partition_of_dir(directory)
            found = groups[directory] = _Partition(-1 if number is None else number)
        return found

    for root in require_exists(paths, SOURCE):
        if root.is_file():
            group(root.resolve().parent).files.append(root.resolve())
            continue
        logs = _log_files(root)
        if logs:
            group(root.resolve()).files.extend(p.resolve() for p in logs)
            continue
        for sub in sorted(p for p in root.iterdir() if _is_offsets_dir(p)):
            group(sub.resolve()).files.extend(p.resolve() for p in _log_files(sub))
    selected = [g for g in groups.values() if g.files]
    if not selected:
        raise InputError(
            f"no segment files under {', '.join(paths)}: give .log files, "
            f"{OFFSETS_TOPIC}-<p> directories or a Kafka log directory holding them"
        )
    for item in selected:
        item.files = sorted(set(item.files), key=_base_offset)
    return sorted(selected, key=lambda g: g.number)


def scan_batches(path: Path) -> tuple[list[int], bool]:
    """(start position of every batch, whether any is transactional), from headers only.
    Stops at the first header that does not frame a batch: the reader reports it."""
    starts: list[int] = []
    transactional = False
    size = path.stat().st_size
    if size == 0:
        return starts, transactional
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        position = 0
        while position + _HEADER.size <= size:
            _base, length, _epoch, magic, _crc, attributes = _HEADER.unpack_from(data, position)
            if length <= 0 or position + _LOG_OVERHEAD + length > size:
                break
            starts.append(position)
            if magic >= 2 and attributes & _TRANSACTIONAL:
                transactional = True
            position += _LOG_OVERHEAD + length
    return starts, transactional


def plan_splits(partitions: list[_Partition], split_bytes: int) -> list[FileSplit]:
    splits: list[FileSplit] = []
    for item in partitions:
        scans = [(file, *scan_batches(file)) for file in item.files]
        if any(transactional for _, _, transactional in scans):
            files = tuple(str(f) for f in item.files)
            splits.append(FileSplit(files, partition=item.number, transactional=True))
            continue
        for file, starts, _ in scans:
            cuts = [0]
            for start in starts:
                if start - cuts[-1] >= split_bytes:
                    cuts.append(start)
            ends = [*cuts[1:], -1]
            splits.extend(
                FileSplit((str(file),), start, end, item.number)
                for start, end in zip(cuts, ends, strict=True)
            )
    return splits


def split_bytes_of(options: Mapping[str, str]) -> int:
    raw = options.get("splitBytes", str(DEFAULT_SPLIT_BYTES))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"option splitBytes={raw!r}: expected a positive number of bytes")
    return value


class SegmentReader(DataSourceReader):
    """Batch reader of segment files (pickled to the executors: plain attributes only)."""

    def __init__(self, schema: StructType, options: Mapping[str, str]) -> None:
        self.schema = schema
        self.quarantine = output_of(options) == OUTPUT_QUARANTINE
        self.splits = plan_splits(
            segment_partitions(paths_of(options, SOURCE)), split_bytes_of(options)
        )

    def partitions(self) -> list[FileSplit]:
        return self.splits

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, FileSplit)
        yield from read_split(partition, Collector.of(self.schema, SOURCE, self.quarantine))


def read_split(split: FileSplit, collector: Collector) -> Iterator[Any]:
    """What one Spark task of the source does: Arrow batches of the split's records, or its
    quarantine rows (the collector's output). Public for benchmarks/spark_sources.py."""
    return _SplitReader(split, collector).read()


@dataclass(slots=True)
class _SplitReader:
    """Decodes one split: batches -> (transaction resolution) -> records -> Arrow batches."""

    split: FileSplit
    collector: Collector
    #: raw records awaiting decoding, their `txn` value, and where their batches start:
    #: (index of the batch's first record here, file, byte position of the batch)
    records: list[Any] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    marks: list[tuple[int, str, int]] = field(default_factory=list)

    def read(self) -> Iterator[Any]:
        from offsetwatch.decoder.canonical import Canonical
        from offsetwatch.decoder.codec import Codec

        codec, canonical = Codec(), Canonical()
        if self.split.transactional:
            yield from self._read_transactional(codec, canonical)
            return
        (file,) = self.split.files  # planning gives plain partitions one file per split
        start, end = self.split.start, self.split.end
        with open(file, "rb") as f:
            f.seek(start)
            data = f.read(-1 if end < 0 else end - start)
        rows, quarantine = self.collector.rows, self.collector.quarantine
        records, statuses = self.records, self.statuses
        for run in self._runs(data, rows):
            if isinstance(run, pa.RecordBatch):
                if not quarantine:  # plain commits hold nothing to quarantine
                    yield run
                continue
            for raw in self._batches(file, data, run.start, run.end):
                self.marks.append((len(records), file, raw.header.position))
                records.extend(raw.records)
                statuses.extend(["none"] * len(raw.records))
                if len(records) >= BATCH_RECORDS:
                    yield from self._flush(codec, canonical)
                    records, statuses = self.records, self.statuses
        yield from self._flush(codec, canonical)

    def _runs(self, data: bytes, rows: CanonicalRows) -> Iterator[pa.RecordBatch | Run]:
        """Arrow batches of the plain offset commits, and the runs left for the record path."""
        for run in runs(data):
            if run.batches is None:
                yield run
            else:
                yield from decode_run(data, run, self.split.partition, rows)

    def _read_transactional(self, codec: Any, canonical: Any) -> Iterator[Any]:
        """Whole files in order, records released by their transaction markers."""
        from offsetwatch.decoder.segments import TransactionResolver

        resolver = TransactionResolver()
        records, statuses = self.records, self.statuses
        for file in self.split.files:
            with open(file, "rb") as f:
                data = f.read()
            for batch in self._batches(file, data, 0, len(data)):
                self.marks.append((len(records), file, batch.header.position))
                # released records are located by the batch that released them
                for record, status in resolver.feed(batch):
                    records.append(record)
                    statuses.append(status if record.is_transactional else "none")
                if len(records) >= BATCH_RECORDS:
                    yield from self._flush(codec, canonical)
                    records, statuses = self.records, self.statuses
        self.marks.append((len(records), self.split.files[-1], -1))
        for record, status in resolver.pending():
            records.append(record)
            statuses.append(status)
        yield from self._flush(codec, canonical)

    def _where(self, index: int) -> tuple[str, int]:
        mark = self.marks[bisect_right(self.marks, (index, "\uffff", 0)) - 1]
        return mark[1], mark[2]

    def _batches(self, file: str, data: bytes, start: int, end: int) -> Iterator[Any]:
        """The record path over data[start:end] (data: the split's bytes)."""
        from offsetwatch.decoder.segments import SegmentReader as BatchReader

        collector = self.collector

        def bad_batch(error: DecodeError) -> None:
            collector.bad_input(file, error.byte_position, "bad_batch", str(error))

        base = self.split.start
        reader = BatchReader(
            memoryview(data)[start:end],
            verify_crc=False,
            base_position=base + start,
            on_error=bad_batch,
        )
        try:
            for batch in reader:
                header = batch.header
                if not header.crc_valid:
                    collector.bad_input(
                        file,
                        header.position,
                        "crc_mismatch",
                        f"offsets {header.base_offset}..{header.last_offset}: stored CRC "
                        f"{header.crc} does not match; records kept",
                    )
                yield batch
        except DecodeError as error:
            collector.bad_input(file, error.byte_position, "bad_segment_tail", str(error))
        tail = reader.truncated_tail
        if tail is not None and tail.reason != "zero padding" and self.split.end < 0:
            # a partial write at the end of the active segment: Kafka drops it on recovery
            collector.bad_input(file, tail.position, "truncated", tail.reason)

    def _flush(self, codec: Any, canonical: Any) -> Iterator[Any]:
        records, statuses = self.records, self.statuses
        partition = self.split.partition
        messages = [(r.key, r.value, partition, r.offset, r.timestamp) for r in records]

        def bad_record(index: int, message: Message, error: DecodeError) -> None:
            file, position = self._where(index)
            raw = _hex(message[0], message[1])
            self.collector.bad_input(file, position, "bad_record", str(error), raw)

        decoded = decode_records(
            codec, canonical, self.collector.rows, messages, statuses, bad_record
        )
        if not self.collector.quarantine:
            yield from decoded.batches
        for index, row in decoded.rest:
            self.collector.add(row, *self._where(index))
        self.records, self.statuses, self.marks = [], [], []
        yield from self.collector.drain()


def _hex(key: bytes | None, value: bytes | None) -> str:
    return f"key={key.hex() if key else None} value={value.hex() if value else None}"
