"""ReplayController on the mock cluster: a replay happens once per replay id, across
rebalances and members joining later, for eager, cooperative and KIP-848 groups.

What the mock cannot show: timestamp lookups (it answers -1), so FromTimestamp is checked
through the injectable lookup answering as Kafka does; and the trailing NUL byte a real
broker keeps in metadata committed by confluent-kafka 2.16.1 (the mock hands back the
string without it), checked on the metadata the real Kafka 4.0 broker returned in the
conformance run.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from offsetwatch.consumer_helpers import (
    FromBeginning,
    FromSnapshot,
    FromTimestamp,
    ReplayController,
    replay_id_of,
    replay_metadata,
)
from offsetwatch.consumer_helpers.assignment import assign_at
from offsetwatch.consumer_helpers.errors import ConsumerHelperError
from offsetwatch.mock_cluster import MockCluster
from tests.kafka_fixtures import create_data_topic, kafka_cluster  # noqa: F401
from tests.offsetwatch.consumer_helpers.clients import (
    PROTOCOLS,
    KafkaTimeAnswers,
    Reader,
    hold,
    make_consumer,
    poll_until,
    produce_in_small_batches,
    produce_timed,
    release,
)

TOPIC = "orders"
PARTITIONS = 4
PER_PARTITION = 60
EVERYTHING = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}


def test_replay_id_survives_the_trailing_nul_of_a_real_broker(conformance_dir: Path) -> None:
    groups = json.loads(
        (conformance_dir / "runs" / "main" / "groups-final.json").read_text(encoding="utf-8")
    )
    with_nul = [
        row["metadata"]
        for record in groups.values()
        for row in record.get("offsets", [])
        if (row["metadata"] or "").endswith("\x00")
    ]
    # What Kafka 4.0 returned for metadata committed by confluent-kafka 2.16.1.
    assert "manual-rewind\x00" in with_nul
    assert all(replay_id_of(text) is None for text in with_nul)
    assert replay_id_of(replay_metadata("fix-1234") + "\x00") == "fix-1234"
    assert replay_id_of(replay_metadata("fix-1234")) == "fix-1234"
    assert replay_id_of("") is None
    assert replay_id_of(None) is None


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\x00b"])
def test_replay_ids_are_checked(bad: str) -> None:
    with pytest.raises(ValueError, match="replay id"):
        ReplayController(bad, FromBeginning())


def _caught_up_group(bootstrap: str, group: str, protocol: str) -> None:
    """The group before the replay: committed at the log ends, no replay mark."""
    consumer = make_consumer(bootstrap, group, protocol)
    consumer.commit(
        offsets=[TopicPartition(TOPIC, p, PER_PARTITION) for p in range(PARTITIONS)],
        asynchronous=False,
    )
    consumer.close()


@dataclass
class _CommitEach:
    """A replaying reader's on_message: commit past every message, as the application does."""

    controller: ReplayController
    consumer: Consumer

    def __call__(self, message: Message) -> None:
        self.controller.commit(self.consumer, message)

    def accepted(self) -> bool:
        """Whether the coordinator takes a commit of this member's positions now."""
        try:
            self.controller.commit(self.consumer)
        except ConsumerHelperError:
            return False
        return True


def _replaying_reader(bootstrap: str, group: str, protocol: str, replay: str) -> Reader:
    controller = ReplayController(replay, FromBeginning())
    reader = Reader(make_consumer(bootstrap, group, protocol))
    reader.on_message = _CommitEach(controller, reader.consumer)
    controller.subscribe(reader.consumer, [TOPIC])
    return reader


def _paced(reader: Reader) -> Reader:
    """Stop each partition a quarter in, until `hold`: every partition begins, none finishes."""
    reader.pause_each_after = PER_PARTITION // 4
    return reader


def _under_way(reader: Reader) -> bool:
    """Every partition begun: whichever moves to another member has progress to lose."""
    return {partition for partition, _ in reader.read} == set(range(PARTITIONS))


def _settled(*readers: Reader) -> bool:
    """Every partition assigned to exactly one reader, and every reader has some."""
    sets = [reader.assigned() for reader in readers]
    return all(sets) and sum(map(len, sets)) == PARTITIONS == len(set().union(*sets))


