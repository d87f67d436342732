"""`offsetwatch offsets export|reset|migrate` on librdkafka's mock cluster: bad input, our own
CSV round trips, injected races, the history mode, a cluster without DescribeGroups. Every
reset mode's plan against Kafka's tool, applying it, live groups and migrate are in
test_offsets_real_broker.py.

The mock has no DescribeGroups and answers timestamp lookups with -1. Tests that need a
group's members or a time lookup run the command on `MockPlus`: the real AdminBroker on the
mock, with those two answers added the way Kafka 4.x gives them (see doubles.py). Everything
else (offset reads, commits, log offsets) is the mock's own.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Mapping
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


def test_export_to_an_unwritable_file_is_refused_before_connecting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def connect(_args: object) -> None:
        raise AssertionError("connected before checking -o")

    monkeypatch.setattr(offsets_cmd, "broker_from_args", connect)
    target = tmp_path / "missing" / "g1.csv"
    code = main(["offsets", "export", "--group", "g1", "-o", str(target)])
    assert code == 2
    assert capsys.readouterr().err == (
        f"offsetwatch: error: --output {target}: its directory does not exist; create it or "
        "choose another\n"
    )


def test_export_whose_write_fails_after_the_checks(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A device passes the checks (it is written in place, not probed); its write failing
    later is still one line naming the option."""
    code, out, err = run(capsys, cluster, "offsets", "export", "--group", "g1", "-o", "/dev/full")
    assert code == 2 and out == ""
    assert err == (
        "offsetwatch: error: --output /dev/full: cannot write it: No space left on device; "
        "free space there or choose another place\n"
    )
