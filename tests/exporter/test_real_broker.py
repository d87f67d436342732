"""The exporter on a real Kafka 4.0.0 broker (the run's shared one), compared with Kafka.

Every record in `__consumer_offsets` here was written by Kafka's group coordinator for real
clients: consumers in classic (eager and cooperative) and KIP-848 groups, simple commits,
transactional commits (`send_offsets_to_transaction`), Kafka's own
`kafka-consumer-groups.sh --delete` / `--delete-offsets`, and a topic's deletion. One
exporter reads the broker's whole `__consumer_offsets` for the module (other tests' groups
are there too); each test compares its own groups: the exporter's JSON API and /metrics must
say what Kafka's Admin API says on the same broker (see tests/exporter/real_broker_helpers.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.service import ExporterService
from tests.exporter.daemon_helpers import (
    exporter_config,
    readyz,
    running_exporter,
    scrape,
    wait_for,
)
from tests.exporter.real_broker_helpers import (
    CLIENT,
    TP,
    LiveGroup,
    assert_equal_to_kafka,
    high_watermarks,
    kafka_answers,
    kafka_listed_groups,
    left_group,
    listed_by_exporter,
    no_errors,
    offsets_partition_count,
    present,
    settled,
    stable_offsets,
    sync_exporter,
)
from tests.real_broker import Broker, kip848_groups, retry, unique

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def exporter(kafka_broker: Broker) -> Iterator[ExporterService]:
    """One exporter for the module, started once `__consumer_offsets` exists (a commit
    creates it: the exporter reads the topic, it never creates it)."""
    topic = unique("exporter-start")
    kafka_broker.create_topic(topic)
    kafka_broker.commit(unique("exporter-start"), {(topic, 0): 0})
    config = exporter_config(kafka_broker.bootstrap, kafka_lag_exporter_aliases=True)
    with running_exporter(config) as service:
        wait_for(
            lambda: readyz(service).status == 200,
            "/readyz 200",
            describe=lambda: readyz(service).body,
        )
        yield service
        no_errors(service)


def _topics(broker: Broker, counts: dict[str, list[int]]) -> set[TP]:
    """Create and fill topics: name -> records per partition. Returns every partition."""
    for topic, per_partition in counts.items():
        broker.create_topic(topic, len(per_partition))
        broker.produce(topic, per_partition)
    return {(t, p) for t, per_partition in counts.items() for p in range(len(per_partition))}


def _below(ends: dict[TP, int], index: int) -> Callable[[TP], int]:
    """The offsets the `index`th group commits: a few records in, below each log end."""
    return lambda tp: min(ends[tp], index + tp[1] + 1)


def test_live_groups_equal_kafka(kafka_broker: Broker, exporter: ExporterService) -> None:
    """Classic eager (range), classic cooperative (cooperative-sticky) and KIP-848 groups,
    two live members each: committed offset, log end, lag, owner per partition, and kind,
    state and members (ids, client ids, hosts, assignments) per group, equal Kafka's."""
    orders, audit = unique("orders"), unique("audit")
    # an empty partition too: log end 0, committed 0, lag 0
    partitions = _topics(kafka_broker, {orders: [30, 20, 10], audit: [7, 0]})
    ends = {(orders, 0): 30, (orders, 1): 20, (orders, 2): 10, (audit, 0): 7, (audit, 1): 0}
    kinds = {
        unique("eager"): {"group.protocol": "classic", "partition.assignment.strategy": "range"},
        unique("cooperative"): {
            "group.protocol": "classic",
            "partition.assignment.strategy": "cooperative-sticky",
        },
    }
    if kip848_groups():
        kinds[unique("kip848")] = {"group.protocol": "consumer"}
    live = [
        LiveGroup(kafka_broker, g, [orders, audit], 2, extra).start() for g, extra in kinds.items()
    ]
    try:
        for index, group in enumerate(live):
            # different offsets per group, each below its log end
            group.join_and_commit(partitions, _below(ends, index))
        names = [group.group for group in live]
        wait_for(
            lambda: all(
                a is not None and a.state == "STABLE" and len(a.members) == 2
                for a in kafka_answers(kafka_broker, names).values()
            ),
            "Kafka describing every group as STABLE with its two members",
            describe=lambda: kafka_answers(kafka_broker, names),
        )
        compared = settled(exporter, kafka_broker, names)
        assert_equal_to_kafka(compared)
        kinds_seen = sorted(present(a).kind for a in compared.kafka.values())
        expected = ["CLASSIC", "CLASSIC", "CONSUMER"] if kip848_groups() else ["CLASSIC"] * 2
        assert kinds_seen == expected, compared.kafka
        for answer in compared.kafka.values():
            assert answer is not None
            assert set(answer.rows) == partitions
            assert set(answer.owners) == partitions  # every partition has a live owner
            assert all(m.assignment for m in answer.members)
    finally:
        for group in live:
            group.close()


