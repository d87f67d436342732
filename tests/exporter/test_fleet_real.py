"""A fleet of three `offsetwatch export --fleet` replicas as child processes on the real broker,
beside one exporter alone as the reference (issue 32, docs/fleet.md).

Checked against the single exporter and Kafka on the same broker:
* every group-level series on /metrics is exported by exactly one replica, and the union is
  the single exporter's, series by series;
* any replica answers /api/v1/groups (every group, nothing said missing) and
  /api/v1/groups/NAME of every group, whose committed offsets equal Kafka's OffsetFetch;
* /api/v1/fleet of each replica names the same owners as Kafka's DescribeConsumerGroups;
* a replica that leaves (SIGTERM), and with the classic protocol one that dies (SIGKILL: its
  10 s session; KIP-848's is the broker's, 45 s by default), hands its partitions over: the
  fleet answers as one exporter again. The handover window is printed, never asserted.

The faults (classic protocol, its 10 s session: KIP-848's 45 s would make the module slow),
one fleet through all of them: a replica SIGSTOPped past its session and resumed stops
exporting what it lost (how long the union counted its groups twice is measured), a replica
added with other settings (said, the union stays whole), all replicas but one gone (the last
exports everything); and a --fleet name an application's group has is refused at start.
Every handover time goes to `record_property` and is printed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from offsetwatch.decoder.partitioner import partition_for
from tests.exporter.daemon_helpers import group_path, wait_for
from tests.exporter.exporter_process import OFFSETWATCH, ExporterProcess
from tests.exporter.fleet_processes import admin_commit, fleet_replica
from tests.real_broker import Broker, retry, unique

#: a fleet of child exporters through stops, kills, hangs and restarts, minutes of mostly
#: waiting: the multi-node tier (`make test-cluster`), beside the 3-node Kafka tests
pytestmark = [pytest.mark.broker, pytest.mark.cluster]

GROUPS = 40
#: a group's series on /metrics: its partitions' committed offsets
SERIES = "offsetwatch_group_partition_committed_offset"


def _commits(broker: Broker, topic: str, groups: list[str]) -> None:
    """Each group commits offset 1 + its index on `topic`, as the Admin API writes it."""
    admin = broker.admin()  # kept alive until its futures answer
    for index, group in enumerate(groups):
        retry(lambda group=group, index=index: admin_commit(admin, group, topic, 1 + index))


def _alone(broker: Broker, tmp_path: Path, children: list[ExporterProcess]) -> ExporterProcess:
    argv = [
        "--bootstrap-server",
        broker.bootstrap,
        "--http-host",
        "127.0.0.1",
        "--http-port",
        "0",
        "--sample-interval-s",
        "1",
        "--snapshot-interval-s",
        "0.5",
    ]
    return ExporterProcess.start(argv, tmp_path / "alone.log", children)


def _series(exporter: ExporterProcess, groups: set[str]) -> set[tuple[str, str, str, float]]:
    answer = exporter.get("/metrics")
    assert answer.status == 200
    out = set()
    for family in text_string_to_metric_families(answer.body.decode()):
        for sample in family.samples:
            if sample.name == SERIES and sample.labels.get("group") in groups:
                labels = sample.labels
                out.add((labels["group"], labels["topic"], labels["partition"], sample.value))
    return out


def _ready(exporter: ExporterProcess) -> bool:
    return bool(exporter.get("/readyz").status == 200)


def _fleet(exporter: ExporterProcess) -> dict[str, Any]:
    answer = exporter.get("/api/v1/fleet")
    assert answer.status == 200, answer.body
    return dict(answer.json())


def _one_exporter(
    replicas: list[ExporterProcess], alone: ExporterProcess, groups: set[str]
) -> Callable[[], bool]:
    """True once the replicas' series are disjoint and together the single exporter's."""

    def check() -> bool:
        each = [_series(r, groups) for r in replicas]
        union: set[tuple[str, str, str, float]] = set().union(*each)
        disjoint = sum(len(s) for s in each) == len(union)
        return disjoint and union == _series(alone, groups) and len(union) == len(groups)

    return check


@pytest.fixture
def workload(kafka_broker: Broker) -> Iterator[tuple[str, list[str]]]:
    topic = unique("orders")
    kafka_broker.create_topic(topic, 1)
    kafka_broker.produce(topic, [GROUPS + 5])
    groups = [unique(f"fleet-g{i}") for i in range(GROUPS)]
    _commits(kafka_broker, topic, groups)
    yield topic, groups


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_fleet_answers_as_one_exporter_and_hands_over(
    kafka_broker: Broker,
    workload: tuple[str, list[str]],
    protocol: str,
    tmp_path: Path,
    children: list[ExporterProcess],
    record_property: Callable[[str, object], None],
) -> None:
    _topic, group_list = workload
    groups = set(group_list)
    fleet = unique("fleet")
    alone = _alone(kafka_broker, tmp_path, children)
    replicas = [
        fleet_replica(kafka_broker, fleet, f"r{i}", protocol, tmp_path, children) for i in range(3)
    ]
    for exporter in (alone, *replicas):
        wait_for(lambda e=exporter: _ready(e), "ready", describe=exporter.tail)  # type: ignore[misc]
    wait_for(
        lambda: all(
            len(_fleet(r)["members"]) == 3 and not _fleet(r)["unowned_partitions"] for r in replicas
        ),
        "every replica sees three members and no unowned partition",
        describe=lambda: [_fleet(r) for r in replicas],
    )
    wait_for(
        _one_exporter(replicas, alone, groups),
        "each series once, the union = the single exporter's",
        describe=lambda: ([len(_series(r, groups)) for r in replicas], replicas[0].tail()),
    )
    owned = [_fleet(r) for r in replicas]
    assert sum(len(m["partitions"]) for m in owned[0]["members"]) == owned[0]["partition_count"]
    admin = kafka_broker.admin()  # kept alive until its future answers
    described = admin.describe_consumer_groups([fleet])[fleet].result(60)
    kafka_owners = {
        m.client_id.split("|")[1]: sorted(tp.partition for tp in m.assignment.topic_partitions)
        for m in described.members
    }
    assert {m["replica"]: m["partitions"] for m in owned[0]["members"]} == kafka_owners

    # any replica answers for every group, as Kafka's OffsetFetch says
    kafka = {g: kafka_broker.committed(g) for g in group_list}
    for group in group_list:
        answer = replicas[0].get(group_path(group))
        assert answer.status == 200, (group, answer.body)
        rows = {(r["topic"], r["partition"]): r["committed"] for r in answer.json()["partitions"]}
        assert rows == kafka[group], group
    listed = replicas[1].get("/api/v1/groups")
    assert "X-Offsetwatch-Fleet-Incomplete" not in listed.headers, listed.headers
    assert groups <= {g["group"] for g in listed.json()}

    # a replica that leaves, then (classic: its session is 10 s, KIP-848's the broker's 45 s)
    # one that dies: the fleet answers as one exporter again
    endings = [(replicas[2], "SIGTERM")]
    if protocol == "classic":
        endings.append((replicas[1], "SIGKILL"))
    for ending, signal_name in endings:
        started = time.monotonic()
        ending.end(getattr(signal, signal_name))
        left = [r for r in replicas if r.proc.poll() is None]
        wait_for(
            lambda left=left: all(  # type: ignore[misc]
                len(_fleet(r)["members"]) == len(left) and not _fleet(r)["unowned_partitions"]
                for r in left
            ),
            f"the partitions of the replica ended by {signal_name} taken over",
            timeout_s=120,
            describe=lambda left=left: [_fleet(r) for r in left],  # type: ignore[misc]
        )
        wait_for(
            _one_exporter(left, alone, groups),
            f"one exporter again after {signal_name}",
            timeout_s=120,
            describe=lambda left=left: [len(_series(r, groups)) for r in left],  # type: ignore[misc]
        )
        took = time.monotonic() - started
        record_property(f"handover_{signal_name}_s", round(took, 1))
        print(
            f"fleet ({protocol}): {signal_name} of a replica -> every group exported once "
            f"again in {took:.1f} s"
        )
    for group in group_list[:5]:
        assert replicas[0].get(group_path(group)).status == 200


Series = set[tuple[str, str, str, float]]


def _members(exporter: ExporterProcess) -> dict[str, list[int]]:
    """Replica name -> partitions, as `exporter`'s fleet view last described the group."""
    return {m["replica"]: m["partitions"] for m in _fleet(exporter)["members"]}


