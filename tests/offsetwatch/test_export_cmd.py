"""`offsetwatch export` as an operator runs it: the real script, real HTTP, SIGTERM.

The cluster is librdkafka's mock cluster hosted in this test process; the exporter runs as a
child process and reaches it over TCP like any Kafka client.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from offsetwatch.exporter.sinks.checkpoint import load_checkpoint
from offsetwatch.mock_cluster import MockCluster
from offsetwatch.record_factory import RecordFactory
from tests.kafka_fixtures import OFFSETS_TOPIC, fill_partitions, produce_raw

pytestmark = pytest.mark.kafka

SCRIPT = Path(sys.executable).parent / "offsetwatch"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _wait(predicate: object, what: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def test_export_serves_lag_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    factory = RecordFactory()
    now_ms = int(time.time() * 1000)
    with MockCluster() as cluster:
        cluster.create_topic(OFFSETS_TOPIC, 3)
        cluster.create_topic("orders", 2)
        fill_partitions(cluster.bootstrap_servers, "orders", {0: 10, 1: 7})
        records = [
            (0, *factory.commit("svc", "orders", 0, 4, now_ms, metadata="m\x00")),
            (0, *factory.commit("svc", "orders", 1, 7, now_ms)),
        ]
        produce_raw(cluster.bootstrap_servers, records)
        port = _free_port()
        checkpoint = tmp_path / "state" / "checkpoint"
        env = {
            **os.environ,
            "OFFSETWATCH_KAFKA_FETCH_WAIT_MAX_MS": "50",
            "OFFSETWATCH_SAMPLE_INTERVAL_S": "1",
            "OFFSETWATCH_SNAPSHOT_INTERVAL_S": "0.5",
        }
        process = subprocess.Popen(
            [
                str(SCRIPT),
                "export",
                # Kafka's spelling, as every other command takes it (--bootstrap-servers, the
                # exporter's older one, is checked with the others in test_connection_options)
                "--bootstrap-server",
                cluster.bootstrap_servers,
                "--http-host",
                "127.0.0.1",
                "--http-port",
                str(port),
                "--checkpoint-path",
                str(checkpoint),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait(lambda: _get(base + "/readyz")[0] == 200, "/readyz 200")

            def lag_known() -> bool:
                status, body = _get(base + "/api/v1/groups/svc")
                if status != 200:
                    return False
                rows = json.loads(body)["partitions"]
                return [r["lag"] for r in rows] == [6, 0]

            _wait(lag_known, "lag of svc: 6 on partition 0, 0 on partition 1")
            status, metrics = _get(base + "/metrics")
            assert status == 200
            assert 'offsetwatch_group_lag{group="svc"} 6' in metrics
            process.send_signal(signal.SIGTERM)
            _out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 0, err
        # the final checkpoint was written at shutdown, positions after both records
        loaded = load_checkpoint(checkpoint)
        assert loaded.positions.get(0) == 2
        table = loaded.state.groups["svc"].topics["orders"]
        assert list(table.committed[:2]) == [4, 7]
        assert table.metadata_of(0) == "m\x00"
