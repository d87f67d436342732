"""Every long-running command interrupted by Ctrl-C (SIGINT) at several points (issue 31 item 4).

Each command of LONG runs as the installed script, as an operator runs it, against an
in-process mock cluster, and gets SIGINT at each of its points: `start` (its run has begun:
librdkafka is loaded, which the CLI's own imports never do), `working` (its output has
begun) and `late` (most of its work is done). Every case must end with 130, or 0 for a
command that stops as its documented way of ending (decode --follow, export, demo) or that
was done; with at most one short line on stderr after the signal and never a traceback; its
outputs complete under their final names or absent, never cut. The points are conditions
the test waits for, never fixed sleeps.

A command that is not in LONG must be in SHORT with the reason: a new command cannot be left
out silently (`test_every_command_is_classified`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from offsetwatch.cli import build_parser
from tests.kafka_fixtures import mock_cluster, produce_raw
from tests.offsetwatch.test_decode_interrupt import sample_records
from tests.offsetwatch.test_misuse_generated import Command, _commands

pytestmark = pytest.mark.kafka

SCRIPT: Final = Path(sys.executable).with_name("offsetwatch")
FAST: Final = ("-X", "fetch.wait.max.ms=20", "-X", "log_level=3")


@dataclass(frozen=True)
class Cluster:
    bootstrap: str
    records: int  # in __consumer_offsets
    group: str  # with committed offsets on TOPIC
    topic: str


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    from confluent_kafka import Consumer, TopicPartition

    with mock_cluster(topics={"__consumer_offsets": 1, "orders": 2}) as bootstrap:
        count = produce_raw(bootstrap, sample_records())
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing"})
        try:
            consumer.commit(
                offsets=[TopicPartition("orders", p, 0) for p in (0, 1)], asynchronous=False
            )
        finally:
            consumer.close()
        yield Cluster(bootstrap, count, "billing", "orders")


@dataclass
class Run:
    """One child: its stderr, read as it comes, and the paths the case looks at."""

    process: subprocess.Popen[bytes]
    root: Path
    lines: list[str] = field(default_factory=list)

    def read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))


def _loaded_librdkafka(run: Run) -> bool:
    try:
        with open(f"/proc/{run.process.pid}/maps", encoding="utf-8") as maps:
            return "librdkafka" in maps.read()
    except OSError:
        return False


def _has(name: str) -> Callable[[Run], bool]:
    """Whether the file `name` (under the case's directory) has content."""

    def has(run: Run) -> bool:
        path = run.root / name
        return path.exists() and path.stat().st_size > 0

    return has


def _archived(run: Run) -> bool:
    return any(p.stat().st_size > 0 for p in (run.root / "archive").rglob("*") if p.is_file())


def _json_lines(path: Path) -> int:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), f"{path} ends in a cut line"
    lines = text.splitlines()
    for line in lines:
        json.loads(line)
    return len(lines)


@dataclass(frozen=True)
class Long:
    """How one long command runs, when its points are reached, and what it leaves."""

    argv: Callable[[Cluster, Path], list[str]]
    #: what to wait for before the signal, by point, after `start`
    points: dict[str, Callable[[Run], bool]]
    check: Callable[[Cluster, Path, int], None]
    codes: tuple[int, ...] = (0, 130)


def _decode_argv(c: Cluster, root: Path) -> list[str]:
    return ["decode", "--bootstrap-server", c.bootstrap, "--follow", "-o", str(root / "out.json")]


def _decode_check(c: Cluster, root: Path, code: int) -> None:
    out = root / "out.json"
    assert not Path(f"{out}.partial").exists(), "FILE.partial left under the final name's side"
    if out.exists():  # stopped after it began: whole lines, as many as were read
        assert _json_lines(out) <= c.records


def _export_argv(c: Cluster, root: Path) -> list[str]:
    return [
        *("export", "--bootstrap-server", c.bootstrap, "--http-port", "0"),
        *("--archive-dir", str(root / "archive"), "--checkpoint-path", str(root / "state")),
        *("--checkpoint-interval-s", "1", "--archive-roll-s", "1", "--log-level", "ERROR"),
    ]


