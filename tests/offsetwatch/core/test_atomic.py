"""atomic_write: the target holds the old content or the new, and no temporary file stays."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

import offsetwatch.core.atomic as atomic_module
from offsetwatch.core.atomic import atomic_write, writable_target, write_text_atomic


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


def _fifo_reader(fifo: Path, got: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as stream:
            got.append(stream.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_what_the_name_already_is_decides_how_it_is_written(tmp_path: Path) -> None:
    """A symlink keeps pointing where it did; a FIFO (like /dev/null, /dev/stdout) is written
    in place, never renamed over; a directory, a symlink loop and a missing directory are
    refused before anything is written, naming the path."""
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _fifo_reader(fifo, got)
    with atomic_write(fifo) as out:
        out.write(b"streamed")
    reader.join(10)
    assert got == [b"streamed"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)

    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    (tmp_path / "adir").mkdir()
    for bad in (loop, tmp_path / "adir", tmp_path / "no-such-dir" / "x.json"):
        with pytest.raises(OSError) as raised:
            write_text_atomic(bad, "x")
        assert raised.value.filename == str(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "adir",
        "fifo",
        "link.json",
        "loop",
        "real.json",
    ]


def test_writable_target_classifies_without_writing(tmp_path: Path) -> None:
    assert writable_target(tmp_path / "new.json") == (tmp_path / "new.json", False)
    os.mkfifo(tmp_path / "fifo")
    assert writable_target(tmp_path / "fifo") == (tmp_path / "fifo", True)
    assert writable_target("/dev/null") == (Path("/dev/null"), True)
    (tmp_path / "dangling").symlink_to("later.json")
    assert writable_target(tmp_path / "dangling") == (tmp_path / "later.json", False)
