"""The exporter on a real 3-node cluster (replication factor 3, `min.insync.replicas=2`) as a
client commits, through the faults production clusters see: the leader of the group's
`__consumer_offsets` partition killed, the active controller killed, a rolling restart, two of
three nodes down, a node hung past every request timeout.

Each test checks: after the fault the API equals Kafka's OffsetFetch; `/readyz` was never
ready while any partition was stale, and said not ready within `--stale-after-s` (+ slack)
once the cluster could confirm nothing; no traceback in the exporter's log. It records, never
asserts, the time to recover and the exporter's CPU while degraded (`make test-cluster`:
these tests run outside `make test`, whose time they would double)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.partitioner import partition_for
from tests.exporter.daemon_helpers import wait_for
from tests.exporter.exporter_process import ExporterProcess, export_argv
from tests.exporter.exporter_process import api_offsets as child_api_offsets
from tests.exporter.real_broker_helpers import Committer, kafka_log_ends, kafka_offsets
from tests.exporter.test_broker_faults_real import positions_of
from tests.real_broker import unique
from tests.three_brokers import NODES, ThreeBrokers, three_brokers

pytestmark = [pytest.mark.broker, pytest.mark.cluster]

STALE_AFTER_S = 4.0
OFFSETS_PARTITIONS = 50  # Kafka's default
#: an answer that came from a batch or a round begun before the fault, taken a moment after
SLACK_S = 2.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreeBrokers]:
    with three_brokers(tmp_path_factory.mktemp("three") / "cluster") as brokers:
        yield brokers


@dataclass(slots=True)
class Readiness:
    """Samples /readyz of the exporter until stopped: (time, status, body)."""

    exporter: ExporterProcess
    seen: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.done.is_set():
            with contextlib.suppress(Exception):
                answer = self.exporter.get("/readyz")
                self.seen.append((time.monotonic(), answer.status, answer.json()))
            time.sleep(0.2)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _kafka_committed(cluster: ThreeBrokers, group: str) -> dict[tuple[str, int], int] | None:
    for node in range(1, NODES + 1):
        with contextlib.suppress(Exception):
            return {
                tp: offset
                for tp, (offset, _e, _m) in kafka_offsets(cluster.broker(node), group).items()
            }
    return None


def _kafka_log_ends(cluster: ThreeBrokers, topic: str) -> dict[tuple[str, int], int] | None:
    for node in range(1, NODES + 1):
        with contextlib.suppress(Exception):
            return kafka_log_ends(cluster.broker(node), [(topic, p) for p in range(6)])
    return None


def _api_log_ends(exporter: ExporterProcess, group: str) -> dict[tuple[str, int], int] | None:
    answer = exporter.get(f"/api/v1/groups/{group}")
    if answer.status != 200:
        return None
    return {(r["topic"], r["partition"]): r["log_end"] for r in answer.json()["partitions"]}


def _source_positions(cluster: ThreeBrokers) -> set[tuple[int, int]]:
    records = positions_of(cluster.broker(1), OFFSETS_TOPIC, OFFSETS_PARTITIONS)
    return {(r["partition"], r["offset"]) for r in records}


def _republished(cluster: ThreeBrokers, output: str) -> list[tuple[int, int]]:
    out = []
    for record in positions_of(cluster.broker(1), output, 3):
        value = json.loads(record["value"])
        if value.get("type") != "log_end":
            out.append((value["partition"], value["offset"]))
    return out


@dataclass(slots=True)
class Run:
    cluster: ThreeBrokers
    exporter: ExporterProcess
    readiness: Readiness
    committer: Committer
    group: str
    topic: str
    output: str


@contextlib.contextmanager
def _running(cluster: ThreeBrokers, tmp_path: Path, name: str) -> Iterator[Run]:
    topic, group, output = unique("orders"), unique(name), unique("republished")
    admin_broker = cluster.broker(1)
    admin_broker.create_topic(topic, 6)
    admin_broker.create_topic(output, 3)
    children: list[ExporterProcess] = []
    committer = Committer(admin_broker, topic, group, 6)
    try:
        wait_for(lambda: committer.commits > 3, "commits flowing")
        argv = export_argv(
            cluster.bootstrap,
            output,
            tmp_path / "archive",
            tmp_path / "exporter.ckpt",
            "--sample-interval-s", "1",
            "--stale-after-s", str(STALE_AFTER_S),
            "--snapshot-interval-s", "1",
            "-X", "socket.timeout.ms=5000",
        )  # fmt: skip
        exporter = ExporterProcess.start(argv, tmp_path / "exporter.log", children)
        wait_for(lambda: exporter.get("/readyz").status == 200, "ready", timeout_s=120)
        readiness = Readiness(exporter)
        watcher = threading.Thread(target=readiness.run, daemon=True)
        watcher.start()
        try:
            yield Run(cluster, exporter, readiness, committer, group, topic, output)
        finally:
            readiness.done.set()
            watcher.join(10)
    finally:
        committer.stop()
        for child in children:
            if child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait(60)
            child.log.close()


def _check(run: Run, record: Callable[[str, object], None], label: str, began: float) -> None:
    """After the fault: the API = OffsetFetch, never ready while stale, no traceback."""
    run.committer.stop()
    recovered_from = time.monotonic()
    wait_for(
        lambda: (
            (kafka := _kafka_committed(run.cluster, run.group)) is not None
            and child_api_offsets(run.exporter, run.group) == kafka
        ),
        "the API = OffsetFetch after the fault",
        timeout_s=180,
        describe=lambda: (
            child_api_offsets(run.exporter, run.group),
            _kafka_committed(run.cluster, run.group),
        ),
    )
    recovery_s = round(time.monotonic() - recovered_from, 1)
    record("recovery_s", recovery_s)
    wait_for(
        lambda: (
            (ends := _kafka_log_ends(run.cluster, run.topic)) is not None
            and _api_log_ends(run.exporter, run.group) == ends
        ),
        "the API's log ends = ListOffsets",
        timeout_s=60,
        describe=lambda: (
            _api_log_ends(run.exporter, run.group),
            _kafka_log_ends(run.cluster, run.topic),
        ),
    )
    # every __consumer_offsets position republished exactly once, through the fault (the
    # readers of this check commit nothing, so the source stands still meanwhile)
    expected = _source_positions(run.cluster)
    wait_for(
        lambda: set(_republished(run.cluster, run.output)) >= expected,
        "every __consumer_offsets position republished",
        timeout_s=120,
    )
    republished = _republished(run.cluster, run.output)
    assert len(republished) == len(set(republished)), "a record republished twice"
    assert set(republished) == expected
    wrong = [
        (round(at - began, 1), body)
        for at, status, body in run.readiness.seen
        if status == 200 and body.get("stale_partitions")
    ]
    assert not wrong, f"ready while stale: {wrong[:3]}"
    log = run.exporter.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    print(f"{label}: API = OffsetFetch {recovery_s} s after the fault ended")


def _degraded_cpu(run: Run, seconds: float) -> float:
    """The exporter's CPU (share of one core) over the next `seconds`."""
    pid = run.exporter.proc.pid
    cpu, began = _cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    return (_cpu_s(pid) - cpu) / (time.monotonic() - began)


