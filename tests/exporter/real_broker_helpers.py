"""The exporter against a real Kafka 4.0.0 broker: live groups, Kafka's answers, the exporter's.

Kafka's answer for a group is what its Admin API says on the same broker: OffsetFetch
(`list_consumer_group_offsets`), ListOffsets (log ends) and DescribeGroups /
ConsumerGroupDescribe (`describe_consumer_groups`: kind, state, members and their
assignments). The exporter's answer is read twice, from its JSON API and from `/metrics`, and
both must equal Kafka's field by field.

No comparison is made on a guess of time: `sync_exporter` waits until the exporter's
`__consumer_offsets` consumer has read up to Kafka's high watermark (or last stable offset)
of the group's partition and a snapshot was built after that, and
`settled` takes Kafka's answer before and after reading the exporter's, so a group that
changes meanwhile (a rebalance, an expiry) is compared again instead of failing at random.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Final

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.service import ExporterService
from tests.exporter.daemon_helpers import (
    TIMEOUT_S,
    api_group,
    api_groups,
    scrape,
    wait_for,
)
from tests.real_broker import Broker

#: clients of the tests' groups: quiet logs, and metadata refreshed every 5 s (not 5 min)
CLIENT: Final[dict[str, object]] = {"log_level": 3, "topic.metadata.refresh.interval.ms": 5000}

TP = tuple[str, int]
#: (committed offset, log end, lag) of one (topic, partition)
Row = tuple[int, int, int]
#: `Row` + (leader epoch or None, commit metadata) of one (topic, partition)
FullRow = tuple[int, int, int, int | None, str]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------------------------
# Live members
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class LiveGroup:
    """Real consumers of one group, subscribed to `topics`.

    One background thread polls them all, so rebalances complete and the members stay live
    (classic members must poll to rejoin; KIP-848 members to reconcile) while the test waits
    on other things. Everything else a consumer does (commit, assignment) runs on that
    thread too: confluent-kafka 2.16 serializes the calls on one client, and a thread that
    polls without pause starves another thread's call on the same consumer.
    """

    broker: Broker
    group: str
    topics: Sequence[str]
    size: int
    extra: Mapping[str, object] = field(default_factory=dict)
    consumers: list[Any] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = field(
        default_factory=queue.SimpleQueue
    )

    def start(self) -> LiveGroup:
        for index in range(self.size):
            consumer = self.broker.consumer(
                self.group, **{**CLIENT, "client.id": f"{self.group}-c{index}", **self.extra}
            )
            consumer.subscribe(list(self.topics))
            self.consumers.append(consumer)
        self._thread = threading.Thread(target=self._poll, name=f"poll-{self.group}", daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            for consumer in self.consumers:
                consumer.poll(0.05)
            while True:
                try:
                    action, result = self._calls.get_nowait()
                except queue.Empty:
                    break
                try:
                    result.set_result(action())
                except BaseException as error:  # handed to the caller's thread
                    result.set_exception(error)

    def call(self, action: Callable[[], Any]) -> Any:
        """`action()` run on the polling thread; its result or exception here."""
        result: Future[Any] = Future()
        self._calls.put((action, result))
        return result.result(timeout=TIMEOUT_S)

    def assignments(self) -> list[set[TP]]:
        return list(
            self.call(
                lambda: [
                    {(tp.topic, tp.partition) for tp in consumer.assignment()}
                    for consumer in self.consumers
                ]
            )
        )

    def balanced(self, partitions: set[TP]) -> bool:
        """Every partition is owned by exactly one member and every member owns one."""
        owned = self.assignments()
        flat = [tp for assigned in owned for tp in assigned]
        return all(owned) and len(flat) == len(set(flat)) and set(flat) == partitions

    def commit_assigned(self, offset_of: Callable[[TP], int]) -> None:
        """Each member commits `offset_of(tp)` for the partitions it owns (a real member's
        OffsetCommit, with its generation or member epoch)."""

        def commit() -> None:
            for consumer in self.consumers:
                offsets = [
                    TopicPartition(tp.topic, tp.partition, offset_of((tp.topic, tp.partition)))
                    for tp in consumer.assignment()
                ]
                if offsets:
                    consumer.commit(offsets=offsets, asynchronous=False)

        self.call(commit)

    def join_and_commit(self, partitions: set[TP], offset_of: Callable[[TP], int]) -> None:
        """Wait until the members share `partitions`, then commit; a commit refused because
        a rebalance started meanwhile (stale generation or member epoch) is made again."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            wait_for(
                lambda: self.balanced(partitions),
                f"{self.group}: {self.size} members sharing {sorted(partitions)}",
                max(1.0, deadline - time.monotonic()),
                describe=self.assignments,
            )
            try:
                self.commit_assigned(offset_of)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        """Members leave the group (LeaveGroup / a leaving heartbeat)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        for consumer in self.consumers:
            consumer.close()
        self.consumers.clear()


def left_group(
    broker: Broker, group: str, topic: str, partitions: int, protocol: str, offset: int
) -> None:
    """A group whose one member joined (`group.protocol` = `protocol`), committed `offset`
    for each of the `partitions` partitions of `topic`, and left: an empty classic or
    KIP-848 group with offsets."""
    live = LiveGroup(broker, group, [topic], 1, {"group.protocol": protocol}).start()
    try:
        live.join_and_commit({(topic, p) for p in range(partitions)}, lambda tp: offset)
    finally:
        live.close()


# --------------------------------------------------------------------------------------------
# Kafka's answers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberAnswer:
    member_id: str
    client_id: str
    host: str
    assignment: frozenset[TP]


@dataclass(frozen=True, slots=True)
class GroupAnswer:
    """What one side says about one group."""

    kind: str
    state: str
    members: frozenset[MemberAnswer]
    rows: Mapping[TP, FullRow]
    #: (topic, partition) -> member id of its owner
    owners: Mapping[TP, str]


def present(answer: GroupAnswer | None) -> GroupAnswer:
    """The answer of a group that must exist."""
    assert answer is not None
    return answer


def kafka_offsets(broker: Broker, group: str) -> dict[TP, tuple[int, int | None, str]]:
    """OffsetFetch of `group`: (offset, leader epoch, metadata) of every committed partition.

    confluent-kafka hands metadata over as a C string: the NUL it appended on commit (the
    broker stores it) is cut there, so `exporter_answers` compares without that one NUL."""
    admin = broker.admin()
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=30
    )[group]
    answer = future.result(timeout=60)
    return {
        (tp.topic, tp.partition): (tp.offset, tp.leader_epoch, tp.metadata or "")
        for tp in answer.topic_partitions
        if tp.offset >= 0
    }


def kafka_log_ends(broker: Broker, partitions: Iterable[TP]) -> dict[TP, int]:
    """ListOffsets (latest) of every partition in one request."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    admin = broker.admin()
    futures = admin.list_offsets(
        {TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted}, request_timeout=30
    )
    return {
        (tp.topic, tp.partition): int(future.result(timeout=60).offset)
        for tp, future in futures.items()
    }


