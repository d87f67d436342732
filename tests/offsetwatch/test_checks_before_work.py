"""Outputs that overlap their inputs are refused before any work (issue 31 item 4).

A lake inside the archive it is compacted from, alerts written into the archive a stream
reads, an analysis whose tables would replace the lake, a decode written over its input:
each is one line naming both options, exit 2, with nothing started (the harness stops any
work: no Spark session, no connection) and nothing created or changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.cli import main
from tests.offsetwatch.test_misuse_paths import ReachedWork, _stop_at_work


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *names: str) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("offsetwatch: error: "), err
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    directory = tmp_path / "archive"
    directory.mkdir()
    (directory / "records-0.jsonl").write_text("{}\n")
    return directory


@pytest.mark.parametrize("where", ["inside", "same", "around"])
def test_compact_refuses_a_lake_that_overlaps_its_input(
    where: str,
    archive: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake = {"inside": archive / "lake", "same": archive, "around": tmp_path}[where]
    before = sorted(p.name for p in archive.iterdir())
    with _stop_at_work(monkeypatch):
        _refused(
            ["spark", "compact", "--input", str(archive), "--lake", str(lake)],
            capsys,
            "--lake",
            "--input",
        )
    assert sorted(p.name for p in archive.iterdir()) == before  # no lake made in it


@pytest.mark.parametrize("flag", ["--checkpoint", "--alerts-dir"])
def test_stream_refuses_outputs_inside_the_archive_it_reads(
    flag: str,
    archive: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outputs = {"--checkpoint": tmp_path / "checkpoint", "--alerts-dir": tmp_path / "alerts"}
    outputs[flag] = archive / "out"
    argv = ["spark", "stream", "--archive", str(archive)]
    for name, path in outputs.items():
        argv += [name, str(path)]
    with _stop_at_work(monkeypatch):
        _refused(argv, capsys, flag, "--archive")
    assert not (archive / "out").exists()


def _lake(path: Path) -> Path:
    (path / "commits").mkdir(parents=True)
    (path / "commits" / "part-0.parquet").write_bytes(b"PAR1")
    return path


@pytest.mark.parametrize(
    ("lake_at", "out_at"),
    [
        ("episodes", "."),  # --out/episodes is the lake: overwrite would delete it
        ("lake", "lake"),  # the lake's own directory
        ("lake", "lake/commits/x"),  # inside one of its tables
    ],
)
def test_analyze_refuses_an_out_that_would_replace_or_enter_the_lake(
    lake_at: str,
    out_at: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake = _lake(tmp_path / lake_at)
    out = tmp_path / out_at
    with _stop_at_work(monkeypatch):
        _refused(
            ["spark", "analyze", "--lake", str(lake), "--out", str(out)], capsys, "--out", "--lake"
        )
    assert sorted(p.name for p in lake.iterdir()) == ["commits"]


def test_analyze_takes_a_directory_of_its_own_in_the_lake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = _lake(tmp_path / "lake")
    for _ in range(2):  # the second run finds the directory the first made
        with _stop_at_work(monkeypatch), pytest.raises(ReachedWork):
            main(["spark", "analyze", "--lake", str(lake), "--out", str(lake / "analytics")])
        assert (lake / "analytics").is_dir()


@pytest.mark.parametrize("inside_dir", [False, True])
def test_decode_refuses_an_output_that_is_its_input(
    inside_dir: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"key": "0001", "value": null}\n')
    given = tmp_path if inside_dir else source
    output = tmp_path / "out.json" if inside_dir else source
    kind = "segments" if inside_dir else "hex-jsonl"
    _refused(
        ["decode", "--input", kind, str(given), "-o", str(output)],
        capsys,
        "--output",
        str(given),
    )
    assert source.read_text() == '{"key": "0001", "value": null}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
