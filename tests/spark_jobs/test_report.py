"""report: a summary naming the group's episodes and a PNG chart, from a small lake."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

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


#: the rewind's commit; the lag SLO breach is seen at the next tick (whole epoch minutes)
REWIND_MS = T0 + 20 * MINUTE + 1
NEXT_TICK_MS = 1_795_301_220_000
SUMMARY = """\
group g: 2026-11-21 22:26:40 .. 2026-11-21 22:46:40 UTC
rebalances: 1 (storms: 0), members joined 1, left 0
lag (messages) p50/p90/p99: 50 / 50 / 550; lag seconds p50/p90/p99: 50 / 50 / 350
episodes: 1 lag_slo, 1 rewind
  rewind orders-0: 2026-11-21 22:46:40 .. ongoing, 400 offsets
  lag_slo orders-0: 2026-11-21 22:47:00 .. ongoing, 350 seconds"""
#: matplotlib's first colours (log end, committed offset) and the lag line's
LINE_COLOURS = {"log end": "#1f77b4", "committed offset": "#ff7f0e", "lag seconds": "#d62728"}


def _pixels_of(image: Any, colour: str) -> int:
    rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    return int((abs(image[:, :, :3] - rgb) < 0.02).all(axis=2).sum())


def test_summary_and_png(spark: SparkSession, lake: Path, tmp_path: Path) -> None:
    """Every line of the summary: the one generation (a rebalance with one join), lag 50
    every minute and 550 after the rewind of 400, and the two episodes that follow it."""
    import matplotlib.image

    report = build_report(spark, lake, "g", T0, tmp_path / "out")
    assert report.summary == SUMMARY
    assert [e[:3] for e in report.episodes] == [
        ("rewind", REWIND_MS, None),
        ("lag_slo", NEXT_TICK_MS, None),
    ]
    assert report.chart == tmp_path / "out" / "g.png"
    assert report.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(report.chart)
    assert image.shape[:2] == (600, 1000)
    drawn = {name: _pixels_of(image, colour) for name, colour in LINE_COLOURS.items()}
    assert all(n > 200 for n in drawn.values()), drawn


def test_unknown_group_is_named(spark: SparkSession, lake: Path) -> None:
    with pytest.raises(UnknownGroupError, match="'nobody'"):
        build_report(spark, lake, "nobody", T0)


def test_cli_without_a_lake_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["spark", "report", "--lake", str(tmp_path), "--group", "g"]) == 2
    assert "offsetwatch spark compact" in capsys.readouterr().err
