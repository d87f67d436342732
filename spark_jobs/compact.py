"""`offsetwatch spark compact`: raw history (archive, segments, a topic) -> the Parquet lake.

One run reads only the input files not compacted before (path, size and mtime are recorded in
the lake), flattens the canonical records into `commits`, `group_events` and `log_ends`
(spark_jobs/lake_flatten.py) and `__share_group_state` records into `share_state`
(spark_jobs/lake_share_state.py), drops records already in the lake (the archive is
at-least-once: within the run its copies are equal rows, dropped by one `distinct` of the
input; against the touched date partitions of the lake the key is the record's
`__consumer_offsets` position), stages the Parquet files and publishes them
with one atomic commit (spark_jobs/lake_store.py). A rerun with no new input is a no-op; a
crash leaves the lake as before the run or as after it, never in between.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pyspark.sql import functions as F

from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.lake_flatten import (
    derive_group_events,
    flatten_commits,
    flatten_log_ends,
    group_records,
    split_events,
)
from offsetwatch.spark_jobs.lake_share_state import (
    derive_share_state,
    prior_state,
    run_topic_names,
    share_state_records,
)
from offsetwatch.spark_jobs.lake_store import (
    GROUP_STATE,
    InputFile,
    Lake,
    Manifest,
    Run,
    stat_files,
)
from offsetwatch.spark_jobs.sources import InputError
from offsetwatch.spark_jobs.sources.archive import archive_files
from offsetwatch.spark_jobs.sources.lake_input import BAD_COLUMN
from offsetwatch.spark_jobs.sources.segments import segment_partitions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Progress = Callable[[str], None]

#: dedupe keys per table: a `__consumer_offsets` position; log-end samples have none, a
#: sample is its partition and instant
DEDUPE_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    ls.COMMITS: ("source_partition", "source_offset"),
    ls.LOG_ENDS: ("topic", "partition", "sampled_at_ms"),
    # a `__share_group_state` position
    ls.SHARE_STATE: ("source_partition", "source_offset"),
}
FILE_SOURCES: Final = ("archive", "segments")
#: the staged, deduplicated input of a run (never published; not a hidden name, which
#: Spark warns about when it is read)
_INPUT: Final = "input"


def stderr_progress(line: str) -> None:
    print(f"compact: {line}", file=sys.stderr, flush=True)


@dataclass(slots=True)
class CompactResult:
    run_id: str | None = None
    input_files: int = 0
    new_files: int = 0
    #: rows added per lake table by this run
    rows: dict[str, int] = field(default_factory=dict)
    #: bad input of this run, per reason (the rows are in LAKE/quarantine)
    quarantined: dict[str, int] = field(default_factory=dict)
    recovered: list[str] = field(default_factory=list)
    #: seconds per stage, in order
    stages: dict[str, float] = field(default_factory=dict)


def check_input(source: str, path: Path) -> None:
    """Raise InputError when `path` is missing or holds no input of `source` (before a Spark
    session is started: a usage error should not cost a JVM start)."""
    pending_input(source, path, Manifest())


def pending_input(source: str, path: Path, manifest: Manifest) -> tuple[list[InputFile], int]:
    """(input files not compacted yet, number of input files in all): the files the source
    reads at `path`; InputError when there are none."""
    if source == "segments":
        found = [f for p in segment_partitions([str(path)]) for f in p.files]
    else:
        found = archive_files([str(path)])
    files = stat_files(found)
    return [f for f in files if not manifest.is_done(f)], len(files)


def compact(
    spark: SparkSession,
    source: str,
    lake_dir: Path,
    input_path: Path | None = None,
    options: Mapping[str, str] | None = None,
    progress: Progress = stderr_progress,
) -> CompactResult:
    """Compact new input into the lake at `lake_dir` (created if needed)."""
    lake = Lake(lake_dir)
    result = CompactResult(recovered=lake.recover())
    for line in result.recovered:
        progress(line)
    manifest = lake.manifest()
    new: list[InputFile] = []
    if source in FILE_SOURCES:
        if input_path is None:
            raise InputError(f"--input is required with --source {source}")
        new, result.input_files = pending_input(source, input_path, manifest)
        result.new_files = len(new)
        done = result.input_files - len(new)
        progress(f"{len(new)} new input files ({_size(new)}), {done} already in the lake")
        if not new:
            progress("nothing to do")
            return result
    lake_input = _read(spark, source, input_path, new, result, dict(options or {}))
    return compact_input(spark, lake_input, lake, new, manifest, progress, result)


def _read(
    spark: SparkSession,
    source: str,
    input_path: Path | None,
    new: Sequence[InputFile],
    result: CompactResult,
    options: dict[str, str],
) -> DataFrame:
    """The lake input (records and bad input, `read_lake_input`) of the new input: the whole
    input path when everything is new, else each new archive file / each segment partition
    directory with a new or grown file (transactions span a partition's segment files, so a
    directory is read whole)."""
    from offsetwatch.spark_jobs.reader import read_lake_input

    if source not in FILE_SOURCES:
        where = None if input_path is None else str(input_path)
        units: Sequence[str | None] = [where]
    elif len(new) == result.input_files:
        units = [str(input_path)]
    elif source == "segments":
        units = sorted({str(Path(f.path).parent) for f in new})
    else:
        units = [f.path for f in new]
    if source == "archive":  # one read of every file: one scan, one Spark partition per file
        return read_lake_input(spark, source, [u for u in units if u], **options)
    frames = [read_lake_input(spark, source, u, **options) for u in units]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _size(files: Sequence[InputFile]) -> str:
    total = float(sum(f.size for f in files))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if total < 1024 or unit == "GiB":
            return f"{total:.0f} {unit}" if unit == "B" else f"{total:.1f} {unit}"
        total /= 1024
    raise AssertionError("unreachable")


def without_lake_rows(spark: SparkSession, lake: Lake, table: str, rows: DataFrame) -> DataFrame:
    """`rows` minus those whose dedupe key is already in the lake (same date partitions)."""
    if not lake.has_table(table):
        return rows
    keys = [*DEDUPE_KEYS[table], "date"]
    dates = [r["date"] for r in rows.select("date").distinct().collect()]
    if not dates:
        return rows
    existing = (
        spark.read.parquet(str(lake.table(table))).where(F.col("date").isin(dates)).select(*keys)
    )
    return rows.join(existing, keys, "left_anti")


def _stage(run: Run, table: str, rows: DataFrame) -> int:
    target = run.staged_table(table)
    rows.write.mode("overwrite").partitionBy("date").parquet(str(target))
    return _count_staged(rows.sparkSession, target)


def _count_staged(spark: SparkSession, target: Path) -> int:
    if not any(target.rglob("*.parquet")):
        return 0
    return spark.read.parquet(str(target)).count()


def compact_records(
    spark: SparkSession,
    records: DataFrame,
    lake: Lake,
    new_files: Sequence[InputFile],
    manifest: Manifest,
    progress: Progress = stderr_progress,
    result: CompactResult | None = None,
    quarantine: DataFrame | None = None,
) -> CompactResult:
    """Flatten, dedupe, stage and commit `records` (canonical rows read from `new_files`)
    and `quarantine` (their bad input, QUARANTINE_SCHEMA rows)."""
    from offsetwatch.spark_jobs.reader import lake_input

    return compact_input(
        spark, lake_input(records, quarantine), lake, new_files, manifest, progress, result
    )


def compact_input(
    spark: SparkSession,
    lake_input: DataFrame,
    lake: Lake,
    new_files: Sequence[InputFile],
    manifest: Manifest,
    progress: Progress = stderr_progress,
    result: CompactResult | None = None,
) -> CompactResult:
    """Flatten, dedupe, stage and commit `lake_input` (`read_lake_input` rows read from
    `new_files`: records, and bad input with `bad` set)."""
    result = result or CompactResult(new_files=len(new_files))
    run = lake.new_run()
    try:
        staged = _stage_input(spark, run, lake_input, result, progress)
        records = staged.where(F.col(BAD_COLUMN).isNull()).drop(BAD_COLUMN)
        tables = {
            ls.COMMITS: flatten_commits(records),
            ls.LOG_ENDS: flatten_log_ends(records).dropDuplicates(list(DEDUPE_KEYS[ls.LOG_ENDS])),
        }
        for table, rows in tables.items():
            started = time.monotonic()
            deduped = without_lake_rows(spark, lake, table, rows)
            result.rows[table] = _stage(run, table, deduped.select(*_columns(table)))
            result.stages[table] = time.monotonic() - started
            progress(f"{table}: {result.rows[table]:,} new rows in {result.stages[table]:.1f} s")
        started = time.monotonic()
        events = _stage_group_events(spark, records, lake, manifest, run)
        result.rows[ls.GROUP_EVENTS] = events
        result.stages[ls.GROUP_EVENTS] = time.monotonic() - started
        progress(
            f"{ls.GROUP_EVENTS}: {events:,} new rows in {result.stages[ls.GROUP_EVENTS]:.1f} s"
        )
        started = time.monotonic()
        shares = _stage_share_state(spark, records, lake, run)
        result.rows[ls.SHARE_STATE] = shares
        result.stages[ls.SHARE_STATE] = time.monotonic() - started
        progress(f"{ls.SHARE_STATE}: {shares:,} new rows in {result.stages[ls.SHARE_STATE]:.1f} s")
        started = time.monotonic()
        quarantine = staged.where(F.col(BAD_COLUMN).isNotNull()).select(f"{BAD_COLUMN}.*")
        result.quarantined = _stage_quarantine(run, quarantine)
        seconds = result.stages[ls.QUARANTINE] = time.monotonic() - started
        bad = sum(result.quarantined.values())
        progress(f"{ls.QUARANTINE}: {bad:,} bad input records in {seconds:.1f} s")
        for reason, count in sorted(result.quarantined.items()):
            progress(f"{ls.QUARANTINE}: {count:,} x {reason}")
        next_manifest = Manifest(
            files={**manifest.files, **{f.path: [f.size, f.mtime_ns] for f in new_files}},
            group_state=run.run_id
            if run.staged_table(GROUP_STATE).is_dir()
            else manifest.group_state,
            runs=manifest.runs + 1,
        )
    except BaseException:
        run.abandon()
        raise
    # past this point a failure is finished by the next run's recovery, not abandoned
    published = run.commit((*ls.LAKE_TABLES, ls.SHARE_STATE, ls.QUARANTINE), next_manifest)
    result.run_id = run.run_id
    progress(f"committed run {run.run_id}: {published} files published")
    return result


def _stage_input(
    spark: SparkSession, run: Run, lake_input: DataFrame, result: CompactResult, progress: Progress
) -> DataFrame:
    """The input read once, deduplicated, kept in the run's staging as Parquet: every table
    and the quarantine read it. Copies in an at-least-once archive are equal rows (one
    `__consumer_offsets` position is one record), so a hash `distinct` dedupes every table
    at once, and Parquet costs less to write than Spark's in-memory cache to build."""
    started = time.monotonic()
    target = run.staged_table(_INPUT)
    lake_input.distinct().write.parquet(str(target))
    staged = spark.read.schema(lake_input.schema).parquet(str(target))
    seconds = result.stages[_INPUT] = time.monotonic() - started
    progress(f"input read and deduplicated in {seconds:.1f} s")
    return staged


