"""KRaft nodes and clusters of any supported Kafka release, on loopback, for tests and benchmarks.

A node directory holds `server.properties`, `release` (its Kafka version), `port`,
`broker.pid`, `data/` and `logs/` (`server.log`, `stdout.log`). A cluster directory holds
`cluster.json` and one node directory per node (`node-1`, `node-2`, ...): every node is a
combined broker and controller, and the nodes form one KRaft quorum.

Ports: a node's client listener is PORT, its controller PORT+1; node i of a cluster that
starts at PORT listens on PORT+2(i-1) and PORT+2(i-1)+1.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafka_dist import (
    BROKER_CLASS,
    STARTED_LINE,
    KafkaDistError,
    Release,
    catalog,
    java_or_fail,
    locked,
    release,
    server_log_config,
)

HOST: Final = "127.0.0.1"
#: Kafka's own kafka-server-start.sh defaults
BROKER_JVM: Final = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
#: CLI tools are short-lived: start fast rather than run fast (C1 only, serial GC)
TOOL_JVM: Final = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")
DEFAULT_HEAP: Final = "-Xmx768m -Xms256m"
#: the JVM's unified logging writes to stdout: class-sharing warnings (a class the archive
#: skips, another JDK than the one that wrote it) would mix with a tool's own output
QUIET_JVM: Final = ("-Xlog:disable", "-Xlog:all=off")


def started_timeout_s() -> float:
    return float(os.environ.get("OFFSETWATCH_BROKER_START_TIMEOUT_S", "120"))


def cluster_id() -> str:
    """What `kafka-storage.sh random-uuid` prints (Kafka's Uuid: URL-safe base64 of 16 random
    bytes, never starting with '-'), without starting a JVM for it."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


#: Kafka 4.0's switches for its early-access share groups (KIP-932)
SHARE_4_0: Final = (
    "group.share.enable=true",
    "unstable.api.versions.enable=true",
    "group.coordinator.rebalance.protocols=classic,consumer,share",
)
#: the first line that has each group kind, and the first where it is on by default
GROUP_KINDS: Final[dict[str, tuple[str, str]]] = {
    "consumer": ("3.9", "4.0"),
    "share": ("4.0", "4.2"),
    "streams": ("4.1", "4.2"),
}


def _line_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def group_kind_settings(version: str, kinds: Sequence[str]) -> tuple[list[str], list[str]]:
    """The server properties and `kafka-storage format --feature`s that let a broker of
    `version` run the group kinds named ("consumer" for KIP-848, "share", "streams");
    KafkaDistError names the
    release that first has a kind this one lacks."""
    overrides: list[str] = []
    features: list[str] = []
    for kind in kinds:
        if kind not in GROUP_KINDS:
            raise KafkaDistError(f"no group kind {kind!r}: use consumer, share or streams")
        first, default_on = GROUP_KINDS[kind]
        if _line_key(version) < _line_key(first):
            raise KafkaDistError(f"Kafka {version} has no {kind} groups: they came in {first}")
        if _line_key(version) >= _line_key(default_on):
            continue
        if kind == "consumer":  # 3.9: early access, and the new group coordinator with it
            overrides.append("group.coordinator.rebalance.protocols=classic,consumer")
        elif kind == "share" and _line_key(version) == (4, 0):
            overrides += SHARE_4_0
        else:  # 4.1: preview (share.version=1) and early access (streams.version=1)
            features.append(f"{kind}.version=1")
            overrides.append("unstable.feature.versions.enable=true")
            overrides.append("unstable.api.versions.enable=true")
    return list(dict.fromkeys(overrides)), features


def properties(
    node_id: int,
    port: int,
    data: Path,
    voters: str,
    nodes: int,
    overrides: Sequence[str],
) -> str:
    replicas = min(nodes, 3)
    isr = 2 if replicas >= 3 else 1
    lines = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{port + 1}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data),
        "num.partitions": "1",
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(isr),
        "offsets.topic.replication.factor": str(replicas),
        "offsets.topic.num.partitions": "50",
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(isr),
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(isr),
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true",
    }
    for kv in overrides:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise KafkaDistError(f"not KEY=VALUE: {kv}")
        lines[key] = value
    return "".join(f"{key}={value}\n" for key, value in lines.items())


@dataclass(frozen=True, slots=True)
class Node:
    directory: Path

    @property
    def port(self) -> int:
        return int((self.directory / "port").read_text())

    @property
    def version(self) -> str:
        return (self.directory / "release").read_text().strip()

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    def pid(self) -> int | None:
        try:
            pid = int((self.directory / "broker.pid").read_text())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid


