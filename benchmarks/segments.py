"""Log-segment reader throughput: records/s of `offsetwatch.decoder.segments` on one core.

Figures (each the best of a few runs; wall clock and process CPU time, so that a busy shared
machine shows up as a wall/CPU gap rather than as a slower reader):

* the real 1,000,000-record `__consumer_offsets` segment written by Kafka 4.0.0
  (`consumer-offsets-1m.log.zst`, decompressed in-process with cramjam), read from bytes with
  `iter_batches` and from a temporary file with `read_segment` (mmap);
* a synthetic segment built with `write_batch` (OffsetCommit-shaped records, 5 % tombstones,
  batches of 1-200 records), uncompressed and zstd-compressed, and one of 1-record batches only
  (how the group coordinator writes single commits: the per-batch cost dominates there);
* a naive baseline reader written here (one `struct.unpack_from` per field, a varint helper
  call per varint, dataclass constructors) on the same 1M segment, for the ratio;
* peak RSS of the process.

`measure()` returns `(name, value, unit)` rows for other scripts; `main()` prints a table.
Run: `.venv/bin/python benchmarks/segments.py`.
"""

from __future__ import annotations

import os
import random
import resource
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import cramjam
import crc32c

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from offsetwatch.decoder.segments import (  # noqa: E402
    Batch,
    BatchHeader,
    Codec,
    RawRecord,
    RecordSpec,
    iter_batches,
    read_segment,
    write_batch,
)

REPEATS = 3
SYNTHETIC_RECORDS = 300_000


def bench_dir() -> Path:
    """Where consumer-offsets-1m.log.zst lives (same conventions as tests/conftest.py)."""
    explicit = os.environ.get("OFFSETWATCH_BENCH_DIR")
    if explicit:
        return Path(explicit)
    conformance = os.environ.get("OFFSETWATCH_CONFORMANCE_DIR")
    if conformance:
        return Path(conformance).parent / "bench"
    return REPO_ROOT.parent / "shared" / "bench"


def _best(run: Callable[[], int]) -> tuple[int, float, float]:
    """(records, best wall seconds, best CPU seconds) over REPEATS runs."""
    best_wall = best_cpu = float("inf")
    records = 0
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        records = run()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return records, best_wall, best_cpu


def _count(batches: Iterable[Batch]) -> int:
    return sum(len(batch.records) for batch in batches)


# --- naive baseline ---------------------------------------------------------------------------


def _naive_varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        (b,) = struct.unpack_from(">B", data, pos)
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def naive_read(data: bytes) -> Iterator[Batch]:
    """A straightforward v2 reader: per-field struct.unpack_from, plain constructors."""
    pos = 0
    while pos + 61 <= len(data):
        (base_offset,) = struct.unpack_from(">q", data, pos)
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (leader_epoch,) = struct.unpack_from(">i", data, pos + 12)
        (magic,) = struct.unpack_from(">b", data, pos + 16)
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        (base_ts,) = struct.unpack_from(">q", data, pos + 27)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        (producer_id,) = struct.unpack_from(">q", data, pos + 43)
        (producer_epoch,) = struct.unpack_from(">h", data, pos + 51)
        (base_seq,) = struct.unpack_from(">i", data, pos + 53)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        end = pos + 12 + length
        crc_valid = crc32c.crc32c(data[pos + 21 : end]) == crc
        if magic != 2 or attributes & 0x27 or not crc_valid:
            raise ValueError("the naive reader handles uncompressed v2 data batches only")
        transactional = bool(attributes & 0x10)
        records = []
        p = pos + 61
        for _ in range(count):
            _size, p = _naive_varint(data, p)
            (_attrs,) = struct.unpack_from(">b", data, p)
            p += 1
            ts_delta, p = _naive_varint(data, p)
            offset_delta, p = _naive_varint(data, p)
            key_len, p = _naive_varint(data, p)
            key = None if key_len < 0 else data[p : p + key_len]
            p += max(key_len, 0)
            value_len, p = _naive_varint(data, p)
            value = None if value_len < 0 else data[p : p + value_len]
            p += max(value_len, 0)
            header_count, p = _naive_varint(data, p)
            if header_count:
                raise ValueError("the naive reader handles records without headers only")
            records.append(
                RawRecord(
                    offset=base_offset + offset_delta,
                    timestamp=base_ts + ts_delta,
                    key=key,
                    value=value,
                    headers=(),
                    sequence=-1 if base_seq == -1 else base_seq + offset_delta,
                    producer_id=producer_id,
                    is_transactional=transactional,
                )
            )
        header = BatchHeader(
            base_offset=base_offset,
            last_offset=base_offset + last_delta,
            count=count,
            partition_leader_epoch=leader_epoch,
            magic=magic,
            crc=crc,
            crc_valid=crc_valid,
            attributes=attributes,
            codec=Codec.NONE,
            timestamp_type=(attributes >> 3) & 1,
            is_transactional=transactional,
            is_control=False,
            delete_horizon_ms=None,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_seq,
            last_sequence=-1 if base_seq == -1 else base_seq + last_delta,
            base_timestamp=base_ts,
            max_timestamp=max_ts,
            position=pos,
            size=end - pos,
        )
        yield Batch(header, tuple(records), ())
        pos = end


