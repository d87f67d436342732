"""The exporter on a real Kafka 4.0.0 broker of this module's own: offsets expired by
retention, and `__consumer_offsets` compacted by the log cleaner.

The broker keeps offsets one minute (the least Kafka allows) and checks every second;
`__consumer_offsets` has one partition (every group's records in one log) with 20 kB
segments, and the cleaner compacts a closed segment half a second after it is dirty and
drops tombstones a second later. So within seconds of a workload the log holds only the
latest record per key, and a minute after a group without members last committed (or became
empty), Kafka expires its offsets and then deletes the group. Kafka's Admin API on the same
broker is the reference (see tests/exporter/real_broker_helpers.py).

The expiry cannot happen sooner than a minute after the commits: the module's fixture makes
them first, and the compaction test runs while that minute passes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import pytest
from confluent_kafka import TopicPartition

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.exporter.service import ExporterService
from tests.exporter.daemon_helpers import (
    TIMEOUT_S,
    exporter_config,
    readyz,
    running_exporter,
    scrape,
    wait_for,
    wait_ready_with_log_ends,
)
from tests.exporter.real_broker_helpers import (
    CLIENT,
    LiveGroup,
    assert_equal_to_kafka,
    detail_projection,
    high_watermarks,
    kafka_answers,
    kafka_listed_groups,
    left_group,
    listed_by_exporter,
    no_errors,
    present,
    settled,
    sync_exporter,
)
from tests.real_broker import Broker, own_broker, run_tool, unique

pytestmark = pytest.mark.broker

T = TypeVar("T")

SETTINGS: Final = (
    "offsets.retention.minutes=1",
    "offsets.retention.check.interval.ms=1000",
    "offsets.topic.num.partitions=1",
    # segments roll every tenth of a second while commits come (by time: Kafka refuses
    # segment.bytes below 1 MiB, the offsets topic's own setting too since 4.1), so a
    # workload of a second fills several closed segments for the cleaner
    "log.roll.ms=100",
    "log.cleaner.backoff.ms=500",
    "log.cleaner.min.cleanable.ratio=0.01",
    "log.cleaner.delete.retention.ms=1000",
    # KIP-848 members heartbeat every half second: joins and leaves take one round trip
    "group.consumer.min.heartbeat.interval.ms=500",
    "group.consumer.heartbeat.interval.ms=500",
)
PARTITIONS: Final = 20
#: an expiry takes a minute after the last commit, plus the retention check: wait long
EXPIRY_TIMEOUT_S: Final = 240.0


@dataclass(frozen=True, slots=True)
class Scene:
    broker: Broker
    topic: str
    #: groups without members: Kafka expires their offsets a minute after the fixture
    expiring: tuple[str, ...]
    #: a group with a live member subscribed to the topic: its offsets of that topic never
    #: expire; its offset of `unsubscribed` does
    live: str
    unsubscribed: str


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    directory = tmp_path_factory.mktemp("retention") / "broker"
    with own_broker(directory, *SETTINGS) as broker:
        topic = unique("events")
        broker.create_topic(topic, PARTITIONS)
        broker.produce(topic, [5] * PARTITIONS)
        simple, classic, consumer, live = (
            unique(p) for p in ("simple", "classic", "consumer", "live")
        )
        broker.commit(simple, {(topic, 0): 1, (topic, 1): 2})
        left_group(broker, classic, topic, PARTITIONS, "classic", 3)
        left_group(broker, consumer, topic, PARTITIONS, "consumer", 2)
        member = LiveGroup(broker, live, [topic], 1, {"group.protocol": "classic"}).start()
        try:
            member.join_and_commit({(topic, p) for p in range(PARTITIONS)}, lambda tp: 4)
            # the live member also commits a topic it does not subscribe to: Kafka expires
            # that offset alone and keeps the group
            other = unique("unsubscribed")
            broker.create_topic(other)
            broker.produce(other, [3])
            [consumer_of_live] = member.consumers
            member.call(
                lambda: consumer_of_live.commit(
                    offsets=[TopicPartition(other, 0, 1)], asynchronous=False
                )
            )
            committed = present(kafka_answers(broker, [live])[live]).rows
            assert len(committed) == PARTITIONS + 1 and (other, 0) in committed
            yield Scene(broker, topic, (simple, classic, consumer), live, other)
        finally:
            member.close()


@pytest.fixture(scope="module")
def exporter(scene: Scene) -> Iterator[ExporterService]:
    """Started after the first commits (they create `__consumer_offsets`), running through
    both tests: it sees the cleaner's work and the expiry happen."""
    config = exporter_config(scene.broker.bootstrap, kafka_lag_exporter_aliases=True)
    with running_exporter(config) as service:
        wait_for(lambda: readyz(service).status == 200, "/readyz 200")
        yield service
        no_errors(service)


def _segments(broker: Broker) -> list[Path]:
    return sorted((broker.data_dir / f"{OFFSETS_TOPIC}-0").glob("*.log"))


def _cleaned_up_to(broker: Broker) -> int:
    """The cleaner's own record of how far it compacted `__consumer_offsets-0` (-1: never)."""
    checkpoint = broker.data_dir / "cleaner-offset-checkpoint"
    if not checkpoint.exists():
        return -1
    for line in checkpoint.read_text().splitlines()[2:]:
        topic, partition, offset = line.split()
        if (topic, partition) == (OFFSETS_TOPIC, "0"):
            return int(offset)
    return -1


