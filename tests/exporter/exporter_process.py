"""`offsetwatch export` as a child process of a test, and a watcher of its readiness.

A child (not an in-process ExporterService) when the test crashes something: the exporter
itself (SIGKILL), or the broker under it (SIGSTOP), where a crash of the client library must
show as the child's exit status and log, not take the pytest worker down with it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from prometheus_client.parser import text_string_to_metric_families

from tests.exporter.daemon_helpers import group_path, http_get, wait_for

OFFSETWATCH = str(Path(sys.executable).parent / "offsetwatch")
_SERVING = re.compile(rb"serving metrics and API on (http://\S+)")


@dataclass(slots=True)
class ExporterProcess:
    """`offsetwatch export` as a child; its URL is read from its log (it picks a free port)."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]
    url: str = ""

    @classmethod
    def start(
        cls, argv: list[str], log_path: Path, children: list[ExporterProcess]
    ) -> ExporterProcess:
        # the test run's own OFFSETWATCH_* variables are not settings of this exporter
        env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSETWATCH_")}
        log = log_path.open("ab")
        proc = subprocess.Popen(
            [OFFSETWATCH, "export", *argv], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        child = cls(proc, log_path, log)
        children.append(child)
        wait_for(child._serving, "offsetwatch export serving HTTP", describe=child.tail)
        return child

    def _serving(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"offsetwatch export exited {self.proc.returncode}")
        found = _SERVING.findall(self.log_path.read_bytes())
        if found:
            self.url = found[-1].decode()
        return bool(found)

    def tail(self, size: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-size:]

    def stacks(self) -> str:
        """The exit status, or every thread's stack (SIGUSR1), then the end of the log."""
        if self.proc.poll() is not None:
            return f"exited {self.proc.returncode}; log: {self.tail()}"
        self.proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        return f"still running; its threads and log: {self.tail(12000)}"

    def get(self, path: str) -> Any:
        return http_get(self.url, path, timeout_s=5)

    def end(self, sig: int) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(120)
        self.log.close()
        return code


def api_offsets(exporter: ExporterProcess, group: str) -> dict[tuple[str, int], int] | None:
    answer = exporter.get(group_path(group))
    if answer.status != 200:
        return None
    return {(r["topic"], r["partition"]): r["committed"] for r in answer.json()["partitions"]}


def metric(exporter: ExporterProcess, name: str) -> float | None:
    """The value of an unlabelled sample of /metrics."""
    answer = exporter.get("/metrics")
    for family in text_string_to_metric_families(answer.body.decode()):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


def source_up_metric(exporter: ExporterProcess) -> float | None:
    return metric(exporter, "offsetwatch_source_up")


@dataclass(slots=True)
class Watcher:
    """Samples /readyz and offsetwatch_source_up of whichever exporter runs, until stopped."""

    current: ExporterProcess | None = None
    #: (which exporter, /readyz status, its source_up, offsetwatch_source_up): the metric as
    #: scraped both before and after /readyz, None if it changed in between (the answers are
    #: two requests: a sample at a flip would otherwise pair two moments)
    seen: list[tuple[int, int, bool, float | None]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.done.is_set():
            exporter = self.current
            if exporter is not None:
                try:
                    before = source_up_metric(exporter)
                    body = exporter.get("/readyz")
                    after = source_up_metric(exporter)
                    self.seen.append(
                        (
                            exporter.proc.pid,
                            body.status,
                            bool(body.json()["source_up"]),
                            after if before == after else None,
                        )
                    )
                except Exception:  # the exporter is down (killed) or slow: nothing to judge
                    pass
            time.sleep(0.3)


def export_argv(
    bootstrap: str, output: str, archive: Path, checkpoint: Path, *extra: str
) -> list[str]:
    """`offsetwatch export` republishing to `output` and archiving to `archive`, with a
    checkpoint every second, on a free local port (read from its log), plus `extra` flags."""
    return [
        "--bootstrap-server",
        bootstrap,
        "--http-host",
        "127.0.0.1",
        "--http-port",
        "0",
        "--publish-topic",
        output,
        "--archive-dir",
        str(archive),
        "--checkpoint-path",
        str(checkpoint),
        "--checkpoint-interval-s",
        "1",
        *extra,
    ]