def _export_check(c: Cluster, root: Path, code: int) -> None:
    from offsetwatch.exporter.sinks.checkpoint import load_checkpoint

    if (root / "state").exists():
        load_checkpoint(root / "state")  # whole, or it raises
    leftovers = [p.name for p in root.iterdir() if p.name.startswith(".state")]
    assert not leftovers, leftovers
    for path in (root / "archive").rglob("*"):
        if path.is_file():
            assert not path.name.startswith("."), f"{path} was not published at the stop"
            _json_lines(path)


def _demo_argv(c: Cluster, root: Path) -> list[str]:
    return ["demo", "--http-port", "0", "--plain", "--archive-dir", str(root / "archive")]


def _demo_check(c: Cluster, root: Path, code: int) -> None:
    for path in (root / "archive").rglob("*"):
        if path.is_file():
            assert not path.name.startswith("."), f"{path} was not published at the stop"
            _json_lines(path)


def _offsets_export_argv(c: Cluster, root: Path) -> list[str]:
    return [
        *("offsets", "export", "--bootstrap-server", c.bootstrap, "--group", c.group),
        *("-o", str(root / "offsets.csv")),
    ]


def _offsets_export_check(c: Cluster, root: Path, code: int) -> None:
    out = root / "offsets.csv"
    assert [p.name for p in root.iterdir() if p.name != "offsets.csv"] == []  # no temp
    if code == 0:
        assert out.read_text().endswith("\n") and c.topic in out.read_text()
    else:
        assert not out.exists(), "an interrupted export left a file"


def _offsets_reset_argv(c: Cluster, root: Path) -> list[str]:
    # the plan only (no --execute): what is interrupted is the reading of the group
    return [
        *("offsets", "reset", "--bootstrap-server", c.bootstrap, "--group", c.group),
        *("--topic", c.topic, "--to-earliest"),
    ]


def _nothing(c: Cluster, root: Path, code: int) -> None:
    assert list(root.iterdir()) == []


def _said(text: str) -> Callable[[Run], bool]:
    return lambda run: any(text in line for line in run.lines)


def _done(run: Run) -> bool:
    """For a command that ends by itself within a second: `late` is the moment it ends, and
    the signal may come after its exit (then it must have ended 0)."""
    return run.process.poll() is not None


LONG: Final[dict[Command, Long]] = {
    ("decode",): Long(
        _decode_argv,
        points={
            "working": _has("out.json.partial"),
            "late": lambda run: _json_lines_partial(run.root / "out.json.partial") >= 3,
        },
        check=_decode_check,
    ),
    ("export",): Long(
        _export_argv, {"working": _archived, "late": _has("state")}, check=_export_check
    ),
    ("demo",): Long(
        _demo_argv,
        {"working": _said("offsetwatch console:"), "late": _archived},
        check=_demo_check,
    ),
    # done in well under a second: at its start, or as it ends
    ("offsets", "export"): Long(_offsets_export_argv, {"late": _done}, check=_offsets_export_check),
    ("offsets", "reset"): Long(_offsets_reset_argv, {"late": _done}, check=_nothing),
}

_SPARK = "starts a Spark session (~20 s of CPU): not run here"
#: commands with no SIGINT case, and why
SHORT: Final[dict[Command, str]] = {
    ("groups", "list"): "one request and its answer: nothing to leave half done",
    ("groups", "describe"): "one request and its answer: nothing to leave half done",
    ("offsets", "migrate"): "a commit whose interruption is exit 3's case (offsets.py)",
    ("spark", "analyze"): _SPARK,
    ("spark", "compact"): _SPARK + "; its commit point is tested in tests/spark_jobs",
    ("spark", "offsets-at"): _SPARK,
    ("spark", "package"): "writes one zip through a temporary name in well under a second",
    ("spark", "report"): _SPARK,
    ("spark", "stream"): _SPARK,
}


