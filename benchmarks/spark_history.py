"""Figures of the history lake: compact N offset commits into Parquet, then analytics over it.

    .venv/bin/python benchmarks/spark_history.py [--records N] [--work /tmp/offsetwatch-bench]

Prints, on local[2]:
* compact of a JSON-lines archive of N offset commits (plus log-end samples): total time and
  rows/s per phase (read = parse + flatten, dedupe = + the distinct of the input, write = the
  rest of the job: Parquet, group events, commit), beside the baseline a first version would be
  (Spark's JSON schema inference, same flatten / dedupe / write);
* compact of the same records as Avro container files (a smaller N, stated) and of the real
  1,000,000-record Kafka 4.0 segment of ../shared/bench (segments source);
* analytics (`spark_jobs.analytics.analyze`: windows, group statistics, every episode
  detector) over the N-row lake.
The generated input is kept under --work (reused when the record count matches).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

GROUPS = 200
TOPICS = 5
PARTITIONS = 10
OFFSETS_PARTITIONS = 50
START_MS = 1_795_300_000_000
STEP_MS = 5_000
FILES = 8
LINE = (
    '{{"type":"offset_commit","key_type":1,"value_version":3,"tombstone":false,'
    '"newer_version":false,"partition":{sp},"offset":{so},"timestamp":{ts},"group":"{g}",'
    '"key":{{"group":"{g}","topic":"{t}","partition":{p}}},'
    '"value":{{"offset":{o},"leader_epoch":-1,"metadata":"","commit_timestamp":{ts},'
    '"expire_timestamp":-1,"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}}}}\n'
)
LOG_END = (
    '{{"type":"log_end","key_type":-1,"value_version":0,"tombstone":false,'
    '"newer_version":false,"partition":-1,"offset":-1,"timestamp":{ts},"group":null,'
    '"key":{{"topic":"{t}","partition":{p}}},'
    '"value":{{"log_end_offset":{o},"sampled_at_ms":{ts}}}}}\n'
)


def _commit_row(i: int) -> dict[str, Any]:
    """Commit i: every (group, topic, partition) commits once per round, 100 messages on."""
    keys = GROUPS * TOPICS * PARTITIONS
    round_, slot = divmod(i, keys)
    group, rest = divmod(slot, TOPICS * PARTITIONS)
    topic, partition = divmod(rest, PARTITIONS)
    source_partition = group % OFFSETS_PARTITIONS
    return {
        "sp": source_partition,
        "so": i,  # unique per record; keeps the dedupe honest
        "ts": START_MS + round_ * STEP_MS + slot % STEP_MS,
        "g": f"group-{group:03d}",
        "t": f"topic-{topic}",
        "p": partition,
        "o": round_ * 100,
    }


def _write_file(args: tuple[Path, int, int]) -> int:
    path, first, last = args
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = GROUPS * TOPICS * PARTITIONS
    with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
        for i in range(first, last):
            out.write(LINE.format(**_commit_row(i)))
            if i % keys == keys - 1:  # a log-end sample of every partition once per round
                row = _commit_row(i)
                for topic in range(TOPICS):
                    for partition in range(PARTITIONS):
                        out.write(
                            LOG_END.format(
                                ts=row["ts"], t=f"topic-{topic}", p=partition, o=row["o"] + 150
                            )
                        )
    return last - first


def generate_jsonl(root: Path, records: int) -> Path:
    archive = root / f"archive-{records}"
    if archive.is_dir():
        return archive
    tmp = root / "archive.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    bounds = [records * k // FILES for k in range(FILES + 1)]
    jobs = [
        (tmp / "date=2026-11-21" / f"offsetwatch-{k:013d}-{k:06d}.jsonl", bounds[k], bounds[k + 1])
        for k in range(FILES)
    ]
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_write_file, jobs))
    tmp.rename(archive)
    return archive


def generate_avro(root: Path, records: int) -> Path:
    from offsetwatch.decoder.avro import AvroCodec

    avro_dir = root / f"avro-{records}"
    if avro_dir.is_dir():
        return avro_dir
    tmp = root / "avro.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "date=2026-11-21").mkdir(parents=True)
    codec = AvroCodec()
    per_file = records // 2
    for k in range(2):
        canonicals = (
            json.loads(LINE.format(**_commit_row(i)))
            for i in range(k * per_file, (k + 1) * per_file)
        )
        codec.write_container(str(tmp / "date=2026-11-21" / f"part-{k}.avro"), canonicals)
    tmp.rename(avro_dir)
    return avro_dir


def unpack_segment(root: Path, bench: Path) -> Path | None:
    packed = bench / "consumer-offsets-1m.log.zst"
    if not packed.exists():
        return None
    target = root / "segments" / "__consumer_offsets-0"
    log = target / "00000000000000000000.log"
    if not log.exists():
        target.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            subprocess.run(["zstd", "-dc", str(packed)], stdout=out, check=True)
    return target.parent


def _timed(action: Any) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def _rate(rows: int, seconds: float) -> str:
    return f"{rows / seconds:>12,.0f} rows/s" if seconds > 0 else "           - rows/s"


def bench_jsonl(spark: Any, work: Path, archive: Path, records: int) -> Path:
    from pyspark.sql import functions as F

    from offsetwatch.spark_jobs.compact import compact
    from offsetwatch.spark_jobs.lake_flatten import flatten_commits
    from offsetwatch.spark_jobs.reader import read_lake_input

    def lake_input() -> Any:
        return read_lake_input(spark, "archive", str(archive))

    read_s = _timed(
        lambda: flatten_commits(lake_input()).write.format("noop").mode("overwrite").save()
    )
    dedupe_s = _timed(lambda: lake_input().distinct().write.format("noop").mode("overwrite").save())
    lake = work / "lake-jsonl"
    shutil.rmtree(lake, ignore_errors=True)
    total_s = _timed(lambda: compact(spark, "archive", lake, archive, progress=_progress))
    rerun_s = _timed(lambda: compact(spark, "archive", lake, archive, progress=_progress))

    def baseline() -> None:
        inferred = spark.read.json(str(archive))  # what one writes first: schema inference
        commits = flatten_commits(inferred.withColumn("txn", F.lit(None).cast("string")))
        target = work / "lake-baseline"
        shutil.rmtree(target, ignore_errors=True)
        (
            commits.dropDuplicates(["source_partition", "source_offset"])
            .write.partitionBy("date")
            .parquet(str(target))
        )

    baseline_s = _timed(baseline)
    print(f"\ncompact, JSON lines archive, {records:,} offset commits, local[2]")
    print(f"  read (parse + flatten)   {read_s:7.1f} s  {_rate(records, read_s)}")
    dedupe_only = max(dedupe_s - read_s, 0.0)
    print(f"  dedupe                   {dedupe_only:7.1f} s  {_rate(records, dedupe_only)}")
    write_only = max(total_s - dedupe_s, 0.0)
    print(f"  write + events + commit  {write_only:7.1f} s  {_rate(records, write_only)}")
    print(f"  compact total            {total_s:7.1f} s  {_rate(records, total_s)}  (10M: <= 60 s)")
    print(f"  rerun, nothing new       {rerun_s:7.1f} s")
    print(
        f"  baseline: schema inference, commits only  {baseline_s:7.1f} s  "
        f"{_rate(records, baseline_s)}  ({baseline_s / total_s:.2f}x the compact time)"
    )
    return lake


def bench_other_sources(spark: Any, work: Path, bench: Path, avro_records: int) -> None:
    from offsetwatch.spark_jobs.compact import compact

    avro = generate_avro(work, avro_records)
    lake = work / "lake-avro"
    shutil.rmtree(lake, ignore_errors=True)
    seconds = _timed(lambda: compact(spark, "archive", lake, avro, progress=_progress))
    print(f"\ncompact, Avro archive, {avro_records:,} offset commits (smaller N: the Avro files")
    print(f"  are written in Python)   {seconds:7.1f} s  {_rate(avro_records, seconds)}")
    segments = unpack_segment(work, bench)
    if segments is None:
        print("\ncompact, segments: skipped (../shared/bench/consumer-offsets-1m.log.zst missing)")
        return
    lake = work / "lake-segments"
    shutil.rmtree(lake, ignore_errors=True)
    result: list[Any] = []
    seconds = _timed(
        lambda: result.append(compact(spark, "segments", lake, segments, progress=_progress))
    )
    rows = sum(result[0].rows.values())
    print("\ncompact, segments: the real 1,000,000-record Kafka 4.0 segment")
    print(f"  {seconds:7.1f} s  {_rate(1_000_000, seconds)} (input records), {rows:,} lake rows")


def bench_analytics(spark: Any, lake: Path, records: int) -> None:
    from offsetwatch.spark_jobs.analytics.analyze import analyze

    def run() -> None:
        commits = spark.read.parquet(str(lake / "commits"))
        log_ends = spark.read.parquet(str(lake / "log_ends"))
        events_dir = lake / "group_events"
        events = (
            spark.read.parquet(str(events_dir))
            if events_dir.is_dir()
            else spark.createDataFrame([], _group_events_schema())
        )
        result = analyze(commits, log_ends, events)
        for frame in (result.windows, result.group_stats, result.episodes):
            frame.write.format("noop").mode("overwrite").save()

    seconds = _timed(run)
    print(f"\nanalytics (windows, group stats, all episode detectors) over {records:,} rows")
    print(f"  from Parquet             {seconds:7.1f} s  {_rate(records, seconds)}  (10M: <= 30 s)")


def _group_events_schema() -> Any:
    from offsetwatch.spark_jobs.lake_schema import GROUP_EVENTS_SCHEMA

    return GROUP_EVENTS_SCHEMA


def _progress(line: str) -> None:
    print(f"    compact: {line}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--avro-records", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/offsetwatch-bench"))
    parser.add_argument(
        "--bench-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench"
    )
    parser.add_argument("--skip", action="append", default=[], choices=("other", "analytics"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    seconds = _timed(lambda: generate_jsonl(args.work, args.records))
    print(f"input: {args.records:,} commits as JSON lines under {args.work} ({seconds:.1f} s)")

    from offsetwatch.spark_jobs.session import SparkSettings, get_session

    spark = get_session(
        SparkSettings(
            master="local[2]",
            app_name="offsetwatch-bench-history",
            shuffle_partitions=4,
            conf={"spark.driver.memory": "4g"},
        )
    )
    archive = args.work / f"archive-{args.records}"
    lake = bench_jsonl(spark, args.work, archive, args.records)
    if "other" not in args.skip:
        bench_other_sources(spark, args.work, args.bench_dir, args.avro_records)
    if "analytics" not in args.skip:
        bench_analytics(spark, lake, args.records)
    spark.stop()


if __name__ == "__main__":
    main()
