"""`offsetwatch spark ...` starts quietly: the JVM's and Spark's start-up lines appear only
with --verbose. A real command in a child process, since they come from the JVM it starts."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from offsetwatch.commands.spark._common import _py4j_connection_noise
from tests.conftest import REPO_ROOT

#: `cluster`: in `make test-cluster` (the long tier), whose time it does not add to `make
#: test`: each test starts a Spark JVM of its own (three, 3.5 minutes of make test, 2026-12-07)
pytestmark = [pytest.mark.spark, pytest.mark.cluster]

#: what Spark 4 prints before any output of ours when left to its defaults
LOG4J_PROFILE = "Using Spark's default log4j profile"
NATIVE_CODE = "NativeCodeLoader: Unable to load native-hadoop library"
HOSTNAME = "resolves to a loopback address"
LOCAL_IP = "Set SPARK_LOCAL_IP"
LOG_LEVEL = "Setting default log level"
INCUBATOR = "WARNING: Using incubator modules"
BANNERS = (LOG4J_PROFILE, NATIVE_CODE, HOSTNAME, LOCAL_IP, LOG_LEVEL, INCUBATOR)


def _hostname_is_loopback() -> bool:
    """Spark warns about the hostname only where it resolves to a loopback address."""
    try:
        return socket.gethostbyname(socket.gethostname()).startswith("127.")
    except OSError:
        return False


def _history(tmp_path: Path) -> Path:
    commit = {
        "type": "offset_commit",
        "key_type": 1,
        "value_version": 3,
        "tombstone": False,
        "newer_version": False,
        "partition": 0,
        "offset": 0,
        "timestamp": 1_767_225_600_000,
        "group": "g",
        "key": {"group": "g", "topic": "orders", "partition": 0},
        "value": {
            "offset": 42,
            "leader_epoch": -1,
            "metadata": "",
            "commit_timestamp": 1_767_225_600_000,
            "expire_timestamp": -1,
            "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",
        },
    }
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(commit) + "\n", encoding="utf-8")
    return path


def test_spark_start_up_lines_only_with_verbose(tmp_path: Path) -> None:
    history = _history(tmp_path)
    argv = [sys.executable, "-m", "offsetwatch.cli", "spark", "offsets-at"]
    argv += ["--input", str(history), "--group", "g", "--time", "2026-01-02T00:00:00Z"]
    argv += ["--master", "local[1]"]
    # Spark's defaults as an operator has them, but for the tests' JVM options (they print nothing)
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "SPARK_CONF_DIR" or not k.startswith(("SPARK_", "PYSPARK_"))
    }
    # both JVMs start at once: each mostly waits for its own start-up
    runs = {
        verbose: subprocess.Popen(
            argv + (["--verbose"] if verbose else []),
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for verbose in (False, True)
    }
    done = {verbose: process.communicate(timeout=300) for verbose, process in runs.items()}
    for verbose, (out, err) in done.items():
        assert runs[verbose].returncode == 0, err
        assert out == "orders,0,42\n"
    quiet_err, verbose_err = done[False][1], done[True][1]
    assert not any(banner in quiet_err for banner in BANNERS), quiet_err
    expected = [LOG4J_PROFILE, NATIVE_CODE, LOG_LEVEL, INCUBATOR]
    if _hostname_is_loopback():
        expected += [HOSTNAME, LOCAL_IP]
    assert [b for b in expected if b not in verbose_err] == [], verbose_err


def test_a_session_that_cannot_start_is_one_line(tmp_path: Path) -> None:
    """A wrong --master ended in 300 lines of Java and py4j (issue 31 item 6): now Spark's
    reason in one line and exit 2. A master Spark cannot parse ends its JVM at once (the
    reason is only in the JVM's stderr); local[0] fails inside the running JVM (py4j)."""
    history = _history(tmp_path)
    argv = [sys.executable, "-m", "offsetwatch.cli", "spark", "offsets-at"]
    argv += ["--input", str(history), "--group", "g", "--time", "2026-01-02T00:00:00Z"]
    reasons = {
        "bogus": "SparkException: Master must either be yarn or start with spark",
        "local[0]": "SparkException: Asked to run locally with 0 threads",
    }
    runs = {
        master: subprocess.Popen(
            [*argv, "--master", master],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for master in reasons
    }
    for master, process in runs.items():
        out, err = process.communicate(timeout=300)
        assert (process.returncode, out) == (2, ""), err
        assert err.startswith(f"offsetwatch: error: Spark did not start with --master {master}: ")
        assert reasons[master] in err and err.count("\n") == 1, err


def test_ctrl_c_leaves_out_py4j_tracebacks() -> None:
    """Ctrl-C during spark compact printed ~50 lines of py4j's own logging.exception (issue
    31 item 6); the command still ends with 130, and other records pass."""

    def record(message: str, path: str) -> logging.LogRecord:
        return logging.LogRecord("root", logging.ERROR, path, 1059, message, None, None)

    py4j = "/venv/site-packages/py4j/java_gateway.py"
    assert not _py4j_connection_noise(record("KeyboardInterrupt while sending command.", py4j))
    assert not _py4j_connection_noise(record("Exception while sending command.", py4j))
    assert _py4j_connection_noise(record("Exception while sending command.", "/app/mine.py"))
    assert _py4j_connection_noise(record("Answer from Java side is empty", py4j))
