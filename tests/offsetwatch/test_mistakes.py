"""One clear line for every mistake (issues 19 and 21): a bad flag, property, variable, config
file or an unreachable cluster gets exactly one `offsetwatch: error: ...` line on stderr that
names what to fix, exit code 2, and never a traceback or a raw `KafkaError{...}` repr.

No broker: the cluster these commands are pointed at is a closed port (refused at once) or a
name that does not resolve; librdkafka refuses bad settings when a client handle is made. An
unreadable input of `decode` is the one case that exits 1: it is named, the readable inputs
are still decoded.
"""

from __future__ import annotations

import codecs
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from offsetwatch.cli import main

#: nothing listens on port 1 of the loopback: a connection is refused at once
CLOSED = "127.0.0.1:1"
UNRESOLVABLE = "no-such-broker.invalid:9092"
SAMPLE = Path(__file__).parents[2] / "offsetwatch" / "samples" / "consumer-offsets.hex.jsonl"


@dataclass(frozen=True, slots=True)
class Mistake:
    argv: list[str]
    #: every one of these must be in the error line
    names: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    #: file name -> bytes, written to the test's directory (argv refers to them as {dir}/name)
    files: Mapping[str, bytes] = field(default_factory=dict)
    #: must not be in the error line (blaming the wrong thing)
    not_named: tuple[str, ...] = ()


UTF16_TOML = codecs.BOM_UTF16_LE + 'bootstrap_server = "k:9092"\n'.encode("utf-16-le")
UTF16_YAML = codecs.BOM_UTF16_LE + "basic_auth_users: {}\n".encode("utf-16-le")
BAD_KAFKA_TABLE = b'[kafka]\n"nosuch.prop" = "1"\n'

