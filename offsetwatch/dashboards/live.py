"""The demo workload behind a real Prometheus: what the operator kit is proven against.

`DemoStack` runs librdkafka's mock cluster in this process, the demo's simulated groups
(offsetwatch.simulator), and the exporter on it. `Prometheus` runs the Prometheus binary on
loopback, scraping the exporter every second with the project's rules, their windows shortened
by `shorten_rules` so that a minute shows what takes half an hour in production. The end-to-end
test (tests/grafana/test_e2e.py) and the picture script (offsetwatch.dashboards.pictures) use
both.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import yaml

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.dashboards.rules import dump

#: metric thresholds that are durations in seconds: they shrink with the windows
_SECONDS_THRESHOLDS: Final = (
    re.compile(r"(offsetwatch_group_lag_seconds > )(\d+)"),
    re.compile(r"(time\(\) - offsetwatch_start_time_seconds > )(\d+)"),
)
_DURATION: Final = re.compile(r"(\d+)([smh])")
_UNIT_S: Final = {"s": 1, "m": 60, "h": 3600}


def _scale_duration(text: str, factor: float) -> str:
    def one(match: re.Match[str]) -> str:
        seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
        return f"{max(1, round(seconds * factor))}s"

    return _DURATION.sub(one, text)


def _scale_expr(expr: str, factor: float) -> str:
    expr = re.sub(r"\[[^\]]+\]", lambda m: _scale_duration(m.group(0), factor), expr)
    expr = re.sub(r"offset \w+", lambda m: _scale_duration(m.group(0), factor), expr)
    for pattern in _SECONDS_THRESHOLDS:
        expr = pattern.sub(lambda m: f"{m.group(1)}{max(1, round(int(m.group(2)) * factor))}", expr)
    return expr


def shorten_rules(rules: dict[str, Any], factor: float) -> dict[str, Any]:
    """The rules with every window, `for`, offset and lag-seconds threshold times `factor`.

    Thresholds on the exporter's own loop ages stay: the demo's loops are fast already.
    """
    groups = []
    for group in rules["groups"]:
        out = []
        for rule in group["rules"]:
            rule = dict(rule, expr=_scale_expr(rule["expr"], factor))
            if "for" in rule:
                rule["for"] = _scale_duration(rule["for"], factor)
            out.append(rule)
        groups.append(dict(group, rules=out))
    return {"groups": groups}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get_json(url: str, timeout_s: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read())


def wait_until(
    predicate: Callable[[], object],
    what: str,
    timeout_s: float,
    describe: Callable[[], object] | None = None,
) -> None:
    """Poll until `predicate()` is true (an exception counts as false); raise after timeout_s
    with `what` and what `describe()` says was seen last."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as error:  # reported if it never passes
            last = error
        time.sleep(0.5)
    seen = f"; seen: {describe()!r}" if describe is not None else ""
    raise TimeoutError(
        f"gave up after {timeout_s:g} s waiting for {what} (last error: {last!r}){seen}"
    )


class QueryError(RuntimeError):
    """Prometheus answered a query with an error."""


