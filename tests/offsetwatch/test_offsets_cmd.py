"""`offsetwatch offsets export|reset|migrate` on librdkafka's mock cluster.

The mock has no DescribeGroups and answers timestamp lookups with -1. Tests that need a
group's members or a time lookup run the command on `MockPlus`: the real AdminBroker on the
mock, with those two answers added the way Kafka 4.x gives them (see doubles.py). Everything
else (offset reads, commits, log offsets) is the mock's own.
"""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from offsetwatch.cli import main
from offsetwatch.commands import offsets as offsets_cmd
from offsetwatch.mock_cluster import MockCluster
from offsetwatch.offset_ops.admin import AdminBroker
from offsetwatch.offset_ops.model import Committed, GroupInfo, MemberInfo, TopicPartitionKey
from tests.kafka_fixtures import create_data_topic
from tests.offsetwatch.offset_ops.doubles import MockPlus

pytestmark = pytest.mark.kafka

G1 = {("orders", 0): Committed(3, "m0"), ("orders", 1): Committed(20), ("refunds", 0): Committed(1)}
BUSY = GroupInfo(
    "busy",
    "CONSUMER",
    "STABLE",
    "",
    "uniform",
    False,
    (MemberInfo("m-1", "rdkafka", "/10.0.0.1", None, (("orders", 0),)),),
)


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as cluster:
        create_data_topic(cluster, "orders", [10, 20, 30])
        create_data_topic(cluster, "refunds", [5])
        broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
        broker.alter("g1", G1)
        broker.alter("busy", {("orders", 0): Committed(2)})
        yield cluster


@pytest.fixture
def plus(cluster: MockCluster, monkeypatch: pytest.MonkeyPatch) -> MockPlus:
    broker = MockPlus(cluster.bootstrap_servers, {"busy": BUSY})
    monkeypatch.setattr(offsets_cmd, "broker_from_args", lambda _args: broker)
    return broker


def run(
    capsys: pytest.CaptureFixture[str], cluster: MockCluster, *argv: str
) -> tuple[int, str, str]:
    code = main([*argv, "--bootstrap-server", cluster.bootstrap_servers])
    out, err = capsys.readouterr()
    return code, out, err


def committed(cluster: MockCluster, group: str) -> dict[TopicPartitionKey, int]:
    broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
    return {k: c.offset for k, c in broker.committed({group: None})[group].items()}


def offsets_of(values: Mapping[TopicPartitionKey, Committed]) -> dict[TopicPartitionKey, int]:
    return {k: c.offset for k, c in values.items()}


def test_dry_run_changes_nothing(cluster: MockCluster, capsys: pytest.CaptureFixture[str]) -> None:
    for mode in (["--to-earliest"], ["--to-latest"], ["--shift-by", "-5"], ["--to-offset", "7"]):
        code, out, err = run(
            capsys, cluster, "offsets", "reset", "--group", "g1", "--all-topics", *mode
        )
        assert code == 0, err
        assert "dry run: nothing changed; add --execute to reset 3 partition(s)" in out
    assert committed(cluster, "g1") == offsets_of(G1)
    code, out, _ = run(
        capsys, cluster, "offsets", "reset", "--group", "g1", "--all-topics", "--shift-by", "-5"
    )
    assert out.splitlines()[1].split() == [
        "orders",
        "0",
        "3",
        "0",
        "-3",
        "re-read",
        "3",
        "clamped",
        "to",
        "log",
        "start",
        "(asked",
        "-2)",
    ]


def test_execute_changes_exactly_the_plan(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "g1",
        "--topic",
        "orders:0,2",
        "--to-offset",
        "12",
        "--execute",
        "--force",
    )
    assert code == 0, err
    assert "reset 2 partition(s) of group g1" in out
    # orders:0 is clamped to its log end 10; orders:2 had no offset; the rest is untouched.
    assert committed(cluster, "g1") == {
        ("orders", 0): 10,
        ("orders", 1): 20,
        ("orders", 2): 12,
        ("refunds", 0): 1,
    }


def test_from_file_round_trips_export(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    saved = tmp_path / "g1.csv"
    assert run(capsys, cluster, "offsets", "export", "--group", "g1", "-o", str(saved))[0] == 0
    assert saved.read_text() == "orders,0,3\norders,1,20\nrefunds,0,1\n"
    code, _, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "g1",
        "--all-topics",
        "--to-latest",
        "--execute",
        "--force",
    )
    assert code == 0, err
    assert committed(cluster, "g1") == {("orders", 0): 10, ("orders", 1): 20, ("refunds", 0): 5}
    code, _, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "g1",
        "--from-file",
        str(saved),
        "--execute",
        "--force",
    )
    assert code == 0, err
    assert run(capsys, cluster, "offsets", "export", "--group", "g1")[1] == saved.read_text()


