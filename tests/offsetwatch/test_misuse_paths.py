"""Every path option of every command given a bad path (issue 31 item 4).

Generated from the CLI's own parser definitions (`path_options`): an option whose type is a
Path or whose metavar is FILE, DIR, PATH or CSV is a path option, and a path option added
tomorrow is covered the day it is added. What a path is for (read or written, a file or a
directory) is not in the parser; ROLES says it, and the first test fails for a path option
ROLES does not know, so a new option cannot be left out silently.

Each option is given a missing path, an unreadable one (we run as root, who reads anything:
opening it raises PermissionError by a monkeypatch), a directory where a file is expected or
a file where a directory is, a FIFO, a symlink loop and, for what is written, /dev/full, a
file on a full filesystem and one on a read-only filesystem (tmpfs mounts of this module:
skipped with the reason where mounting is not allowed, failing under CI=true). Every case
ends with exit 2 and one `offsetwatch: error:` line (a log record counts as a line) naming
the option and the file, or it passes the checks and
reaches the command's work, which the harness stops: nothing here connects or starts Spark.
A refused path is left as it was: nothing is created on the full disk or beside a missing
file. `decode` alone may end with the exit 1 the README gives it (an input it cannot read is
named and skipped; an output it could not write keeps FILE.partial). A case that would block
(a FIFO nobody opens) is ended by an alarm, and fails.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import errno
import io
import logging
import os
import signal
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, Final

import pytest

from offsetwatch.cli import build_parser, main
from offsetwatch.commands import path_options
from tests.full_disk import fill, tmpfs
from tests.offsetwatch.test_misuse_generated import MINIMAL, Command, _commands, _flag

#: what each path option is: read ("in") or written ("out"), a "file", a "dir" or either
ROLES: Final[dict[tuple[Command, str], tuple[str, str]]] = {
    (("decode",), "paths"): ("in", "any"),
    (("decode",), "--output"): ("out", "file"),
    (("demo",), "--archive-dir"): ("out", "dir"),
    (("export",), "--config"): ("in", "file"),
    (("export",), "--web-config"): ("in", "file"),
    (("export",), "--archive-dir"): ("out", "dir"),
    (("export",), "--checkpoint-path"): ("out", "file"),
    **{
        (("groups", sub), flag): ("in", "file")
        for sub in ("list", "describe")
        for flag in ("--exporter-ca", "--exporter-cert", "--exporter-key")
    },
    (("groups", "list"), "--exporter-password-file"): ("in", "file"),
    (("groups", "describe"), "--exporter-password-file"): ("in", "file"),
    (("offsets", "export"), "--output"): ("out", "file"),
    (("offsets", "reset"), "--from-file"): ("in", "file"),
    (("offsets", "reset"), "--history"): ("in", "dir"),
    (("spark", "analyze"), "--lake"): ("in", "dir"),
    (("spark", "analyze"), "--out"): ("out", "dir"),
    (("spark", "compact"), "--input"): ("in", "any"),
    (("spark", "compact"), "--lake"): ("out", "dir"),
    (("spark", "offsets-at"), "--input"): ("in", "any"),
    (("spark", "package"), "--out"): ("out", "dir"),
    (("spark", "report"), "--lake"): ("in", "dir"),
    (("spark", "report"), "--out"): ("out", "dir"),
    (("spark", "stream"), "--archive"): ("in", "dir"),
    (("spark", "stream"), "--checkpoint"): ("out", "dir"),
    (("spark", "stream"), "--alerts-dir"): ("out", "dir"),
}

#: cases that fail in code being changed by others now: strict, so their fix is noticed
KNOWN: Final[dict[str, str]] = {}

#: exit 1, documented in the README: decode names an input it cannot read and decodes the
#: others, and an output that could not be written keeps FILE.partial
DOCUMENTED_EXIT_1: Final = {(("decode",), "paths"), (("decode",), "--output")}


class ReachedWork(Exception):
    """The command passed its checks and began its work (connect, start Spark or the
    exporter): where the harness stops it."""


def _name(action: argparse.Action) -> str:
    return _flag(action) if action.option_strings else action.dest


PathOption = tuple[Command, argparse.Action]
PATHS: Final[list[PathOption]] = [
    (command, action)
    for command, parser in _commands(build_parser())
    for action in path_options(parser)
]


def _lake(root: Path) -> Path:
    """The least a lake is for report and analyze to go on to their work."""
    lake = root / "lake-ok"
    (lake / "commits" / "date=2026-01-01").mkdir(parents=True, exist_ok=True)
    (lake / "commits" / "date=2026-01-01" / "part-0.parquet").write_bytes(b"PAR1")
    return lake


def _certificate(root: Path) -> Path:
    """A self-signed certificate without its key: what --exporter-key goes with."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "offsetwatch-test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    path = root / "cert.pem"
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def _argv(command: Command, action: argparse.Action, value: str, root: Path) -> list[str]:
    """The command line with `value` for the option, and what the option needs to be read
    at all (groups read their --exporter-* files only with --exporter)."""
    name = _name(action)
    if name == "paths":
        return [*command, value]
    rest = list(MINIMAL[command])
    if command == ("decode",):
        rest = ["--sample"]
    elif command[0] == "groups":
        rest += ["--exporter", "https://127.0.0.1:9", "--bootstrap-server", "127.0.0.1:9"]
        if name == "--exporter-key":  # read only beside a certificate
            rest += ["--exporter-cert", str(_certificate(root))]
    elif command == ("offsets", "reset") and name != "--history":
        rest = ["--group", "g", "--bootstrap-server", "127.0.0.1:9"]
    elif command == ("offsets", "reset"):
        rest = ["--group", "g", "--all-topics", "--to-history-time", "2026-01-01T00:00Z"]
        rest += ["--bootstrap-server", "127.0.0.1:9"]
    elif command[0] == "offsets":
        rest += ["--bootstrap-server", "127.0.0.1:9"]
    elif command == ("export",):
        rest = ["--bootstrap-server", "127.0.0.1:9"]
    elif command == ("spark", "stream") and name != "--archive":
        (root / "archive").mkdir()
        rest = ["--archive", str(root / "archive"), "--checkpoint", str(root / "checkpoint")]
    elif command == ("spark", "stream"):
        rest = ["--checkpoint", str(root / "checkpoint")]
    elif command in (("spark", "analyze"), ("spark", "report")) and name != "--lake":
        rest = [a if a != "lake" else str(_lake(root)) for a in rest]
    elif command == ("spark", "compact") and name == "--lake":
        (root / "archive").mkdir()
        (root / "archive" / "a.jsonl").write_text("")
        rest = ["--input", str(root / "archive")]
    elif command == ("spark", "compact"):
        rest = ["--lake", str(root / "new-lake")]
    if name in ("--lake",) and command != ("spark", "compact"):
        rest = [a for a in rest if a != "lake"]
        rest.remove("--lake")
    return [*command, *rest, name, value]


