"""`offsetwatch groups list|describe`.

On librdkafka's mock cluster: committed offsets, log ends and lag (the mock has no ListGroups
or DescribeGroups, so members and state are reported as unknown there). Listing, members and
state are shown with the answers a real Kafka 4.0.0 broker gave (groups-final.json).
"""

from __future__ import annotations

import csv
import http.server
import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from offsetwatch.cli import main
from offsetwatch.commands import groups as groups_cmd
from offsetwatch.mock_cluster import MockCluster
from offsetwatch.offset_ops.admin import AdminBroker
from offsetwatch.offset_ops.model import Committed
from tests.kafka_fixtures import create_data_topic
from tests.offsetwatch.offset_ops.doubles import RecordedBroker, recorded_groups

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


@pytest.fixture
def recorded(conformance_dir: Path, monkeypatch: pytest.MonkeyPatch) -> RecordedBroker:
    broker = RecordedBroker(recorded_groups(conformance_dir))
    monkeypatch.setattr(groups_cmd, "broker_from_args", lambda _args: broker)
    return broker


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


def test_the_mock_cannot_list_groups(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "groups", "list", "--bootstrap-server", cluster.bootstrap_servers)
    assert code == 2
    assert err == (
        "offsetwatch: error: the cluster does not support ListGroups: name the groups, "
        "`offsetwatch groups describe GROUP`\n"
    )


def test_list_recorded(recorded: RecordedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "groups", "list", "--bootstrap-server", "recorded:9092")
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["GROUP", "TYPE", "STATE", "SIMPLE"]
    assert ["live-consumer-1ed0", "CONSUMER", "STABLE", "no"] in lines
    assert ["admin-alter-new-8d77", "CLASSIC", "EMPTY", "yes"] in lines


def test_members_and_state_recorded(
    recorded: RecordedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "groups",
        "describe",
        "live-consumer-1ed0",
        "live-classic-7506",
        "-X",
        "bootstrap.servers=r:1",
    ]
    code, out, _ = run(capsys, *args, "--members")
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert [
        "live-consumer-1ed0",
        "90t3KvT1TQqxt4SQCyyojg",
        "/127.0.0.1",
        "rdkafka",
        "3",
        "orders:0,1,2",
    ] in lines
    code, out, _ = run(capsys, *args, "--state", "--format", "json")
    states = {row["group"]: row for row in json.loads(out)}
    assert states["live-consumer-1ed0"]["state"] == "STABLE"
    assert states["live-consumer-1ed0"]["members"] == 2
    assert states["live-classic-7506"]["type"] == "CLASSIC"
    code, out, _ = run(capsys, "groups", "describe", "--all-groups", "-X", "bootstrap.servers=r:1")
    assert code == 0
    assert out.count("total lag") == len(recorded.list_groups())


class _ExporterApi(http.server.BaseHTTPRequestHandler):
    """/api/v1/groups/{group} of `offsetwatch export` (body shaped by exporter/api.py)."""

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
        if found:
            self.wfile.write(self.body)

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


def test_describe_a_live_kip848_group(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A group.protocol=consumer member is joined and has committed: its offsets and lag are
    described; its member list needs ConsumerGroupDescribe, which the mock lacks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "kip848",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition("orders", 1, 15)], asynchronous=False)
        code, out, err = run(
            capsys, "groups", "describe", "kip848", "--bootstrap-server", cluster.bootstrap_servers
        )
    finally:
        consumer.close()
    assert code == 0, err
    assert out.splitlines()[1].split() == ["kip848", "orders", "1", "15", "20", "5", "-", "-", "-"]
