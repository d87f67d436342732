"""Real clients' commits into a real broker's `__consumer_offsets`, for the live path matrix.

Every kind of commit the coordinator writes: a classic group and a KIP-848 group that
subscribe, consume and commit; a simple (assign-only) commit; a group deleted after its
commit; transactional offset commits that are committed, aborted and left open; and a
`stuck` group that keeps committing offset 0 while `healthy` commits the log end (a stall,
in real time: the analytics then run with a window of seconds).

Kafka's answers come from the same broker: OffsetFetch (`Broker.committed`) and ListOffsets
(high watermark and last stable offset).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Final

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.partitioner import partition_for
from tests.exporter.daemon_helpers import wait_for
from tests.real_broker import Broker, retry, unique

OFFSETS_PARTITIONS: Final = 50  # the broker script's offsets.topic.num.partitions
DATA_PARTITIONS: Final = 2
RECORDS_PER_PARTITION: Final = 20
#: rounds of the stall: each adds records, `healthy` commits the log end, `stuck` commits 0
STALL_ROUNDS: Final = 10
STALL_STEP: Final = 5

Offsets = dict[str, dict[tuple[str, int], int]]


@dataclass(slots=True)
class Workload:
    """The groups of one live run (kind -> group id) and its data topic."""

    topic: str
    groups: dict[str, str] = field(default_factory=dict)
    #: kinds whose commits Kafka never counts (only their earlier plain commit stays)
    plain_before_transaction: dict[str, int] = field(default_factory=dict)

    def group(self, kind: str) -> str:
        return self.groups[kind]


def _consume_all(consumer: Consumer, topic: str, expected: int) -> None:
    """Subscribe and read until every record of `topic` arrived (a real member's life)."""
    consumer.subscribe([topic])
    seen = 0

    def read() -> bool:
        nonlocal seen
        for message in consumer.consume(num_messages=500, timeout=0.5):
            if message.error() is None:
                seen += 1
        return seen >= expected

    wait_for(read, f"{expected} records of {topic} for {consumer}", interval_s=0)


def _member_commits(broker: Broker, group: str, topic: str, protocol: str) -> None:
    extra: dict[str, object] = {"group.protocol": protocol}
    if protocol == "classic":
        # the broker's minimum session; a short heartbeat makes the join quick
        extra |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    consumer = broker.consumer(group, **extra)
    try:
        _consume_all(consumer, topic, DATA_PARTITIONS * RECORDS_PER_PARTITION)
        retry(lambda: consumer.commit(asynchronous=False))
    finally:
        consumer.close()


def _transactional_producer(broker: Broker) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": unique("offsetwatch-live-txn"),
            # the open one must outlive the exporter's catch-up on a loaded machine; if it
            # does not, the broker aborts it and the guard test says it was not open
            "transaction.timeout.ms": 120_000,
        }
    )
    producer.init_transactions(60)
    return producer


def _offsets_in_transaction(
    producer: Producer, broker: Broker, group: str, offsets: dict[tuple[str, int], int]
) -> None:
    """A transaction that commits `offsets` for `group` (left to the caller to end)."""
    member = broker.consumer(group)  # only for its group metadata: it never joins
    try:
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            member.consumer_group_metadata(),
            60,
        )
    finally:
        member.close()


def prepare(broker: Broker) -> Workload:
    """The data topic with records, and a group id per kind.

    The open transaction's group lands on an `__consumer_offsets` partition no other group
    of the run uses: records after an open transaction are held back from read_committed
    readers (the exporter) until it ends, and the others must be read.
    """
    topic = unique("live-orders")
    broker.create_topic(topic, DATA_PARTITIONS)
    broker.produce(topic, [RECORDS_PER_PARTITION] * DATA_PARTITIONS)
    work = Workload(topic)
    for kind in ("classic", "consumer", "simple", "deleted", "txn-committed", "txn-aborted"):
        work.groups[kind] = unique(f"live-{kind}")
    work.groups["stuck"] = unique("live-stuck")
    work.groups["healthy"] = unique("live-healthy")
    used = {partition_for(g, OFFSETS_PARTITIONS) for g in work.groups.values()}
    while "txn-open" not in work.groups:
        candidate = unique("live-txn-open")
        if partition_for(candidate, OFFSETS_PARTITIONS) not in used:
            work.groups["txn-open"] = candidate
    return work