def test_every_path_option_has_a_role() -> None:
    found = {(command, _name(action)) for command, action in PATHS}
    missing = found - set(ROLES)
    assert not missing, f"say in ROLES whether these are read or written: {sorted(missing)}"
    assert set(ROLES) <= found, f"no longer path options: {sorted(set(ROLES) - found)}"


@contextlib.contextmanager
def _stop_at_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever begins a command's work raises ReachedWork: the first call that connects
    (a client handle made only to check the settings connects nowhere and is left alone),
    the exporter's first reader, the Spark session and the demo's cluster."""
    import offsetwatch.commands._offset_common
    import offsetwatch.commands.decode.sources
    import offsetwatch.core.connection
    import offsetwatch.exporter.daemon
    import offsetwatch.mock_cluster
    import offsetwatch.offset_ops.admin
    import offsetwatch.spark_jobs.session

    def reached(*_: object, **__: object) -> Any:
        raise ReachedWork

    for module, name in (
        (offsetwatch.core.connection, "probe_cluster"),
        (offsetwatch.commands.decode.sources, "probe_cluster"),
        (offsetwatch.commands._offset_common, "probe_cluster"),
        (offsetwatch.offset_ops.admin, "AdminClient"),
        # made after the exporter checked its paths (Exporter.open)
        (offsetwatch.exporter.daemon, "OffsetsTopicSource"),
        (offsetwatch.spark_jobs.session, "get_session"),
        (offsetwatch.mock_cluster, "MockCluster"),
    ):
        monkeypatch.setattr(module, name, reached)
    yield


class Hung(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """A blocking call (open of a FIFO nobody writes) ends with Hung instead of hanging
    the suite: the handler raises in the main thread, which PEP 475 lets through."""

    def ring(signum: int, frame: FrameType | None) -> None:
        raise Hung

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _fifo_peer(fifo: Path) -> Iterator[None]:
    """The other end of a FIFO, as `<(cmd)` gives one: whoever opens it to read gets an
    empty stream, whoever opens it to write has it drained. Without a peer an open blocks,
    which the command cannot know in advance."""
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                try:
                    fd = os.open(fifo, flags)
                except OSError:  # ENXIO: no reader yet
                    continue
                try:
                    if flags & os.O_WRONLY == 0:
                        # the writer came: take all it writes, until it closes
                        os.set_blocking(fd, True)
                        with contextlib.suppress(OSError):
                            while os.read(fd, 65536):
                                pass
                finally:
                    os.close(fd)
            done.wait(0.01)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(5)


def _denied_under(root: Path) -> Callable[..., Any]:
    def check(path: Any) -> None:
        if isinstance(path, int):
            return
        text = os.path.abspath(os.fsdecode(path))
        if text == str(root) or text.startswith(f"{root}{os.sep}"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))

    return check


@contextlib.contextmanager
def _unreadable(monkeypatch: pytest.MonkeyPatch, path: Path) -> Iterator[None]:
    """Opening, listing or creating anything at or under `path` is refused, as for a user
    without the permission (root is never refused by the file mode)."""
    check = _denied_under(path.absolute())

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def denied(target: Any, *args: Any, **kwargs: Any) -> Any:
            check(target)
            return real(target, *args, **kwargs)

        return denied

    real_open = builtins.open
    for module, name in ((builtins, "open"), (io, "open")):
        monkeypatch.setattr(module, name, wrap(real_open))
    for name in ("open", "scandir", "listdir", "mkdir"):
        monkeypatch.setattr(os, name, wrap(getattr(os, name)))
    yield


CASES: Final = ("missing", "unreadable", "wrong-kind", "fifo", "symlink-loop")
#: cases of what is written only
OUTPUT_CASES: Final = ("dev-full", "full-disk", "read-only")
#: the cases given a path on a filesystem of their own, by its fixture
DISKS: Final = {"full-disk": "full_disk", "read-only": "read_only_disk"}


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 64 KiB tmpfs with no byte left, shared by the module's cases (each in a directory
    of its own, made before it filled up: an empty directory takes no block)."""
    mount_point = tmp_path_factory.mktemp("full-disk")
    with tmpfs(mount_point, 64 * 1024):
        for index in range(len(PATHS)):
            (mount_point / str(index)).mkdir()
        fill(mount_point, leave=0)
        yield mount_point


