"""`offsetwatch spark analyze`: help and usage errors (one line, exit 2) before any Spark starts.
A run over a lake: tests/spark_jobs/analytics/test_analyze_cmd.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.cli import main
from offsetwatch.commands.spark.analyze import parse_instant


def test_help_teaches_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "analyze", "--help"]) == 0
    out = capsys.readouterr().out
    assert "offsetwatch spark analyze --lake /data/lake --since 24h" in out
    assert "--lag-slo" in out and "--storm" in out


def test_parse_instant() -> None:
    now = 1_800_000_000_000
    assert parse_instant("1767225600000", now) == 1_767_225_600_000
    assert parse_instant("2026-01-01T00:00:00Z", now) == 1_767_225_600_000
    assert parse_instant("2026-01-01T01:00:00+01:00", now) == 1_767_225_600_000
    assert parse_instant("2026-01-01T00:00:00", now) == 1_767_225_600_000
    assert parse_instant("24h", now) == now - 86_400_000
    assert parse_instant("90m", now) == now - 5_400_000
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_instant("yesterday", now)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lake", "{tmp}"], "no commits table there"),
        (["--lake", "{tmp}", "--since", "yesterday"], "--since/--until"),
        (["--lake", "{tmp}", "--format", "parquet"], "add --out DIR"),
        (["--lake", "{tmp}", "--storm", "5"], "expected N/SPAN"),
    ],
)
def test_usage_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["spark", "analyze", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
