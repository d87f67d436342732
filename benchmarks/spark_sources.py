"""Spark source throughput: records/s of `read_records` into a DataFrame on local[2].

    .venv/bin/python benchmarks/spark_sources.py            # segments (1M records), archive
    .venv/bin/python benchmarks/spark_sources.py --quick    # segments only, one run

Figures (best of N runs, wall clock from the action's start to its end; the session is
started and warmed up first, so JVM and Python-worker start-up are not counted):

* `segments`: the real 1,000,000-record `__consumer_offsets` segment of Kafka 4.0.0
  (shared/bench, decompressed to a temporary `__consumer_offsets-0` directory) read by the
  `segments` source: planning (batch-header scan), decoding in the Python workers, Arrow
  batches into Spark. Target (issue 6): >= 300,000 records/s on 2 cores. Beside it the same
  read with `splitBytes` larger than the file: one Spark partition, one core.
  Each Spark figure also as records per CPU second of the Spark processes (the JVM and the
  Python workers, from /proc): on a machine shared with other work wall clock mostly measures
  the others; two idle cores give at most twice that rate.
* `segments, one task in-process`: the same decoding in this process, one task over the whole
  file, as records per CPU second: the per-core cost, least distorted by other load.
* `archive-avro` and `archive-jsonl` (not with --quick): the same records written through the
  exporter's ArchiveWriter, read by the archive source (fastavro in the workers) and by
  Spark's native JSON reader with the generated schema.

Every row is materialised with the `noop` sink (Spark's way to run a full read without
writing): `count()` could skip columns. Nothing here is asserted; tests never time anything.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import cramjam
from pyspark.sql import DataFrame, SparkSession

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import proc_cpu  # noqa: E402
from offsetwatch.spark_jobs.reader import read_records  # noqa: E402
from offsetwatch.spark_jobs.session import SparkSettings, get_session  # noqa: E402

TARGET = 300_000


def bench_dir() -> Path:
    """Where consumer-offsets-1m.log.zst lives (same conventions as tests/conftest.py)."""
    explicit = os.environ.get("OFFSETWATCH_BENCH_DIR")
    if explicit:
        return Path(explicit)
    conformance = os.environ.get("OFFSETWATCH_CONFORMANCE_DIR")
    if conformance:
        return Path(conformance).parent / "bench"
    return REPO_ROOT.parent / "shared" / "bench"


def _segment_dir(work: Path) -> Path:
    source = bench_dir() / "consumer-offsets-1m.log.zst"
    if not source.exists():
        sys.exit(f"{source} not found: set OFFSETWATCH_BENCH_DIR to the folder holding it")
    target = work / "__consumer_offsets-0"
    target.mkdir()
    (target / "00000000000000000000.log").write_bytes(
        bytes(cramjam.zstd.decompress(source.read_bytes()))
    )
    return target


def _timed(action: Callable[[], None], repeats: int) -> float:
    return _measured(action, repeats)[0]


def _measured(action: Callable[[], None], repeats: int) -> tuple[float, float]:
    """(best wall seconds, CPU seconds of the Spark processes in that run)."""
    best = (float("inf"), 0.0)
    for _ in range(repeats):
        before = spark_processes()
        start = time.perf_counter()
        action()
        seconds = time.perf_counter() - start
        best = min(best, (seconds, spark_cpu_between(before, spark_processes())))
    return best


def spark_processes() -> proc_cpu.Snapshot | None:
    """The Spark JVM and its descendants (the Python workers); None without a JVM. Their
    CPU is the work of the read itself, which other load on a shared machine does not
    inflate the way it inflates wall clock."""
    jvm = proc_cpu.spark_jvm_pid()
    return None if jvm is None else proc_cpu.tree(proc_cpu.proc_table(), jvm)


def spark_cpu_between(before: proc_cpu.Snapshot | None, after: proc_cpu.Snapshot | None) -> float:
    """CPU seconds of the Spark processes between two snapshots, per process (workers Spark
    stopped in between do not take their earlier ticks with them); NaN without a JVM."""
    if before is None or after is None:
        return float("nan")
    return proc_cpu.cpu_between(before, after)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _row(name: str, records: int, seconds: float, target: int | None = None) -> None:
    rate = records / seconds
    met = "" if target is None else ("  met" if rate >= target else "  NOT met")
    goal = "" if target is None else f"  target >= {target:,}/s"
    print(f"{name:<44} {records:>10,} rec {seconds:>7.2f} s {rate:>12,.0f} rec/s{goal}{met}")


def run(frame_of: Callable[[], DataFrame]) -> Callable[[], None]:
    """A full read of the frame, every row materialised and dropped (the noop sink)."""
    return lambda: frame_of().write.format("noop").mode("overwrite").save()


def _task_cpu(segments: str) -> tuple[int, float]:
    """(records, CPU seconds) of one task reading the whole segment in this process: the
    per-core cost, which a busy shared machine inflates less than wall clock."""
    from offsetwatch.spark_jobs.schema import records_struct
    from offsetwatch.spark_jobs.sources import Collector
    from offsetwatch.spark_jobs.sources.segments import (
        SOURCE,
        plan_splits,
        read_split,
        segment_partitions,
    )

    (split,) = plan_splits(segment_partitions([segments]), 1 << 40)
    start = time.process_time()
    rows = sum(
        batch.num_rows
        for batch in read_split(split, Collector.of(records_struct(), SOURCE, quarantine=False))
    )
    return rows, time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="segments only, one run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    spark = get_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    with tempfile.TemporaryDirectory(prefix="offsetwatch-bench-") as tmp:
        work = Path(tmp)
        segments = str(_segment_dir(work))

        frame = read_records(spark, "segments", segments)
        records = frame.count()
        partitions = frame.rdd.getNumPartitions()
        run(lambda: read_records(spark, "segments", segments))()  # warm-up: workers, imports
        seconds, cpu = _measured(run(lambda: read_records(spark, "segments", segments)), repeats)
        print(f"local[2], {os.cpu_count()} CPUs visible, best of {repeats}, load {_load()}")
        _row(f"segments ({partitions} Spark partitions)", records, seconds, TARGET)
        _row("  the same, per CPU second of Spark (JVM + workers)", records, cpu)
        whole = str(1 << 40)
        seconds, cpu = _measured(
            run(lambda: read_records(spark, "segments", segments, splitBytes=whole)), repeats
        )
        _row("segments, one Spark partition (1 core)", records, seconds)
        _row("  the same, per CPU second of Spark (JVM + workers)", records, cpu)
        _row("segments, one task in-process, per CPU second", *_task_cpu(segments))
        if not args.quick:
            _archive_figures(spark, work, segments, repeats)
    spark.stop()
    return 0


def _archive_figures(spark: SparkSession, work: Path, segments: str, repeats: int) -> None:
    from offsetwatch.decoder.canonical import Canonical
    from offsetwatch.decoder.codec import Codec
    from offsetwatch.decoder.segments import read_partition_dir
    from offsetwatch.exporter.sinks.archive import ArchiveWriter

    codec, canonical = Codec(), Canonical()
    writers = [ArchiveWriter(work / "avro", "avro"), ArchiveWriter(work / "jsonl", "jsonl")]
    count = 0
    for batch in read_partition_dir(segments, verify_crc=False):
        for raw in batch.records:
            record = canonical.to_dict(
                codec.decode(raw.key, raw.value, 0, raw.offset, raw.timestamp)
            )
            for writer in writers:
                writer.write(record)
            count += 1
    for writer in writers:
        writer.close()
    for fmt in ("avro", "jsonl"):
        path = str(work / fmt)
        seconds = _timed(run(partial(read_records, spark, "archive", path)), repeats)
        _row(f"archive-{fmt}", count, seconds)


if __name__ == "__main__":
    raise SystemExit(main())
