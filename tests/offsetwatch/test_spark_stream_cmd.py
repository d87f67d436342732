"""`offsetwatch spark stream`: help and usage errors (one line, exit 2) before any Spark starts.
The stream itself is tested in tests/spark_jobs/test_streaming.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.cli import main


def test_help_teaches_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "stream", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--alertmanager" in out and "--checkpoint" in out
    assert "offsetwatch spark stream --archive" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--checkpoint", "c"], "give exactly one input"),
        (["--archive", "a", "--kafka", "b:9092", "--checkpoint", "c"], "give exactly one input"),
        (["--archive", "{tmp}"], "--checkpoint DIR is required"),
        (["--archive", "{tmp}/missing", "--checkpoint", "c"], "--archive {tmp}/missing does not"),
        (["--archive", "{tmp}", "--checkpoint", "c", "--trigger-s", "0"], "--trigger-s: 0 is out"),
    ],
)
def test_usage_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    message = message.replace("{tmp}", str(tmp_path))
    assert main(["spark", "stream", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