@pytest.fixture(scope="module")
def read_only_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A read-only tmpfs: refused to root too (EROFS), unlike any file mode."""
    mount_point = tmp_path_factory.mktemp("read-only")
    with tmpfs(mount_point, 64 * 1024):
        for index in range(len(PATHS)):
            (mount_point / str(index)).mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], check=True)
        yield mount_point


def _prepare(case: str, role: str, kind: str, root: Path) -> tuple[Path, Path]:
    """The path to give, and what the unreadable case locks (for a file written: the
    directory it is written in, where its temporary name is made too)."""
    path = _path(case, role, kind, root)
    return path, path.parent if (case, role, kind) == ("unreadable", "out", "file") else path


def _path(case: str, role: str, kind: str, root: Path) -> Path:
    if case in DISKS:
        return root / ("out" if kind == "file" else "new")
    if case == "missing":
        return root / "missing"
    if case == "unreadable":
        target = root / "locked"
        if role == "out" and kind == "file":
            target.mkdir()
            return target / "out"
        if kind == "dir":
            target.mkdir()
        else:
            target.write_text("x\n")
        return target
    if case == "wrong-kind":
        target = root / "other"
        if kind == "dir":
            target.write_text("x\n")  # a file where a directory is expected
        else:
            target.mkdir()  # and a directory where a file is
        return target
    if case == "fifo":
        target = root / "fifo"
        os.mkfifo(target)
        return target
    if case == "symlink-loop":
        target = root / "loop"
        target.symlink_to(root / "loop")
        return target
    assert case == "dev-full"
    return Path("/dev/full")


def _ids(option: PathOption) -> str:  # "spark compact --lake"
    command, action = option
    return " ".join((*command, _name(action)))


def _expect_refusal(role: str, kind: str, case: str, command: Command) -> bool:
    """Whether the case must be refused (True) or may also go on to the work (False)."""
    if case in ("symlink-loop", "unreadable"):
        return True
    if case == "missing":
        return role == "in"
    if case == "wrong-kind":
        return kind != "any"
    if case == "fifo":
        return kind == "dir"
    if case in DISKS:
        return True  # a write is tried before the work
    assert case == "dev-full"
    return kind == "dir"


def _cases() -> Iterator[Any]:
    for index, (command, action) in enumerate(PATHS):
        role, _ = ROLES.get((command, _name(action)), ("in", "any"))
        for case in (*CASES, *(OUTPUT_CASES if role == "out" else ())):
            key = f"{_ids((command, action))} {case}"
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN[key])] if key in KNOWN else []
            yield pytest.param(index, case, id=key, marks=marks)


@pytest.mark.parametrize(("index", "case"), list(_cases()))
def test_a_bad_path_is_one_line_naming_the_option_and_the_file(
    index: int,
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    command, action = PATHS[index]
    name = _name(action)
    role, kind = ROLES[(command, name)]
    monkeypatch.chdir(tmp_path)
    root = request.getfixturevalue(DISKS[case]) / str(index) if case in DISKS else tmp_path
    path, locked = _prepare(case, role, kind, root)
    argv = _argv(command, action, str(path), tmp_path)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_stop_at_work(monkeypatch))
        if case == "fifo":
            stack.enter_context(_fifo_peer(path))
        if case == "unreadable":
            stack.enter_context(_unreadable(monkeypatch, locked))
        stack.enter_context(_alarm(10))
        try:
            code: int | None = main(argv)
        except ReachedWork:
            code = None
        except Hung:
            pytest.fail(f"{argv} blocked")
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    if code in (None, 0):
        assert not _expect_refusal(role, kind, case, command), (argv, "went on to work", err)
        return
    lines = err.strip().splitlines()
    # a log line is a line on stderr too (in-process, pytest takes it from the handler)
    logged = [r.getMessage()[:80] for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 1 and not logged, (err, logged)
    if code == 1 and (command, name) in DOCUMENTED_EXIT_1:
        assert lines[0].startswith("offsetwatch: "), err
    else:
        assert code == 2, (argv, code, err)
        assert lines[0].startswith("offsetwatch: error: "), err
    # the option (a positional: its value) and the file, by the name it was given
    assert name in lines[0] or name == "paths", (name, lines[0])
    assert str(path) in lines[0], (str(path), lines[0])
    _unchanged(case, path, kind)


def _unchanged(case: str, path: Path, kind: str) -> None:
    """A refused path is left as it was (and nothing was created in its place)."""
    if case == "missing":
        assert not path.exists(), path
    elif case == "fifo":
        assert stat.S_ISFIFO(path.stat().st_mode)
    elif case == "wrong-kind":
        assert path.is_file() if kind == "dir" else path.is_dir()
    elif case in DISKS:
        assert list(path.parent.iterdir()) == [], "a file or directory was left on the full disk"


@pytest.mark.parametrize("under", ["", "part-0.parquet", ".tmp-name"])
def test_an_os_error_no_command_caught_is_named_by_its_option(
    under: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The net under every command (cli._last_resort): a file error in the work, which no
    check before it could foresee, names the option that gave the file."""
    import offsetwatch.spark_jobs.session

    out = tmp_path / "out"
    failed = out / under if under != ".tmp-name" else tmp_path / ".out.123.tmp"

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(failed))

    monkeypatch.setattr(offsetwatch.spark_jobs.session, "get_session", full)
    argv = ["spark", "report", "--lake", str(_lake(tmp_path)), "--group", "g", "--out", str(out)]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"offsetwatch: error: --out {out}"), lines
    assert "No space left on device" in lines[0] and "free space" in lines[0]
    assert (f"({failed})" in lines[0]) == bool(under), lines[0]  # the file, when not the option's
