"""/metrics under API load and under hostile clients, with and without TLS.

Runs the demo (librdkafka's mock cluster, simulated groups, the real exporter service), then,
for plain HTTP and for TLS + basic auth (a throw-away CA from trustme):

* one client scrapes /metrics in a loop on the idle server: the ceiling (p50/p99/max);
* the same scrapes while 200 idle connections, 200 slowloris connections (one header byte a
  second; over TLS after the handshake, reconnecting when cut off) and 50 kept-alive
  browsers polling /api/v1/groups hold the server (issue 31 item 2);
* the same scrapes while Debian's `wrk -t2 -c50 -d DURATION` hammers /api/v1/groups
  (requests/s, its latency p99), then `wrk` on /metrics alone.

Run: `.venv/bin/python benchmarks/http_security.py [--duration 10]` (needs /usr/bin/wrk).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import bcrypt
import trustme

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from offsetwatch.exporter.config import ExporterConfig  # noqa: E402
from offsetwatch.exporter.service import ExporterService  # noqa: E402
from offsetwatch.mock_cluster import MockCluster  # noqa: E402
from offsetwatch.simulator import ClusterSimulator  # noqa: E402

PASSWORD = "bench-password"


def web_config(directory: Path) -> tuple[Path, Path]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(directory / "server.crt"))
    cert.private_key_pem.write_to_path(str(directory / "server.key"))
    ca.cert_pem.write_to_path(str(directory / "ca.crt"))
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    path = directory / "web.yml"
    path.write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"basic_auth_users:\n  bench: {hashed}\n"
    )
    return path, directory / "ca.crt"


def scrape_loop(
    port: int, context: ssl.SSLContext | None, auth: dict[str, str], stop: threading.Event
) -> tuple[list[float], int]:
    latencies: list[float] = []
    failures = 0
    while not stop.is_set():
        started = time.perf_counter()
        try:
            if context is None:
                connection: http.client.HTTPConnection = http.client.HTTPConnection(
                    "127.0.0.1", port, timeout=30
                )
            else:
                connection = http.client.HTTPSConnection(
                    "127.0.0.1", port, context=context, timeout=30
                )
            connection.request("GET", "/metrics", headers=auth)
            response = connection.getresponse()
            response.read()
            connection.close()
            if response.status != 200:
                failures += 1
                continue
        except (OSError, http.client.HTTPException):
            failures += 1
            continue
        latencies.append(time.perf_counter() - started)
    return latencies, failures


class Hostile:
    """Idle connections, slowloris connections and kept-alive browsers, one thread each."""

    def __init__(
        self,
        port: int,
        context: ssl.SSLContext | None,
        auth: dict[str, str],
        counts: tuple[int, int, int] = (200, 200, 50),
    ) -> None:
        self.port, self.context, self.auth = port, context, auth
        idle, slow, browsers = counts
        self.stop = threading.Event()
        # idle ones never start a TLS handshake: they hold a connection as cheaply as can be
        self.idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(idle)]
        self.slow = [self._slow_one() for _ in range(slow)]
        self.browsers = [self._browser() for _ in range(browsers)]
        self.answers = 0
        self.threads = [
            threading.Thread(target=self._trickle, daemon=True),
            threading.Thread(target=self._browse, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _slow_one(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        if self.context is None:
            return sock
        return self.context.wrap_socket(sock, server_hostname="127.0.0.1")

    def _browser(self) -> http.client.HTTPConnection:
        if self.context is None:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=30)

    def _trickle(self) -> None:
        head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000
        sent = 0
        while not self.stop.wait(1.0):
            for i, sock in enumerate(self.slow):
                try:
                    sock.send(head[sent : sent + 1])
                except OSError:  # cut off by the server: a new one, as an attacker would
                    sock.close()
                    with contextlib.suppress(OSError):
                        self.slow[i] = self._slow_one()
            sent += 1

    def _browse(self) -> None:
        while not self.stop.is_set():
            for i, browser in enumerate(self.browsers):
                try:
                    browser.request("GET", "/api/v1/groups", headers=self.auth)
                    browser.getresponse().read()
                    self.answers += 1
                except (OSError, http.client.HTTPException):
                    browser.close()
                    self.browsers[i] = self._browser()
            self.stop.wait(0.2)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
        for sock in [*self.idle, *self.slow]:
            sock.close()
        for browser in self.browsers:
            browser.close()


def scrapes_for(
    port: int, context: ssl.SSLContext | None, auth: dict[str, str], seconds: float
) -> tuple[list[float], int]:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    latencies, failures = scrape_loop(port, context, auth, stop)
    timer.cancel()
    latencies.sort()
    return latencies, failures


def line(label: str, latencies: list[float], failures: int) -> str:
    if not latencies:
        return f"  {label:<44} no answer, failures {failures}"
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    return (
        f"  {label:<44} p50 {statistics.median(latencies) * 1000:6.1f} ms   p99 "
        f"{p99 * 1000:6.1f} ms   max {latencies[-1] * 1000:6.1f} ms   "
        f"({len(latencies)} scrapes, {failures} failed)"
    )


def run_wrk(url: str, auth: dict[str, str], duration: int) -> tuple[float, str]:
    command = ["wrk", "-t2", "-c50", f"-d{duration}s", "--latency"]
    for name, value in auth.items():
        command += ["-H", f"{name}: {value}"]
    output = subprocess.run(
        [*command, url], capture_output=True, text=True, timeout=duration + 60
    ).stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    p99 = re.search(r"99%\s+(\S+)", output)
    return (float(rate.group(1)) if rate else 0.0), (p99.group(1) if p99 else "?")


def measure(service: ExporterService, tls_ca: Path | None, duration: int) -> None:
    port = service.http.port
    context = ssl.create_default_context(cafile=str(tls_ca)) if tls_ca else None
    auth = (
        {"Authorization": "Basic " + base64.b64encode(f"bench:{PASSWORD}".encode()).decode()}
        if tls_ca
        else {}
    )
    scheme = "https" if tls_ca else "http"
    label = "TLS + basic auth" if tls_ca else "plain HTTP"
    print(f"\n{label}:")
    print(line("/metrics, nothing else (the ceiling)", *scrapes_for(port, context, auth, duration)))
    hostile = Hostile(port, context, auth)
    try:
        under = scrapes_for(port, context, auth, duration)
    finally:
        hostile.close()
    print(line("/metrics, 200 idle + 200 slowloris + 50 kept", *under))
    figures = service.http.health()["http"]
    print(
        f"  {'':<44} (browsers answered {hostile.answers}; the gate timed out "
        f"{figures.get('timed_out', '?')}, evicted {figures.get('evicted', '?')})"
    )
    stop = threading.Event()
    result: list[tuple[list[float], int]] = []
    scraper = threading.Thread(
        target=lambda: result.append(scrape_loop(port, context, auth, stop)), daemon=True
    )
    scraper.start()
    api_rate, api_p99 = run_wrk(f"{scheme}://127.0.0.1:{port}/api/v1/groups", auth, duration)
    stop.set()
    scraper.join(60)
    latencies, failures = result[0]
    latencies.sort()
    print(line("/metrics, wrk -c50 on /api/v1/groups", latencies, failures))
    print(f"  wrk -c50 /api/v1/groups            {api_rate:>10,.0f} req/s   p99 {api_p99}")
    metrics_rate, metrics_p99 = run_wrk(f"{scheme}://127.0.0.1:{port}/metrics", auth, duration)
    print(f"  wrk -c50 /metrics alone            {metrics_rate:>10,.0f} req/s   p99 {metrics_p99}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is missing: apt-get install -y wrk")
    directory = Path(tempfile.mkdtemp(prefix="offsetwatch-bench-http-"))
    config_path, ca_path = web_config(directory)
    with MockCluster() as cluster:
        simulator = ClusterSimulator(cluster.bootstrap_servers)
        simulator.create_topics(cluster.create_topic)
        simulator.start()
        for tls in (False, True):
            config = ExporterConfig(
                bootstrap_servers=cluster.bootstrap_servers,
                http_host="127.0.0.1",
                http_port=0,
                sample_interval_s=2.0,
                snapshot_interval_s=1.0,
                web_config=config_path if tls else None,
                log_level="WARNING",
            )
            service = ExporterService(config)
            service.start()
            service.run_in_background()
            try:
                deadline = time.monotonic() + 60
                while not service.exporter.stats.ready and time.monotonic() < deadline:
                    simulator.tick()
                    time.sleep(0.5)
                measure(service, ca_path if tls else None, args.duration)
            finally:
                service.stop()
        simulator.close()
    print(
        f"\n(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}; default 8 HTTP workers, /api limited to 4 at a time, "
        "request timeout 10 s)"
    )


if __name__ == "__main__":
    main()
