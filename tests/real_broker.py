"""A real Apache Kafka broker for the tests, and Kafka's own tools of the same release.

The release is the default of `scripts/kafka/versions.toml` (4.4.0), or the one that
`OFFSETWATCH_BROKER_VERSION` names (a version or a line such as 4.1), fetched from Maven Central
into the cache by `make kafka` (`make test` fetches it first) and started by
`scripts/kafka/broker`. `OFFSETWATCH_TEST_KAFKA_HOME` names another folder holding a `broker`
script of the same interface instead: `../shared/kafka` runs the tests on the vendored Kafka
4.0.0 where Maven Central cannot be reached.

One broker serves the whole test run: the first test that asks for `kafka_broker` starts it
(under a file lock, so that xdist workers share it), every later one reuses it, and
`pytest_unconfigure` of the process that created the run's directory stops it (see
`tests/conftest.py`). Tests keep out of each other's way with `unique()` topic and group names.

Tests that need other broker settings (short offset retention, a fast log cleaner, share
groups) start a broker of their own with `own_broker(dir, KEY=VALUE...)`; each start costs a
JVM (about 5 s of one core), so keep them few.

Without java or the release, the tests skip locally with the reason, and fail under `CI=true`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
KAFKA_SCRIPTS: Final = REPO_ROOT / "scripts" / "kafka"
sys.path.insert(0, str(KAFKA_SCRIPTS))

import kafka_dist  # noqa: E402
import kafka_launcher  # noqa: E402

#: the directory under which the run's shared broker lives (set by tests/conftest.py in the
#: process that starts the run, inherited by the xdist workers)
RUN_DIR_VARIABLE: Final = "OFFSETWATCH_TEST_BROKER_RUN_DIR"
HOME_VARIABLE: Final = "OFFSETWATCH_TEST_KAFKA_HOME"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TestKafka:
    """The Kafka release the tests run: its version, its `broker` command, its jars."""

    version: str
    script: Path
    libs: Path
    #: a folder of `OFFSETWATCH_TEST_KAFKA_HOME` rather than a release of the cache
    vendored: bool

    @property
    def line(self) -> tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)

    def at_least(self, line: str) -> bool:
        major, minor = line.split(".")
        return self.line >= (int(major), int(minor))


def test_kafka() -> TestKafka:
    configured = os.environ.get(HOME_VARIABLE)
    if configured:
        home = Path(configured)
        libs = home / "dist" / "libs"
        jars = sorted(libs.glob("kafka_2.13-*.jar")) if libs.is_dir() else []
        found = [re.fullmatch(r"kafka_2\.13-(\d+\.\d+\.\d+)\.jar", j.name) for j in jars]
        versions = [m.group(1) for m in found if m]
        return TestKafka(versions[0] if versions else "4.0.0", home / "broker", libs, True)
    version = kafka_dist.catalog().resolve(os.environ.get("OFFSETWATCH_BROKER_VERSION"))
    home = kafka_dist.cache_root() / version
    return TestKafka(version, KAFKA_SCRIPTS / "broker", home / "libs", False)


test_kafka.__test__ = False  # type: ignore[attr-defined]
TestKafka.__test__ = False  # type: ignore[attr-defined]


def kafka_home() -> Path:
    """The folder holding the `broker` command (what `scripts/capture_*.py` take)."""
    return test_kafka().script.parent


def broker_script() -> Path:
    return test_kafka().script


#: JVM options for the tests' own Java programs: javac's (C1 only, serial GC: a one-file
#: compile ends before C2 pays), and the programs' (a Kafka tool's JVM: a test's few records
#: need no C2 compiler)
JAVAC_JVM: Final = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")
CLIENT_JVM: Final = kafka_launcher.TOOL_JVM


def client_classpath() -> str:
    """The release's jars, for the tests' own Java drivers (same client as the broker)."""
    return str(test_kafka().libs / "*")


def missing_reason() -> str | None:
    """Why no real broker can run here, or None when one can."""
    kafka = test_kafka()
    if shutil.which("java") is None:
        return "java is not on PATH: the real Kafka broker needs Java 17 or newer"
    if kafka.vendored and not kafka.script.is_file():
        return f"{HOME_VARIABLE} names {kafka.script.parent}, which holds no `broker` script"
    if not kafka.vendored and not (kafka.libs.parent / "ready").exists():
        return (
            f"Kafka {kafka.version} is not in {kafka_dist.cache_root()}: run `make kafka` "
            f"(Maven Central), or set {HOME_VARIABLE}=../shared/kafka for the vendored 4.0.0"
        )
    return None


def require_broker() -> None:
    """Skip locally, fail under CI=true, when the real broker cannot run."""
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def kip848_groups() -> bool:
    """Whether the tests' release runs KIP-848 groups that librdkafka joins: 4.0 and later.
    3.9's are early access (ConsumerGroupHeartbeat v0), which librdkafka 2.16 does not speak
    (its members never get an assignment), so the tests leave them out there."""
    return test_kafka().at_least("4.0")


def require_kip848_groups() -> None:
    if not kip848_groups():
        pytest.skip(
            f"Kafka {test_kafka().version}'s KIP-848 groups are early access, which "
            "librdkafka 2.16 cannot join (GA from 4.0)"
        )


def group_kind_properties(*kinds: str) -> tuple[str, ...]:
    """What `start_broker` needs to run these group kinds ("share", "streams") on the tests'
    release: KEY=VALUE properties, and `--feature` options for the launcher. Skips where the
    release has no such groups (the version matrix runs 3.9, which has no share groups),
    under CI=true too: the reason names the release."""
    kafka = test_kafka()
    try:
        overrides, features = kafka_launcher.group_kind_settings(kafka.version, kinds)
    except kafka_dist.KafkaDistError as error:
        pytest.skip(str(error))
    return (*overrides, *(option for f in features for option in ("--feature", f)))


def unique(prefix: str) -> str:
    """A topic or group name no other test of the run uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def free_port_pair() -> int:
    """A port P with P and P+1 free (the broker's controller listens on P+1).

    Taken below Linux's ephemeral range (32768-60999): a port the kernel hands out for
    outgoing connections could be taken again by any client between this check and the
    broker's bind.
    """
    chooser = random.Random()
    for _ in range(500):
        port = chooser.randrange(20_000, 32_000)
        if _bindable(port) and _bindable(port + 1):
            return port
    raise RuntimeError("no two consecutive free ports on 127.0.0.1 in 20000-32000")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_tool(name: str, *args: str, timeout: float = 120.0, check: bool = True) -> str:
    """One of Kafka's own CLI tools (`kafka-consumer-groups.sh`, ...): its standard output."""
    done = subprocess.run(
        [str(broker_script()), "tool", name, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{name} {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


@dataclass(frozen=True, slots=True)
class Broker:
    """A running broker: its data directory and address."""

    directory: Path
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def tool(self, name: str, *args: str, timeout: float = 120.0, check: bool = True) -> str:
        """Kafka's own tool against this broker (`--bootstrap-server` is added)."""
        return run_tool(
            name, "--bootstrap-server", self.bootstrap, *args, timeout=timeout, check=check
        )

    def cluster_id(self) -> str:
        """Kafka's cluster id, from a metadata answer (retried while the broker starts)."""
        admin = self.admin()  # kept alive until it answers
        return str(retry(lambda: admin.list_topics(timeout=10)).cluster_id)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def producer(self, **extra: object) -> Producer:
        config: dict[str, object] = {"bootstrap.servers": self.bootstrap, "linger.ms": 5}
        config.update(extra)
        return Producer(config)

    def consumer(self, group: str, **extra: object) -> Consumer:
        config: dict[str, object] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        config.update(extra)
        return Consumer(config)

    def control(self, action: str) -> None:
        """`kill` (SIGKILL: a crash) or `stop` this broker; `restart` it on the same data and
        port and wait until it serves (log recovery after a crash can outlast the `broker`
        script's own 30 s wait on a loaded machine: the JVM goes on, so wait for it here)."""
        done = subprocess.run(
            [str(broker_script()), action, str(self.directory)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if action != "restart":
            if done.returncode != 0:
                raise RuntimeError(f"broker {action} {self.directory}: {done.stderr.strip()}")
            return
        if done.returncode != 0 and "not started after" not in done.stderr:
            raise RuntimeError(f"broker restart {self.directory}: {done.stderr.strip()}")
        log = self.directory / "logs" / "server.log"
        deadline = time.monotonic() + 240
        while "Kafka Server started" not in log.read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker restart {self.directory}: not serving after 240 s")
            time.sleep(0.25)
        wait_serving(self, timeout_s=120)

    def create_topic(self, topic: str, partitions: int = 1, **config: str) -> None:
        admin = self.admin()  # kept alive until its futures answer
        futures = admin.create_topics(
            [NewTopic(topic, partitions, 1, config=dict(config))], operation_timeout=30
        )
        for future in futures.values():
            future.result(timeout=60)

    def produce(
        self,
        topic: str,
        counts: Sequence[int],
        *,
        timestamp_ms: Callable[[int, int], int] | None = None,
    ) -> None:
        """`counts[p]` records into partition p, value = "p:i"; timestamps if given."""
        producer = self.producer(**{"enable.idempotence": True})
        for partition, count in enumerate(counts):
            for i in range(count):
                stamp = 0 if timestamp_ms is None else timestamp_ms(partition, i)
                producer.produce(
                    topic, value=f"{partition}:{i}".encode(), partition=partition, timestamp=stamp
                )
                if i % 10_000 == 9_999:
                    producer.poll(0)
        remaining = producer.flush(60)
        assert remaining == 0, f"{remaining} records not delivered to {topic}"

    def commit(
        self, group: str, offsets: Mapping[tuple[str, int], int], metadata: str | None = None
    ) -> None:
        """Commit `offsets` for `group` as a real consumer does (no member: a simple commit)."""
        consumer = self.consumer(group)
        try:
            partitions = [
                TopicPartition(topic, partition, offset, metadata=metadata)
                if metadata is not None
                else TopicPartition(topic, partition, offset)
                for (topic, partition), offset in offsets.items()
            ]
            bounded(
                lambda: retry(lambda: consumer.commit(offsets=partitions, asynchronous=False)),
                COMMIT_DEADLINE_S,
                f"committing for {group} on {self.bootstrap} (see {self.directory}/logs)",
            )
        finally:
            consumer.close()

    def log_ends(self, topic: str, partitions: int) -> dict[int, int]:
        consumer = self.consumer(unique("log-ends"))
        try:
            return {
                p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1])
                for p in range(partitions)
            }
        finally:
            consumer.close()

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """Kafka's OffsetFetch for `group`: every committed (topic, partition) and its offset."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = self.admin()  # kept alive until its future answers
        future = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=30
        )[group]
        answer = future.result(timeout=60)
        return {
            (tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0
        }


#: a synchronous commit waits for a coordinator without end (librdkafka has no timeout for
#: it): a broker that cannot create __consumer_offsets would hang the run instead of failing
COMMIT_DEADLINE_S: Final = 120.0


def bounded(action: Callable[[], T], timeout_s: float, what: str) -> T:
    """`action()` on a thread of its own, an AssertionError naming `what` after `timeout_s`."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(action())
        except BaseException as error:
            failure.append(error)

    worker = threading.Thread(target=run, daemon=True, name=f"bounded: {what}")
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise AssertionError(f"not done within {timeout_s:g} s: {what}")
    if failure:
        raise failure[0]
    return outcome[0]


def retry(action: Callable[[], T], *, attempts: int = 60, pause_s: float = 0.5) -> T:
    """`action()`, retried while the freshly started coordinators load (NOT_COORDINATOR...)."""
    for attempt in range(attempts):
        try:
            return action()
        except KafkaException:
            if attempt == attempts - 1:
                raise
            time.sleep(pause_s)
    raise AssertionError("unreachable")


def start_broker(
    directory: Path,
    *properties: str,
    port: int | None = None,
    extra_listeners: Sequence[tuple[str, int]] = (),
) -> Broker:
    """Format `directory` and start a broker on it; wait until it serves.

    Without a `port`, a free pair is chosen, and chosen again if another process took it
    before the broker bound it. `extra_listeners`: (name, port) listeners beside PLAINTEXT
    (their security protocols in the `listener.security.protocol.map` of `properties`)."""
    for attempt in range(5):
        chosen = port if port is not None else free_port_pair()
        if attempt:
            shutil.rmtree(directory, ignore_errors=True)
        listening = list(properties)
        if extra_listeners:
            extra = ",".join(f"{name}://127.0.0.1:{at}" for name, at in extra_listeners)
            listening += [
                f"listeners=PLAINTEXT://127.0.0.1:{chosen},CONTROLLER://127.0.0.1:{chosen + 1},"
                + extra,
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{chosen}," + extra,
            ]
        done = subprocess.run(
            [str(broker_script()), "start", str(directory), str(chosen), *listening],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if done.returncode == 0:
            broker = Broker(directory, chosen)
            wait_serving(broker)
            return broker
        if port is not None or "Address already in use" not in done.stderr:
            break
    raise RuntimeError(f"the real broker did not start in {directory}: {done.stderr.strip()}")


def wait_serving(broker: Broker, timeout_s: float = 60.0) -> None:
    """Until metadata answers and the group coordinator takes a commit."""
    deadline = time.monotonic() + timeout_s
    admin = broker.admin()
    while True:
        try:
            admin.list_topics(timeout=5)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def stop_broker(directory: Path) -> None:
    if (directory / "broker.pid").exists():
        subprocess.run(
            [str(broker_script()), "stop", str(directory)],
            capture_output=True,
            timeout=120,
            check=False,
        )


@contextlib.contextmanager
def own_broker(
    directory: Path, *properties: str, extra_listeners: Sequence[tuple[str, int]] = ()
) -> Iterator[Broker]:
    """A broker of the test's own, with other settings than the shared one; stopped after."""
    require_broker()
    broker = start_broker(directory, *properties, extra_listeners=extra_listeners)
    try:
        yield broker
    finally:
        stop_broker(directory)


def _shared_dir() -> Path:
    configured = os.environ.get(RUN_DIR_VARIABLE)
    if not configured:
        raise RuntimeError(f"{RUN_DIR_VARIABLE} is not set: tests/conftest.py sets it")
    return Path(configured)


def shared_broker() -> Broker:
    """The run's one broker, started by whichever worker asks first."""
    root = _shared_dir()
    root.mkdir(parents=True, exist_ok=True)
    state = root / "broker.json"
    with kafka_dist.locked(root / "broker.lock"):
        if state.exists():
            known = json.loads(state.read_text())
            if "error" in known:
                raise RuntimeError(known["error"])
            return Broker(Path(known["directory"]), int(known["port"]))
        try:
            # 3.9 as it runs by default: the classic group coordinator (see kip848_groups)
            broker = start_broker(root / "broker")
        except Exception as error:
            state.write_text(json.dumps({"error": str(error)}))
            raise
        state.write_text(json.dumps({"directory": str(broker.directory), "port": broker.port}))
        return broker


def stop_shared_broker(root: Path) -> None:
    """Called once at the end of the run by the process that created `root`."""
    stop_broker(root / "broker")
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_broker() -> Broker:
    """The run's shared real broker (KRaft, single node, on loopback)."""
    require_broker()
    return shared_broker()
