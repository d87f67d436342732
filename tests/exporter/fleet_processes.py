"""`offsetwatch export --fleet` replicas as child processes, and commits as the Admin API
writes them: shared by the fleet's real-broker modules."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from tests.exporter.exporter_process import ExporterProcess
from tests.real_broker import Broker


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def admin_commit(admin: Any, group: str, topic: str, offset: int) -> None:
    """`group` commits `offset` on partition 0 of `topic` (AlterConsumerGroupOffsets); a
    partition's error raises (a topic just created: its metadata may lag; retry it)."""
    tps = [TopicPartition(topic, 0, offset)]
    futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])
    for future in futures.values():
        for tp in future.result(timeout=60).topic_partitions:
            if tp.error is not None:
                raise KafkaException(tp.error)


def fleet_replica(
    broker: Broker,
    fleet: str,
    name: str,
    protocol: str,
    tmp_path: Path,
    children: list[ExporterProcess],
    extra: tuple[str, ...] = (),
    log_name: str | None = None,
) -> ExporterProcess:
    """A replica of `fleet` on a free port it announces as its URL, sampling every second;
    its log is `log_name` (a replica started again under its name needs a log of its own:
    the URL is read from the log) or `<name>.log` in `tmp_path`."""
    port = free_port()
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
        *extra,
    ]
    return ExporterProcess.start(argv, tmp_path / (log_name or f"{name}.log"), children)


def fleet_members(exporter: ExporterProcess) -> dict[str, list[int]]:
    """Replica name -> partitions, as `exporter`'s /api/v1/fleet last described the group."""
    answer = exporter.get("/api/v1/fleet")
    assert answer.status == 200, answer.body
    return {m["replica"]: m["partitions"] for m in answer.json()["members"]}


def fleet_settled(asked: ExporterProcess, names: set[str], partitions: int) -> bool:
    """`asked` sees exactly the replicas `names`, holding every partition between them."""
    members = fleet_members(asked)
    held = sorted(p for owned in members.values() for p in owned)
    return set(members) == names and held == list(range(partitions))
