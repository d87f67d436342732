"""report: a summary naming the group's episodes and a PNG chart, from a small lake."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from offsetwatch.cli import main
from offsetwatch.spark_jobs.compact import compact_records
from offsetwatch.spark_jobs.lake_store import Lake
from offsetwatch.spark_jobs.offsets_at import UnknownGroupError
from offsetwatch.spark_jobs.report import build_report
from tests.spark_jobs.lake_records import classic, commit, frame, log_end

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

T0 = 1_795_300_000_000
MINUTE = 60_000


def _history() -> list[dict[str, object]]:
    """g consumes orders-0 steadily for 20 minutes, then is reset 500 messages back."""
    records: list[dict[str, object]] = [classic("g", 1, ["a"], T0, 0)]
    for minute in range(21):
        ts = T0 + minute * MINUTE
        offset = 100 * minute if minute < 20 else 1_500
        records.append(commit("g", "orders", 0, offset, ts + 1, minute + 1))
        records.append(log_end("orders", 0, 100 * minute + 50, ts))
    return records


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = Lake(tmp_path_factory.mktemp("report") / "lake")
    compact_records(spark, frame(spark, _history()), where, [], where.manifest(), lambda _: None)
    return where.root


def test_summary_and_png(spark: SparkSession, lake: Path, tmp_path: Path) -> None:
    report = build_report(spark, lake, "g", T0, tmp_path / "out")
    assert report.summary.startswith("group g:")
    assert "rewind" in [e[0] for e in report.episodes]
    assert "rewind orders-0" in report.summary and "lag (messages)" in report.summary
    assert report.chart is not None
    assert report.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_group_is_named(spark: SparkSession, lake: Path) -> None:
    with pytest.raises(UnknownGroupError, match="'nobody'"):
        build_report(spark, lake, "nobody", T0)


def test_cli_without_a_lake_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["spark", "report", "--lake", str(tmp_path), "--group", "g"]) == 2
    assert "offsetwatch spark compact" in capsys.readouterr().err
