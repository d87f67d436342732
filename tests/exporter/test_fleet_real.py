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
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.exporter.daemon_helpers import group_path, wait_for
from tests.exporter.exporter_process import ExporterProcess
from tests.real_broker import Broker, retry, unique

pytestmark = pytest.mark.broker

GROUPS = 40
#: a group's series on /metrics: its partitions' committed offsets
SERIES = "offsetwatch_group_partition_committed_offset"


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _commits(broker: Broker, topic: str, groups: list[str]) -> None:
    """Each group commits offset 1 + its index on `topic`, as the Admin API writes it."""
    admin = broker.admin()  # kept alive until its futures answer

    def commit(group: str, offset: int) -> None:
        tps = [TopicPartition(topic, 0, offset)]
        futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])
        for future in futures.values():
            for tp in future.result(timeout=60).topic_partitions:
                if tp.error is not None:  # a topic just created: its metadata may lag
                    raise KafkaException(tp.error)

    for index, group in enumerate(groups):
        retry(lambda group=group, index=index: commit(group, 1 + index))


def _replica(
    broker: Broker,
    fleet: str,
    name: str,
    protocol: str,
    tmp_path: Path,
    children: list[ExporterProcess],
) -> ExporterProcess:
    port = _port()
    argv = [
        "--bootstrap-server",
        broker.bootstrap,
        "--http-host",
        "127.0.0.1",
        "--http-port",
        str(port),
        "--sample-interval-s",
        "1",
        "--snapshot-interval-s",
        "0.5",
        "--fleet",
        fleet,
        "--fleet-replica",
        name,
        "--fleet-url",
        f"http://127.0.0.1:{port}",
        "--fleet-protocol",
        protocol,
    ]
    return ExporterProcess.start(argv, tmp_path / f"{name}.log", children)


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
) -> None:
    _topic, group_list = workload
    groups = set(group_list)
    fleet = unique("fleet")
    alone = _alone(kafka_broker, tmp_path, children)
    replicas = [
        _replica(kafka_broker, fleet, f"r{i}", protocol, tmp_path, children) for i in range(3)
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
        print(
            f"fleet ({protocol}): {signal_name} of a replica -> every group exported once "
            f"again in {time.monotonic() - started:.1f} s"
        )
    for group in group_list[:5]:
        assert replicas[0].get(group_path(group)).status == 200