def kafka_listed_groups(broker: Broker) -> set[str]:
    """ListGroups: every group the coordinator knows."""
    admin = broker.admin()
    listed = admin.list_consumer_groups(request_timeout=30).result(timeout=60)
    return {g.group_id for g in listed.valid}


def kafka_answers(broker: Broker, groups: Iterable[str]) -> dict[str, GroupAnswer | None]:
    """Kafka's answer for each group; None for a group with neither offsets nor members
    (deleted, expired or never created: the exporter must not show it)."""
    names = sorted(set(groups))
    offsets = {g: kafka_offsets(broker, g) for g in names}
    ends = kafka_log_ends(broker, {tp for rows in offsets.values() for tp in rows})
    admin = broker.admin()
    futures = admin.describe_consumer_groups(names, request_timeout=30)
    answers: dict[str, GroupAnswer | None] = {}
    for group in names:
        description = futures[group].result(timeout=60)
        members = frozenset(
            MemberAnswer(
                m.member_id,
                m.client_id,
                m.host,
                frozenset((tp.topic, tp.partition) for tp in m.assignment.topic_partitions),
            )
            for m in description.members
        )
        state = description.state.name
        if not offsets[group] and not members:
            answers[group] = None
            continue
        rows = {
            tp: (c, ends[tp], ends[tp] - c, epoch, metadata)
            for tp, (c, epoch, metadata) in offsets[group].items()
        }
        owners = {tp: m.member_id for m in members for tp in m.assignment if tp in rows}
        answers[group] = GroupAnswer(description.type.name, state, members, rows, owners)
    return answers


def offsets_partition_count(broker: Broker) -> int:
    admin = broker.admin()
    metadata = admin.list_topics(OFFSETS_TOPIC, timeout=30)
    return len(metadata.topics[OFFSETS_TOPIC].partitions)


def stable_offsets(broker: Broker, partitions: Iterable[int]) -> dict[int, int]:
    """Last stable offset of `__consumer_offsets` partitions: how far a read_committed
    reader can read (the high watermark unless a transaction is open there)."""
    admin = broker.admin()
    futures = admin.list_offsets(
        {TopicPartition(OFFSETS_TOPIC, p): OffsetSpec.latest() for p in set(partitions)},
        isolation_level=IsolationLevel.READ_COMMITTED,
        request_timeout=30,
    )
    return {tp.partition: int(f.result(timeout=60).offset) for tp, f in futures.items()}