def _columns(table: str) -> list[str]:
    schemas = {
        ls.COMMITS: ls.COMMITS_SCHEMA,
        ls.GROUP_EVENTS: ls.GROUP_EVENTS_SCHEMA,
        ls.LOG_ENDS: ls.LOG_ENDS_SCHEMA,
        ls.SHARE_STATE: ls.SHARE_STATE_SCHEMA,
    }
    return schemas[table].fieldNames()


def _stage_group_events(
    spark: SparkSession, records: DataFrame, lake: Lake, manifest: Manifest, run: Run
) -> int:
    group_rows = group_records(records).dropDuplicates(["partition", "offset"])
    state_path = lake.group_state_path(manifest)
    prior = spark.read.parquet(str(state_path)) if state_path is not None else None
    combined = derive_group_events(spark, group_rows, prior).persist()
    try:
        events, states = split_events(combined)
        written = _stage(run, ls.GROUP_EVENTS, events.select(*_columns(ls.GROUP_EVENTS)))
        if states.limit(1).count():
            states.coalesce(1).write.mode("overwrite").parquet(str(run.staged_table(GROUP_STATE)))
        return written
    finally:
        combined.unpersist()


def _stage_share_state(spark: SparkSession, records: DataFrame, lake: Lake, run: Run) -> int:
    """The share-state rows of the run's `__share_group_state` records, each share partition
    continuing from its last row in the lake (nothing is read or written without such
    records: a consumer-groups-only history costs one empty filter)."""
    shares = share_state_records(records)
    if not shares.limit(1).count():
        return 0
    prior = None
    if lake.has_table(ls.SHARE_STATE):
        prior = prior_state(spark, str(lake.table(ls.SHARE_STATE)))
    names = run_topic_names(records)
    if prior is not None:  # names an earlier run learnt stay known
        for row in prior.where(F.col("topic").isNotNull()).select("topic_id", "topic").collect():
            names.setdefault(row["topic_id"], row["topic"])
    rows = derive_share_state(spark, shares, prior, names)
    deduped = without_lake_rows(spark, lake, ls.SHARE_STATE, rows)
    return _stage(run, ls.SHARE_STATE, deduped.select(*_columns(ls.SHARE_STATE)))


def _stage_quarantine(run: Run, quarantine: DataFrame) -> dict[str, int]:
    target = run.staged_table(ls.QUARANTINE)
    quarantine.select(*ls.QUARANTINE_SCHEMA.fieldNames()).write.mode("overwrite").parquet(
        str(target)
    )
    if not any(target.rglob("*.parquet")):
        return {}
    staged = quarantine.sparkSession.read.parquet(str(target))
    return {r["reason"]: int(r["count"]) for r in staged.groupBy("reason").count().collect()}