@dataclass(slots=True)
class Prometheus:
    """A Prometheus server on loopback scraping one target every `scrape_interval_s`."""

    binary: str
    target: str
    rules: dict[str, Any]
    scrape_interval_s: int = 1
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ow-prom-")))
    port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        interval = f"{self.scrape_interval_s}s"
        config = {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "evaluation_interval": interval,
            },
            "rule_files": ["rules.yml"],
            "scrape_configs": [
                # the job name the rules' scrape-health alerts select
                {"job_name": "offsetwatch", "static_configs": [{"targets": [self.target]}]}
            ],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        (self.workdir / "rules.yml").write_text(dump(self.rules, ""))
        log = (self.workdir / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1d",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
        )
        log.close()
        wait_until(self._ready, f"Prometheus on {self.url} (log: {self.log_path})", timeout_s)

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def _ready(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)

    def _api(self, path: str, **params: str) -> Any:
        answer = _get_json(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        if answer.get("status") != "success":
            raise QueryError(f"{path} {params}: {answer}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query at the current time: the result vector."""
        data = self._api("query", query=expr)
        result: list[dict[str, Any]] = data["result"] if data["resultType"] != "scalar" else []
        return result

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Any]:
        data = self._api(
            "query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step_s}s"
        )
        result: list[Any] = data["result"]
        return result

    def label_values(self, label: str, match: str) -> list[str]:
        values: list[str] = self._api(f"label/{label}/values", **{"match[]": match})
        return values

    def rule_groups(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = self._api("rules")["groups"]
        return groups

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
            self._process = None


#: a key of type 1 (offset commit) whose group string claims 5 bytes and holds 2: the
#: exporter counts it as a decode error (reason truncated) and quarantines it
UNDECODABLE_KEY: Final = b"\x00\x01\x00\x05ab"


@dataclass(slots=True)
class DemoStack:
    """Mock cluster, the demo's simulated groups, and the exporter serving /metrics.

    One thread owns the simulator and ticks it every second; other threads ask for group
    deletions through `delete_group`, which that thread carries out.
    """

    status_window_s: float = 8.0
    state_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ow-demo-")))
    _cluster: Any = None
    _simulator: Any = None
    _service: Any = None
    _ticker: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _deletions: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> DemoStack:
        from offsetwatch.exporter.config import ExporterConfig
        from offsetwatch.exporter.service import ExporterService
        from offsetwatch.mock_cluster import MockCluster
        from offsetwatch.simulator import ClusterSimulator, demo_warn_ratio

        self._cluster = MockCluster()
        bootstrap = self._cluster.bootstrap_servers
        self._simulator = ClusterSimulator(bootstrap)
        self._simulator.create_topics(self._cluster.create_topic)
        self._simulator.start()
        config = ExporterConfig(
            bootstrap_servers=bootstrap,
            # the mock holds an empty fetch for the whole fetch.wait.max.ms
            kafka_properties={"fetch.wait.max.ms": "50", "log_level": "3"},
            cluster_name="demo",
            http_host="127.0.0.1",
            http_port=0,
            sample_interval_s=1.0,
            snapshot_interval_s=0.5,
            status_window_s=self.status_window_s,
            warn_min_growth_ratio=demo_warn_ratio(1.0, self.status_window_s),
            kafka_lag_exporter_aliases=True,
            publish_topic="offsetwatch.records",
            publish_dlq_topic="offsetwatch.records.dlq",
            archive_dir=self.state_dir / "archive",
            checkpoint_path=self.state_dir / "checkpoint",
            checkpoint_interval_s=2.0,
            log_level="WARNING",
        )
        self._service = ExporterService(config)
        self._service.start()
        self._service.run_in_background()
        self._ticker = threading.Thread(target=self._tick, name="demo-workload", daemon=True)
        self._ticker.start()
        return self

    @property
    def target(self) -> str:
        """host:port of /metrics, Prometheus' `instance` label."""
        return f"127.0.0.1:{self._service.http.port}"

    @property
    def groups(self) -> list[str]:
        return [plan.group for plan in self._simulator.plans]

    def delete_group(self, group: str) -> None:
        with self._lock:
            self._deletions.append(group)

    def inject_undecodable_record(self) -> None:
        """Write a record the decoder rejects into __consumer_offsets partition 0."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self._cluster.bootstrap_servers})
        producer.produce(OFFSETS_TOPIC, b"\x00", UNDECODABLE_KEY, partition=0)
        producer.flush(10)

    def _tick(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            with self._lock:
                deletions, self._deletions = self._deletions, []
            for group in deletions:
                self._simulator.delete_group(group)
            self._simulator.tick()
            self._stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(30)
        if self._service is not None:
            self._service.stop()
        if self._simulator is not None:
            self._simulator.close()
        if self._cluster is not None:
            self._cluster.close()