# --------------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------------


def _transactional_producer(broker: Broker) -> Producer:
    producer = broker.producer(
        **{"transactional.id": unique("tx"), "log_level": 3, "transaction.timeout.ms": 60_000}
    )
    producer.init_transactions(60)
    return producer


def _send_offsets(broker: Broker, producer: Producer, group: str, offsets: dict[TP, int]) -> None:
    """TxnOffsetCommit: the group's offsets as part of the producer's open transaction."""
    consumer = broker.consumer(group, **CLIENT)
    try:
        producer.send_offsets_to_transaction(
            [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            consumer.consumer_group_metadata(),
            60,
        )
    finally:
        consumer.close()


def test_transactional_commits_only_committed_ones_show(
    kafka_broker: Broker, exporter: ExporterService
) -> None:
    """A committed transaction's offsets show; an aborted one's never do, neither on top of
    committed offsets nor as a group's only offsets; an open one's do not while it is open
    (the exporter's read_committed consumer stops at the last stable offset) nor after it is
    aborted. Kafka's OffsetFetch on the same broker says the same throughout."""
    topic = unique("payments")
    _topics(kafka_broker, {topic: [50, 50]})
    committed, aborted_only, left_open = unique("tx-commit"), unique("tx-abort"), unique("tx-open")
    producer = _transactional_producer(kafka_broker)

    # committed: 5/6; then an aborted transaction would move them to 9/9
    producer.begin_transaction()
    _send_offsets(kafka_broker, producer, committed, {(topic, 0): 5, (topic, 1): 6})
    producer.commit_transaction(60)
    producer.begin_transaction()
    _send_offsets(kafka_broker, producer, committed, {(topic, 0): 9, (topic, 1): 9})
    producer.abort_transaction(60)
    # a group whose only offsets were aborted
    producer.begin_transaction()
    _send_offsets(kafka_broker, producer, aborted_only, {(topic, 0): 11})
    producer.abort_transaction(60)

    compared = settled(exporter, kafka_broker, [committed, aborted_only])
    assert_equal_to_kafka(compared)
    answer = compared.kafka[committed]
    assert answer is not None and {tp: r[0] for tp, r in answer.rows.items()} == {
        (topic, 0): 5,
        (topic, 1): 6,
    }
    assert compared.kafka[aborted_only] is None
    assert aborted_only not in listed_by_exporter(exporter)
    # the exporter read past the abort markers: the aborted records were skipped, not unread
    count = offsets_partition_count(kafka_broker)
    spots = {partition_for(g, count) for g in (committed, aborted_only)}
    sync_exporter(exporter, high_watermarks(kafka_broker, spots))

    # open: a plain commit of 3, then a transaction with 8 that stays open
    kafka_broker.commit(left_open, {(topic, 0): 3})
    spot = partition_for(left_open, count)
    open_tx = _transactional_producer(kafka_broker)
    try:
        open_tx.begin_transaction()
        _send_offsets(kafka_broker, open_tx, left_open, {(topic, 0): 8})
        stable = stable_offsets(kafka_broker, [spot])
        high = high_watermarks(kafka_broker, [spot])
        assert stable[spot] < high[spot], "the transaction holds the last stable offset back"
        sync_exporter(exporter, stable)
        assert exporter.exporter.stats.source_position[spot] < high[spot]
        compared = settled(exporter, kafka_broker, [left_open], stable_offsets)
        assert_equal_to_kafka(compared)
        assert present(compared.kafka[left_open]).rows[(topic, 0)][0] == 3
        # an exporter started while the transaction is open gets ready (its first pass ends
        # at the last stable offset) and agrees
        config = exporter_config(kafka_broker.bootstrap, kafka_lag_exporter_aliases=True)
        with running_exporter(config) as fresh:
            wait_for(lambda: readyz(fresh).status == 200, "/readyz 200 of a fresh exporter")
            assert_equal_to_kafka(settled(fresh, kafka_broker, [left_open], stable_offsets))
        open_tx.abort_transaction(60)
        sync_exporter(exporter, high_watermarks(kafka_broker, [spot]))
        compared = settled(exporter, kafka_broker, [left_open])
        assert_equal_to_kafka(compared)
        assert present(compared.kafka[left_open]).rows[(topic, 0)][0] == 3
    finally:
        # never leave a transaction open on the shared broker: it holds back every
        # read_committed reader of that partition until it times out
        with contextlib.suppress(KafkaException):  # already aborted above
            open_tx.abort_transaction(30)


# --------------------------------------------------------------------------------------------
# Deletions by Kafka's own tool
# --------------------------------------------------------------------------------------------


def test_deleted_groups_disappear(kafka_broker: Broker, exporter: ExporterService) -> None:
    """`kafka-consumer-groups.sh --delete` of a simple group, a classic group and a KIP-848
    group (members gone): each disappears from the API, the group list and /metrics when
    Kafka's OffsetFetch and ListGroups no longer know it; a group not deleted stays."""
    topic = unique("ledger")
    _topics(kafka_broker, {topic: [20, 20]})
    simple, classic, consumer, kept = (unique(p) for p in ("simple", "classic", "consumer", "kept"))
    kafka_broker.commit(simple, {(topic, 0): 4, (topic, 1): 5})
    kafka_broker.commit(kept, {(topic, 0): 1})
    left_group(kafka_broker, classic, topic, 2, "classic", 6)
    # 3.9: a second classic group where KIP-848 members cannot join (kip848_groups)
    left_group(kafka_broker, consumer, topic, 2, "consumer" if kip848_groups() else "classic", 8)
    groups = [simple, classic, consumer, kept]
    before = settled(exporter, kafka_broker, groups)
    assert_equal_to_kafka(before)
    assert all(before.kafka[g] is not None for g in groups)
    expected_kind = "CONSUMER" if kip848_groups() else "CLASSIC"
    assert present(before.kafka[consumer]).kind == expected_kind

    deleted = [simple, classic, consumer]
    args = [a for g in deleted for a in ("--group", g)]
    kafka_broker.tool("kafka-consumer-groups.sh", "--delete", *args)
    after = settled(exporter, kafka_broker, groups)
    assert_equal_to_kafka(after)
    assert {g for g in groups if after.kafka[g] is None} == set(deleted)
    assert not set(deleted) & kafka_listed_groups(kafka_broker)
    assert not set(deleted) & listed_by_exporter(exporter)
    metrics = scrape(exporter)
    for name, labels in metrics.samples:
        assert dict(labels).get("group") not in deleted, (name, labels)


def test_deleted_offsets_disappear(kafka_broker: Broker, exporter: ExporterService) -> None:
    """`kafka-consumer-groups.sh --delete-offsets --group G --topic T`: T's partitions
    leave the API and /metrics, the group's other topic stays, as Kafka's OffsetFetch says."""
    dropped, kept = unique("dropped"), unique("kept")
    _topics(kafka_broker, {dropped: [10, 10, 10], kept: [10]})
    group = unique("offsets")
    # with leader epochs and metadata, which the API must show as Kafka stores them
    committer = kafka_broker.consumer(group, **CLIENT)
    try:
        offsets = [
            TopicPartition(dropped, 0, 1, "first", 3),
            TopicPartition(dropped, 1, 2, leader_epoch=4),
            TopicPartition(dropped, 2, 3, "third"),
            TopicPartition(kept, 0, 4, "kept", 0),
        ]
        retry(lambda: committer.commit(offsets=offsets, asynchronous=False))
    finally:
        committer.close()
    before = settled(exporter, kafka_broker, [group])
    assert_equal_to_kafka(before)
    kafka_broker.tool(
        "kafka-consumer-groups.sh", "--delete-offsets", "--group", group, "--topic", dropped
    )
    after = settled(exporter, kafka_broker, [group])
    assert_equal_to_kafka(after)
    answer = after.kafka[group]
    assert answer is not None and answer.rows == {(kept, 0): (4, 10, 6, 0, "kept")}
    metrics = scrape(exporter)
    assert not [
        labels
        for labels in metrics.series("offsetwatch_group_partition_committed_offset")
        if ("topic", dropped) in labels
    ]


def test_offsets_of_a_deleted_topic_disappear(
    kafka_broker: Broker, exporter: ExporterService
) -> None:
    """Deleting a topic: Kafka's coordinator drops every group's offsets of it (it writes
    their tombstones); the exporter drops them too, and no series names the topic any more
    (not even its log end), while the group's other topic stays."""
    gone, stays = unique("gone"), unique("stays")
    _topics(kafka_broker, {gone: [5, 5], stays: [3]})
    group = unique("deleted-topic")
    kafka_broker.commit(group, {(gone, 0): 1, (gone, 1): 2, (stays, 0): 3})
    assert_equal_to_kafka(settled(exporter, kafka_broker, [group]))
    admin = kafka_broker.admin()  # kept alive until its futures answer
    for future in admin.delete_topics([gone], operation_timeout=30).values():
        future.result(timeout=60)
    wait_for(
        lambda: set(present(kafka_answers(kafka_broker, [group])[group]).rows) == {(stays, 0)},
        "Kafka dropping the offsets of the deleted topic",
        describe=lambda: kafka_answers(kafka_broker, [group]),
    )
    after = settled(exporter, kafka_broker, [group])
    assert_equal_to_kafka(after)
    assert present(after.kafka[group]).rows == {(stays, 0): (3, 3, 0, None, "")}
    for name, labels in scrape(exporter).samples:
        assert dict(labels).get("topic") != gone, (name, labels)
