"""The offsets a group had committed at an instant: the restore path of the offset tools.

Kafka semantics, applied to the history up to T (record timestamps, log order):
* the last record of each (topic, partition) wins: a commit sets the offset, a tombstone
  (offset deletion, topic deletion, expiry by the broker) removes it;
* a commit with an explicit expiry time (OffsetCommitValue v1) is gone once that time passed,
  even if the broker's tombstone came later;
* a group deletion (`group_deleted` in group_events) removes everything committed before it;
  a later commit starts a new group of the same name;
* aborted transactional commits and commits of transactions still open never count (sources
  that know the outcome say so in `txn`: segments, and the files `decode --input segments`
  writes, whose records carry it as `transaction`; the exporter's archive holds only
  committed ones, as it reads with read_committed). The rule is `contract.NOT_COUNTED`.

`offsets_at_from_path` reads the lake or raw canonical JSON lines (an archive directory, the
output of `offsetwatch decode --format json`); `offsets_at` is the DataFrame function.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from offsetwatch.decoder import contract
from offsetwatch.instants import InstantRangeError, epoch_or_iso_ms
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.lake_store import BOOKKEEPING
from offsetwatch.spark_jobs.schema import TXN_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class UnknownGroupError(LookupError):
    """The history holds no record of the group at all."""

    def __init__(self, group: str, where: str) -> None:
        super().__init__(
            f"group {group!r} does not appear in {where}: check the name (exact, "
            "case-sensitive) and that the history covers the group"
        )
        self.group = group


def parse_time(text: str) -> int:
    """Epoch milliseconds of `text`: epoch ms digits, or ISO 8601 (no zone means UTC)."""
    try:
        return epoch_or_iso_ms(text)
    except InstantRangeError as error:
        raise ValueError(f"time {error}") from None
    except ValueError:
        raise ValueError(
            f"time {text!r}: give ISO 8601 (2026-11-21T08:00:00Z) or epoch milliseconds"
        ) from None


def committed_at(commits: DataFrame, group_events: DataFrame | None, time_ms: int) -> DataFrame:
    """`group, topic, partition, offset` rows of every group at `time_ms`, from lake frames."""
    valid = commits.where(
        (F.col("record_ts") <= time_ms) & ~F.col(TXN_COLUMN).isin(*contract.NOT_COUNTED)
    )
    position = F.struct("source_partition", "source_offset")
    latest = valid.groupBy("group", "topic", "partition").agg(
        F.max(F.struct(position.alias("pos"), "kind", "offset", "expire_ts")).alias("last")
    )
    alive = latest.where(
        (F.col("last.kind") == "commit")
        & (F.col("last.expire_ts").isNull() | (F.col("last.expire_ts") > time_ms))
    )
    if group_events is not None:
        deletions = (
            group_events.where((F.col("event") == "group_deleted") & (F.col("ts") <= time_ms))
            .groupBy("group")
            .agg(F.max(F.struct("source_partition", "source_offset")).alias("deleted"))
        )
        alive = alive.join(deletions, "group", "left").where(
            F.col("deleted").isNull() | (F.col("last.pos") > F.col("deleted"))
        )
    return alive.select("group", "topic", "partition", F.col("last.offset").alias("offset"))


def offsets_at(
    commits: DataFrame, group_events: DataFrame | None, group: str, time_ms: int
) -> DataFrame:
    """`topic, partition, offset` rows of `group` at `time_ms` from lake-table frames."""
    mine = F.col("group") == group
    events = None if group_events is None else group_events.where(mine)
    return (
        committed_at(commits.where(mine), events, time_ms)
        .drop("group")
        .orderBy("topic", "partition")
    )


def is_lake(path: Path) -> bool:
    return (path / BOOKKEEPING).is_dir() or (path / ls.COMMITS).is_dir()


def _lake_frames(
    spark: SparkSession, lake: Path, group: str, time_ms: int
) -> tuple[DataFrame, DataFrame | None]:
    from offsetwatch.spark_jobs.lake_flatten import utc_date

    until = utc_date(F.lit(time_ms))
    commits_dir = lake / ls.COMMITS
    commits = (
        spark.read.parquet(str(commits_dir))
        if commits_dir.is_dir()
        else spark.createDataFrame([], ls.COMMITS_SCHEMA)
    )
    events_dir = lake / ls.GROUP_EVENTS
    events = spark.read.parquet(str(events_dir)) if events_dir.is_dir() else None
    # the whole history of the group says whether it exists at all; T prunes the rest
    known = commits.where(F.col("group") == group).limit(1).count() > 0 or (
        events is not None and events.where(F.col("group") == group).limit(1).count() > 0
    )
    if not known:
        raise UnknownGroupError(group, f"the lake {lake}")
    commits = commits.where(F.col("date") <= until)
    if events is not None:
        events = events.where(F.col("date") <= until)
    return commits, events


def _raw_frames(spark: SparkSession, path: Path, group: str) -> tuple[DataFrame, DataFrame | None]:
    from offsetwatch.spark_jobs.lake_flatten import (
        derive_group_events,
        flatten_commits,
        group_records,
        split_events,
    )
    from offsetwatch.spark_jobs.reader import read_json_lines, read_records
    from offsetwatch.spark_jobs.sources.archive import is_avro, is_jsonl

    if path.is_file() and not (is_jsonl(path) or is_avro(path)):
        # e.g. `offsetwatch decode --format json > history.json`: JSON lines by another name
        records = read_json_lines(spark, [str(path)])
    else:
        records = read_records(spark, "archive", str(path))
    records = records.where(F.col("group") == group)
    commits = flatten_commits(records).cache()
    events, _ = split_events(derive_group_events(spark, group_records(records), None))
    events = events.cache()
    if commits.limit(1).count() == 0 and events.limit(1).count() == 0:
        raise UnknownGroupError(group, str(path))
    return commits, events


def offsets_at_from_path(
    path: str | Path, group: str, time_ms: int, spark: SparkSession | None = None
) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} that `group` had committed at `time_ms` (epoch ms).

    `path`: the lake (`offsetwatch spark compact --lake`), an archive directory or file, or
    canonical JSON lines (`offsetwatch decode --format json`). Raises UnknownGroupError when
    the history never mentions the group, FileNotFoundError when `path` does not exist.
    Without `spark`, a local session is started.
    """
    where = Path(path)
    if not where.exists():
        raise FileNotFoundError(f"{where} does not exist")
    if spark is None:
        from offsetwatch.spark_jobs.session import SparkSettings, get_session

        spark = get_session(SparkSettings(app_name="offsetwatch-offsets-at", shuffle_partitions=4))
    if is_lake(where):
        commits, events = _lake_frames(spark, where, group, time_ms)
    else:
        commits, events = _raw_frames(spark, where, group)
    rows = offsets_at(commits, events, group, time_ms).collect()
    return {(r["topic"], int(r["partition"])): int(r["offset"]) for r in rows}