def high_watermarks(broker: Broker, partitions: Iterable[int]) -> dict[int, int]:
    admin = broker.admin()
    futures = admin.list_offsets(
        {TopicPartition(OFFSETS_TOPIC, p): OffsetSpec.latest() for p in set(partitions)},
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        request_timeout=30,
    )
    return {tp.partition: int(f.result(timeout=60).offset) for tp, f in futures.items()}


# --------------------------------------------------------------------------------------------
# The exporter's answers
# --------------------------------------------------------------------------------------------


def sync_exporter(service: ExporterService, targets: Mapping[int, int]) -> None:
    """Until the exporter has read each `__consumer_offsets` partition up to its target
    offset and built a snapshot after that: what it serves then reflects every record
    before the targets."""
    stats = service.exporter.stats
    wait_for(
        lambda: all(stats.source_position.get(p, -1) >= end for p, end in targets.items()),
        f"the exporter's positions in {OFFSETS_TOPIC} at {dict(targets)}",
        describe=lambda: {p: stats.source_position.get(p) for p in targets},
    )
    reached = now_ms()
    wait_for(
        lambda: service.exporter.snapshot.time_ms > reached,
        "a snapshot built after the exporter read that far",
    )


#: how far in a `__consumer_offsets` partition the exporter must have read
Ends = Callable[[Broker, Iterable[int]], dict[int, int]]


def sync_to_kafka(
    service: ExporterService, broker: Broker, groups: Iterable[str], ends: Ends
) -> None:
    """`sync_exporter` to the current `ends` of the groups' partitions."""
    count = offsets_partition_count(broker)
    sync_exporter(service, ends(broker, {partition_for(g, count) for g in groups}))


def exporter_answers(service: ExporterService, groups: Iterable[str]) -> dict[str, Any]:
    """The JSON API's answer for each group (None for 404), in `GroupAnswer` form."""
    answers: dict[str, GroupAnswer | None] = {}
    for group in groups:
        answer = api_group(service, group)
        if answer.status == 404:
            answers[group] = None
            continue
        assert answer.status == 200, (group, answer)
        detail = answer.json()
        rows: dict[TP, FullRow] = {}
        owners: dict[TP, str] = {}
        for row in detail["partitions"]:
            tp = (row["topic"], row["partition"])
            metadata = row["metadata"]
            rows[tp] = (
                row["committed"],
                row["log_end"],
                row["lag"],
                row["leader_epoch"],
                metadata[:-1] if metadata.endswith("\x00") else metadata,
            )
            if row["owner"] is not None:
                owners[tp] = row["owner"]["member_id"]
        members = frozenset(
            MemberAnswer(
                m["member_id"],
                m["client_id"],
                m["host"],
                frozenset((a["topic"], p) for a in m["assignment"] for p in a["partitions"]),
            )
            for m in detail["members"]
        )
        answers[group] = GroupAnswer(detail["kind"], detail["state"], members, rows, owners)
    return answers


@dataclass(frozen=True, slots=True)
class MetricsAnswer:
    """What /metrics says about one group (the same fields as `GroupAnswer`, less members'
    identities, which only the kafka-lag-exporter aliases carry, as owners)."""

    kind: str
    state: str
    members: int
    rows: Mapping[TP, Row]
    owners: Mapping[TP, str]


def metrics_answers(service: ExporterService, groups: Iterable[str]) -> dict[str, Any]:
    """/metrics' answer for each group (None when no series names it)."""
    metrics = scrape(service)
    committed = metrics.by(
        "offsetwatch_group_partition_committed_offset", "group", "topic", "partition"
    )
    lag = metrics.by("offsetwatch_group_partition_lag", "group", "topic", "partition")
    ends = metrics.by("offsetwatch_partition_log_end_offset", "topic", "partition")
    members = metrics.by("offsetwatch_group_members", "group")
    info = metrics.by("offsetwatch_group_info", "group", "kind", "state")
    owners = metrics.by(
        "kafka_consumergroup_group_offset", "group", "topic", "partition", "consumer_id"
    )
    answers: dict[str, MetricsAnswer | None] = {}
    for group in groups:
        named = [key for series in (committed, lag, members, info, owners) for key in series]
        if not any(key[0] == group for key in named):
            answers[group] = None
            continue
        rows = {
            (t, int(p)): (int(v), int(ends[(t, p)]), int(lag[(g, t, p)]))
            for (g, t, p), v in committed.items()
            if g == group
        }
        [(kind, state)] = [(k, s) for (g, k, s) in info if g == group]
        answers[group] = MetricsAnswer(
            kind,
            state,
            int(members[(group,)]),
            rows,
            {(t, int(p)): m for (g, t, p, m) in owners if g == group and m},
        )
    return answers


def as_metrics(answer: GroupAnswer | None) -> MetricsAnswer | None:
    if answer is None:
        return None
    rows = {tp: row[:3] for tp, row in answer.rows.items()}
    return MetricsAnswer(answer.kind, answer.state, len(answer.members), rows, answer.owners)


