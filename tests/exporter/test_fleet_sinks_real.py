"""A fleet's sinks exactly once on the real broker (issue 32 item 4, docs/fleet.md "Sinks").

Three `offsetwatch export --fleet` replicas as child processes (classic protocol: its 10 s
session keeps a SIGKILL's handover short) republish to one topic and archive under one
directory, while clients commit all along, through:

1. a replica SIGKILLed (the others take its partitions from its last periodic commit and
   read back what it published after it) and restarted under the same name (it takes
   partitions back from live replicas: their revocations commit after delivering);
2. a replica SIGTERMed (it commits at its exit, then leaves the group).

Every position of `__consumer_offsets` below its log end taken after those faults is then
counted in the publish topic, by the `offsetwatch.source.*` headers: none missing, none
twice. The archive files of all replicas hold every one of those positions (the lake's
`spark compact` dedupes by position: the set after dedupe is checked, not Spark itself), and
how many a handover archived twice is reported.

3. Then a zombie: a replica SIGSTOPped past its session and resumed. What it still had in
   its producer is delivered after the others took its partitions over: those duplicates
   are counted and reported (record_property), not asserted - the fleet does not fence them
   (docs/fleet.md, "Sinks exactly once"). Nothing is lost, which is asserted.

A second test runs a KIP-848 fleet through a stop, a restart and a stop (its SIGKILL would
wait the broker's 45 s session), with the same counts.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.exporter.sinks.publisher import HEADER_SOURCE_OFFSET, HEADER_SOURCE_PARTITION
from tests.exporter.daemon_helpers import wait_for
from tests.exporter.exporter_process import ExporterProcess
from tests.exporter.fleet_processes import fleet_replica, fleet_settled
from tests.exporter.real_broker_helpers import Committer
from tests.real_broker import Broker, require_kip848_groups, unique

pytestmark = [pytest.mark.broker, pytest.mark.cluster]

#: the shared broker's __consumer_offsets
OFFSETS_PARTITIONS = 50
OUTPUT_PARTITIONS = 3
#: committing clients, each its own group (so its own __consumer_offsets partition)
COMMITTERS = 6
#: each replica reads the shared broker's whole __consumer_offsets (every test's commits)
READY_TIMEOUT_S = 240.0
NAMES = ("r0", "r1", "r2")

Position = tuple[int, int]


def _read_topic(broker: Broker, topic: str, partitions: int, headers: bool) -> list[Position]:
    """Every record's position (`headers`: the source position its headers name; records
    without them, log-end samples, are left out)."""
    consumer = broker.consumer(
        unique("reader"), **{"enable.partition.eof": True, "isolation.level": "read_committed"}
    )
    out: list[Position] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ended: set[int] = set()
        while len(ended) < partitions:
            for message in consumer.consume(10_000, 15):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    ended.add(int(message.partition() or 0))
                    continue
                if not headers:
                    out.append((int(message.partition() or 0), int(message.offset() or 0)))
                    continue
                named = dict(message.headers() or ())
                if HEADER_SOURCE_PARTITION in named:
                    out.append(
                        (
                            int(named[HEADER_SOURCE_PARTITION] or b""),
                            int(named[HEADER_SOURCE_OFFSET] or b""),
                        )
                    )
        return out
    finally:
        consumer.close()


def _log_ends(broker: Broker) -> dict[int, int]:
    return broker.log_ends(OFFSETS_TOPIC, OFFSETS_PARTITIONS)


def _below(positions: list[Position], ends: dict[int, int]) -> list[Position]:
    return [(p, o) for p, o in positions if o < ends.get(p, 0)]


def _archived(directory: Path) -> list[Position]:
    """Positions in the published archive files of every replica (hidden in-progress files
    are no part of the lake until salvaged)."""
    out = []
    for file in sorted(directory.rglob("*.jsonl")):
        if any(part.startswith(".") for part in file.relative_to(directory).parts):
            continue
        for line in file.read_bytes().split(b"\n"):
            if line.strip():
                value = json.loads(line)
                if value.get("type") != "log_end":
                    out.append((value["partition"], value["offset"]))
    return out


@pytest.fixture
def committers(kafka_broker: Broker) -> Iterator[list[Committer]]:
    topic = unique("fleet-sinks-orders")
    kafka_broker.create_topic(topic, 2)
    started = [
        Committer(kafka_broker, topic, unique(f"fleet-sinks-g{i}"), 2) for i in range(COMMITTERS)
    ]
    try:
        yield started
    finally:
        for committer in started:
            committer.stop()


def _printed(record: Callable[[str, object], None]) -> Callable[[str, object], None]:
    """record_property that also prints each figure (the run's log has them all)."""

    def both(key: str, value: object) -> None:
        record(key, value)
        print(f"{key} = {value}")

    return both


@dataclass(slots=True)
class _Fleet:
    """Three replicas republishing to `output` and archiving under `archive`."""

    broker: Broker
    protocol: str
    tmp_path: Path
    children: list[ExporterProcess]
    output: str = field(default_factory=lambda: unique("fleet-sinks-out"))
    name: str = field(default_factory=lambda: unique("fleet-sinks"))
    replicas: dict[str, ExporterProcess] = field(default_factory=dict)
    runs: Counter[str] = field(default_factory=Counter)

    @property
    def archive(self) -> Path:
        return self.tmp_path / "archive"

    def start(self, name: str) -> ExporterProcess:
        """`name` started (again: a log of its own, its URL is read from the log)."""
        self.runs[name] += 1
        sinks = ("--publish-topic", self.output, "--archive-dir", str(self.archive))
        self.replicas[name] = fleet_replica(
            self.broker,
            self.name,
            name,
            self.protocol,
            self.tmp_path,
            self.children,
            sinks,
            f"{name}-{self.runs[name]}.log",
        )
        return self.replicas[name]

    def settled(self, names: set[str], what: str) -> None:
        """The replicas `names` ready, and each sees exactly them holding every partition."""
        replicas = self.replicas
        wait_for(
            lambda: all(
                replicas[n].get("/readyz").status == 200
                and fleet_settled(replicas[n], names, OFFSETS_PARTITIONS)
                for n in names
            ),
            what,
            timeout_s=READY_TIMEOUT_S,
            describe=lambda: {n: replicas[n].tail(1500) for n in names},
        )

    def published_through(self, ends: dict[int, int], what: str) -> list[Position]:
        """The source positions the publish topic names, once it names every position of
        `__consumer_offsets` below `ends`; those below `ends`."""
        expected = set(_below(_read_topic(self.broker, OFFSETS_TOPIC, 50, False), ends))
        published: list[Position] = []

        def whole() -> bool:
            nonlocal published
            published = _read_topic(self.broker, self.output, OUTPUT_PARTITIONS, True)
            return expected <= set(published)

        wait_for(whole, what, timeout_s=180, interval_s=2.0)
        return _below(published, ends)

    def exactly_once(self, what: str, record: Callable[[str, object], None]) -> dict[int, int]:
        """Every position below the log ends now published once; the ends."""
        ends = _log_ends(self.broker)
        counts = Counter(self.published_through(ends, f"every position published ({what})"))
        duplicates = {position: n for position, n in counts.items() if n > 1}
        record(f"{what}_positions", len(counts))
        record(f"{what}_published_duplicates", len(duplicates))
        source = set(_below(_read_topic(self.broker, OFFSETS_TOPIC, 50, False), ends))
        print(f"{what}: {len(source)} positions, {len(duplicates)} published twice")
        assert set(counts) == source, ("lost", sorted(source - set(counts))[:20])
        assert not duplicates, sorted(duplicates.items())[:20]
        return ends

    def logs_clean(self) -> None:
        for path in sorted(self.tmp_path.glob("r*.log")):
            log = path.read_text(errors="replace")
            assert "Traceback" not in log, (path.name, log[-3000:])
            assert "sink commits of the partitions gained" in log, (path.name, log[-3000:])

    def archived_once(self, ends: dict[int, int], record: Callable[[str, object], None]) -> None:
        """Each replica archived under its own name; together every position below `ends`
        (what the lake's dedupe by position keeps once); the copies a handover made are
        reported."""
        assert {p.name for p in self.archive.iterdir()} <= set(NAMES)
        counts = Counter(_below(_archived(self.archive), ends))
        record("archived_duplicates", sum(1 for n in counts.values() if n > 1))
        source = set(_below(_read_topic(self.broker, OFFSETS_TOPIC, 50, False), ends))
        assert set(counts) == source, ("lost", sorted(source - set(counts))[:20])


def test_a_fleet_republishes_and_archives_each_position_once_through_kill_restart_and_stop(
    kafka_broker: Broker,
    committers: list[Committer],
    tmp_path: Path,
    children: list[ExporterProcess],
    record_property: Callable[[str, object], None],
) -> None:
    record_property = _printed(record_property)
    fleet = _Fleet(kafka_broker, "classic", tmp_path, children)
    kafka_broker.create_topic(fleet.output, OUTPUT_PARTITIONS)
    for name in NAMES:
        fleet.start(name)
    replicas = fleet.replicas
    fleet.settled(set(NAMES), "three replicas ready, every partition held")
    time.sleep(3)

    # 1. a replica dies: the others go on from its last commit, reading back after it
    killed = time.monotonic()
    assert replicas["r1"].end(signal.SIGKILL) == -signal.SIGKILL
    fleet.settled({"r0", "r2"}, "the two others hold every partition after the SIGKILL")
    record_property("sigkill_handover_s", round(time.monotonic() - killed, 1))
    time.sleep(3)
    # ... and comes back: live replicas hand partitions to it (their revocations commit)
    fleet.start("r1")
    fleet.settled(set(NAMES), "r1 back, the three settled again")
    time.sleep(3)

    # 2. a replica stops: it commits at its exit
    assert replicas["r2"].end(signal.SIGTERM) == 0, replicas["r2"].tail()
    fleet.settled({"r0", "r1"}, "the two others hold every partition after the SIGTERM")
    time.sleep(3)
    ends = fleet.exactly_once("faults", record_property)

    # 3. a zombie: SIGSTOPped past its session, resumed with its producer's queue
    replicas["r0"].proc.send_signal(signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        wait_for(
            lambda: fleet_settled(replicas["r1"], {"r1"}, OFFSETS_PARTITIONS),
            "r1 alone holds every partition while r0 is stopped",
            timeout_s=READY_TIMEOUT_S,
        )
        record_property("sigstop_handover_s", round(time.monotonic() - stopped, 1))
    finally:
        replicas["r0"].proc.send_signal(signal.SIGCONT)
    fleet.settled({"r0", "r1"}, "r0 back in the fleet after SIGCONT")
    time.sleep(3)
    for committer in committers:
        committer.stop()
    time.sleep(1)
    zombie_ends = _log_ends(kafka_broker)
    everything = fleet.published_through(zombie_ends, "every position published (zombie)")
    zombie_counts = Counter(p for p in everything if p[1] >= ends.get(p[0], 0))
    zombie_duplicates = sum(1 for n in zombie_counts.values() if n > 1)
    record_property("zombie_positions", len(zombie_counts))
    record_property("zombie_duplicates", zombie_duplicates)
    print(f"zombie phase: {len(zombie_counts)} positions, {zombie_duplicates} published twice")
    source_all = set(_below(_read_topic(kafka_broker, OFFSETS_TOPIC, 50, False), zombie_ends))
    assert set(everything) == source_all, ("lost", sorted(source_all - set(everything))[:20])

    for name in ("r0", "r1"):
        assert replicas[name].end(signal.SIGTERM) == 0, replicas[name].tail()
    fleet.logs_clean()
    assert {p.name for p in fleet.archive.iterdir()} == set(NAMES)
    fleet.archived_once(zombie_ends, record_property)


def test_a_kip848_fleet_republishes_each_position_once_through_restart_and_stop(
    kafka_broker: Broker,
    committers: list[Committer],
    tmp_path: Path,
    children: list[ExporterProcess],
    record_property: Callable[[str, object], None],
) -> None:
    """The same commits with KIP-848 (its revocations and commits by member epoch): a
    replica stopped and started again, and one stopped for good. (Its SIGKILL waits the
    broker's 45 s session: the classic test above has the kill.)"""
    record_property = _printed(record_property)
    require_kip848_groups()
    fleet = _Fleet(kafka_broker, "consumer", tmp_path, children)
    kafka_broker.create_topic(fleet.output, OUTPUT_PARTITIONS)
    for name in NAMES:
        fleet.start(name)
    replicas = fleet.replicas
    fleet.settled(set(NAMES), "three replicas ready, every partition held")
    time.sleep(3)
    assert replicas["r1"].end(signal.SIGTERM) == 0, replicas["r1"].tail()
    fleet.settled({"r0", "r2"}, "the two others hold every partition after r1's SIGTERM")
    time.sleep(3)
    fleet.start("r1")
    fleet.settled(set(NAMES), "r1 back, the three settled again")
    time.sleep(3)
    assert replicas["r2"].end(signal.SIGTERM) == 0, replicas["r2"].tail()
    fleet.settled({"r0", "r1"}, "the two others hold every partition after r2's SIGTERM")
    time.sleep(3)
    for committer in committers:
        committer.stop()
    time.sleep(1)
    ends = fleet.exactly_once("kip848", record_property)
    for name in ("r0", "r1"):
        assert replicas[name].end(signal.SIGTERM) == 0, replicas[name].tail()
    fleet.logs_clean()
    fleet.archived_once(ends, record_property)
