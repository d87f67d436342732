"""atomic_write: the target holds the old content or the new, and no temporary file stays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import offsetwatch.core.atomic as atomic_module
from offsetwatch.core.atomic import atomic_write, write_text_atomic


def test_text_and_bytes_replace_the_target(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_text_atomic(target, "old ü")
    with atomic_write(target) as out:
        out.write(b"\x00new")
    assert target.read_bytes() == b"\x00new"
    write_text_atomic(target, "ü")
    assert target.read_text(encoding="utf-8") == "ü"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_an_error_in_the_block_leaves_the_old_content_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_text_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_write(target, "w") as out:
        out.write("half")
        raise RuntimeError("writer died")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_fsync_file_then_rename_then_fsync_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync file")
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append(f"replace {Path(src).name} -> {Path(dst).name}")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(atomic_module, "fsync_directory", lambda d: calls.append(f"fsync {d}"))
    write_text_atomic(tmp_path / "c", "x")
    assert calls[0] == "fsync file"
    assert calls[1].startswith("replace .c.") and calls[1].endswith(".tmp -> c")
    assert calls[2:] == [f"fsync {tmp_path}"]


def test_temps_of_a_killed_writer_are_removed_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "c"
    leftover = tmp_path / ".c.4242.123456789.tmp"
    leftover.write_text("half", encoding="utf-8")
    other = tmp_path / ".d.4242.123456789.tmp"  # another target's: not ours to remove
    other.write_text("half", encoding="utf-8")
    write_text_atomic(target, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".d.4242.123456789.tmp", "c"]
