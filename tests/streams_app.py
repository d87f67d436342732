"""Real Kafka Streams applications (tests/StreamsApp.java) for the streams-group tests and the
release captures: compiled once with javac against the release's own jars (its kafka-streams
among them), each instance one JVM."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from tests.real_broker import (
    CLIENT_JVM,
    JAVAC_JVM,
    client_classpath,
    kafka_dist,
    require_broker,
    test_kafka,
)

SOURCE: Final = Path(__file__).with_name("StreamsApp.java")
#: generous: up to 8 engineers share 2 cores, and a Streams JVM starts in seconds of a core
RUNNING_DEADLINE_S: Final = 120.0

#: broker settings that keep the tests short: a lost member is noticed within seconds, and
#: the first assignment is not held back for late joiners
STREAMS_TUNING: Final = (
    "group.streams.session.timeout.ms=6000",
    "group.streams.min.session.timeout.ms=6000",
    "group.streams.heartbeat.interval.ms=1000",
    "group.streams.min.heartbeat.interval.ms=1000",
    "group.streams.initial.rebalance.delay.ms=0",
)


def require_streams() -> None:
    """Skip locally, fail under CI=true, when no Streams application can run here."""
    require_broker()
    kafka = test_kafka()
    reason = None
    if not kafka.at_least("4.1"):
        reason = f"Kafka {kafka.version} has no streams groups (KIP-1071 came in 4.1)"
    elif shutil.which("javac") is None:
        reason = "javac is not on PATH: the streams tests compile their Java application"
    elif not any(kafka.libs.glob("kafka-streams-*.jar")):
        reason = f"no kafka-streams jar in {kafka.libs}: run `scripts/kafka/broker fetch`"
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true" and kafka.at_least("4.1"):
        pytest.fail(reason)
    pytest.skip(reason)


def compile_app(into: Path) -> Path:
    """StreamsApp.java compiled into `into` (a few seconds of a core)."""
    into.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            "javac",
            *JAVAC_JVM,
            "-proc:none",
            "-cp",
            client_classpath(),
            "-d",
            str(into),
            str(SOURCE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"javac {SOURCE.name}: {done.stderr}"
    return into


def _log_options() -> list[str]:
    # the quiet logging of Kafka's own tools, from the same release
    kafka = test_kafka()
    return kafka_dist.Release(kafka.version, kafka.libs.parent).tool_log_options()


@dataclass(slots=True)
class StreamsInstance:
    """One running instance of an application: a JVM whose stdout says RUNNING / ERROR."""

    application_id: str
    client_id: str
    process: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def wait_running(self, timeout: float = RUNNING_DEADLINE_S) -> None:
        try:
            while True:
                line = self.lines.get(timeout=timeout)
                if line == "RUNNING":
                    return
                assert not line.startswith("ERROR"), f"{self.client_id}: {line}"
        except queue.Empty:
            raise AssertionError(f"{self.client_id} not RUNNING within {timeout:g} s") from None

    def stop(self) -> None:
        """SIGTERM: Kafka Streams closes and leaves the group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)

    def kill(self) -> None:
        """SIGKILL: the member stays in the group until its session times out."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def start_instance(
    classes: Path,
    bootstrap: str,
    application_id: str,
    topology: str,
    source: str,
    sink: str,
    work: Path,
    client_id: str,
) -> StreamsInstance:
    """An instance with its own state directory and stall file (`work/<client_id>.stall`)."""
    state = work / f"{client_id}.state"
    command = [
        "java",
        *CLIENT_JVM,
        *_log_options(),
        "-cp",
        f"{classes}{os.pathsep}{client_classpath()}",
        "StreamsApp",
        bootstrap,
        application_id,
        topology,
        source,
        sink,
        str(state),
        str(stall_file(work, client_id)),
        client_id,
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    instance = StreamsInstance(application_id, client_id, process)
    threading.Thread(target=instance._pump, daemon=True).start()
    return instance


def stall_file(work: Path, client_id: str) -> Path:
    """While this file exists, the instance's stream thread holds its record (no commits)."""
    return work / f"{client_id}.stall"