MISTAKES: dict[str, Mistake] = {
    # -- out-of-range numbers and times, refused where parsed ----------------------------
    "decode --timeout past int32 ms": Mistake(
        ["decode", "--timeout", "2147484", "--bootstrap-server", CLOSED],
        ("--timeout", "2147484", "2147483 seconds"),
    ),
    "decode --timeout infinite": Mistake(
        ["decode", "--timeout", "1e309", "--bootstrap-server", CLOSED], ("--timeout", "1e309")
    ),
    "decode --timeout 0 ms": Mistake(
        ["decode", "--timeout", "0.0001", "--bootstrap-server", CLOSED], ("--timeout", "0.0001")
    ),
    "decode --timeout nan from the environment": Mistake(
        ["decode", "--bootstrap-server", CLOSED],
        ("OFFSETWATCH_TIMEOUT", "nan"),
        env={"OFFSETWATCH_TIMEOUT": "nan"},
    ),
    "decode --from past int64": Mistake(
        ["decode", "--from", "9223372036854775808", "--bootstrap-server", CLOSED],
        ("--from", "9223372036854775808", "year 9999", "milliseconds"),
    ),
    "decode --from before 1970": Mistake(
        ["decode", "--from", "1969-01-01T00:00:00Z", "--bootstrap-server", CLOSED],
        ("--from", "1969-01-01T00:00:00Z", "before 1970"),
    ),
    "decode --from in the future": Mistake(
        ["decode", "--from", "2999-01-01T00:00:00Z", "--bootstrap-server", CLOSED],
        ("--from", "in the future", "--from end"),
    ),
    "decode --partition past int32": Mistake(
        ["decode", "--partition", "99999999999", "--sample"], ("--partition", "99999999999")
    ),
    "offsets reset --to-offset past int64": Mistake(
        ["offsets", "reset", "--group", "g", "--all-topics", "--to-offset", "9" * 20],
        ("--to-offset", "9" * 20, "9223372036854775807"),
    ),
    "offsets reset --shift-by past int64": Mistake(
        ["offsets", "reset", "--group", "g", "--all-topics", "--shift-by", "-" + "9" * 20],
        ("--shift-by",),
    ),
    "export --http-port out of range": Mistake(
        ["export", "--http-port", "70000"], ("--http-port", "70000")
    ),
    "export --sample-interval-s overflows a wait": Mistake(
        ["export", "--sample-interval-s", "1e300"], ("--sample-interval-s", "2147483")
    ),
    "export --http-workers from the environment": Mistake(
        ["export"],
        ("--http-workers", "OFFSETWATCH_HTTP_WORKERS"),
        env={"OFFSETWATCH_HTTP_WORKERS": "100000"},
    ),
    "demo --http-port out of range": Mistake(["demo", "--http-port", "-1"], ("--http-port", "-1")),
    "demo --duration infinite": Mistake(["demo", "--duration", "inf"], ("--duration", "inf")),
    "spark analyze --lag-slo nan": Mistake(
        ["spark", "analyze", "--lag-slo", "nan"], ("--lag-slo", "nan")
    ),
    "spark stream --trigger-s negative": Mistake(
        ["spark", "stream", "--trigger-s", "-1"], ("--trigger-s", "-1")
    ),
    # -- librdkafka settings that can never work, named by where they came from -------------
    "decode -X unknown property": Mistake(
        ["decode", "--bootstrap-server", CLOSED, "-X", "nosuch.prop=1"],
        ("-X nosuch.prop", "fix or remove it"),
    ),
    "groups list -X unknown property": Mistake(
        ["groups", "list", "--bootstrap-server", CLOSED, "-X", "nosuch.prop=1"],
        ("-X nosuch.prop", "fix or remove it"),
    ),
    "groups describe -X bad value": Mistake(
        ["groups", "describe", "g", "--bootstrap-server", CLOSED, "-X", "security.protocol=BOGUS"],
        ("-X security.protocol", "BOGUS"),
        not_named=("group",),
    ),
    "offsets export bad property from the environment": Mistake(
        ["offsets", "export", "--group", "g", "--bootstrap-server", CLOSED],
        ("OFFSETWATCH_KAFKA_NOSUCH_PROP", "nosuch.prop"),
        env={"OFFSETWATCH_KAFKA_NOSUCH_PROP": "1"},
    ),
    "offsets reset an SSL file librdkafka cannot load": Mistake(
        [
            "offsets",
            "reset",
            "--group",
            "g",
            "--all-topics",
            "--to-earliest",
            "--bootstrap-server",
            CLOSED,
            "-X",
            "security.protocol=SSL",
            "-X",
            "ssl.ca.location=/nonexistent/ca.pem",
        ],
        ("-X ssl.ca.location",),
    ),
    "export an empty --http-host": Mistake(
        ["export", "--bootstrap-server", CLOSED, "--http-host", ""],
        ("--http-host must not be empty", "0.0.0.0 listens on every interface"),
    ),
    "export an empty variable": Mistake(
        ["export", "--bootstrap-server", CLOSED],
        ("--http-host must not be empty", "OFFSETWATCH_HTTP_HOST"),
        env={"OFFSETWATCH_HTTP_HOST": ""},
    ),
    "export an empty setting in the file": Mistake(
        ["export", "--config", "{dir}/offsetwatch.toml"],
        ("offsets_topic in", "offsetwatch.toml must not be empty"),
        files={"offsetwatch.toml": b'bootstrap_servers = "127.0.0.1:1"\noffsets_topic = ""\n'},
    ),
    "export -X unknown property": Mistake(
        ["export", "--bootstrap-server", CLOSED, "-X", "nosuch.prop=1"], ("-X nosuch.prop",)
    ),
    "export bad value from the environment": Mistake(
        ["export", "--bootstrap-server", CLOSED],
        ("OFFSETWATCH_KAFKA_SECURITY_PROTOCOL", "BOGUS"),
        env={"OFFSETWATCH_KAFKA_SECURITY_PROTOCOL": "BOGUS"},
    ),
    "export unknown property in the [kafka] table": Mistake(
        ["export", "--config", "{dir}/offsetwatch.toml"],
        ('"nosuch.prop" in the [kafka] table of', "offsetwatch.toml"),
        files={"offsetwatch.toml": BAD_KAFKA_TABLE},
    ),
    "export a SASL mechanism librdkafka lacks": Mistake(
        [
            "export",
            "--bootstrap-server",
            CLOSED,
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=GSSAPI",
        ],
        ("-X sasl.mechanism", "GSSAPI"),
    ),
    # -- an unreachable cluster: the address, where it came from, what to check -------------
    "groups list refused": Mistake(
        ["groups", "list", "--bootstrap-server", CLOSED],
        ("cannot reach Kafka at 127.0.0.1:1", "--bootstrap-server", "Connection refused"),
    ),
    "groups describe refused, address from the environment": Mistake(
        ["groups", "describe", "payments"],
        ("cannot reach Kafka at 127.0.0.1:1", "OFFSETWATCH_BOOTSTRAP_SERVER", "security"),
        env={"OFFSETWATCH_BOOTSTRAP_SERVER": CLOSED},
        not_named=("payments", "unknown group"),
    ),
    "decode of a cluster that refuses": Mistake(
        ["decode", "--bootstrap-server", CLOSED],
        ("cannot reach Kafka at 127.0.0.1:1", "--bootstrap-server", "Connection refused"),
    ),
    "offsets export name that does not resolve": Mistake(
        ["offsets", "export", "--group", "g", "--bootstrap-server", UNRESOLVABLE],
        (f"cannot reach Kafka at {UNRESOLVABLE}", "resolve"),
    ),
    "offsets migrate refused": Mistake(
        [
            "offsets",
            "migrate",
            "--from-group",
            "a",
            "--to-group",
            "b",
            "--bootstrap-server",
            CLOSED,
        ],
        ("cannot reach Kafka at 127.0.0.1:1",),
    ),
    # -- files -------------------------------------------------------------------------------
    "export --config saved as UTF-16": Mistake(
        ["export", "--config", "{dir}/offsetwatch.toml"],
        ("offsetwatch.toml", "not UTF-8", "UTF-16", "--config"),
        files={"offsetwatch.toml": UTF16_TOML},
    ),
    "export OFFSETWATCH_CONFIG saved as UTF-16": Mistake(
        ["export"],
        ("offsetwatch.toml", "UTF-16", "OFFSETWATCH_CONFIG"),
        env={"OFFSETWATCH_CONFIG": "{dir}/offsetwatch.toml"},
        files={"offsetwatch.toml": UTF16_TOML},
    ),
    "export --web-config saved as UTF-16": Mistake(
        ["export", "--web-config", "{dir}/web.yml"],
        ("--web-config", "web.yml", "UTF-16"),
        files={"web.yml": UTF16_YAML},
    ),
    "export --config is a directory": Mistake(
        ["export", "--config", "{dir}"], ("--config", "is a directory")
    ),
}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a case sets: a developer's OFFSETWATCH_* must not change a verdict."""
    for name in list(os.environ):
        if name.startswith("OFFSETWATCH_") and "TEST" not in name and "CONFORMANCE" not in name:
            monkeypatch.delenv(name)