def _settled(asked: ExporterProcess, names: set[str], partitions: int) -> bool:
    """`asked` sees exactly the replicas `names`, holding every partition between them."""
    members = _members(asked)
    held = sorted(p for owned in members.values() for p in owned)
    return set(members) == names and held == list(range(partitions))


def test_a_classic_fleet_through_stop_resume_add_and_all_but_one_gone(
    kafka_broker: Broker,
    workload: tuple[str, list[str]],
    tmp_path: Path,
    children: list[ExporterProcess],
    record_property: Callable[[str, object], None],
) -> None:
    topic, group_list = workload
    groups = set(group_list)

    # an application's group (it has committed offsets) is no fleet name: refused at start
    taken = group_list[0]
    argv = [OFFSETWATCH, "export", "--bootstrap-server", kafka_broker.bootstrap]
    argv += ["--fleet", taken, "--http-port", "0", "--fleet-url", "http://127.0.0.1:1"]
    # the test run's own OFFSETWATCH_* variables are not settings of this exporter
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSETWATCH_")}
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    errors = [line for line in refused.stderr.splitlines() if "error" in line]
    assert refused.returncode == 2, refused.stderr
    assert errors == [
        f"offsetwatch: error: --fleet {taken}: the consumer group {taken!r} is used by an "
        f"application (offsets committed on 1 partition(s) of {topic}); a replica would join "
        "it and take partitions of __consumer_offsets as that application's member. Choose "
        "another --fleet name"
    ], refused.stderr

    fleet = unique("fleet")
    alone = _alone(kafka_broker, tmp_path, children)
    replicas = [
        fleet_replica(kafka_broker, fleet, f"r{i}", "classic", tmp_path, children) for i in range(3)
    ]
    r0, r1, r2 = replicas
    for exporter in (alone, *replicas):
        wait_for(lambda e=exporter: _ready(e), "ready", describe=exporter.tail)  # type: ignore[misc]
    partitions = int(_fleet(r0)["partition_count"])
    # ready is joined: a replica may hold nothing yet while cooperative rounds go on
    wait_for(
        lambda: _settled(r0, {"r0", "r1", "r2"}, partitions) and all(_members(r0).values()),
        "three replicas holding partitions",
        describe=lambda: _fleet(r0),
    )
    wait_for(_one_exporter(replicas, alone, groups), "one exporter", describe=r0.tail)
    expected = _series(alone, groups)  # the workload commits nothing more

    # -- a replica stopped past its session (10 s), then resumed --------------------------
    lost = set(_members(r0)["r1"])
    assert lost, "r1 was given no partition to lose"
    started = time.monotonic()
    r1.proc.send_signal(signal.SIGSTOP)
    running = [r0, r2]  # a stopped process answers no scrape
    wait_for(
        lambda: _settled(r0, {"r0", "r2"}, partitions),
        "the stopped replica's partitions taken over",
        timeout_s=120,
        describe=lambda: _fleet(r0),
    )
    wait_for(
        _one_exporter(running, alone, groups),
        "the others export every group once",
        timeout_s=120,
        describe=lambda: [len(_series(r, groups)) for r in running],
    )
    took = time.monotonic() - started
    record_property("handover_sigstop_s", round(took, 1))
    print(f"fleet (classic): SIGSTOP of a replica -> every group exported once in {took:.1f} s")

    resumed = time.monotonic()
    r1.proc.send_signal(signal.SIGCONT)
    doubled_last: float | None = None
    learned: float | None = None
    doubled_after_learning = 0
    deadline = resumed + 120
    while True:
        each = [_series(r, groups) for r in replicas]
        union: Series = set().union(*each)
        now = time.monotonic()
        doubled = sum(len(s) for s in each) > len(union)
        if learned is None and "lost (the member's session expired)" in r1.tail(100_000):
            learned = now
        if doubled:
            doubled_last = now
            if learned is not None and now - learned > 1.0:
                doubled_after_learning += 1
        whole = not doubled and union == expected
        if whole and _settled(r0, {"r0", "r1", "r2"}, partitions):
            break
        assert now < deadline, (
            f"not one exporter {now - resumed:.0f} s after SIGCONT: "
            f"{[len(s) for s in each]} series, {_fleet(r0)}; {r1.tail()}"
        )
        time.sleep(0.1)
    assert learned is not None, r1.tail()
    # what the resumed replica exports now is its own partitions' groups only
    mine = set(_members(r0)["r1"])
    count = partitions
    assert {g for g, *_ in _series(r1, groups)} <= {
        g for g in groups if partition_for(g, count) in mine
    }
    double_s = 0.0 if doubled_last is None else doubled_last - resumed
    twice = (
        "no scrape saw a group exported twice"
        if doubled_last is None
        else f"the union counted groups twice until {double_s:.1f} s after it"
    )
    whole_s = time.monotonic() - resumed
    record_property("sigcont_double_export_s", round(double_s, 1))
    record_property("sigcont_learned_lost_s", round(learned - resumed, 1))
    record_property("sigcont_whole_again_s", round(whole_s, 1))
    print(
        f"fleet (classic): SIGCONT after the session expired -> the resumed replica said its "
        f"{len(lost)} partitions lost after {learned - resumed:.1f} s; {twice} "
        f"({doubled_after_learning} scrapes doubled more than 1 s after it said so); one "
        f"exporter of three again after {whole_s:.1f} s"
    )

    # -- a replica added, with other settings (a filter that leaves nothing out): the
    # partitions rebalance, the union stays whole, and the difference is said -------------
    started = time.monotonic()
    nothing = ("--group-deny", "^no-such-group-at-all$")
    r3 = fleet_replica(kafka_broker, fleet, "r3", "classic", tmp_path, children, nothing)
    replicas.append(r3)
    wait_for(lambda: _ready(r3), "the added replica ready", describe=r3.tail)
    wait_for(
        lambda: _settled(r0, {"r0", "r1", "r2", "r3"}, partitions) and bool(_members(r0)["r3"]),
        "the added replica given partitions",
        timeout_s=120,
        describe=lambda: _fleet(r0),
    )
    wait_for(
        _one_exporter(replicas, alone, groups),
        "one exporter of four",
        timeout_s=120,
        describe=lambda: [len(_series(r, groups)) for r in replicas],
    )
    took = time.monotonic() - started
    record_property("replica_added_s", round(took, 1))
    print(f"fleet (classic): a replica added -> one exporter of four in {took:.1f} s")
    wait_for(lambda: _fleet(r0)["mismatched"] == ["r3"], "r3's settings said", describe=r0.tail)
    view = _fleet(r2)
    fingerprints = {m["replica"]: m["settings_fingerprint"] for m in view["members"]}
    assert (
        fingerprints["r0"]
        == fingerprints["r1"]
        == fingerprints["r2"]
        == view["settings_fingerprint"]
    )
    assert fingerprints["r3"] not in (None, view["settings_fingerprint"])
    assert _fleet(r3)["mismatched"] == ["r0", "r1", "r2"]
    said = [line for line in r0.tail(1_000_000).splitlines() if "other settings" in line]
    assert len(said) == 1 and "r3 (" in said[0] and "they are out of step" in said[0], said
    wait_for(
        lambda: "this replica is out of step" in r3.tail(1_000_000),
        "the added replica says it is out of step",
        describe=r3.tail,
    )

    # -- all replicas but one gone (one dies, two leave): the last exports everything -----
    started = time.monotonic()
    r1.proc.send_signal(signal.SIGKILL)
    for leaving in (r2, r3):
        leaving.proc.send_signal(signal.SIGTERM)
    for ended in (r1, r2, r3):
        ended.proc.wait(60)
    wait_for(
        lambda: _settled(r0, {"r0"}, partitions),
        "the last replica holds every partition",
        timeout_s=120,
        describe=lambda: _fleet(r0),
    )
    wait_for(
        lambda: _series(r0, groups) == expected,
        "the last replica exports every group",
        timeout_s=120,
        describe=lambda: len(_series(r0, groups)),
    )
    took = time.monotonic() - started
    record_property("all_but_one_gone_s", round(took, 1))
    print(f"fleet (classic): all replicas but one gone -> it exports everything in {took:.1f} s")
    assert _fleet(r0)["mismatched"] == []
