"""`offsetwatch spark package --out DIR`: one zip that Spark executors import from, written
so that a failure never leaves a cut zip under its final name."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from offsetwatch.cli import main
from offsetwatch.spark_jobs.session import PACKAGE_ZIP
from tests.full_disk import fill, small_disk

__all__ = ["small_disk"]  # the fixture


def test_the_zip_holds_the_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "package", "--out", str(tmp_path)]) == 0
    target = tmp_path / PACKAGE_ZIP
    assert capsys.readouterr().out.strip() == str(target)
    names = zipfile.ZipFile(target).namelist()
    assert "offsetwatch/decoder/__init__.py" in names and "offsetwatch/cli.py" in names
    assert os.listdir(tmp_path) == [PACKAGE_ZIP]  # no temporary file left


def test_a_full_disk_leaves_no_cut_zip_and_names_the_file(
    small_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filler = fill(small_disk, leave=16 * 1024)
    assert main(["spark", "package", "--out", str(small_disk)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"cannot write {small_disk / PACKAGE_ZIP}" in err and "No space left" in err
    assert sorted(os.listdir(small_disk)) == [filler.name]  # neither the zip nor a temp file
