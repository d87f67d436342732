"""`offsetwatch spark analyze` over a lake written as compact writes it (Parquet by date)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from offsetwatch.cli import main
from tests.spark_jobs.datasets import ScenarioBuilder, at, frames

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_analyze_a_lake(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ScenarioBuilder(end_ms=at(40))
    b.produce("orders", 0, [(b.start_ms, 10.0)])
    b.join("billing", b.start_ms).follow("billing", "orders", 0, b.start_ms, at(20))
    tables = frames(spark, b.build())
    lake = tmp_path / "lake"
    for name, frame in tables._asdict().items():
        frame.write.partitionBy("date").parquet(str(lake / name))

    assert main(["spark", "analyze", "--lake", str(lake), "--format", "json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    episodes = [line for line in lines if line["table"] == "episodes"]
    # last commit at 19:55: STOP once that is before the 10-minute window (30:00)
    assert [(e["kind"], e["group"], e["start_ms"], e["end_ms"]) for e in episodes] == [
        ("lag_slo", "billing", at(25), None),
        ("stop", "billing", at(30), None),
    ]
    (stats,) = [line for line in lines if line["table"] == "group_stats"]
    assert stats["group"] == "billing" and stats["stop_ms"] == 11 * 60_000
    assert any(line["table"] == "windows" for line in lines)