def _records_of(broker: Broker, group: str) -> int:
    """Records of `group` in `__consumer_offsets-0`'s segment files, by Kafka's own
    kafka-dump-log --offsets-decoder."""
    files = ",".join(str(f) for f in _segments(broker))
    dumped = run_tool("kafka-dump-log.sh", "--offsets-decoder", "--files", files)
    return len(re.findall(r'"group":"' + re.escape(group) + '"', dumped))


def _at_rest(broker: Broker, services: list[ExporterService], read: Callable[[], T]) -> T:
    """`read()` while every exporter has read the whole log and nothing was appended: both
    have then applied exactly the same records (an expiry may append any time)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        end = high_watermarks(broker, [0])
        for service in services:
            sync_exporter(service, end)
        result = read()
        if high_watermarks(broker, [0]) == end:
            return result
        assert time.monotonic() < deadline, "the log kept growing"


def test_compacted_log_rebuilds_the_same_state(scene: Scene, exporter: ExporterService) -> None:
    """40 rounds of commits of 20 partitions roll several segments; once the cleaner has
    compacted them (its checkpoint reaches the active segment; kafka-dump-log shows fewer
    of the group's records than were written), a fresh exporter reads the compacted log and
    arrives at the same state as the one that read every record live, and both equal
    Kafka's OffsetFetch for every group Kafka lists."""
    broker, topic = scene.broker, scene.topic
    group = unique("compacted")
    start = high_watermarks(broker, [0])[0]
    consumer = broker.consumer(group, **CLIENT)
    rounds = 40
    try:
        for r in range(rounds):
            offsets = [TopicPartition(topic, p, 1 + (r + p) % 5) for p in range(PARTITIONS)]
            consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    wait_for(
        lambda: _cleaned_up_to(broker) >= int(_segments(broker)[-1].stem) > start,
        "the cleaner compacting every closed segment, the workload's among them",
        describe=lambda: (_cleaned_up_to(broker), [f.name for f in _segments(broker)], start),
    )
    kept = _records_of(broker, group)
    assert PARTITIONS <= kept < rounds * PARTITIONS, kept

    config = exporter_config(broker.bootstrap, kafka_lag_exporter_aliases=True)
    with running_exporter(config) as fresh:
        wait_ready_with_log_ends(fresh)
        # what Kafka lists and what either exporter lists: nothing missing, nothing extra
        groups = kafka_listed_groups(broker) | listed_by_exporter(exporter)
        groups |= listed_by_exporter(fresh)
        assert group in groups and scene.live in groups
        rebuilt = settled(fresh, broker, groups)
        assert_equal_to_kafka(rebuilt)
        live = settled(exporter, broker, groups)
        assert_equal_to_kafka(live)
        projections = _at_rest(
            broker,
            [fresh, exporter],
            lambda: [
                (name, detail_projection(fresh, name), detail_projection(exporter, name))
                for name in sorted(groups)
            ],
        )
        for name, rebuilt_view, live_view in projections:
            assert rebuilt_view == live_view, name
        # the fresh exporter really read a compacted log: fewer records than offsets
        high = high_watermarks(broker, [0])[0]
        assert fresh.exporter.stats.total_records < high
        no_errors(fresh)


def test_expired_offsets_disappear(scene: Scene, exporter: ExporterService) -> None:
    """A simple group, a classic and a KIP-848 group whose members left: once Kafka's
    OffsetFetch is empty for them (retention) and ListGroups no longer lists them, the
    exporter's API, group list and /metrics do not show them either. The group with a live
    member keeps the offsets of its subscribed topic and loses the one of a topic it does
    not subscribe to, in both. A fresh exporter started after the expiry agrees."""
    broker = scene.broker
    gone = set(scene.expiring)
    unsubscribed = (scene.unsubscribed, 0)
    wait_for(
        # offsets expired, then the empty groups deleted (in the same cleanup pass)
        lambda: (
            all(a is None for a in kafka_answers(broker, gone).values())
            and not gone & kafka_listed_groups(broker)
            and unsubscribed not in present(kafka_answers(broker, [scene.live])[scene.live]).rows
        ),
        "Kafka expiring the offsets of the groups without members, and the groups",
        EXPIRY_TIMEOUT_S,
        interval_s=1.0,
        describe=lambda: kafka_answers(broker, scene.expiring),
    )
    groups = [*scene.expiring, scene.live]
    compared = settled(exporter, broker, groups)
    assert_equal_to_kafka(compared)
    kept = present(compared.kafka[scene.live]).rows
    assert set(kept) == {(scene.topic, p) for p in range(PARTITIONS)}
    for name, labels in scrape(exporter).samples:
        assert dict(labels).get("topic") != scene.unsubscribed, (name, labels)
    assert not gone & kafka_listed_groups(broker)
    assert not gone & listed_by_exporter(exporter)
    for name, labels in scrape(exporter).samples:
        assert dict(labels).get("group") not in gone, (name, labels)

    config = exporter_config(broker.bootstrap, kafka_lag_exporter_aliases=True)
    with running_exporter(config) as fresh:
        wait_ready_with_log_ends(fresh)
        assert_equal_to_kafka(settled(fresh, broker, groups))
        assert not gone & listed_by_exporter(fresh)
