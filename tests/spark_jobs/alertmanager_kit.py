"""A real Prometheus Alertmanager (Debian's `prometheus-alertmanager`) on loopback for tests,
with a webhook receiver in the test process that records every notification it sends."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

BINARY = "prometheus-alertmanager"
TIMEOUT_S = 60.0


def require_alertmanager() -> str:
    """The binary's path; skip locally, fail under CI=true when it is missing."""
    path = shutil.which(BINARY) or (
        f"/usr/bin/{BINARY}" if os.path.exists(f"/usr/bin/{BINARY}") else None
    )
    if path is None:
        message = f"{BINARY} not found (Debian: apt-get install prometheus-alertmanager)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Callable[[], object], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if predicate():
                return
        except OSError:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)


@dataclass(slots=True)
class Webhook:
    """The notifications Alertmanager posted: (status, labels) per alert, in arrival order."""

    received: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def statuses(self, episode: str) -> list[str]:
        with self.lock:
            return [s for s, labels in self.received if labels.get("episode") == episode]


@dataclass(frozen=True, slots=True)
class RunningAlertmanager:
    url: str
    webhook: Webhook

    def alerts(self) -> list[dict[str, Any]]:
        """GET /api/v2/alerts: the alerts it holds that have not ended."""
        with urllib.request.urlopen(self.url + "/api/v2/alerts", timeout=10) as answer:
            alerts: list[dict[str, Any]] = json.loads(answer.read())
        return alerts

    def by_episode(self) -> dict[str, dict[str, Any]]:
        return {a["labels"]["episode"]: a for a in self.alerts() if "episode" in a["labels"]}


def _webhook_server(webhook: Webhook) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with webhook.lock:
                for alert in body["alerts"]:
                    webhook.received.append((alert["status"], alert["labels"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@contextlib.contextmanager
def alertmanager(tmp_path: Path) -> Iterator[RunningAlertmanager]:
    """Alertmanager on a free loopback port, no clustering, a temp storage path, routing every
    alert to the test's webhook at once (group_wait 0 s) with resolved notifications on."""
    binary = require_alertmanager()
    webhook = Webhook()
    server = _webhook_server(webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        "route:\n"
        "  receiver: test\n"
        "  group_by: ['...']\n"
        "  group_wait: 0s\n"
        "  group_interval: 1s\n"
        "  repeat_interval: 1h\n"
        "receivers:\n"
        "  - name: test\n"
        "    webhook_configs:\n"
        f"      - url: http://127.0.0.1:{server.server_address[1]}/hook\n"
        "        send_resolved: true\n",
        encoding="utf-8",
    )
    port = free_port()
    storage = tmp_path / "am-data"
    storage.mkdir()
    log = open(tmp_path / "alertmanager.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={storage}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    running = RunningAlertmanager(f"http://127.0.0.1:{port}", webhook)
    try:
        wait_for(
            lambda: urllib.request.urlopen(running.url + "/-/ready", timeout=2).status == 200,
            "Alertmanager ready",
        )
        yield running
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        server.shutdown()
        server.server_close()
