"""/metrics under API load, with and without TLS: the exporter's HTTP server bounded.

Runs the demo (librdkafka's mock cluster, simulated groups, the real exporter service), then,
for plain HTTP and for TLS + basic auth (a throw-away CA from trustme):

* Debian's `wrk -t2 -c50 -d DURATION` hammers /api/v1/groups (requests/s, its latency p99);
* meanwhile one client scrapes /metrics in a loop: p50/p99/max latency and failures.

Run: `.venv/bin/python benchmarks/http_security.py [--duration 10]` (needs /usr/bin/wrk).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import os
import re
import shutil
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
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan")
    label = "TLS + basic auth" if tls_ca else "plain HTTP"
    print(f"\n{label}:")
    print(f"  wrk -c50 /api/v1/groups            {api_rate:>10,.0f} req/s   p99 {api_p99}")
    print(
        f"  /metrics during it ({len(latencies)} scrapes)   p50 "
        f"{statistics.median(latencies) * 1000:.1f} ms   p99 {p99 * 1000:.1f} ms   max "
        f"{latencies[-1] * 1000:.1f} ms   failures {failures}"
    )
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
        f"{os.getloadavg()[0]:.2f}; default 8 HTTP workers, /api limited to 4 at a time)"
    )


if __name__ == "__main__":
    main()
