"""A small real filesystem that fills up: a tmpfs mounted for one test.

Mounting needs root (CAP_SYS_ADMIN): elsewhere a test using `small_disk` skips with the
reason, and fails under CI=true (CI runs as root)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

DISK_BYTES = 1 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    with tmpfs(mount_point, DISK_BYTES):
        yield mount_point


@contextlib.contextmanager
def tmpfs(mount_point: Path, size: int) -> Iterator[Path]:
    """A tmpfs of `size` bytes on the directory `mount_point` (one fixture may share it
    between tests: mounting is the slow part)."""
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        message = f"cannot mount a tmpfs (needs root): {done.stderr.strip() or done.returncode}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file taking all the space but `leave` bytes (tmpfs counts whole pages)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as error:
            assert error.errno == errno.ENOSPC
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))
    return filler
