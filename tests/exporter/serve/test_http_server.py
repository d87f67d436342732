"""The HTTP endpoints, over real sockets; and a real Prometheus scraping them."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.process_collector import ProcessCollector

from offsetwatch.exporter.serve.api import group_detail, groups_list, readiness, to_json
from offsetwatch.exporter.serve.http_server import (
    METRICS_CONTENT_TYPE,
    ExporterHttpServer,
    accepts_gzip,
)
from offsetwatch.exporter.serve.metrics import MetricsConfig, SnapshotCollector
from offsetwatch.exporter.stats import PipelineStats
from tests.exporter.serve.test_metrics import NOW, ODD_GROUP, Holder, build, sample_state


def ready_stats() -> PipelineStats:
    stats = PipelineStats(started_ms=NOW - 60_000, source_up=True)
    for partition in range(3):
        stats.set_position(partition, 100)
        stats.set_high_watermark(partition, 100)
    stats.mark_ready(NOW - 30_000)
    stats.count_record("offset_commit", 3, 100)
    return stats


@pytest.fixture
def holder() -> Holder:
    return Holder(build(sample_state()), ready_stats())


@pytest.fixture
def server(holder: Holder) -> Iterator[ExporterHttpServer]:
    collector = SnapshotCollector(holder, MetricsConfig(kafka_lag_exporter_aliases=True))
    with ExporterHttpServer(collector, host="127.0.0.1", port=0) as srv:
        yield srv
    assert not srv.running


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        assert self.headers["Content-Type"].startswith("application/json")
        return json.loads(self.body)


def get(server: ExporterHttpServer, path: str, method: str = "GET", **headers: str) -> Response:
    request = urllib.request.Request(server.url + path, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Response(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Response(error.code, dict(error.headers), error.read())


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


# ---------------------------------------------------------------------------------- /metrics


def test_metrics(server: ExporterHttpServer) -> None:
    response = get(server, "/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == METRICS_CONTENT_TYPE
    assert "version=0.0.4" in METRICS_CONTENT_TYPE
    assert "Content-Encoding" not in response.headers
    assert int(response.headers["Content-Length"]) == len(response.body)
    parsed = samples(response.body.decode())
    assert parsed[("offsetwatch_group_lag", (("group", "live"),))] == 47
    assert parsed[("offsetwatch_group_lag", (("group", ODD_GROUP),))] == 1
    assert ("offsetwatch_ready", ()) in parsed
    assert any(name == "kafka_consumergroup_group_lag" for name, _ in parsed)


def test_metrics_gzip(server: ExporterHttpServer) -> None:
    plain = get(server, "/metrics")
    zipped = get(server, "/metrics", **{"Accept-Encoding": "gzip, deflate"})
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert zipped.headers["Vary"] == "Accept-Encoding"
    assert int(zipped.headers["Content-Length"]) == len(zipped.body)
    body = gzip.decompress(zipped.body).decode()
    # only the ages of the self-metrics may differ between the two scrapes
    ages = ("offsetwatch_snapshot_age_seconds", "offsetwatch_start_time_seconds")
    strip = [line for line in body.splitlines() if not line.startswith(ages)]
    assert strip == [line for line in plain.body.decode().splitlines() if not line.startswith(ages)]
    refused = get(server, "/metrics", **{"Accept-Encoding": "gzip;q=0, identity"})
    assert "Content-Encoding" not in refused.headers


def test_metrics_follow_the_latest_snapshot(server: ExporterHttpServer, holder: Holder) -> None:
    assert ("offsetwatch_group_lag", (("group", "live"),)) in samples(
        get(server, "/metrics").body.decode()
    )
    holder.snapshot = build(sample_state(), ready=False)
    parsed = samples(get(server, "/metrics").body.decode())
    assert not any(name.startswith("offsetwatch_group_") for name, _ in parsed)
    assert ("offsetwatch_build_info", (("version", server.collector.version),)) in parsed


def test_extra_registry_is_appended(holder: Holder) -> None:
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    collector = SnapshotCollector(holder)
    with ExporterHttpServer(collector, "127.0.0.1", 0, extra_registry=registry) as srv:
        for encoding in ("identity", "gzip"):
            response = get(srv, "/metrics", **{"Accept-Encoding": encoding})
            body = response.body if encoding == "identity" else gzip.decompress(response.body)
            names = {name for name, _ in samples(body.decode())}
            assert "offsetwatch_group_lag" in names
            if os.path.exists("/proc/self/stat"):
                assert "process_resident_memory_bytes" in names


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, False),
        ("", False),
        ("gzip", True),
        ("GZIP", True),
        ("deflate, gzip;q=0.5", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0, *", False),
        ("*", True),
        ("*;q=0", False),
        ("br, identity", False),
        ("gzip;q=abc", False),
    ],
)
def test_accepts_gzip(header: str | None, expected: bool) -> None:
    assert accepts_gzip(header) is expected


# ------------------------------------------------------------------------ health, ready


def test_healthz(server: ExporterHttpServer, holder: Holder) -> None:
    holder.stats.source_up = False
    response = get(server, "/healthz")
    assert (response.status, response.body) == (200, b"ok\n")
    assert get(server, "/healthz", method="HEAD").body == b""


def test_readyz(server: ExporterHttpServer, holder: Holder) -> None:
    response = get(server, "/readyz")
    assert response.status == 200
    assert response.json()["ready"] is True
    assert response.json()["ready_since_ms"] == NOW - 30_000

    catching_up = PipelineStats(source_up=True)
    for partition in range(50):
        catching_up.set_position(partition, 10)
        catching_up.set_high_watermark(partition, 10 if partition >= 3 else 20)
    holder.stats = catching_up
    response = get(server, "/readyz")
    assert response.status == 503
    body = response.json()
    assert body["ready"] is False
    assert body["reason"] == "catching up: 3 of 50 partitions not at end yet"
    assert (body["partitions"], body["partitions_behind"]) == (50, 3)

    holder.stats = PipelineStats(source_up=False, ready=True)
    response = get(server, "/readyz")
    assert response.status == 503
    assert response.json()["reason"] == "source down"


def test_readiness_before_any_position() -> None:
    ready, body = readiness(PipelineStats(source_up=True))
    assert not ready
    assert body["reason"].startswith("catching up")


# ------------------------------------------------------------------------------- JSON API


def test_groups_list(server: ExporterHttpServer) -> None:
    response = get(server, "/api/v1/groups")
    assert response.status == 200
    groups = {g["group"]: g for g in response.json()}
    assert set(groups) == {"live", "stopped", ODD_GROUP}
    live = groups["live"]
    assert live["kind"] == "CLASSIC"
    assert live["state"] == "STABLE"
    assert live["members"] == 2
    assert live["status"] == "OK"
    assert live["total_lag"] == 47
    assert live["max_lag_seconds"] > 0
    assert live["last_commit_ms"] == NOW - 5_000
    assert live["last_commit"].endswith("Z")
    assert groups["stopped"]["status"] == "ERR"
    assert get(server, "/api/v1/groups/").json() == response.json()


def test_group_detail(server: ExporterHttpServer) -> None:
    response = get(server, "/api/v1/groups/live")
    assert response.status == 200
    detail = response.json()
    assert detail["group"] == "live"
    assert (detail["protocol_type"], detail["protocol"], detail["generation"]) == (
        "consumer",
        "range",
        4,
    )
    rows = {(r["topic"], r["partition"]): r for r in detail["partitions"]}
    assert set(rows) == {("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0)}
    row = rows[("orders", 2)]
    assert (row["committed"], row["log_end"], row["lag"]) == (20, 50, 30)
    assert row["metadata"] == "meta"
    assert row["leader_epoch"] == 7
    assert row["status"] == "OK"
    assert row["owner"] == {"member_id": "m-2", "client_id": "client-b", "host": "/10.0.0.2"}
    assert rows[("payments", 0)]["owner"] is None
    assert rows[("orders", 1)]["lag_seconds"] == 0.0
    members = {m["member_id"]: m for m in detail["members"]}
    assert members["m-1"]["assignment"] == [{"topic": "orders", "partitions": [0, 1]}]
    assert members["m-2"]["client_id"] == "client-b"


def test_group_detail_unknowns_are_null(server: ExporterHttpServer) -> None:
    detail = get(server, "/api/v1/groups/stopped").json()
    row = next(r for r in detail["partitions"] if r["topic"] == "unsampled")
    assert (row["log_end"], row["lag"], row["lag_seconds"]) == (None, None, None)
    assert row["status"] == "ERR"
    assert detail["generation"] is None
    assert detail["members"] == []
    assert detail["is_simple"] is True


def test_group_detail_url_decoding(server: ExporterHttpServer) -> None:
    response = get(server, "/api/v1/groups/" + urllib.parse.quote(ODD_GROUP, safe=""))
    assert response.status == 200
    assert response.json()["group"] == ODD_GROUP


def test_unknown_group_and_path(server: ExporterHttpServer) -> None:
    response = get(server, "/api/v1/groups/nope%2Fslash")
    assert response.status == 404
    assert response.json() == {"error": "unknown group", "group": "nope/slash"}
    missing = get(server, "/nowhere?x=1")
    assert missing.status == 404
    assert missing.json()["path"] == "/nowhere"
    assert get(server, "/").status == 200
    bad = get(server, "/api/v1/groups/%ff")
    assert bad.status == 400


def test_json_functions_never_emit_nan(holder: Holder) -> None:
    snapshot = holder.snapshot
    text = to_json({"groups": groups_list(snapshot), "detail": group_detail(snapshot, "stopped")})
    assert b"NaN" not in text
    assert group_detail(snapshot, "nope") is None
    with pytest.raises(ValueError):
        to_json({"x": float("nan")})


# ------------------------------------------------------------------------------- server


def test_port_zero_and_restart_refused(holder: Holder) -> None:
    srv = ExporterHttpServer(SnapshotCollector(holder), "127.0.0.1", 0)
    with pytest.raises(RuntimeError):
        _ = srv.port
    srv.start()
    try:
        assert srv.port > 0
        assert srv.url == f"http://127.0.0.1:{srv.port}"
        with pytest.raises(RuntimeError):
            srv.start()
    finally:
        srv.stop()
    srv.stop()  # idempotent
    assert not srv.running


def test_no_access_log_noise(server: ExporterHttpServer, capfd: pytest.CaptureFixture[str]) -> None:
    for path in ("/metrics", "/healthz", "/readyz", "/nowhere", "/api/v1/groups/x"):
        get(server, path)
    # a malformed request makes http.server log an error: still not on stderr
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"NOT HTTP\r\n\r\n")
        sock.recv(1024)
    out, err = capfd.readouterr()
    assert err == ""
    assert out == ""


def test_keep_alive_connection_serves_several_requests(server: ExporterHttpServer) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for path in ("/metrics", "/healthz", "/api/v1/groups", "/metrics"):
            connection.request("GET", path)
            response = connection.getresponse()
            assert response.status == 200
            response.read()
    finally:
        connection.close()


# ---------------------------------------------------------------------- real Prometheus


def _prometheus_binary() -> str:
    binary = shutil.which("prometheus")
    if binary is None:
        message = "prometheus binary not found (Debian: apt-get install prometheus)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _query(port: int, query: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    assert body["status"] == "success"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.mark.prometheus
def test_real_prometheus_scrapes_us(server: ExporterHttpServer, tmp_path: Path) -> None:
    binary = _prometheus_binary()
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "scrape_configs:\n"
        "  - job_name: offsetwatch\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{server.port}']\n"
    )
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        lag: dict[str, float] = {}
        while time.monotonic() < deadline and "live" not in lag:
            assert process.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            time.sleep(0.5)
            try:
                result = _query(port, "offsetwatch_group_lag")
            except (OSError, urllib.error.URLError):
                continue
            lag = {r["metric"]["group"]: float(r["value"][1]) for r in result}
        assert lag.get("live") == 47, (tmp_path / "prometheus.log").read_text()[-3000:]
        assert lag[ODD_GROUP] == 1  # escaped label value survived the round trip
        up = _query(port, 'up{job="offsetwatch"}')
        assert [float(r["value"][1]) for r in up] == [1.0]
        aliases = _query(port, 'kafka_consumergroup_group_lag{group="live",partition="2"}')
        assert aliases[0]["metric"]["client_id"] == "client-b"
        assert float(aliases[0]["value"][1]) == 30
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.mark.prometheus
def test_promtool_accepts_the_exposition(server: ExporterHttpServer) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        message = "promtool not found (Debian: apt-get install prometheus)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    body = get(server, "/metrics").body
    result = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    # exit 0: valid and lint-clean (names, HELP, counter suffixes); 3: lint warnings
    assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()