def test_export_of_a_plan_feeds_from_file(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "g1",
        "--topic",
        "orders",
        "--to-earliest",
        "--export",
    )
    assert code == 0
    assert out == "orders,0,0\norders,1,0\norders,2,0\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(out)
    code, _, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "g1",
        "--from-file",
        str(plan),
        "--execute",
        "--force",
    )
    assert code == 0, err
    assert committed(cluster, "g1")[("orders", 2)] == 0


def _produce_timed(cluster: MockCluster, stamps: Mapping[int, list[int]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 3})
    for partition, times in stamps.items():
        for stamp in times:
            producer.produce("events", b"v", partition=partition, timestamp=stamp)
    assert producer.flush(10) == 0


def _first_at_or_after(times: list[int], time_ms: int) -> int:
    return next((i for i, t in enumerate(times) if t >= time_ms), len(times))


def test_to_datetime_lands_on_the_first_offset_at_or_after_the_time(
    cluster: MockCluster, plus: MockPlus, capsys: pytest.CaptureFixture[str]
) -> None:
    base = 1_790_000_000_000
    stamps = {
        0: [base + 1_000 * i for i in range(10)],
        1: [base + 1_000 * i + 500 for i in range(10)],
        2: [base + 20_000 + i for i in range(3)],  # all after the time
        3: [base - 5_000],  # all before the time
    }
    cluster.create_topic("events", 4)
    _produce_timed(cluster, stamps)
    AdminBroker({"bootstrap.servers": cluster.bootstrap_servers}).alter(
        "timed", {("events", p): Committed(0) for p in range(4)}
    )
    time_ms = base + 4_200
    moment = datetime.fromtimestamp(time_ms / 1000, UTC).isoformat()
    code, _, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "timed",
        "--topic",
        "events",
        "--to-datetime",
        moment,
        "--execute",
    )
    assert code == 0, err
    expected = {("events", p): _first_at_or_after(times, time_ms) for p, times in stamps.items()}
    assert expected == {("events", 0): 5, ("events", 1): 4, ("events", 2): 0, ("events", 3): 1}
    assert committed(cluster, "timed") == expected


def test_by_duration_counts_back_from_now(
    cluster: MockCluster, plus: MockPlus, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time() * 1000)
    times = [now - 100_000 + 10_000 * i for i in range(10)]  # every 10 s over the last 100 s
    cluster.create_topic("events", 1)
    _produce_timed(cluster, {0: times})
    AdminBroker({"bootstrap.servers": cluster.bootstrap_servers}).alter(
        "timed", {("events", 0): Committed(0)}
    )
    before = int(time.time() * 1000)
    code, _, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "timed",
        "--topic",
        "events",
        "--by-duration",
        "PT45S",
        "--execute",
    )
    after = int(time.time() * 1000)
    assert code == 0, err
    offset = committed(cluster, "timed")[("events", 0)]
    assert (
        _first_at_or_after(times, after - 45_000)
        >= offset
        >= _first_at_or_after(times, before - 45_000)
    )
    assert offset == 6  # records at now-40 s and later