def _json_lines_partial(path: Path) -> int:
    try:
        return path.read_text(encoding="utf-8").count("\n")
    except OSError:
        return 0


def test_every_command_is_classified() -> None:
    commands = {command for command, _ in _commands(build_parser())}
    assert set(LONG) | set(SHORT) == commands, "add a new command to LONG or to SHORT"
    assert not set(LONG) & set(SHORT)


def _wait(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _ids(case: tuple[Command, str]) -> str:
    return " ".join((*case[0], case[1]))


@pytest.mark.parametrize(
    "case", [(c, p) for c, spec in LONG.items() for p in ("start", *spec.points)], ids=_ids
)
def test_ctrl_c_at_each_point_is_quiet_and_leaves_whole_outputs(
    case: tuple[Command, str], cluster: Cluster, tmp_path: Path
) -> None:
    command, point = case
    spec = LONG[command]
    argv = [str(SCRIPT), *spec.argv(cluster, tmp_path)]
    if command[0] in ("decode", "export"):
        argv += FAST
    process = subprocess.Popen(
        argv,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    run = Run(process, tmp_path)
    reader = threading.Thread(target=run.read, daemon=True)
    reader.start()
    try:
        ready = {"start": _loaded_librdkafka, **spec.points}[point]
        _wait(lambda: ready(run) or process.poll() is not None, f"{point} of {command}")
        mark = len(run.lines)
        ended_first = process.poll() is not None
        if not ended_first:
            process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(10)
    err = "\n".join(run.lines)
    assert "Traceback" not in err, err
    assert code in ((0,) if ended_first else spec.codes), (code, err)
    after = [line for line in run.lines[mark:] if line.strip()]
    assert len(after) <= 1 and all(len(line) <= 200 for line in after), after
    spec.check(cluster, tmp_path, code)


def test_ctrl_c_while_the_commands_load_is_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first ~0.1 s of every start (the commands' modules imported, the options
    parsed) is before any command's own handling: a Ctrl-C there ended in a traceback."""
    import offsetwatch.cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(offsetwatch.cli, "build_parser", interrupted)
    assert offsetwatch.cli.main(["decode", "--sample"]) == 130
    assert capsys.readouterr() == ("", "")


def _declared_entry_point() -> tuple[str, str]:
    """The console script's module and function as pyproject.toml declares them: the
    installed script is regenerated from it (`make`), and may be older than the tree."""
    import tomllib

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    module, function = project["project"]["scripts"]["offsetwatch"].split(":")
    return module, function


def test_ctrl_c_while_the_script_imports_the_cli_is_130_without_a_traceback(
    tmp_path: Path,
) -> None:
    """The console script imports its entry point before any code of ours runs: a Ctrl-C
    during the ~80 ms import of offsetwatch.cli ended in a traceback. The child runs what the
    generated script runs, and gets SIGINT from inside that import (as the commands'
    package is looked up), not after a guessed sleep."""
    module, function = _declared_entry_point()
    child = f"""\
import signal, sys

class InterruptOnce:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "offsetwatch.commands":
            sys.meta_path.remove(InterruptOnce)
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptOnce)
from {module} import {function}
sys.exit({function}())
"""
    done = subprocess.run(
        [sys.executable, "-c", child, "decode", "--sample"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, b"", b"")


def test_the_entry_point_gives_sigint_back_for_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exit of the import guard never outlives the import: the command runs with
    Python's handler, so its own Ctrl-C handling (outputs whole, 130) is what happens."""
    import importlib

    import offsetwatch.cli

    module, function = _declared_entry_point()
    entry = getattr(importlib.import_module(module), function)
    seen = []

    def run() -> int:
        seen.append(signal.getsignal(signal.SIGINT))
        raise KeyboardInterrupt  # as if it came before cli.main's own handling began

    monkeypatch.setattr(offsetwatch.cli, "main", run)
    # as a console script starts: Python's own handler (a pytest-xdist worker has its own)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert entry() == 130
        assert seen == [signal.default_int_handler]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