def prepare(
    directory: Path,
    kafka: Release,
    node_id: int,
    port: int,
    voters: str,
    nodes: int,
    overrides: Sequence[str],
) -> Node:
    (directory / "data").mkdir(parents=True, exist_ok=True)
    logs = directory / "logs"
    logs.mkdir(exist_ok=True)
    (directory / "server.properties").write_text(
        properties(node_id, port, directory / "data", voters, nodes, overrides)
    )
    (directory / "port").write_text(f"{port}\n")
    (directory / "release").write_text(f"{kafka.version}\n")
    name, text, _ = server_log_config(kafka.logging, logs)
    (directory / name).write_text(text)
    return Node(directory)


def format_node(node: Node, kafka: Release, cluster: str, features: Sequence[str]) -> None:
    args = ["format", "-t", cluster, "-c", str(node.directory / "server.properties")]
    for feature in features:
        args += ["--feature", feature]
    done = subprocess.run(
        tool_command(kafka, "kafka-storage.sh", args), capture_output=True, text=True, check=False
    )
    (node.logs / "format.out").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        raise KafkaDistError(f"formatting {node.directory} failed: {said[-1] if said else '?'}")


def launch(node: Node, archive_at_exit: Path | None = None) -> int:
    kafka = release(node.version)
    java = java_or_fail()
    (node.logs / "server.log").write_text("")
    _, _, log_option = server_log_config(kafka.logging, node.logs)
    heap = os.environ.get("KAFKA_HEAP_OPTS", DEFAULT_HEAP).split()
    # as kafka-run-class.sh: KAFKA_JVM_PERFORMANCE_OPTS replaces the defaults (the tests start
    # dozens of brokers on two cores and trade peak speed for start-up time)
    performance = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", "").split() or list(BROKER_JVM)
    extra = os.environ.get("KAFKA_OPTS", "").split()
    sharing = [f"-XX:ArchiveClassesAtExit={archive_at_exit}"] if archive_at_exit else []
    command = [
        java,
        *heap,
        *performance,
        *(sharing or sharing_options(kafka)),
        f"-Dkafka.logs.dir={node.logs}",
        log_option,
        *extra,
        "-cp",
        kafka.class_path,
        BROKER_CLASS,
        str(node.directory / "server.properties"),
    ]
    with (node.logs / "stdout.log").open("ab") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (node.directory / "broker.pid").write_text(f"{process.pid}\n")
    return process.pid


def wait_started(node: Node, pid: int) -> None:
    deadline = time.monotonic() + started_timeout_s()
    server_log = node.logs / "server.log"
    while time.monotonic() < deadline:
        try:
            if STARTED_LINE in server_log.read_text(errors="replace"):
                return
        except OSError:
            pass
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            waited = pid if node.pid() is None else 0
        if waited:
            tail = _tail(node.logs / "stdout.log") + _tail(server_log)
            raise KafkaDistError(
                f"the broker of {node.directory} exited; the end of its logs:\n{tail}"
            )
        time.sleep(0.25)
    raise KafkaDistError(f"broker: not started after {started_timeout_s():.0f} s; see {node.logs}")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
    except OSError:
        return ""


def start(
    directory: Path,
    port: int,
    version: str | None,
    overrides: Sequence[str],
    features: Sequence[str] = (),
    nodes: int = 1,
) -> list[Node]:
    """Format and start a single node (nodes=1, in `directory` itself) or a cluster."""
    kafka = release(version or _default())
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise KafkaDistError(f"{directory} is not empty (use restart, or a fresh directory)")
    directory = directory.resolve()
    ports = [port + 2 * i for i in range(nodes)]
    voters = ",".join(f"{i + 1}@{HOST}:{p + 1}" for i, p in enumerate(ports))
    homes = [directory] if nodes == 1 else [directory / f"node-{i + 1}" for i in range(nodes)]
    prepared = [
        prepare(home, kafka, i + 1, p, voters, nodes, overrides)
        for i, (home, p) in enumerate(zip(homes, ports, strict=True))
    ]
    if nodes > 1:
        (directory / "cluster.json").write_text(
            json.dumps({"release": kafka.version, "nodes": [str(h) for h in homes], "ports": ports})
            + "\n"
        )
    cluster = cluster_id()
    with ThreadPoolExecutor(max_workers=nodes) as pool:
        list(pool.map(lambda node: format_node(node, kafka, cluster, features), prepared))
    pids = [launch(node) for node in prepared]
    for node, pid in zip(prepared, pids, strict=True):
        wait_started(node, pid)
    return prepared


def nodes_of(directory: Path) -> list[Node]:
    directory = directory.resolve()
    described = directory / "cluster.json"
    if described.exists():
        return [Node(Path(home)) for home in json.loads(described.read_text())["nodes"]]
    if not (directory / "server.properties").exists():
        raise KafkaDistError(f"{directory} holds no broker")
    return [Node(directory)]


