"""`offsetwatch spark compact` refuses a lake whose manifest is damaged before Spark starts,
naming the file (it was a JSONDecodeError or KeyError traceback after the session started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.cli import main

DAMAGED = {
    "cut short": b'{\n "files": {\n  "/data/a.jsonl": [',
    "not an object": b"[1, 2]",
    "no files": b'{"version": 1, "runs": 3}',
    "files of the wrong shape": b'{"files": [1]}',
    "not UTF-8": b'{"files": {"\xff": []}}',
    "a directory": b"",
}


@pytest.mark.parametrize("damage", DAMAGED)
def test_a_damaged_manifest_is_one_line_naming_it(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "a.jsonl").write_text("{}\n")
    manifest = tmp_path / "lake" / "_offsetwatch" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    if damage == "a directory":
        manifest.mkdir()
    else:
        manifest.write_bytes(DAMAGED[damage])
    argv = ["spark", "compact", "--input", str(archive), "--lake", str(tmp_path / "lake")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(manifest) in err and "Traceback" not in err, err