def test_the_leader_of_the_groups_partition_killed_and_restarted(
    cluster: ThreeBrokers, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    with _running(cluster, tmp_path, "leaderkill") as run:
        partition = partition_for(run.group, 50)
        leader = cluster.leader_of(OFFSETS_TOPIC, partition)
        began = time.monotonic()
        cluster.kill(leader)
        share = _degraded_cpu(run, 5.0)
        record_property("degraded_cpu_share", round(share, 2))
        cluster.restart(leader)
        _check(run, record_property, f"leader {leader} of partition {partition} killed", began)
        print(f"exporter CPU with one of three nodes down: {share:.0%} of a core")


def test_the_active_controller_killed_and_restarted(
    cluster: ThreeBrokers, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    with _running(cluster, tmp_path, "controllerkill") as run:
        controller = cluster.active_controller()
        began = time.monotonic()
        cluster.kill(controller)
        time.sleep(5.0)
        cluster.restart(controller)
        _check(run, record_property, f"active controller {controller} killed", began)


def test_a_rolling_restart(
    cluster: ThreeBrokers, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    with _running(cluster, tmp_path, "rolling") as run:
        began = time.monotonic()
        for node in range(1, NODES + 1):
            cluster.kill(node)
            cluster.restart(node)
            time.sleep(2.0)
        _check(run, record_property, "rolling restart", began)


def test_two_of_three_down_is_never_served_as_ready(
    cluster: ThreeBrokers, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """With two of three nodes down the cluster has no controller quorum and no ISR of 2:
    the exporter cannot confirm its state, so /readyz must say so, from --stale-after-s on."""
    with _running(cluster, tmp_path, "twodown") as run:
        down = [2, 3]
        began = time.monotonic()
        for node in down:
            cluster.kill(node)
        first = _degraded_cpu(run, 10.0)  # requests in flight when the nodes died
        share = _degraded_cpu(run, 50.0)  # a minute down in all
        record_property("degraded_cpu_share_first_10s", round(first, 2))
        record_property("degraded_cpu_share", round(share, 2))
        late = [
            (round(at - began, 1), status)
            for at, status, _b in run.readiness.seen
            if at - began > STALE_AFTER_S + SLACK_S
        ]
        for node in down:
            cluster.restart(node)
        _check(run, record_property, "two of three nodes down 60 s", began)
        assert late and all(status == 503 for _at, status in late), late
        print(
            f"exporter CPU with two of three nodes down: {first:.0%} of a core in the first "
            f"10 s, {share:.0%} in the next 50 s"
        )


def test_a_node_hung_past_every_request_timeout(
    cluster: ThreeBrokers, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    with _running(cluster, tmp_path, "hung") as run:
        partition = partition_for(run.group, 50)
        leader = cluster.leader_of(OFFSETS_TOPIC, partition)
        began = time.monotonic()
        cluster.pause(leader)
        try:
            share = _degraded_cpu(run, 15.0)
        finally:
            cluster.resume(leader)
        record_property("degraded_cpu_share", round(share, 2))
        _check(run, record_property, f"node {leader} hung 15 s", began)
        print(f"exporter CPU with one node hung: {share:.0%} of a core")