def log_ends_known(service: ExporterService, groups: Iterable[str]) -> bool:
    """The served snapshot knows the log end of every partition of these groups."""
    snapshot = service.exporter.snapshot
    for group in groups:
        found = snapshot.group(group)
        if found is None:
            continue
        if any(end < 0 for rows in found.topics for end in rows.log_end):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Compared:
    kafka: dict[str, GroupAnswer | None]
    api: dict[str, GroupAnswer | None]
    metrics: dict[str, MetricsAnswer | None]


def settled(
    service: ExporterService,
    broker: Broker,
    groups: Iterable[str],
    ends: Ends = high_watermarks,
    timeout_s: float = TIMEOUT_S,
) -> Compared:
    """Kafka's answers and the exporter's (API and /metrics) for the same moment: Kafka is
    asked before and after the exporter (synced to Kafka's log in between); if the two
    Kafka answers differ, the group moved meanwhile and all is read again.

    The exporter is synced to the high watermark by default: every transaction before it
    is decided (another test's may be open in the same partition for a moment; Kafka's
    OffsetFetch already shows plain commits behind it). `ends=stable_offsets` syncs to the
    last stable offset instead, for a test that holds a transaction open on purpose."""
    names = sorted(set(groups))
    deadline = time.monotonic() + timeout_s
    while True:
        before = kafka_answers(broker, names)
        sync_to_kafka(service, broker, names, ends)
        wait_for(
            lambda: log_ends_known(service, names),
            "the log end of every partition of the groups",
            describe=lambda: exporter_answers(service, names),
        )
        api = exporter_answers(service, names)
        metrics = metrics_answers(service, names)
        after = kafka_answers(broker, names)
        if before == after:
            return Compared(before, api, metrics)
        if time.monotonic() > deadline:
            raise AssertionError(f"Kafka's answer kept changing: {before} then {after}")


def assert_equal_to_kafka(compared: Compared) -> None:
    """API and /metrics both say exactly what Kafka says, group by group."""
    for group, kafka in compared.kafka.items():
        assert compared.api[group] == kafka, (group, "API", compared.api[group], kafka)
        assert compared.metrics[group] == as_metrics(kafka), (
            group,
            "/metrics",
            compared.metrics[group],
            kafka,
        )


def listed_by_exporter(service: ExporterService) -> set[str]:
    return {g["group"] for g in api_groups(service)}


def no_errors(service: ExporterService) -> None:
    """Every record Kafka wrote was decoded and applied; the main loop never failed."""
    metrics = scrape(service)
    assert not metrics.series("offsetwatch_decode_errors_total")
    assert metrics.value("offsetwatch_quarantined_total") == 0.0
    assert metrics.value("offsetwatch_loop_errors_total") == 0.0
    assert metrics.value("offsetwatch_source_up") == 1.0
    assert metrics.value("offsetwatch_ready") == 1.0


def detail_projection(service: ExporterService, group: str) -> dict[str, Any] | None:
    """Everything the API says about a group that does not depend on how it was reached
    (live, or rebuilt from a compacted log): left out are the counts and rates of commits
    seen, the lag in seconds and status (they follow the log-end history the exporter
    sampled) and the diagnosis (it follows the rebalances it saw)."""
    answer = api_group(service, group)
    if answer.status == 404:
        return None
    detail = answer.json()
    kept = ("kind", "state", "protocol_type", "protocol", "generation", "assignment_epoch")
    return {
        **{key: detail[key] for key in (*kept, "is_simple", "total_lag", "last_commit_ms")},
        "members": sorted(detail["members"], key=lambda m: str(m["member_id"])),
        "partitions": sorted(
            (
                {k: v for k, v in row.items() if k not in ("lag_seconds", "status")}
                for row in detail["partitions"]
            ),
            key=lambda row: (row["topic"], row["partition"]),
        ),
    }


class Committer:
    """A client committing growing offsets of partitions 0..partitions-1 of `topic` in a loop,
    one commit of them all at a time, through any outage (a failed commit is tried again)."""

    def __init__(self, broker: Broker, topic: str, group: str, partitions: int) -> None:
        self._topic = topic
        self._partitions = range(partitions)
        self._consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        self.commits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        offset = 0
        try:
            while not self._stop.is_set():
                offset += 1
                try:
                    self._consumer.commit(
                        offsets=[TopicPartition(self._topic, p, offset) for p in self._partitions],
                        asynchronous=False,
                    )
                    self.commits += 1
                except KafkaException:
                    time.sleep(0.2)  # broker away or coordinator loading: try again
                time.sleep(0.02)
        finally:
            # here, never from stop()'s thread: closing a client while another thread is
            # inside its commit() (a hung broker) crashes the process in librdkafka
            self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the committer's commit() did not return in 120 s"
