"""A real 3-node KRaft cluster for the tests: each node broker and controller, replication
factor 3 and `min.insync.replicas=2` (scripts/kafka/broker cluster), with one node at a time
killed, restarted, paused or resumed as production faults do."""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from tests.real_broker import Broker, broker_script, require_broker, wait_serving

NODES = 3


def _free_run(count: int) -> int:
    """A base port with `count` free ports from it (node i: base + 2(i-1), its controller +1).

    Below Linux's ephemeral range (32768-60999), as tests/real_broker.py's ports: a node is
    restarted on its port, and while it is down a client reconnecting to it can be handed
    that very port for its own end and connect to itself, so the node cannot bind again."""
    for _ in range(50):
        base = random.randrange(20_000, 32_000 - count, 2)
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + count):
                    probe = stack.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no run of {count} free ports found")


def _script(*args: str, timeout: float = 240.0) -> str:
    done = subprocess.run(
        [str(broker_script()), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"broker {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True, slots=True)
class ThreeBrokers:
    directory: Path
    base_port: int

    def port(self, node: int) -> int:
        return self.base_port + 2 * (node - 1)

    def node_dir(self, node: int) -> Path:
        return self.directory / f"node-{node}"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port(n)}" for n in range(1, NODES + 1))

    def broker(self, node: int = 1) -> Broker:
        """One node as a `Broker` (its clients learn the others from the metadata)."""
        return Broker(self.node_dir(node), self.port(node))

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

    def leader_of(self, topic: str, partition: int) -> int:
        admin = self.admin()
        deadline = time.monotonic() + 60
        while True:
            metadata = admin.list_topics(topic, timeout=10)
            found = metadata.topics[topic].partitions.get(partition)
            if found is not None and found.leader > 0:
                return int(found.leader)
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}[{partition}] has no leader")
            time.sleep(0.2)

    def active_controller(self) -> int:
        admin = self.admin()  # kept alive until the answer: a dropped client cancels it
        described = admin.describe_cluster(request_timeout=10).result(timeout=30)
        return int(described.controller.id)

    def kill(self, node: int) -> None:
        _script("kill", str(self.node_dir(node)))

    def restart(self, node: int) -> None:
        _script("restart", str(self.node_dir(node)))
        wait_serving(self.broker(node))

    def pause(self, node: int) -> None:
        _script("pause", str(self.node_dir(node)))

    def resume(self, node: int) -> None:
        _script("resume", str(self.node_dir(node)))


@contextlib.contextmanager
def three_brokers(directory: Path, *properties: str) -> Iterator[ThreeBrokers]:
    """Three nodes in `directory/node-N`; stopped after."""
    require_broker()
    base = _free_run(2 * NODES)
    _script("cluster", str(directory), str(NODES), str(base), *properties)
    cluster = ThreeBrokers(directory, base)
    try:
        for node in range(1, NODES + 1):
            wait_serving(cluster.broker(node))
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            _script("stop", str(directory))
