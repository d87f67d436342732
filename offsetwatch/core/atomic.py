"""Replacing a file so that a crash leaves the old content or the new, never a mix.

The content goes to a temporary file beside the target (the same file system, so the rename
is atomic), is fsynced, renamed over the target, and then the directory is fsynced so the
rename itself survives a power loss. Temporary names are hidden (`.NAME.PID.NS.tmp`): Spark,
Hive and Hadoop skip dot files, and a concurrent writer of the same target never shares one.

What the name already is decides how it is written (`writable_target`): a symlink is
followed (the link stays, its target gets the content), a device, FIFO or socket is written in
place (a rename would put a file where /dev/null was, as root), a directory is refused before
anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final, Literal, overload

_TMP_SUFFIX: Final = ".tmp"


def fsync_directory(directory: Path) -> None:
    """Persist a directory's entries (after os.replace); a no-op where directories cannot
    be opened (Windows)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def probe_directory(directory: Path) -> None:
    """Create `directory` when missing, then write a byte to a file in it and remove it: a
    real write, since access() says yes to root on a read-only filesystem, and an empty file
    takes no block, so only a byte finds a full disk before the work. Raises either step's
    OSError."""
    directory.mkdir(parents=True, exist_ok=True)
    # unbuffered, and removed before the error leaves: a buffered file that failed to
    # flush fails again on close, and its name stayed until the garbage collector came
    fd, name = tempfile.mkstemp(dir=directory, prefix=".offsetwatch-probe-")
    try:
        os.write(fd, b"\0")
    finally:
        os.close(fd)
        os.unlink(name)


def writable_target(target: str | os.PathLike[str]) -> tuple[Path, bool]:
    """The file to write for `target`, and whether to write it in place (not a regular file:
    /dev/null, /dev/stdout, a FIFO). Raises OSError naming `target` for a directory, a
    symlink loop or a directory that does not exist, before any work is done."""
    given = Path(target)
    try:
        mode = os.stat(given).st_mode  # through every symlink: /dev/stdout is the pipe
    except FileNotFoundError:
        # nothing there yet (or a dangling link, followed to the file it will create)
        resolved = Path(os.path.realpath(given))
        if not resolved.parent.is_dir():
            raise OSError(errno.ENOENT, "its directory does not exist", str(given)) from None
        return resolved, False
    except OSError as error:  # a symlink loop, a directory that may not be searched
        raise OSError(error.errno, error.strerror, str(given)) from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory: give a file name", str(given))
    if not stat.S_ISREG(mode):
        # written where it is: a realpath of /dev/stdout may be /proc/self/fd/pipe:[N]
        return given, True
    return Path(os.path.realpath(given)), False


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def _is_temp_of(candidate: Path, target: Path) -> bool:
    """Whether `candidate` is a temporary file `atomic_write` made for `target`."""
    return (
        candidate.parent == target.parent
        and candidate.name.startswith(_temp_prefix(target))
        and candidate.name.endswith(_TMP_SUFFIX)
    )


def _remove_stale_temps(target: Path, keep: Path) -> None:
    """Temporary files of `target` left by a writer that was killed mid-write."""
    try:
        leftovers = [p for p in target.parent.iterdir() if p != keep and _is_temp_of(p, target)]
    except OSError:
        return
    for leftover in leftovers:
        with contextlib.suppress(OSError):
            leftover.unlink()


@overload
def atomic_write(
    target: str | os.PathLike[str], mode: Literal["wb"] = "wb"
) -> contextlib.AbstractContextManager[IO[bytes]]: ...


@overload
def atomic_write(
    target: str | os.PathLike[str], mode: Literal["w"]
) -> contextlib.AbstractContextManager[IO[str]]: ...


def atomic_write(
    target: str | os.PathLike[str], mode: Literal["w", "wb"] = "wb"
) -> contextlib.AbstractContextManager[IO[Any]]:
    """`with atomic_write(path, "w") as out: out.write(...)`: `path` gets the new content when
    the block ends without an exception, and is left as it was (no temporary file either)
    when it raises. Text mode is UTF-8."""
    return _atomic_write(Path(target), mode)


@contextlib.contextmanager
def _atomic_write(given: Path, mode: Literal["w", "wb"]) -> Iterator[IO[bytes] | IO[str]]:
    target, in_place = writable_target(given)
    if in_place:
        with open(target, mode, encoding="utf-8") if mode == "w" else open(target, "wb") as stream:
            yield stream
            stream.flush()
        return
    temp = target.with_name(
        f"{_temp_prefix(target)}{os.getpid()}.{time.monotonic_ns()}{_TMP_SUFFIX}"
    )
    try:
        out: IO[bytes] | IO[str]
        with open(temp, "x", encoding="utf-8") if mode == "w" else open(temp, "xb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    fsync_directory(target.parent)
    _remove_stale_temps(target, temp)


def write_text_atomic(target: str | os.PathLike[str], text: str) -> None:
    with atomic_write(target, "w") as out:
        out.write(text)
