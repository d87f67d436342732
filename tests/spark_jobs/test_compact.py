"""compact: archive -> lake, incremental and idempotent, crash-safe, deduplicated, quarantine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.cli import main
from offsetwatch.decoder.canonical import dumps
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.compact import compact
from offsetwatch.spark_jobs.lake_store import BOOKKEEPING, Lake, Run
from tests.spark_jobs.lake_records import classic, commit, delete, group_tombstone, log_end

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

DAY1 = 1_795_300_000_000  # 2026-11-21
DAY2 = DAY1 + 86_400_000

PART1 = [
    classic("g", 1, ["a"], DAY1, 0),
    commit("g", "orders", 0, 10, DAY1 + 1, 1),
    commit("g", "orders", 1, 20, DAY1 + 2, 2),
    log_end("orders", 0, 100, DAY1 + 3),
]
PART2 = [
    classic("g", 2, ["a", "b"], DAY1 + 10, 3),
    commit("g", "orders", 0, 30, DAY1 + 11, 4),
    delete("g", "orders", 1, DAY2, 5),
    log_end("orders", 0, 120, DAY2 + 1),
]
PART3 = [
    *PART2[:2],  # the archive is at-least-once: a restart archives records again
    commit("g", "orders", 0, 40, DAY2 + 5, 6),
    group_tombstone("g", DAY2 + 6, 7),
    log_end("orders", 0, 130, DAY2 + 7),
]


def _write(path: Path, records: list[dict[str, Any]], extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps(r) + "\n" for r in records) + extra, encoding="utf-8")
    return path


def _quiet(_: str) -> None:
    pass


def _tables(spark: SparkSession, lake: Path) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in (*ls.LAKE_TABLES, ls.QUARANTINE):
        where = lake / table
        rows = spark.read.parquet(str(where)).collect() if where.is_dir() else []
        out[table] = sorted((tuple(r) for r in rows), key=repr)
    return out


def _files(lake: Path) -> list[str]:
    return sorted(str(p.relative_to(lake)) for p in lake.rglob("*.parquet"))


def test_incremental_runs_give_the_same_lake_as_one_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    _write(archive / "date=2026-11-21" / "offsetwatch-1-000000.jsonl", PART1)
    _write(archive / "date=2026-11-21" / "offsetwatch-2-000001.jsonl", PART2)
    lake = tmp_path / "lake"
    first = compact(spark, "archive", lake, archive, progress=_quiet)
    assert (first.new_files, first.rows[ls.COMMITS], first.rows[ls.LOG_ENDS]) == (2, 4, 2)
    files = _files(lake)
    again = compact(spark, "archive", lake, archive, progress=_quiet)
    assert (again.run_id, again.new_files, _files(lake)) == (None, 0, files)

    _write(archive / "date=2026-11-22" / "offsetwatch-3-000002.jsonl", PART3)
    third = compact(spark, "archive", lake, archive, progress=_quiet)
    assert third.new_files == 1
    assert (third.rows[ls.COMMITS], third.rows[ls.LOG_ENDS]) == (1, 1)  # duplicates dropped

    whole = tmp_path / "whole"
    compact(spark, "archive", whole, archive, progress=_quiet)
    assert _tables(spark, lake) == _tables(spark, whole)
    events = [r[2] for r in sorted(_tables(spark, lake)[ls.GROUP_EVENTS], key=lambda r: r[3])]
    assert events.count("generation") == 2 and events[-1] == "group_deleted"


def test_duplicates_within_a_run_are_dropped(spark: SparkSession, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    _write(archive / "a.jsonl", PART1)
    _write(archive / "b.jsonl", PART1 + PART2)
    result = compact(spark, "archive", tmp_path / "lake", archive, progress=_quiet)
    assert (result.rows[ls.COMMITS], result.rows[ls.LOG_ENDS]) == (4, 2)
    commits = _tables(spark, tmp_path / "lake")[ls.COMMITS]
    assert len({(r[-3], r[-2]) for r in commits}) == len(commits) == 4


def test_bad_lines_are_quarantined_and_the_run_goes_on(spark: SparkSession, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    _write(archive / "a.jsonl", PART1, extra='{"type": "offset_commit", "partit\nnot json\n')
    result = compact(spark, "archive", tmp_path / "lake", archive, progress=_quiet)
    assert result.rows[ls.COMMITS] == 2
    assert sum(result.quarantined.values()) == 2
    rows = _tables(spark, tmp_path / "lake")[ls.QUARANTINE]
    assert {Path(r[1]).name for r in rows} == {"a.jsonl"}
    assert all(r[2] is not None for r in rows)


def test_crash_after_the_commit_point_is_finished_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "archive"
    _write(archive / "a.jsonl", PART1 + PART2)
    lake = tmp_path / "lake"

    def crash(self: Run, record: object) -> None:
        raise KeyboardInterrupt("killed after the commit record")

    with monkeypatch.context() as patch:
        patch.setattr(Run, "publish", crash)
        with pytest.raises(KeyboardInterrupt):
            compact(spark, "archive", lake, archive, progress=_quiet)
    assert list((lake / BOOKKEEPING).glob("commit-*.json"))
    result = compact(spark, "archive", lake, archive, progress=_quiet)
    assert result.recovered and result.new_files == 0
    whole = tmp_path / "whole"
    compact(spark, "archive", whole, archive, progress=_quiet)
    assert _tables(spark, lake) == _tables(spark, whole)


def test_crash_before_the_commit_point_leaves_the_lake_as_it_was(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "archive"
    _write(archive / "a.jsonl", PART1)
    lake = tmp_path / "lake"
    compact(spark, "archive", lake, archive, progress=_quiet)
    before = _tables(spark, lake)
    _write(archive / "b.jsonl", PART2)

    def crash(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt("killed while staging")

    with monkeypatch.context() as patch:
        patch.setattr(Run, "commit", crash)
        with pytest.raises(KeyboardInterrupt):
            compact(spark, "archive", lake, archive, progress=_quiet)
    assert _tables(spark, lake) == before
    assert Lake(lake).manifest().runs == 1
    result = compact(spark, "archive", lake, archive, progress=_quiet)
    assert result.new_files == 1 and result.rows[ls.COMMITS] == 2


def test_cli_missing_or_empty_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = str(tmp_path / "lake")
    missing = ["spark", "compact", "--input", str(tmp_path / "nope"), "--lake", lake]
    assert main(missing) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("offsetwatch: error:") and "nope" in err and "\n" not in err
    (tmp_path / "empty").mkdir()
    assert main(["spark", "compact", "--input", str(tmp_path / "empty"), "--lake", lake]) == 2
    err = capsys.readouterr().err.strip()
    assert "no archive files" in err and "\n" not in err
