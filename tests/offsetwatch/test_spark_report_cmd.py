"""`offsetwatch spark report`: option errors before any Spark starts (a report over a lake:
tests/spark_jobs/test_report.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.cli import main


@pytest.mark.parametrize("since", ["24h", "24H", "24 h", "PT24H", "2026-11-24T08:00:00Z"])
def test_since_takes_every_spelling_of_the_one_time_parser(
    since: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # accepted: the run goes on to the lake (empty here), as `spark analyze --since` does
    argv = ["spark", "report", "--lake", str(tmp_path), "--group", "g", "--since", since]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds no lake" in err and "--since" not in err


def test_a_bad_since_names_the_option_and_every_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["spark", "report", "--lake", str(tmp_path), "--group", "g", "--since", "yesterday"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("offsetwatch: error: --since: 'yesterday'") and "24h" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("command", ["report", "analyze"])
def test_an_out_that_cannot_take_the_result_is_refused_before_the_job(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file given as --out was found only when the job was done, and its result lost."""
    lake = tmp_path / "lake"
    (lake / "commits").mkdir(parents=True)
    (lake / "commits" / "part-0.parquet").touch()  # enough for the lake check: no job runs
    out = tmp_path / "report.png"
    out.touch()
    argv = ["spark", command, "--lake", str(lake), "--out", str(out)]
    assert main([*argv, "--group", "g"] if command == "report" else argv) == 2
    err = capsys.readouterr().err
    assert err == (
        f"offsetwatch: error: --out {out} is a file: give a directory (it is created if missing)\n"
    )