def one_error_line(err: str) -> str:
    assert "Traceback" not in err and "KafkaError{" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("offsetwatch: error: "), err
    return lines[0]


@pytest.mark.parametrize("case", MISTAKES)
def test_a_mistake_is_one_line_naming_it(
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mistake = MISTAKES[case]
    for name, data in mistake.files.items():
        (tmp_path / name).write_bytes(data)
    for name, value in mistake.env.items():
        monkeypatch.setenv(name, value.format(dir=tmp_path))
    argv = [arg.format(dir=tmp_path) for arg in mistake.argv]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    for name in mistake.names:
        assert name in line, line
    for name in mistake.not_named:
        assert name not in line, line


#: mistakes found once the cluster answered (the plan is checked before anything is written)
ON_A_CLUSTER: dict[str, Mistake] = {
    "offsets reset --from-file saved as UTF-16": Mistake(
        ["--from-file", "{dir}/offsets.csv"],
        ("--from-file", "offsets.csv", "UTF-16", "save it as UTF-8"),
        files={"offsets.csv": codecs.BOM_UTF16_LE + "t,0,1\n".encode("utf-16-le")},
    ),
    "offsets reset --to-datetime before 1970": Mistake(
        ["--topic", "t", "--to-datetime", "1969-01-01"], ("--to-datetime", "before 1970")
    ),
    "offsets reset --by-duration reaching before 1970": Mistake(
        ["--topic", "t", "--by-duration", "P99999999D"], ("--by-duration", "before 1970")
    ),
    "offsets reset --to-history-time names itself": Mistake(
        ["--topic", "t", "--to-history-time", "9999-01-01", "--history", "{dir}"],
        ("--to-history-time", "future"),
        not_named=("--to-datetime",),
    ),
}


@pytest.fixture(scope="module")
def mock_bootstrap() -> Iterator[str]:
    from offsetwatch.mock_cluster import MockCluster

    with MockCluster() as cluster:
        cluster.create_topic("t", 2)
        yield cluster.bootstrap_servers


@pytest.mark.parametrize("case", ON_A_CLUSTER)
def test_a_mistake_in_an_offset_reset_is_one_line(
    case: str, mock_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mistake = ON_A_CLUSTER[case]
    for name, data in mistake.files.items():
        (tmp_path / name).write_bytes(data)
    argv = ["offsets", "reset", "--group", "g", "--bootstrap-server", mock_bootstrap]
    assert main(argv + [arg.format(dir=tmp_path) for arg in mistake.argv]) == 2
    line = one_error_line(capsys.readouterr().err)
    for name in mistake.names:
        assert name in line, line
    for name in mistake.not_named:
        assert name not in line, line


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_export_on_a_port_in_use(busy_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["export", "--bootstrap-server", CLOSED, "--http-host", "127.0.0.1"]
    # WARNING keeps the exporter's start-up log off stderr: only the verdict is left there
    argv += ["--http-port", str(busy_port), "--log-level", "WARNING"]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"cannot listen on 127.0.0.1:{busy_port}" in line
    assert "choose another --http-port" in line
    # the log throttle it put on the process's handlers is gone with the run: left on
    # pytest's, it held back the log lines later tests of the same worker look for
    throttles = [type(f).__name__ for h in logging.getLogger().handlers for f in h.filters]
    assert "RepeatFilter" not in throttles


# -- unreadable inputs of decode: named, skipped, the others decoded, exit 1 ---------------

#: the checkout whose code `decode` runs (it is put first on the child's PYTHONPATH)
CHECKOUT = Path(__file__).parents[2]

#: run by each candidate way of starting `decode`: where offsetwatch is imported from, and
#: whether a file of mode 0 (argv[1]) can be read
_PROBE = """\
import pathlib, sys
import offsetwatch.cli
print(pathlib.Path(offsetwatch.cli.__file__).resolve().parent)
try:
    open(sys.argv[1], "rb").close()
except PermissionError:
    print("denied")
else:
    print("read")
"""


@dataclass(frozen=True, slots=True)
class Unprivileged:
    """A way to run `offsetwatch decode` that a file's mode can deny a read."""

    #: what the way is, for the skip message
    description: str
    #: put before the interpreter's path in the command
    prefix: list[str]
    #: the child's PYTHONPATH: holds the offsetwatch package it must import
    pythonpath: Path


def _child_env(pythonpath: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSETWATCH_")}
    # PYTHONPATH comes before site-packages (and an editable install's finder): the child
    # imports this checkout's code, or the copy of it, and nothing else
    env["PYTHONPATH"] = str(pythonpath)
    return env


def _open_dir(prefix: str) -> Path:
    """A fresh directory every user can enter (tempfile's and pytest's are mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


def _make_readable(root: Path) -> None:
    for sub in root.rglob("*"):
        sub.chmod(0o755 if sub.is_dir() else 0o644)


def _ways(copy: Path) -> Iterator[Unprivileged]:
    """Ways to run `decode` where a file's mode counts, the most direct first.

    Root reads any file (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH). Root keeps its uid without
    those two capabilities (so it still reads the checkout and the interpreter, which root
    owns, while a root-owned file of mode 0 is refused); else it becomes the checkout's owner
    (or nobody), who may not reach the checkout (a clone inside `mktemp -d`, mode 0700): then
    a world-readable copy of the package is imported instead.
    """
    yield Unprivileged(f"as uid {os.geteuid()}", [], CHECKOUT)
    if os.geteuid() != 0:
        return
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return
    yield Unprivileged(
        "as root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH",
        [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"],
        CHECKOUT,
    )
    owner = CHECKOUT.stat()
    uid, gid = (owner.st_uid, owner.st_gid) if owner.st_uid != 0 else (65534, 65534)
    as_user = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    yield Unprivileged(f"as uid {uid}", as_user, CHECKOUT)
    copy.mkdir()
    shutil.copytree(  # the symlinks decoder, exporter and spark_jobs are copied as folders
        CHECKOUT / "offsetwatch",
        copy / "offsetwatch",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    copy.chmod(0o755)
    _make_readable(copy)
    yield Unprivileged(f"as uid {uid} from a world-readable copy of offsetwatch/", as_user, copy)


def _why_not(way: Unprivileged, locked: Path) -> str | None:
    """None when `way` imports the expected offsetwatch and is refused `locked` (mode 0)."""
    command = [*way.prefix, sys.executable, "-c", _PROBE, str(locked)]
    env = _child_env(way.pythonpath)
    try:
        result = subprocess.run(
            command, cwd=locked.parent, env=env, capture_output=True, text=True, timeout=120
        )
    except OSError as error:
        return str(error)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return lines[-1] if lines else f"exit status {result.returncode}"
    lines = result.stdout.splitlines() or ["", ""]
    imported, verdict = lines[0], lines[-1]
    expected = (way.pythonpath / "offsetwatch").resolve()
    if Path(imported) != expected:
        return f"imported offsetwatch from {imported}, not {expected}"
    return None if verdict == "denied" else "read a file of mode 0"


@pytest.fixture(scope="module")
def unprivileged() -> Iterator[Unprivileged]:
    """The first of `_ways` that imports this checkout's code and is refused a file of mode 0;
    skipped locally, failed under CI=true, when there is none."""
    scratch = _open_dir("offsetwatch-unprivileged-")
    locked = scratch / "locked"
    locked.write_bytes(b"")
    locked.chmod(0)
    tried = []
    try:
        for way in _ways(scratch / "copy"):
            why = _why_not(way, locked)
            if why is None:
                yield way
                return
            tried.append(f"{way.description}: {why}")
        if os.geteuid() == 0 and shutil.which("setpriv") is None:
            tried.append("setpriv not found")
        if os.geteuid() == 0:
            fix = (
                "run the tests as a non-root user, or as root with setpriv (util-linux) and "
                "CAP_SETPCAP, or from a checkout and interpreter that uid 65534 can read (no "
                "directory of mode 0700 above them)"
            )
        else:
            fix = (
                f"run the tests as a user without CAP_DAC_OVERRIDE who can run {sys.executable}"
                f" and read {CHECKOUT}"
            )
        message = (
            "cannot run `offsetwatch decode` so that a file's mode denies it a read ("
            + "; ".join(tried)
            + f"): {fix}"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    finally:
        _make_readable(scratch)
        shutil.rmtree(scratch)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory the unprivileged user can enter (pytest's tmp_path is root's, mode 0700)."""
    path = _open_dir("offsetwatch-mistakes-")
    yield path
    _make_readable(path)
    shutil.rmtree(path)


def decode(
    unprivileged: Unprivileged, args: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    command = [*unprivileged.prefix, sys.executable, "-m", "offsetwatch.cli", "decode", *args]
    env = _child_env(unprivileged.pythonpath)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_decode_names_unreadable_inputs_and_decodes_the_rest(
    unprivileged: Unprivileged, open_dir: Path, conformance_dir: Path
) -> None:
    segments = conformance_dir / "runs" / "codec-gzip" / "segments"
    good_dir = open_dir / "__consumer_offsets-0"
    shutil.copytree(segments / "__consumer_offsets-0", good_dir)
    locked_dir = open_dir / "__consumer_offsets-1"
    shutil.copytree(segments / "__consumer_offsets-1", locked_dir)
    locked_file = open_dir / "__consumer_offsets-2"
    shutil.copytree(segments / "__consumer_offsets-2", locked_file)
    (open_dir / "good.jsonl").write_bytes(SAMPLE.read_bytes())
    (open_dir / "locked.jsonl").write_bytes(SAMPLE.read_bytes())
    _make_readable(open_dir)
    locked_dir.chmod(0)
    for log in locked_file.glob("*.log"):
        log.chmod(0)
    (open_dir / "locked.jsonl").chmod(0)

    alone = decode(unprivileged, ["--input", "segments", good_dir.name], open_dir)
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.count("\n") > 0
    mixed = decode(
        unprivileged,
        ["--input", "segments", good_dir.name, locked_dir.name, locked_file.name],
        open_dir,
    )
    assert mixed.returncode == 1, mixed.stderr
    assert mixed.stdout == alone.stdout  # every readable record, as when read alone
    assert "Traceback" not in mixed.stderr
    lines = mixed.stderr.splitlines()
    assert lines[0] == (
        f"offsetwatch: {locked_dir.name}: cannot read it (Permission denied): skipped; "
        "check its permissions"
    )
    assert len(lines) == 1 + len(list(locked_file.glob("*.log")))
    for line, log in zip(lines[1:], sorted(locked_file.glob("*.log")), strict=True):
        assert line.startswith(f"offsetwatch: {log.resolve()}: cannot read it"), line

    hex_alone = decode(unprivileged, ["good.jsonl"], open_dir)
    hex_mixed = decode(unprivileged, ["locked.jsonl", "good.jsonl"], open_dir)
    assert (hex_alone.returncode, hex_mixed.returncode) == (0, 1), hex_mixed.stderr
    assert hex_mixed.stdout == hex_alone.stdout
    assert hex_mixed.stderr == (
        "offsetwatch: locked.jsonl: cannot read it (Permission denied): skipped; "
        "check its permissions\n"
    )


@pytest.mark.parametrize("kind", ["fifo", "/dev/null", "loop"])
def test_export_refuses_a_checkpoint_that_can_hold_nothing(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reading a FIFO blocked the exporter for ever and /dev/full fed it zeros without end;
    /dev/null took every checkpoint and gave nothing back. Refused at start, naming it."""
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to("loop")
    else:
        path = Path(kind)
    argv = ["export", "--bootstrap-server", CLOSED, "--http-port", "0"]
    assert main([*argv, "--checkpoint-path", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--checkpoint-path {path}" in err and "Traceback" not in err, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
