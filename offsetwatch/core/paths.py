"""Checks of the paths a command is given, made before its work: one line naming the option
and the path, saying what to do, for each way a path can be wrong.

A path that is read must exist, be of the kind the option takes and be readable (a real
open or listing: access() says yes to root for anything). A directory that is written is
created when missing and written to (`probe_directory`: a byte, so a full disk is found
now and not after the work). A file that is written must not be a directory, its directory
must exist and take a write; devices and FIFOs are written in place (`writable_target`).

A FIFO given as a file to read is left alone: `--config <(...)` is a real use, and opening
one to look would block until its writer comes, or take what it writes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Final, Literal

from offsetwatch.core.atomic import probe_directory, writable_target

__all__ = [
    "Kind",
    "PathProblem",
    "advice",
    "check_input",
    "check_output_dir",
    "check_output_file",
    "inside",
    "os_error_text",
]

Kind = Literal["file", "dir", "any"]

_WHAT: Final[dict[str, str]] = {
    "file": "a file",
    "dir": "a directory",
    "any": "a file or directory",
}


class PathProblem(ValueError):
    """A path option cannot be used; the message names the option and the path."""


def os_error_text(error: OSError) -> str:
    """The reason of an OSError without its repr (`[Errno 13] Permission denied: '...'`)."""
    if error.strerror:
        return error.strerror
    return os.strerror(error.errno) if error.errno else str(error)


def advice(error: OSError) -> str:
    """What to do about a file system error, by its kind."""
    if error.errno == errno.ELOOP:
        return "a symlink points back at itself: fix the link or give the real path"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "check its permissions and those of its directories"
    if error.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a directory"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free space there or choose another place"
    if error.errno == errno.EROFS:
        return "it is on a read-only filesystem: choose another place"
    return "check the path"


def _problem(flag: str, path: Path, error: OSError) -> PathProblem:
    return PathProblem(f"{flag} {path}: {os_error_text(error)}; {advice(error)}")


def check_input(path: Path, flag: str, kind: Kind = "any") -> None:
    """`path` exists, is `kind` and can be opened (a directory: listed)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise PathProblem(f"{flag} {path} does not exist: give {_WHAT[kind]} that does") from None
    except OSError as error:
        raise _problem(flag, path, error) from None
    if kind == "dir" and not stat.S_ISDIR(mode):
        raise PathProblem(f"{flag} {path} is not a directory: give a directory")
    if kind == "file" and stat.S_ISDIR(mode):
        raise PathProblem(f"{flag} {path} is a directory: give a file")
    try:
        if stat.S_ISDIR(mode):
            with os.scandir(path):
                pass
        elif stat.S_ISREG(mode):
            os.close(os.open(path, os.O_RDONLY))
    except OSError as error:
        raise _problem(flag, path, error) from None


def check_output_dir(path: Path, flag: str) -> None:
    """`path` is a directory (created when missing) that takes a write."""
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise _problem(flag, path, error) from None
    if mode is not None and not stat.S_ISDIR(mode):
        what = "a file" if stat.S_ISREG(mode) else "not a directory"
        raise PathProblem(f"{flag} {path} is {what}: give a directory (it is created if missing)")
    created = _missing_ancestors(path) if mode is None else []
    try:
        probe_directory(path)
    except OSError as error:
        # a refused command leaves no trace: the directories made for the probe go again
        for directory in created:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise PathProblem(
            f"cannot write in {flag} {path}: {os_error_text(error)}; {advice(error)}"
        ) from None


def _missing_ancestors(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist, deepest first."""
    missing = []
    for directory in (path, *path.parents):
        if os.path.lexists(directory):
            break
        missing.append(directory)
    return missing


def check_output_file(
    path: Path, flag: str, *, regular: bool = False, make_directory: bool = False
) -> None:
    """`path` can be written: not a directory, in a directory that exists (`make_directory`:
    is created) and takes a write. A device or a FIFO is written in place and not probed;
    with `regular`, refused: a file that is read back, a checkpoint, must keep what was
    written."""
    if make_directory and not os.path.lexists(path):
        check_output_dir(path.parent, f"{flag} {path}: its directory")
    try:
        target, in_place = writable_target(path)
    except OSError as error:
        if error.errno == errno.EISDIR:
            raise PathProblem(f"{flag} {path} is a directory: give a file name") from None
        if error.errno == errno.ENOENT:
            raise PathProblem(
                f"{flag} {path}: its directory does not exist; create it or choose another"
            ) from None
        raise _problem(flag, path, error) from None
    if in_place:
        if regular:
            raise PathProblem(f"{flag} {path} is no regular file: give the path of a file")
        return
    try:
        probe_directory(target.parent)
    except OSError as error:
        raise PathProblem(
            f"cannot write {flag} {path}: {os_error_text(error)}; {advice(error)}"
        ) from None


def inside(path: Path, container: Path) -> bool:
    """Whether `path` is `container` or under it, symlinks resolved (a path that does not
    exist yet is resolved as far as it exists)."""
    resolved, outer = Path(os.path.realpath(path)), Path(os.path.realpath(container))
    return resolved == outer or outer in resolved.parents