# --- synthetic segment ------------------------------------------------------------------------


def synthetic_segment(
    records: int,
    codec: Codec = Codec.NONE,
    seed: int = 7,
    batch_sizes: tuple[int, ...] = (1, 1, 5, 50, 100, 200),
) -> bytes:
    """OffsetCommit-shaped records (key version 1, value version 3), batch sizes drawn from
    `batch_sizes`."""
    rng = random.Random(seed)
    groups = [f"group-{i:04d}-{'x' * rng.randrange(0, 40)}".encode() for i in range(300)]
    topics = [f"topic-{i}".encode() for i in range(20)]
    parts = []
    offset = 0
    ts = 1_790_000_000_000
    while offset < records:
        n = min(records - offset, rng.choice(batch_sizes))
        specs = []
        for i in range(n):
            group, topic = rng.choice(groups), rng.choice(topics)
            key = (
                struct.pack(">hh", 1, len(group))
                + group
                + struct.pack(">h", len(topic))
                + topic
                + struct.pack(">i", rng.randrange(100))
            )
            value = None
            if rng.random() >= 0.05:
                value = struct.pack(">hqihq", 3, rng.randrange(1 << 40), 0, 0, ts)
            specs.append(RecordSpec(i, ts + i, key, value))
        parts.append(write_batch(specs, base_offset=offset, codec=codec, base_sequence=0))
        offset += n
        ts += rng.randrange(1, 5000)
    return b"".join(parts)


# --- measurement ------------------------------------------------------------------------------


def _rate(
    name: str, run: Callable[[], int], rows: list[tuple[str, float, str]]
) -> tuple[float, float]:
    """Append wall and CPU records/s rows; return (wall rate, CPU rate)."""
    records, wall, cpu = _best(run)
    rows.append((f"{name} [{records:,} records]", records / wall, "records/s (wall)"))
    rows.append((f"{name} [{records:,} records]", records / cpu, "records/s (CPU)"))
    return records / wall, records / cpu


def measure() -> list[tuple[str, float, str]]:
    """Run every benchmark; rows of (name, value, unit)."""
    rows: list[tuple[str, float, str]] = []
    source = bench_dir() / "consumer-offsets-1m.log.zst"
    if source.exists():
        real = bytes(cramjam.zstd.decompress(source.read_bytes()))
        fast = _rate(
            "real 1M segment, iter_batches(bytes)", lambda: _count(iter_batches(real)), rows
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "00000000000000000000.log"
            path.write_bytes(real)
            _rate(
                "real 1M segment, read_segment(file, mmap)",
                lambda: _count(read_segment(path)),
                rows,
            )
        naive = _rate(
            "real 1M segment, naive struct.unpack_from baseline",
            lambda: _count(naive_read(real)),
            rows,
        )
        rows.append(("speed-up over the naive baseline (wall)", fast[0] / naive[0], "x"))
        rows.append(("speed-up over the naive baseline (CPU)", fast[1] / naive[1], "x"))
        del real
    else:
        print(f"note: {source} not found; real-segment figures skipped", file=sys.stderr)
    synthetic = synthetic_segment(SYNTHETIC_RECORDS)
    _rate(
        "synthetic segment (write_batch), uncompressed",
        lambda: _count(iter_batches(synthetic)),
        rows,
    )
    singles = synthetic_segment(SYNTHETIC_RECORDS // 3, batch_sizes=(1,))
    _rate(
        "synthetic segment, 1-record batches (per-batch overhead)",
        lambda: _count(iter_batches(singles)),
        rows,
    )
    zstd = synthetic_segment(SYNTHETIC_RECORDS, Codec.ZSTD)
    _rate("synthetic segment (write_batch), zstd", lambda: _count(iter_batches(zstd)), rows)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    rows.append(("peak RSS of this process (incl. the 67 MB segment in memory)", peak, "MiB"))
    return rows


def main() -> None:
    rows = measure()
    width = max(len(name) for name, _, _ in rows)
    print(f"{'benchmark':<{width}}  {'value':>14}  unit")
    for name, value, unit in rows:
        shown = f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"
        print(f"{name:<{width}}  {shown:>14}  {unit}")
    load = os.getloadavg()[0]
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.2f})")


if __name__ == "__main__":
    main()