def commit_everything_but_the_open_transaction(broker: Broker, work: Workload) -> None:
    topic = work.topic
    _member_commits(broker, work.group("classic"), topic, "classic")
    _member_commits(broker, work.group("consumer"), topic, "consumer")
    broker.commit(work.group("simple"), {(topic, 0): 7, (topic, 1): 9})
    broker.commit(work.group("deleted"), {(topic, 0): 4})
    admin = broker.admin()  # kept alive until its future answers
    for future in admin.delete_consumer_groups([work.group("deleted")]).values():
        future.result(60)
    producer = _transactional_producer(broker)
    broker.commit(work.group("txn-committed"), {(topic, 0): 2})
    _offsets_in_transaction(producer, broker, work.group("txn-committed"), {(topic, 0): 11})
    producer.commit_transaction(60)
    broker.commit(work.group("txn-aborted"), {(topic, 1): 5})
    work.plain_before_transaction["txn-aborted"] = 5
    _offsets_in_transaction(producer, broker, work.group("txn-aborted"), {(topic, 1): 15})
    producer.abort_transaction(60)


def stall(broker: Broker, work: Workload, sampled: Callable[[str, int], bool]) -> None:
    """`stuck` commits 0 and `healthy` the log end of partition 0 while it grows, each round
    once the exporter's sampler has seen the new log end (`sampled(group, end)`), so every
    round is in the history with its log end."""
    producer = broker.producer(**{"enable.idempotence": True})
    stuck, healthy = broker.consumer(work.group("stuck")), broker.consumer(work.group("healthy"))
    end = RECORDS_PER_PARTITION
    try:
        for _ in range(STALL_ROUNDS):
            for i in range(STALL_STEP):
                producer.produce(work.topic, value=f"stall:{end + i}".encode(), partition=0)
            assert producer.flush(60) == 0
            end += STALL_STEP
            _commit(healthy, work.topic, end)
            # twice: a window holding one round holds two commits (STALL's proof of life),
            # however slowly the rounds follow each other on a loaded machine
            _commit(stuck, work.topic, 0)
            _commit(stuck, work.topic, 0)
            wait_for(partial(sampled, work.group("stuck"), end), f"the log end {end} sampled")
    finally:
        stuck.close()
        healthy.close()


def _commit(consumer: Consumer, topic: str, offset: int) -> None:
    retry(lambda: consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False))


@contextmanager
def open_transaction(broker: Broker, work: Workload) -> Iterator[None]:
    """`txn-open` commits 3 plainly, then 12 in a transaction that stays open inside the
    block (aborted on leaving it, so it holds back no other test's reader for long)."""
    group = work.group("txn-open")
    broker.commit(group, {(work.topic, 0): 3})
    work.plain_before_transaction["txn-open"] = 3
    producer = _transactional_producer(broker)
    _offsets_in_transaction(producer, broker, group, {(work.topic, 0): 12})
    try:
        yield
    finally:
        try:
            producer.abort_transaction(60)
        except KafkaException as error:
            # timed out: the broker aborted it already (the outcome asked for)
            if error.args[0].code() != KafkaError._FENCED:
                raise


def offsets_ends(broker: Broker, isolation: IsolationLevel) -> dict[int, int]:
    """ListOffsets(latest) of every `__consumer_offsets` partition: the high watermark
    (READ_UNCOMMITTED) or the last stable offset (READ_COMMITTED)."""
    admin = broker.admin()  # kept alive until its futures answer
    request = {
        TopicPartition(OFFSETS_TOPIC, p): OffsetSpec.latest() for p in range(OFFSETS_PARTITIONS)
    }
    futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=60)
    return {tp.partition: int(f.result(90).offset) for tp, f in futures.items()}


def kafka_offsets(broker: Broker, work: Workload) -> Offsets:
    """OffsetFetch for every group of the run (groups without offsets left out)."""
    out: Offsets = {}
    for group in work.groups.values():
        rows = broker.committed(group)
        if rows:
            out[group] = rows
    return out


def now_ms() -> int:
    return time.time_ns() // 1_000_000
