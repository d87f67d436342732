"""`offsetwatch groups list|describe` on librdkafka's mock cluster: our own rendering (table,
CSV, --topic), bad input, the exporter's columns, and a cluster without ListGroups or
DescribeGroups. Listing, members, state and offsets against Kafka's own tool are in
test_groups_real_broker.py.
"""

from __future__ import annotations

import csv
import http.server
import io
import json
import threading
from collections.abc import Iterator

import pytest

from offsetwatch.cli import main
from offsetwatch.mock_cluster import MockCluster
from offsetwatch.offset_ops.admin import AdminBroker
from offsetwatch.offset_ops.model import Committed
from tests.kafka_fixtures import create_data_topic

pytestmark = pytest.mark.kafka


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as cluster:
        create_data_topic(cluster, "orders", [10, 20, 30])
        create_data_topic(cluster, "refunds", [5])
        broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
        broker.alter("g1", {("orders", 0): Committed(3), ("orders", 2): Committed(30)})
        broker.alter("g2", {("refunds", 0): Committed(4)})
        yield cluster


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_matches_committed_offsets_and_log_ends(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    code, out, err = run(capsys, "groups", "describe", "g1", "g2", *bootstrap)
    assert code == 0
    assert "members and state are unknown" in err
    lines = [line.split() for line in out.splitlines()]
    assert lines[0][:6] == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
    ]
    assert lines[1] == ["g1", "orders", "0", "3", "10", "7", "-", "-", "-"]
    assert lines[2] == ["g1", "orders", "2", "30", "30", "0", "-", "-", "-"]
    assert "group g1: 2 partitions, total lag 7, state unknown" in out
    assert ["g2", "refunds", "0", "4", "5", "1", "-", "-", "-"] in lines

    code, out, _ = run(capsys, "groups", "describe", "g1", "--format", "csv", *bootstrap)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows] == [
        ("0", "3", "10", "7"),
        ("2", "30", "30", "0"),
    ]
    code, out, _ = run(
        capsys, "groups", "describe", "g1", "--format", "json", "--topic", "orders", *bootstrap
    )
    (group,) = json.loads(out)
    assert group["total_lag"] == 7
    assert [p["lag"] for p in group["partitions"]] == [7, 0]


def test_describe_bad_input(cluster: MockCluster, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    cases = {
        ("nosuch",): "unknown group 'nosuch'",
        ("g1", "--topic", "nosuch"): "unknown topic 'nosuch'",
        (): "name the groups to describe, or give --all-groups",
        ("g1", "--all-groups"): "name the groups to describe, or give --all-groups",
        ("g1", "--members", "--state"): "argument --state: not allowed with argument --members",
        ("g1", "--exporter", "http://127.0.0.1:9"): "--exporter http://127.0.0.1:9: cannot read",
    }
    for argv, message in cases.items():
        code, out, err = run(capsys, "groups", "describe", *argv, *bootstrap)
        assert (code, out) == (2, ""), argv
        assert err.count("error:") == 1 and message in err.splitlines()[-1], err


def test_the_mock_lacks_list_and_describe_groups(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster without ListGroups/DescribeGroups: the views that need them are one line and
    exit 2 (the offsets and state views answer with a note and `-`/UNKNOWN, tested above and
    below)."""
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    cases = {
        ("list",): "offsetwatch: error: the cluster does not support ListGroups: name the "
        "groups, `offsetwatch groups describe GROUP`\n",
        ("describe", "--all-groups"): "offsetwatch: error: the cluster does not support "
        "ListGroups: --all-groups needs it; name the groups\n",
        ("describe", "g1", "g2", "--members", "--format", "json"): "offsetwatch: error: the "
        "cluster does not support DescribeGroups: --members needs it; `offsetwatch groups "
        "describe GROUP` shows offsets and lag without it\n",
    }
    for argv, message in cases.items():
        assert run(capsys, "groups", *argv, *bootstrap) == (2, "", message), argv


class _ExporterApi(http.server.BaseHTTPRequestHandler):
    """/api/v1/groups/{group} of `offsetwatch export` (body shaped by exporter/serve/api.py)."""

    body = json.dumps(
        {
            "group": "g1",
            "generation": 4,
            "assignment_epoch": None,
            "status": "STALL",
            "partitions": [
                {"topic": "orders", "partition": 0, "lag_seconds": 42.5, "status": "STALL"}
            ],
        }
    ).encode()

    def do_GET(self) -> None:
        found = self.path == "/api/v1/groups/g1"
        self.send_response(200 if found else 404)
        self.end_headers()
        # the exporter's own 404 is JSON: a bare one is a server that is not an exporter
        self.wfile.write(self.body if found else b'{"error": "unknown group"}')

    def log_message(self, *args: object) -> None:
        pass


def test_exporter_adds_lag_seconds_and_status(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """The exporter needs __consumer_offsets records, which the mock's coordinator does not
    write; a server answering with the exporter's JSON stands in for it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ExporterApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code, out, err = run(
            capsys,
            "groups",
            "describe",
            "g1",
            "g2",
            "--exporter",
            url,
            "--bootstrap-server",
            cluster.bootstrap_servers,
        )
        assert code == 0, err
        lines = [line.split() for line in out.splitlines()]
        assert lines[0][-2:] == ["LAG-SECONDS", "STATUS"]
        assert lines[1][-2:] == ["42.5", "STALL"]
        assert lines[2][-2:] == ["-", "-"]
        code, out, _ = run(
            capsys,
            "groups",
            "describe",
            "g1",
            "--state",
            "--exporter",
            url,
            "--bootstrap-server",
            cluster.bootstrap_servers,
        )
        assert out.splitlines()[1].split()[-1] == "4"  # the generation, from the exporter
    finally:
        server.shutdown()
        server.server_close()