def restart(directory: Path) -> list[Node]:
    nodes = nodes_of(directory)
    for node in nodes:
        pid = node.pid()
        if pid is not None:
            raise KafkaDistError(f"{node.directory}: already running (pid {pid})")
    pids = [launch(node) for node in nodes]
    for node, pid in zip(nodes, pids, strict=True):
        wait_started(node, pid)
    return nodes


def signal_nodes(directory: Path, how: str) -> None:
    """`stop` (SIGTERM, SIGKILL after 30 s), `kill` (SIGKILL), `pause` (SIGSTOP), `resume`."""
    sig = {
        "stop": signal.SIGTERM,
        "kill": signal.SIGKILL,
        "pause": signal.SIGSTOP,
        "resume": signal.SIGCONT,
    }[how]
    nodes = nodes_of(directory)
    for node in nodes:
        pid = node.pid()
        if pid is not None:
            os.kill(pid, sig)
    if how in {"pause", "resume"}:
        return
    for node in nodes:
        pid = node.pid()
        deadline = time.monotonic() + 30
        while pid is not None and node.pid() is not None and time.monotonic() < deadline:
            time.sleep(0.25)
        if node.pid() is not None and pid is not None:
            os.kill(pid, signal.SIGKILL)
            while node.pid() is not None:
                time.sleep(0.1)
        (node.directory / "broker.pid").unlink(missing_ok=True)


def class_archive(kafka: Release) -> Path:
    """The release's class-data-sharing archive of a broker's start-up (AppCDS)."""
    return kafka.home / "cds" / "broker.jsa"


def sharing_options(kafka: Release) -> list[str]:
    """JVM options that map the release's archive, when there is one: a broker then starts on
    2.3 CPU s instead of 3.4 and a tool on 0.43 instead of 0.61 (benchmarks/jvm_start.py,
    4.4.0, Java 17, 2026-12-03). A JVM that cannot use it (another JDK) goes on without it."""
    archive = class_archive(kafka)
    return [*QUIET_JVM, f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []


def build_class_archive(kafka: Release) -> Path | None:
    """Write `class_archive` once per release: a broker started and stopped cleanly with
    -XX:ArchiveClassesAtExit (about 5 s). None, with the reason on stderr, when it failed:
    everything still runs, only slower to start."""
    archive = class_archive(kafka)
    if archive.exists():
        return archive
    archive.parent.mkdir(exist_ok=True)
    with locked(archive.parent / ".lock"):
        if archive.exists():
            return archive
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=archive.parent))
        try:
            port = free_port_pair()
            voters = f"1@{HOST}:{port + 1}"
            node = prepare(work / "node", kafka, 1, port, voters, 1, [])
            format_node(node, kafka, cluster_id(), [])
            written = work / "broker.jsa"
            pid = launch(node, archive_at_exit=written)
            wait_started(node, pid)
            _stop_child(pid)
            if not written.exists():
                raise KafkaDistError("the broker wrote no archive at exit")
            written.replace(archive)
            return archive
        except (KafkaDistError, OSError) as error:
            print(f"broker: no class archive for Kafka {kafka.version} ({error})", file=sys.stderr)
            return None
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _stop_child(pid: int, timeout_s: float = 60.0) -> None:
    """SIGTERM a broker this process started and reap it (the archive is written as it exits;
    `signal_nodes` waits on the pid, which a child's zombie would keep alive)."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise KafkaDistError(f"the broker did not stop within {timeout_s:.0f} s")
        time.sleep(0.1)


def free_port_pair() -> int:
    """A free port P on loopback whose successor (a node's controller) is free too."""
    for _ in range(100):
        with socket.socket() as first:
            first.bind((HOST, 0))
            port = int(first.getsockname()[1])
            with socket.socket() as second:
                try:
                    second.bind((HOST, port + 1))
                except OSError:
                    continue
        return port
    raise KafkaDistError(f"no two consecutive free ports on {HOST}")


def tool_command(kafka: Release, script: str, args: Sequence[str]) -> list[str]:
    extra = os.environ.get("KAFKA_OPTS", "").split()
    return [
        java_or_fail(),
        *TOOL_JVM,
        *sharing_options(kafka),
        *kafka.tool_log_options(),
        *extra,
        "-cp",
        kafka.class_path,
        kafka.tool_class(script),
        *args,
    ]


def _default() -> str:
    return catalog().resolve(os.environ.get("OFFSETWATCH_BROKER_VERSION"))


def bootstrap(nodes: Sequence[Node]) -> str:
    return ",".join(f"{HOST}:{node.port}" for node in nodes)


def main_exit(error: KafkaDistError) -> None:
    print(f"broker: {error}", file=sys.stderr)
    raise SystemExit(1)