def _stable(*readers: Reader) -> bool:
    """Settled, and the coordinator takes every member's commit. In a cooperative rebalance
    the clients' assignments settle a round before the group's generation does: a commit in
    between is fenced (ILLEGAL_GENERATION), which here would fail the test and in an
    application make the partition's next owner read again from the last commit."""
    return _settled(*readers) and all(
        isinstance(reader.on_message, _CommitEach) and reader.on_message.accepted()
        for reader in readers
    )


@pytest.mark.kafka
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_members_joining_one_after_another_do_not_replay_twice(
    kafka_cluster: MockCluster,  # noqa: F811
    protocol: str,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(TOPIC, PARTITIONS)
    produce_in_small_batches(bootstrap, TOPIC, PARTITIONS, PER_PARTITION)
    group = f"replay-{uuid.uuid4().hex}"
    _caught_up_group(bootstrap, group, protocol)

    first = _paced(_replaying_reader(bootstrap, group, protocol, "r1"))
    readers = [first]
    try:
        poll_until([first], lambda: _under_way(first))
        # Hold `first` mid-replay (every partition begun, none finished) while `second` joins.
        held = hold(first)
        assert not {(p, PER_PARTITION - 1) for p in range(PARTITIONS)} & set(first.read), (
            "the replay is under way: no partition finished"
        )
        second = _replaying_reader(bootstrap, group, protocol, "r1")
        readers.append(second)
        poll_until([first, second], lambda: _stable(first, second))
        release(first, held)
        poll_until([first, second], lambda: set(first.read + second.read) >= EVERYTHING)
        # After the replay: a third member joins, then one new message per partition.
        third = _replaying_reader(bootstrap, group, protocol, "r1")
        readers.append(third)
        poll_until([first, second, third], lambda: _stable(first, second, third))
        produce_timed(bootstrap, TOPIC, {p: [1] for p in range(PARTITIONS)})
        total = PARTITIONS * (PER_PARTITION + 1)
        poll_until(
            [first, second, third], lambda: len(first.read + second.read + third.read) >= total
        )
        committed = first.consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
    finally:
        for reader in readers:
            reader.consumer.close()
    everything = first.read + second.read + third.read
    assert len(everything) == len(set(everything)) == total, "a message was read twice"
    assert set(everything) == EVERYTHING | {(p, PER_PARTITION) for p in range(PARTITIONS)}
    assert second.read, "the second member took part in the replay"
    assert {(c.offset, replay_id_of(c.metadata)) for c in committed} == {(PER_PARTITION + 1, "r1")}


@pytest.mark.kafka
def test_a_naive_seek_in_on_assign_does_replay_twice(
    kafka_cluster: MockCluster,  # noqa: F811
) -> None:
    """The failure the controller prevents, shown by the same scenario: without the mark the
    second member takes its partitions back to the beginning."""
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(TOPIC, PARTITIONS)
    produce_in_small_batches(bootstrap, TOPIC, PARTITIONS, PER_PARTITION)
    group = f"naive-{uuid.uuid4().hex}"
    _caught_up_group(bootstrap, group, "cooperative")

    def naive(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assign_at(
            consumer, [TopicPartition(p.topic, p.partition, OFFSET_BEGINNING) for p in partitions]
        )

    readers = [Reader(make_consumer(bootstrap, group, "cooperative")) for _ in range(2)]
    for reader in readers:
        reader.on_message = lambda m, c=reader.consumer: c.commit(message=m, asynchronous=False)
    first, second = readers
    _paced(first)
    first.consumer.subscribe([TOPIC], on_assign=naive)
    try:
        poll_until([first], lambda: _under_way(first))
        held = hold(first)
        second.consumer.subscribe([TOPIC], on_assign=naive)
        poll_until([first, second], lambda: _settled(first, second))
        release(first, held)
        poll_until([first, second], lambda: set(first.read + second.read) >= EVERYTHING)
    finally:
        for reader in readers:
            reader.consumer.close()
    everything = first.read + second.read
    assert len(everything) > len(set(everything)), "expected the naive seek to replay twice"


def _single_replay(
    bootstrap: str, group: str, controller: ReplayController, expected: set[tuple[int, int]]
) -> tuple[Reader, list[TopicPartition]]:
    reader = Reader(make_consumer(bootstrap, group, "consumer"))
    reader.on_message = lambda message: controller.commit(reader.consumer, message)
    controller.subscribe(reader.consumer, [TOPIC])
    try:
        poll_until([reader], lambda: set(reader.read) >= expected)
        # One more message per partition: nothing older may come first.
        produce_timed(bootstrap, TOPIC, {p: [10**13] for p in range(PARTITIONS)})
        poll_until([reader], lambda: len(reader.read) >= len(expected) + PARTITIONS)
        committed = reader.consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
    finally:
        reader.consumer.close()
    return reader, committed


@pytest.mark.kafka
def test_snapshot_start_with_clamping_and_untouched_partitions(
    kafka_cluster: MockCluster,  # noqa: F811
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    create_data_topic(kafka_cluster, TOPIC, [PER_PARTITION] * PARTITIONS)
    kafka_cluster.delete_records(TOPIC, 2, 20)  # log start of partition 2 moves to 20
    group = f"snapshot-{uuid.uuid4().hex}"
    consumer = make_consumer(bootstrap, group, "consumer")
    consumer.commit(offsets=[TopicPartition(TOPIC, 3, 50)], asynchronous=False)
    consumer.close()
    # partition 1 beyond its end -> 60; partition 2 before its start -> 20; 3 not in it.
    snapshot = {(TOPIC, 0): 10, (TOPIC, 1): 999, (TOPIC, 2): 5}
    expected = (
        {(0, o) for o in range(10, 60)}
        | {(2, o) for o in range(20, 60)}
        | {(3, o) for o in range(50, 60)}
    )
    reader, committed = _single_replay(
        bootstrap, group, ReplayController("snap", FromSnapshot(snapshot)), expected
    )
    assert sorted(reader.read) == sorted(expected | {(p, 60) for p in range(PARTITIONS)})
    assert {replay_id_of(c.metadata) for c in committed} == {"snap"}


@pytest.mark.kafka
def test_timestamp_start(kafka_cluster: MockCluster) -> None:  # noqa: F811
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(TOPIC, PARTITIONS)
    base = 1_700_000_000_000
    times = {p: [base + (p + 1) * i * 1000 for i in range(20)] for p in range(PARTITIONS)}
    produce_timed(bootstrap, TOPIC, times)
    # Kafka's answers for `at`: none in partition 0 (-1: its log end, 20), then 15, 10, 8.
    at = base + 30_000
    answers = KafkaTimeAnswers(times, TOPIC)
    controller = ReplayController("ts", FromTimestamp.at(at), lookup=answers)
    expected = {(p, o) for p, first in enumerate([20, 15, 10, 8]) for o in range(first, 20)}
    reader, committed = _single_replay(bootstrap, f"ts-{uuid.uuid4().hex}", controller, expected)
    assert sorted(reader.read) == sorted(expected | {(p, 20) for p in range(PARTITIONS)})
    assert {(c.offset, replay_id_of(c.metadata)) for c in committed} == {(21, "ts")}


@pytest.mark.kafka
def test_auto_commit_of_stored_offsets_keeps_the_mark(kafka_cluster: MockCluster) -> None:  # noqa: F811
    """store() + enable.auto.offset.store=false: librdkafka's auto-commit sends the stored
    metadata along, so auto-committing applications keep the replay mark too."""
    bootstrap = kafka_cluster.bootstrap_servers
    create_data_topic(kafka_cluster, TOPIC, [PER_PARTITION] * PARTITIONS)
    controller = ReplayController("auto", FromBeginning())
    reader = Reader(
        make_consumer(
            bootstrap,
            f"auto-{uuid.uuid4().hex}",
            "consumer",
            **{
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 50,
                "enable.auto.offset.store": False,
            },
        )
    )
    reader.on_message = lambda message: controller.store(reader.consumer, message)
    controller.subscribe(reader.consumer, [TOPIC])
    wanted = {(PER_PARTITION, "auto")}
    keys = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

    def committed() -> set[tuple[int, str | None]]:
        found = reader.consumer.committed(keys, timeout=10)
        return {(c.offset, replay_id_of(c.metadata)) for c in found}

    try:
        poll_until([reader], lambda: set(reader.read) >= EVERYTHING and committed() == wanted)
    finally:
        reader.consumer.close()