BAD_INPUTS = [
    (["reset", "--group", "nosuch", "--topic", "orders", "--to-latest"], "unknown group 'nosuch'"),
    (["reset", "--group", "g1", "--topic", "nosuch", "--to-latest"], "unknown topic 'nosuch'"),
    (
        ["reset", "--group", "g1", "--topic", "orders:9", "--to-latest"],
        "unknown partition orders:9",
    ),
    (
        ["reset", "--group", "g1", "--topic", "orders", "--to-datetime", "2999-01-01T00:00:00Z"],
        "--to-datetime 2999-01-01T00:00:00Z is in the future",
    ),
    (
        ["reset", "--group", "g1", "--from-file", "{malformed}"],
        "line 2: expected topic,partition,offset",
    ),
    (["reset", "--group", "g1", "--from-file", "{duplicate}"], "line 3: orders:0 repeats line 1"),
    (
        ["reset", "--group", "g1", "--from-file", "{past_end}"],
        "offset 11 of orders:0 is beyond the log end 10",
    ),
    (["reset", "--group", "g1", "--from-file", "{unknown}"], "unknown partition orders:3"),
    (["reset", "--group", "g1", "--topic", "orders:2", "--shift-by", "1"], "cannot shift orders:2"),
    (
        ["reset", "--group", "busy", "--topic", "orders", "--to-latest"],
        "group 'busy' has 1 active member(s) (state STABLE)",
    ),
    (
        ["reset", "--group", "g1", "--to-earliest", "--to-latest", "--all-topics"],
        "argument --to-latest: not allowed with argument --to-earliest",
    ),
    (
        ["reset", "--group", "g1", "--topic", "orders", "--from-file", "{duplicate}"],
        "--from-file takes its partitions from the file",
    ),
    (["reset", "--group", "g1", "--to-latest"], "say which partitions: --topic"),
    (
        ["migrate", "--from-group", "g1", "--to-group", "busy"],
        "migrate target 'busy' already has offsets",
    ),
    (
        ["migrate", "--from-group", "busy", "--to-group", "fresh"],
        "group 'busy' has 1 active member(s)",
    ),
    (["migrate", "--from-group", "nosuch", "--to-group", "fresh"], "unknown group 'nosuch'"),
    (["export", "--group", "nosuch"], "unknown group 'nosuch'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUTS, ids=[m for _, m in BAD_INPUTS])
def test_bad_input_one_line_exit_2_nothing_applied(
    cluster: MockCluster,
    plus: MockPlus,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    message: str,
) -> None:
    files = {
        "malformed": "orders,0,1\norders;1;2\n",
        "duplicate": "orders,0,1\norders,1,2\norders,0,3\n",
        "past_end": "orders,0,11\n",
        "unknown": "orders,3,0\n",
    }
    for name, text in files.items():
        (tmp_path / f"{name}.csv").write_text(text)
    argv = [a.format(**{n: str(tmp_path / f"{n}.csv") for n in files}) for a in argv]
    if argv[0] != "export":
        argv.append("--execute")
    before = {g: committed(cluster, g) for g in ("g1", "busy", "fresh", "nosuch")}
    code, out, err = run(capsys, cluster, "offsets", *argv)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert message in err
    assert {g: committed(cluster, g) for g in before} == before


def test_time_before_the_log_start_is_refused(
    cluster: MockCluster, plus: MockPlus, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.delete_records("orders", 1, 5)
    code, _, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "g1",
        "--topic",
        "orders",
        "--to-datetime",
        "2001-01-01T00:00:00Z",
        "--execute",
    )
    assert code == 2
    assert "before the log start of orders:1 (first kept offset 5" in err
    assert committed(cluster, "g1") == offsets_of(G1)


def test_active_group_dry_run_warns_execute_refuses_force_applies(
    cluster: MockCluster, plus: MockPlus, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["offsets", "reset", "--group", "busy", "--topic", "orders:0", "--to-latest"]
    code, out, err = run(capsys, cluster, *argv)
    assert code == 0
    assert "warning: group 'busy' has 1 active member(s)" in err
    assert "dry run" in out
    assert run(capsys, cluster, *argv, "--execute")[0] == 2
    assert committed(cluster, "busy") == {("orders", 0): 2}
    # --force: the check is ours; a real broker still refuses a group with members, the
    # mock accepts the commit.
    assert run(capsys, cluster, *argv, "--execute", "--force")[0] == 0
    assert committed(cluster, "busy") == {("orders", 0): 10}


def test_without_describe_groups_execute_needs_force(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["offsets", "reset", "--group", "g1", "--topic", "refunds", "--to-latest", "--execute"]
    code, _, err = run(capsys, cluster, *argv)
    assert code == 2
    assert "cannot check group 'g1' for active members: the cluster does not support" in err
    assert committed(cluster, "g1") == offsets_of(G1)
    assert run(capsys, cluster, *argv, "--force")[0] == 0
    assert committed(cluster, "g1")[("refunds", 0)] == 5


def test_migrate_copies_and_verifies(
    cluster: MockCluster, plus: MockPlus, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["offsets", "migrate", "--from-group", "g1", "--to-group", "g2"]
    code, out, _ = run(capsys, cluster, *argv)
    assert code == 0
    assert "dry run: nothing copied; add --execute to copy 3 offset(s) to g2" in out
    assert committed(cluster, "g2") == {}
    code, out, err = run(capsys, cluster, *argv, "--topic", "ord.*", "--execute")
    assert code == 0, err
    assert "copied and verified 2 offset(s) from g1 to g2" in out
    assert out.splitlines()[1].split() == ["orders", "0", "3", "3", "m0", "ok"]
    found = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers}).committed({"g2": None})
    assert {k: (c.offset, c.metadata) for k, c in found["g2"].items()} == {
        ("orders", 0): (3, "m0"),
        ("orders", 1): (20, ""),
    }


class RacingCommitter(MockPlus):
    """Another client commits to the target between the copy and the read-back."""

    def alter(self, group_id: str, offsets: Mapping[TopicPartitionKey, Committed]) -> None:
        super().alter(group_id, offsets)
        super().alter(group_id, {("orders", 1): Committed(7)})


def test_migrate_detects_a_difference(
    cluster: MockCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = RacingCommitter(cluster.bootstrap_servers)
    monkeypatch.setattr(offsets_cmd, "broker_from_args", lambda _args: broker)
    code, out, err = run(
        capsys, cluster, "offsets", "migrate", "--from-group", "g1", "--to-group", "g2", "--execute"
    )
    assert code == 1
    assert ["orders", "1", "20", "7", "-", "DIFFERENT"] in [
        line.split() for line in out.splitlines()
    ]
    assert "1 of 3 partition(s) of g2 differ from g1 (first: orders:1)" in err


def test_kip848_group(cluster: MockCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """A group.protocol=consumer group: the mock runs its heartbeats and commits, so offsets
    are read and planned. The mock cannot show the reset itself: after the member left it
    still refuses commits from outside the group (UNKNOWN_MEMBER_ID, checked for 60 s), while
    Kafka 4.0 accepts them for an Empty consumer group (the conformance run's
    cli-reset-datetime-f339 was reset by kafka-consumer-groups). The refusal is reported in
    one line and nothing is applied."""
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
    consumer.subscribe(["orders"])
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition("orders", 2, 25)], asynchronous=False)
    consumer.close()
    argv = ["offsets", "reset", "--group", "kip848", "--all-topics", "--shift-by", "-10"]
    code, out, err = run(capsys, cluster, *argv)
    assert code == 0, err
    assert out.splitlines()[1].split()[:6] == ["orders", "2", "25", "15", "-10", "re-read"]
    code, out, err = run(capsys, cluster, *argv, "--execute", "--force")
    assert code == 2
    assert err.splitlines()[-1] == (
        "offsetwatch: error: the broker refused to commit offsets of group 'kip848' "
        "(UNKNOWN_MEMBER_ID): the group has members; stop its consumers first"
    )
    assert committed(cluster, "kip848") == {("orders", 2): 25}


def test_history_mode_names_a_group_the_history_lacks(
    cluster: MockCluster,
    plus: MockPlus,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = [
        "offsets",
        "reset",
        "--group",
        "g1",
        "--all-topics",
        "--to-history-time",
        "2026-01-01T00:00:00Z",
        "--history",
        str(tmp_path),
    ]

    def unknown(path: str, group: str, time_ms: int) -> dict[tuple[str, int], int]:
        raise LookupError(f"group {group!r} does not appear in {path}")

    module = types.ModuleType("offsetwatch.spark_jobs.offsets_at")
    module.offsets_at_from_path = unknown  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "offsetwatch.spark_jobs.offsets_at", module)
    code, _, err = run(capsys, cluster, *argv)
    assert code == 2
    assert f"--history {tmp_path}: group 'g1' does not appear in {tmp_path}" in err
    assert committed(cluster, "g1") == offsets_of(G1)


def test_history_mode_plans_from_the_history(
    cluster: MockCluster,
    plus: MockPlus,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Spark job is another module's (offsets_at); its contract is stood in for here."""
    calls = []

    def offsets_at_from_path(path: str, group: str, time_ms: int) -> dict[tuple[str, int], int]:
        calls.append((path, group, time_ms))
        return {("orders", 0): 7, ("orders", 1): 99, ("refunds", 0): 2}

    module = types.ModuleType("offsetwatch.spark_jobs.offsets_at")
    module.offsets_at_from_path = offsets_at_from_path  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "offsetwatch.spark_jobs.offsets_at", module)
    code, out, err = run(
        capsys,
        cluster,
        "offsets",
        "reset",
        "--group",
        "g1",
        "--topic",
        "orders",
        "--to-history-time",
        "1970-01-01T00:00:01Z",
        "--history",
        str(tmp_path),
        "--execute",
    )
    assert code == 0, err
    assert calls == [(str(tmp_path), "g1", 1000)]
    # In scope (orders) only; orders:1 is clamped to its log end 20.
    assert committed(cluster, "g1") == {("orders", 0): 7, ("orders", 1): 20, ("refunds", 0): 1}
    assert "clamped to log end (asked 99)" in out
    assert "1 partition(s) in scope have no offset in the history at 1970-01-01T00:00:01Z" in err


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("export", "reset", "migrate"):
        assert main(["offsets", command, "--help"]) == 0
        out = capsys.readouterr().out
        assert "examples:" in out and f"offsetwatch offsets {command} --" in out
    assert main(["groups", "describe", "--help"]) == 0
    assert "offsetwatch groups describe --all-groups --exporter" in capsys.readouterr().out


def test_export_to_an_unwritable_file(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "missing" / "g1.csv"
    code, _, err = run(capsys, cluster, "offsets", "export", "--group", "g1", "-o", str(target))
    assert code == 2
    assert err == f"offsetwatch: error: -o {target}: cannot write it: No such file or directory\n"
