"""`offsetwatch spark analyze`: help and usage errors (one line, exit 2) before any Spark starts.
A run over a lake: tests/spark_jobs/analytics/test_analyze_cmd.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.cli import main


def test_help_teaches_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "analyze", "--help"]) == 0
    out = capsys.readouterr().out
    assert "offsetwatch spark analyze --lake /data/lake --since 24h" in out
    assert "--lag-slo" in out and "--storm" in out


@pytest.mark.parametrize("since", ["24h", "24H", "24 h", "PT24H", "2026-11-24T08:00:00Z"])
def test_since_takes_every_spelling_of_the_one_time_parser(
    since: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # accepted: the run goes on to the lake (empty here), as `spark report --since` does
    argv = ["spark", "analyze", "--lake", str(tmp_path), "--since", since, "--storm", "5/10M"]
    assert main(argv) == 2
    assert "no commits table there" in capsys.readouterr().err


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
