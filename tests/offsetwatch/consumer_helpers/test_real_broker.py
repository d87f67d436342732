"""The consumer helpers on a real Kafka 4.0.0 broker: real record timestamps, real
ListOffsets-by-timestamp answers, real group coordinators, for eager (`range`), cooperative
(`cooperative-sticky`) and KIP-848 (`group.protocol=consumer`) members.

Kafka's own answer for "the offsets at time T" is `kafka-consumer-groups.sh --reset-offsets
--to-datetime T --dry-run` on the same topics (one JVM for the whole module, started in the
background while the first test runs: a tool call costs seconds of CPU here). Every topic
has the same layout of chosen timestamps, around T:

- partition 0: one record a second, T falls in the middle;
- partition 1: every record older than T (no answer: Kafka's tool falls back to the log end);
- partition 2: every record newer than T (the log start);
- partition 3: timestamps out of order (the first record at or after T, not a bisection).

Records carry the value "partition:index", and the tests check what was processed by value.
Rebalances are few: one test per protocol runs every helper's scenario side by side, each
in a group of its own, in one polling loop, so that they share one member joining (a KIP-848
member learns of it at its next heartbeat, 5 s apart by the broker's default).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from offsetwatch.consumer_helpers import (
    ExternalOffsets,
    FileOffsetStore,
    FromBeginning,
    FromSnapshot,
    FromTimestamp,
    OffsetStore,
    OutOfRange,
    ReplayController,
    ReplayStart,
    StoredPartition,
    replay_id_of,
    seek_to_timestamp,
)
from offsetwatch.consumer_helpers.assignment import PartitionKey, assign_at
from offsetwatch.consumer_helpers.errors import ConsumerHelperError
from tests.offsetwatch.consumer_helpers.clients import (
    PROTOCOLS,
    Reader,
    hold,
    make_consumer,
    poll_until,
    release,
)
from tests.real_broker import Broker, broker_script, unique

pytestmark = pytest.mark.broker

PARTITIONS = 4
PER_PARTITION = 40
#: generous: the machine is shared, and a KIP-848 member learns of a rebalance only at its
#: next heartbeat (5 s by the broker's default)
WAIT_S = 120.0


@dataclass(frozen=True, slots=True)
class Layout:
    """The chosen record timestamps (CreateTime) around `base_ms`."""

    base_ms: int

    @property
    def at_ms(self) -> int:
        """T, the time every test seeks to."""
        return self.base_ms + 25_000

    def timestamp(self, partition: int, index: int) -> int:
        if partition == 0:
            return self.base_ms + index * 1000
        if partition == 1:
            return self.base_ms - 100_000 + index
        if partition == 2:
            return self.base_ms + 100_000 + index
        return self.base_ms + (index * 7 % PER_PARTITION) * 1000

    def first_at_or_after(self, partition: int) -> int:
        """What the test expects Kafka to answer for T (checked against Kafka's tool)."""
        return next(
            (i for i in range(PER_PARTITION) if self.timestamp(partition, i) >= self.at_ms),
            PER_PARTITION,
        )


@dataclass(slots=True)
class TimedTopics:
    """The module's topics, and Kafka's answer for T on them (the tool runs meanwhile)."""

    layout: Layout
    read_only: str
    """shared by every test that only reads (each with its own groups)"""
    seek: Mapping[str, str]
    """per protocol: the seek tests add records"""
    _tool: subprocess.Popen[str]
    _answer: dict[PartitionKey, int] | None = None

    def kafka_starts(self) -> dict[PartitionKey, int]:
        """Kafka's NEW-OFFSET for T of every partition of the module's topics."""
        if self._answer is None:
            out, err = self._tool.communicate(timeout=300)
            assert self._tool.returncode == 0, err
            self._answer = _reset_plan(out)
        return self._answer

    def kafka_start(self, topic: str) -> dict[int, int]:
        starts = self.kafka_starts()
        return {p: starts[(topic, p)] for p in range(PARTITIONS)}


def _reset_plan(out: str) -> dict[PartitionKey, int]:
    """The GROUP TOPIC PARTITION NEW-OFFSET rows of `--reset-offsets --dry-run`."""
    plan: dict[PartitionKey, int] = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2].isdigit():
            plan[(fields[1], int(fields[2]))] = int(fields[3])
    return plan


def _iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture(scope="module")
def timed(kafka_broker: Broker) -> Iterator[TimedTopics]:
    # Whole seconds, an hour back: every record is in the past (no broker refuses it) and
    # far from any retention.
    layout = Layout((int(time.time()) - 3600) * 1000)
    read_only = unique("helpers-ro")
    seek = {protocol: unique(f"helpers-seek-{protocol}") for protocol in PROTOCOLS}
    names = [read_only, *seek.values()]
    admin = kafka_broker.admin()  # kept alive until its futures answer
    futures = admin.create_topics(
        [NewTopic(name, PARTITIONS, 1) for name in names], operation_timeout=30
    )
    for future in futures.values():
        future.result(timeout=60)
    for name in names:
        kafka_broker.produce(name, [PER_PARTITION] * PARTITIONS, timestamp_ms=layout.timestamp)
    topic_args = [arg for name in names for arg in ("--topic", name)]
    tool = subprocess.Popen(
        [
            str(broker_script()),
            "tool",
            "kafka-consumer-groups.sh",
            "--bootstrap-server",
            kafka_broker.bootstrap,
            "--reset-offsets",
            "--group",
            unique("reference"),
            *topic_args,
            "--to-datetime",
            _iso(layout.at_ms),
            "--dry-run",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    topics = TimedTopics(layout, read_only, seek, tool)
    try:
        yield topics
    finally:
        if tool.poll() is None:
            tool.kill()
        tool.communicate()


def _value(message: Message) -> str:
    raw = message.value()
    assert isinstance(raw, bytes)
    return raw.decode()


def _values(starts: Mapping[int, int], end: int = PER_PARTITION) -> list[str]:
    """The values of the records from `starts[p]` to `end` of each partition, sorted."""
    return sorted(f"{p}:{i}" for p, first in starts.items() for i in range(first, end))


def _reads(starts: Mapping[int, int], end: int = PER_PARTITION) -> list[tuple[int, int]]:
    return sorted((p, o) for p, first in starts.items() for o in range(first, end))


def _commit_positions(consumer: Consumer) -> None:
    offsets = [p for p in consumer.position(consumer.assignment()) if p.offset >= 0]
    if offsets:
        consumer.commit(offsets=offsets, asynchronous=False)


def _accepted(commit: Callable[[], object]) -> bool:
    """Whether the coordinator takes this member's commit now. In a cooperative rebalance the
    clients' assignments settle a round before the group's generation does, and a commit in
    between is fenced: the scenarios go on only once every member's commit is taken."""
    try:
        commit()
    except (KafkaException, ConsumerHelperError):
        return False
    return True


def _settled(readers: Iterable[Reader]) -> bool:
    """Every partition assigned to exactly one reader, and every reader has some."""
    sets = [reader.assigned() for reader in readers]
    return all(sets) and sum(map(len, sets)) == PARTITIONS == len(set().union(*sets))


def _begun(readers: Iterable[Reader]) -> set[int]:
    return {p for reader in readers for p, _ in reader.read}


def _with_partition(reads: Iterable[tuple[int, int]], partition: int) -> int:
    return sum(1 for p, _ in reads if p == partition)


def _poll_until(readers: Iterable[Reader], done: Callable[[], bool]) -> None:
    poll_until(readers, done, WAIT_S)


def _close(readers: Iterable[Reader]) -> None:
    for reader in readers:
        reader.consumer.close()


#: a member about to be held pauses each partition after this many records: every
#: partition begins, none finishes, so whichever moves has progress to lose
PACE = 5
#: the application commits (through the helper) after every this many records: more than a
#: first member reads before it is held, so what it read of a partition that moves reaches
#: the next owner through the helper's on_revoke commit alone
COMMIT_EVERY = PACE * PARTITIONS + 1


class _Scenario:
    """One helper in a group of its own: a first member, a second one joining while the first
    is held, both finishing. Subclasses say what the members do and what must come out."""

    name = ""

    def __init__(self, broker: Broker, topic: str, protocol: str) -> None:
        self.broker, self.topic, self.protocol = broker, topic, protocol
        self.group = unique(f"{self.name}-{protocol}")
        self.members: list[Reader] = []

    def consumer(self) -> Reader:
        return Reader(make_consumer(self.broker.bootstrap, self.group, self.protocol))

    def first(self) -> Reader:
        raise NotImplementedError

    def ready(self) -> bool:
        """The first member is where the second may join."""
        raise NotImplementedError

    def before_join(self) -> None:
        """Once every scenario is ready, before the first members are held."""

    def second(self) -> Reader:
        raise NotImplementedError

    def stable(self) -> bool:
        raise NotImplementedError

    def after_stable(self) -> None:
        """Once both members hold their partitions and the first is released."""

    def complete(self) -> bool:
        raise NotImplementedError

    def before_close(self) -> None:
        """The last look while the members are in the group."""

    def check(self, kafka_at_t: Mapping[int, int]) -> None:
        """After both members closed; `kafka_at_t` is Kafka's answer for T on the topic."""
        raise NotImplementedError


class _Seek(_Scenario):
    """Both members seek to T. The first reads from Kafka's offsets for T to the ends and
    commits; the second starts the partitions that move to it at T again (they are new to
    it: by design), and the first goes on from its commits with those it keeps (an eager
    rebalance hands them over again). Then one record per partition, written now: a
    partition sought again would deliver older ones first, and partition 1, started at its
    log end, delivers it (the end read before the lookup, not "the end" resolved later)."""

    name = "seek"

    def __init__(self, broker: Broker, topic: str, protocol: str, timed: TimedTopics) -> None:
        super().__init__(broker, topic, protocol)
        self.timed, self.layout = timed, timed.layout
        self.starts = {p: timed.layout.first_at_or_after(p) for p in range(PARTITIONS)}
        self.start_commits: dict[PartitionKey, int] = {}
        self.moved: set[int] = set()
        self.kept: set[int] = set()

    def _member(self) -> Reader:
        reader = self.consumer()
        reader.consumer.subscribe([self.topic], on_assign=seek_to_timestamp(self.layout.at_ms))
        self.members.append(reader)
        return reader

    def first(self) -> Reader:
        return self._member()

    def ready(self) -> bool:
        return len(self.members[0].read) >= len(_reads(self.starts))

    def before_join(self) -> None:
        # What the helper committed before reading (the application has committed nothing).
        self.start_commits = self.broker.committed(self.group)
        _commit_positions(self.members[0].consumer)

    def second(self) -> Reader:
        return self._member()

    def stable(self) -> bool:
        return _settled(self.members) and all(
            _accepted(partial(_commit_positions, r.consumer)) for r in self.members
        )

    def after_stable(self) -> None:
        first, second = self.members
        self.moved, self.kept = second.assigned(), first.assigned()
        # Kafka's answer first (its tool may still run): written after the record below,
        # partition 1's answer, the log end, would count it.
        self.timed.kafka_start(self.topic)
        producer = self.broker.producer()
        for partition in range(PARTITIONS):
            producer.produce(
                self.topic, value=f"{partition}:{PER_PARTITION}".encode(), partition=partition
            )
        assert producer.flush(60) == 0

    def complete(self) -> bool:
        again = {p: self.starts[p] for p in self.moved}
        expected = len(_reads(self.starts)) + len(_reads(again)) + PARTITIONS
        return sum(len(m.read) for m in self.members) >= expected

    def before_close(self) -> None:
        for member in self.members:
            _commit_positions(member.consumer)

    def check(self, kafka_at_t: Mapping[int, int]) -> None:
        first, second = self.members
        topic = self.topic
        assert self.start_commits == {(topic, p): offset for p, offset in kafka_at_t.items()}
        assert sorted(first.read) == sorted(
            _reads(kafka_at_t) + [(p, PER_PARTITION) for p in self.kept]
        ), "first member"
        assert sorted(second.read) == _reads(
            {p: kafka_at_t[p] for p in self.moved}, PER_PARTITION + 1
        ), "second member"
        assert self.broker.committed(self.group) == {
            (topic, p): PER_PARTITION + 1 for p in range(PARTITIONS)
        }


class _Replay(_Scenario):
    """A replay (from `start`) of a group that had caught up, or with `start` None the
    control: a naive on_assign seeking to the beginning, which must be caught replaying
    twice. The application commits every few records through the controller."""

    name = "replay"
    REPLAY_ID = "fix-4711"

    def __init__(
        self,
        broker: Broker,
        topic: str,
        protocol: str,
        start: ReplayStart | None,
        wanted: Mapping[int, int],
    ) -> None:
        super().__init__(broker, topic, protocol)
        self.start, self.wanted = start, dict(wanted)
        self.values: list[str] = []
        self.commits: list[Callable[[], object]] = []
        self.marks: list[TopicPartition] = []
        # Before the replay: the group is caught up (committed at the log ends, no mark).
        broker.commit(self.group, {(topic, p): PER_PARTITION for p in range(PARTITIONS)})

    def _member(self) -> Reader:
        reader = self.consumer()
        consumer = reader.consumer
        if self.start is None:

            def naive(c: Consumer, partitions: list[TopicPartition]) -> None:
                assign_at(
                    c, [TopicPartition(p.topic, p.partition, OFFSET_BEGINNING) for p in partitions]
                )

            consumer.subscribe([self.topic], on_assign=naive)
            commit: Callable[[], object] = lambda: _commit_positions(consumer)  # noqa: E731
        else:
            controller = ReplayController(self.REPLAY_ID, self.start)
            controller.subscribe(consumer, [self.topic])
            commit = lambda: controller.commit(consumer)  # noqa: E731

        def process(message: Message) -> None:
            self.values.append(_value(message))
            if len(self.values) % COMMIT_EVERY == 0:
                commit()

        reader.on_message = process
        self.members.append(reader)
        self.commits.append(commit)
        return reader

    def first(self) -> Reader:
        reader = self._member()
        reader.pause_each_after = PACE
        return reader

    def ready(self) -> bool:
        return _begun(self.members) == {p for p, at in self.wanted.items() if at < PER_PARTITION}

    def second(self) -> Reader:
        return self._member()

    def stable(self) -> bool:
        return _settled(self.members) and all(map(_accepted, self.commits))

    def complete(self) -> bool:
        return set(self.values) >= set(_values(self.wanted))

    def before_close(self) -> None:
        keys = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        self.commits[0]()
        self.commits[1]()
        self.marks = self.members[0].consumer.committed(keys, timeout=30)

    def check(self, kafka_at_t: Mapping[int, int]) -> None:
        if self.start is None:
            assert len(self.values) > len(set(self.values)), "the control replayed twice"
            return
        starts = kafka_at_t if isinstance(self.start, FromTimestamp) else self.wanted
        what = type(self.start).__name__
        assert sorted(self.values) == _values(starts), f"{what}: each record exactly once"
        assert all(member.read for member in self.members), f"{what}: both took part"
        # Kafka's OffsetFetch: the replay ended at the log ends, every partition marked.
        assert self.broker.committed(self.group) == {
            (self.topic, p): PER_PARTITION for p in range(PARTITIONS)
        }, what
        assert {(c.offset, replay_id_of(c.metadata)) for c in self.marks} == {
            (PER_PARTITION, self.REPLAY_ID)
        }, what


class _Lossy:
    """An OffsetStore whose saves stop reaching the disk at `crash()`: what a process
    that dies meanwhile leaves behind."""

    def __init__(self, store: OffsetStore) -> None:
        self.store, self.crashed = store, False

    def load(self, keys: Iterable[PartitionKey]) -> dict[PartitionKey, StoredPartition]:
        return self.store.load(keys)

    def save(self, entries: Mapping[PartitionKey, StoredPartition]) -> None:
        if not self.crashed:
            self.store.save(entries)


Processed = list[str]


def _external(
    reader: Reader,
    topic: str,
    store: OffsetStore,
    *,
    save: bool,
    on_out_of_range: Callable[[OutOfRange, Processed], Processed] | None = None,
) -> ExternalOffsets[Processed]:
    """`reader` subscribed through ExternalOffsets, processing each record into its
    partition's state, and saving after each one if `save`. The state of a partition is the
    values processed, in order: "exactly once" is checked directly, after any restart or
    move it must be "p:0", "p:1", ... with no repeat."""
    offsets = ExternalOffsets(
        store,
        initial=list,
        encode=lambda state: json.dumps(state).encode(),
        decode=json.loads,
        on_out_of_range=on_out_of_range,
    )

    def process(message: Message) -> None:
        topic, partition = message.topic(), message.partition()
        assert topic is not None and partition is not None
        offsets.update(message, [*offsets.state(topic, partition), _value(message)])
        if save:
            offsets.save()

    reader.on_message = process
    offsets.subscribe(reader.consumer, [topic])
    return offsets


class _External(_Scenario):
    """ExternalOffsets on a FileOffsetStore; nothing is committed to Kafka. A process saves
    after every record, then crashes (saves lost, a few records processed in vain); the
    restarted process resumes at the saved offsets with the saved state, without saving per
    record; a second member joins and the partitions that move carry their state through
    the first one's on_revoke save."""

    name = "external"

    def __init__(self, broker: Broker, topic: str, protocol: str, directory: Path) -> None:
        super().__init__(broker, topic, protocol)
        self.store = FileOffsetStore(directory)
        self.keys = [(topic, p) for p in range(PARTITIONS)]
        self.saved: dict[PartitionKey, StoredPartition] = {}
        self.offsets: list[ExternalOffsets[Processed]] = []

    def _member(self, store: OffsetStore, save: bool) -> tuple[Reader, ExternalOffsets[Processed]]:
        reader = self.consumer()
        return reader, _external(reader, self.topic, store, save=save)

    def crash_and_restart(self) -> None:
        lossy = _Lossy(self.store)
        crashing, _ = self._member(lossy, save=True)
        crashing.pause_each_after = PACE
        try:
            _poll_until(
                [crashing],
                lambda: all(_with_partition(crashing.read, p) >= PACE for p in range(PARTITIONS)),
            )
            self.saved = self.store.load(self.keys)
            lossy.crashed = True
            held = hold(crashing)
            crashing.pause_each_after = 2 * PACE
            release(crashing, held)
            # Records processed after the crash point: their work is lost with the process.
            _poll_until(
                [crashing],
                lambda: all(
                    _with_partition(crashing.read, p) >= 2 * PACE for p in range(PARTITIONS)
                ),
            )
        finally:
            _close([crashing])  # its on_revoke saves, into the void
        assert self.store.load(self.keys) == self.saved
        assert all(entry.offset >= PACE for entry in self.saved.values())

    def first(self) -> Reader:
        reader, offsets = self._member(self.store, save=False)
        reader.pause_each_after = PACE
        self.members.append(reader)
        self.offsets.append(offsets)
        return reader

    def ready(self) -> bool:
        return _begun(self.members) == set(range(PARTITIONS))

    def second(self) -> Reader:
        reader, offsets = self._member(self.store, save=False)
        self.members.append(reader)
        self.offsets.append(offsets)
        return reader

    def stable(self) -> bool:
        held = [offsets.partitions for offsets in self.offsets]
        return _settled(self.members) and all(held) and sum(map(len, held)) == PARTITIONS

    def complete(self) -> bool:
        held = [(o, key) for o in self.offsets for key in o.partitions]
        return len(held) == PARTITIONS and all(
            len(o.state(*key)) == PER_PARTITION for o, key in held
        )

    def check(self, kafka_at_t: Mapping[int, int]) -> None:
        restarted, joined = self.members
        resumed = {p: self.saved[(self.topic, p)].offset for p in range(PARTITIONS)}
        # The restart resumed exactly at the saved offsets: each partition's first record
        # after the restart is the saved offset's.
        assert {p: min(o for q, o in restarted.read if q == p) for p in range(PARTITIONS)} == (
            resumed
        )
        assert sorted(restarted.read + joined.read) == _reads(resumed), "each record once"
        assert joined.read, "the joining member took partitions over"
        # close() revoked everything: every partition saved complete, state and offset.
        assert {
            key: (entry.offset, json.loads(entry.state))
            for key, entry in self.store.load(self.keys).items()
        } == {
            (self.topic, p): (PER_PARTITION, [f"{p}:{i}" for i in range(PER_PARTITION)])
            for p in range(PARTITIONS)
        }
        # The offsets live outside Kafka: Kafka's OffsetFetch has nothing for the group.
        assert self.broker.committed(self.group) == {}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_helpers_across_a_member_joining(
    kafka_broker: Broker, timed: TimedTopics, protocol: str, tmp_path: Path
) -> None:
    """Every helper's scenario in a group of its own, side by side: the first members run,
    are held (every partition begun, none finished), the second members join and partitions
    move, then all finish; each scenario then checks its records, by value, and Kafka's
    OffsetFetch."""
    layout, read_only = timed.layout, timed.read_only
    everything = dict.fromkeys(range(PARTITIONS), 0)
    at_t = {p: layout.first_at_or_after(p) for p in range(PARTITIONS)}
    external = _External(kafka_broker, read_only, protocol, tmp_path / "offsets")
    scenarios: list[_Scenario] = [
        _Seek(kafka_broker, timed.seek[protocol], protocol, timed),
        _Replay(kafka_broker, read_only, protocol, FromBeginning(), everything),
        _Replay(kafka_broker, read_only, protocol, FromTimestamp.at(layout.at_ms), at_t),
        _Replay(kafka_broker, read_only, protocol, None, everything),
        external,
    ]

    def everyone() -> list[Reader]:
        return [member for s in scenarios for member in s.members]

    try:
        external.crash_and_restart()
        firsts = [s.first() for s in scenarios]
        _poll_until(firsts, lambda: all(s.ready() for s in scenarios))
        for s in scenarios:
            s.before_join()
        held = [hold(first) for first in firsts]
        for s in scenarios:
            s.second()
        _poll_until(everyone(), lambda: all(s.stable() for s in scenarios))
        for first, paused in zip(firsts, held, strict=True):
            release(first, paused)
        for s in scenarios:
            s.after_stable()
        _poll_until(everyone(), lambda: all(s.complete() for s in scenarios))
        for s in scenarios:
            s.before_close()
    finally:
        _close(everyone())
    for s in scenarios:
        s.check(timed.kafka_start(s.topic))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_seek_to_timestamp_only_uncommitted_keeps_committed_partitions(
    kafka_broker: Broker, timed: TimedTopics, protocol: str
) -> None:
    """A group with commits on partitions 0 and 3: those go on from the commits, the others
    start at Kafka's offsets for T (partition 1 at its log end, committed there)."""
    topic, layout = timed.read_only, timed.layout
    group = unique(f"uncommitted-{protocol}")
    kafka_broker.commit(group, {(topic, 0): 2, (topic, 3): 39})
    reader = Reader(make_consumer(kafka_broker.bootstrap, group, protocol))
    reader.consumer.subscribe(
        [topic], on_assign=seek_to_timestamp(layout.at_ms, only_uncommitted=True)
    )
    waited = {**{p: layout.first_at_or_after(p) for p in range(PARTITIONS)}, 0: 2, 3: 39}
    try:
        _poll_until([reader], lambda: len(reader.read) >= len(_reads(waited)))
        committed = kafka_broker.committed(group)
    finally:
        _close([reader])
    kafka = timed.kafka_start(topic)
    assert sorted(reader.read) == _reads({**kafka, 0: 2, 3: 39})
    # The helper committed the starts it chose, and left the others alone.
    assert committed == {(topic, p): offset for p, offset in {**kafka, 0: 2, 3: 39}.items()}


#: where the `trimmed` topic's partition 2 starts once its first records are deleted
TRIMMED_START = 20


@pytest.fixture(scope="module")
def trimmed(kafka_broker: Broker) -> str:
    """A topic of PARTITIONS x PER_PARTITION records whose partition 2 starts at
    TRIMMED_START: its first records deleted (what retention does)."""
    topic = unique("helpers-trimmed")
    kafka_broker.create_topic(topic, PARTITIONS)
    kafka_broker.produce(topic, [PER_PARTITION] * PARTITIONS)
    admin = kafka_broker.admin()  # kept alive until its futures answer
    futures = admin.delete_records([TopicPartition(topic, 2, TRIMMED_START)], request_timeout=60)
    for future in futures.values():
        assert future.result(timeout=60).low_watermark == TRIMMED_START
    return topic


def test_replay_from_a_snapshot_clamps_to_the_log_and_leaves_other_partitions(
    kafka_broker: Broker, trimmed: str
) -> None:
    """Snapshot offsets beyond the log end and before the log start are clamped; a partition
    missing from the snapshot goes on from its committed offset; every partition ends marked."""
    group = unique("snapshot")
    kafka_broker.commit(group, {(trimmed, 3): 30})
    snapshot = {(trimmed, 0): 10, (trimmed, 1): 999, (trimmed, 2): 5}
    controller = ReplayController("snap", FromSnapshot(snapshot))
    reader = Reader(make_consumer(kafka_broker.bootstrap, group, "consumer"))
    reader.on_message = lambda message: controller.commit(reader.consumer, message)
    controller.subscribe(reader.consumer, [trimmed])
    starts = {0: 10, 1: PER_PARTITION, 2: TRIMMED_START, 3: 30}
    keys = [TopicPartition(trimmed, p) for p in range(PARTITIONS)]
    try:
        _poll_until([reader], lambda: len(reader.read) >= len(_reads(starts)))
        marks = reader.consumer.committed(keys, timeout=30)
    finally:
        _close([reader])
    assert sorted(reader.read) == _reads(starts)
    assert kafka_broker.committed(group) == {(trimmed, p): PER_PARTITION for p in range(PARTITIONS)}
    assert {replay_id_of(c.metadata) for c in marks} == {"snap"}


def test_auto_commit_of_stored_offsets_keeps_the_replay_mark(
    kafka_broker: Broker, timed: TimedTopics
) -> None:
    """store() with enable.auto.offset.store=false: librdkafka's auto-commit sends the stored
    metadata along, so an auto-committing application keeps the mark too."""
    topic, group = timed.read_only, unique("auto-commit")
    controller = ReplayController("auto", FromBeginning())
    reader = Reader(
        make_consumer(
            kafka_broker.bootstrap,
            group,
            "consumer",
            **{
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 50,
                "enable.auto.offset.store": False,
            },
        )
    )
    reader.on_message = lambda message: controller.store(reader.consumer, message)
    controller.subscribe(reader.consumer, [topic])
    everything = _reads(dict.fromkeys(range(PARTITIONS), 0))
    keys = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    def marked() -> bool:
        found = reader.consumer.committed(keys, timeout=30)
        return {(c.offset, replay_id_of(c.metadata)) for c in found} == {(PER_PARTITION, "auto")}

    try:
        _poll_until([reader], lambda: len(reader.read) >= len(everything) and marked())
    finally:
        _close([reader])
    assert sorted(reader.read) == everything
    assert kafka_broker.committed(group) == {(topic, p): PER_PARTITION for p in range(PARTITIONS)}


def test_external_offsets_outside_the_log_restart_at_the_log_start(
    kafka_broker: Broker, trimmed: str, tmp_path: Path
) -> None:
    """Stored offsets above the log end (a recreated topic) or below the log start (retention)
    restart at the log start with on_out_of_range's state; the others resume."""
    store = FileOffsetStore(tmp_path / "offsets")
    store.save(
        {
            (trimmed, 0): StoredPartition(500, b'["gone"]'),
            (trimmed, 1): StoredPartition(7, json.dumps([f"1:{i}" for i in range(7)]).encode()),
            (trimmed, 2): StoredPartition(2, b'["2:0", "2:1"]'),
        }
    )
    events: list[tuple[OutOfRange, Processed]] = []

    def on_out_of_range(event: OutOfRange, stored: Processed) -> Processed:
        events.append((event, stored))
        return []

    reader = Reader(make_consumer(kafka_broker.bootstrap, unique("out-of-range"), "consumer"))
    _external(reader, trimmed, store, save=False, on_out_of_range=on_out_of_range)
    starts = {0: 0, 1: 7, 2: TRIMMED_START, 3: 0}
    try:
        _poll_until([reader], lambda: len(reader.read) >= len(_reads(starts)))
    finally:
        _close([reader])  # revokes: saves every partition
    assert sorted(reader.read) == _reads(starts)
    assert sorted(events, key=lambda e: e[0].partition) == [
        (OutOfRange(trimmed, 0, 500, 0, PER_PARTITION), ["gone"]),
        (OutOfRange(trimmed, 2, 2, TRIMMED_START, PER_PARTITION), ["2:0", "2:1"]),
    ]
    first_kept = {0: 0, 1: 0, 2: TRIMMED_START, 3: 0}
    assert {
        key: (entry.offset, json.loads(entry.state))
        for key, entry in store.load([(trimmed, p) for p in range(PARTITIONS)]).items()
    } == {
        (trimmed, p): (PER_PARTITION, [f"{p}:{i}" for i in range(first, PER_PARTITION)])
        for p, first in first_kept.items()
    }


def test_kafka_answers_for_the_time_are_the_layouts(timed: TimedTopics) -> None:
    """The expectations the tests wait for are Kafka's own answer (its tool, on the same
    records): partition 1 has nothing at or after T, and the tool falls back to the log end.
    Last in the module: the tool has run meanwhile."""
    layout = timed.layout
    expected = {p: layout.first_at_or_after(p) for p in range(PARTITIONS)}
    assert expected == {0: 25, 1: PER_PARTITION, 2: 0, 3: 4}
    for topic in [timed.read_only, *timed.seek.values()]:
        assert timed.kafka_start(topic) == expected
