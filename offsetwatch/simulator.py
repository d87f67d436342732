"""A cluster workload for the demo: data topics, and groups that behave well and badly.

Writes messages to data topics (so log-end offsets move) and real-format
`__consumer_offsets` records (made by `RecordFactory`) for one group per behaviour the
exporter must tell apart: healthy, lagging, stalled, stopped, rewound, deleted, an idle but
caught-up consumer, a KIP-848 consumer group and a transactional committer (optionally one
aborted transaction in three, whose offsets must never count); and two the diagnosis must
explain: one member of three that stops progressing while the other two go on, and a group in
a rebalance storm (an instance that crashes and rejoins every few seconds); a streams group
(KIP-1071) whose second Kafka Streams instance hangs on its tasks. And share groups
(KIP-932 queues), one per queue status, from offsetwatch.share_simulator.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from confluent_kafka import KafkaException, Producer

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.record_factory import KeyValue, Member, RecordFactory
from offsetwatch.share_simulator import (
    SHARE_BEHAVIOURS,
    ShareQueue,
    ShareRecords,
    create_share_topic,
    state_writer,
)


@dataclass(frozen=True, slots=True)
class TopicLoad:
    name: str
    partitions: int
    #: messages per second per partition
    rate: float


@dataclass(frozen=True, slots=True)
class GroupPlan:
    group: str
    behaviour: str
    topic: str
    #: what the exporter should conclude, shown in the demo table
    expect: str


DEFAULT_TOPICS: Final = (
    TopicLoad("orders", 6, 40.0),
    TopicLoad("payments", 3, 10.0),
    TopicLoad("audit-log", 1, 0.0),
)

DEFAULT_PLANS: Final = (
    GroupPlan("billing-healthy", "healthy", "orders", "OK, lag ~0"),
    GroupPlan("reports-lagging", "lagging", "orders", "WARN, lag growing"),
    GroupPlan("etl-stalled", "stalled", "payments", "STALL: commits, offset stuck"),
    GroupPlan("search-stopped", "stopped", "payments", "STOP: no commits, lag"),
    GroupPlan("replay-rewound", "rewind", "orders", "REWIND: offset reset"),
    GroupPlan("old-deleted", "deleted", "payments", "disappears after ~30 s"),
    GroupPlan("audit-idle", "idle", "audit-log", "OK: idle topic, caught up"),
    GroupPlan("kip848-consumers", "kip848", "orders", "KIP-848 group, OK"),
    GroupPlan("txn-processor", "transactional", "payments", "OK; aborted txns ignored"),
    GroupPlan(
        "orders-enricher",
        "stuck-member",
        "orders",
        "STALL, stuck_member: enricher-2 (p 2, 5)",
    ),
    GroupPlan("search-indexer", "storm", "payments", "STALL, rebalance_storm"),
    GroupPlan(
        "wordcount-streams",
        "streams-stuck-task",
        "orders",
        "streams group: STALL, stuck_member: wordcount-1, tasks 0_1, 0_3, 0_5",
    ),
    GroupPlan("jobs-queue", "share-poison", "orders", "share: WARN, poison_records (p 0, 3)"),
    GroupPlan("emails-queue", "share-lagging", "payments", "share: WARN, backlog growing"),
    GroupPlan("thumbnails-queue", "share-stuck", "payments", "share: STALL, start offset stuck"),
    GroupPlan("exports-queue", "share-stopped", "payments", "share: STOP, no members"),
)

#: the simulated groups commit once per tick, about once a second
TICK_S: Final = 1.0


def demo_warn_ratio(sample_interval_s: float, status_window_s: float) -> float:
    """The exporter's WARN growth ratio for the demo's short status windows.

    A healthy consumer's lag is a sawtooth of up to one commit interval plus one sample
    interval of traffic (docs/status-rules.md). The default 5% covers that in a 10-minute
    window; the demo judges 8-30 s windows on commits every second, where it is 10-25% of the
    window and flashed WARN on its healthy groups. Three times that noise keeps them OK; at
    most 0.75, so the lagging group (consuming half the traffic: a growth ratio of 1) still
    WARNs."""
    return min(0.75, max(0.05, 3 * (TICK_S + sample_interval_s) / status_window_s))


#: the storm group rebalances this often (seconds): 6 per minute, a storm in the demo's
#: 30 s window (5 rebalances) and in the default 10 minute one
STORM_PERIOD_S: Final = 5


@dataclass(slots=True)
class _GroupRun:
    plan: GroupPlan
    consumed: dict[int, float] = field(default_factory=dict)
    deleted: bool = False
    generation: int = 1
    #: when the storm group rebalances next (seconds since start)
    next_rejoin: float = STORM_PERIOD_S


@dataclass(slots=True)
class ClusterSimulator:
    """Drives the workload against a cluster (the demo uses librdkafka's mock cluster)."""

    bootstrap_servers: str
    offsets_partitions: int = 6
    topics: tuple[TopicLoad, ...] = DEFAULT_TOPICS
    plans: tuple[GroupPlan, ...] = DEFAULT_PLANS
    clock: Callable[[], float] = time.time
    factory: RecordFactory = field(default_factory=RecordFactory)
    produced: dict[tuple[str, int], float] = field(default_factory=dict)
    started: float = 0.0
    transactions_supported: bool = True
    _producer: Any = None
    _txn_producer: Any = None
    _runs: list[_GroupRun] = field(default_factory=list)
    _queues: list[ShareQueue] = field(default_factory=list)

    def create_topics(self, create_topic: Callable[[str, int], None]) -> None:
        """Create the data topics and `__consumer_offsets` with their partition counts.

        `create_topic` is the cluster's own control call: librdkafka's mock cluster has no
        CreateTopics API, only its C control interface (see offsetwatch.mock_cluster).
        """
        create_topic(OFFSETS_TOPIC, self.offsets_partitions)
        create_share_topic(create_topic)
        for topic in self.topics:
            create_topic(topic.name, topic.partitions)

    def start(self) -> None:
        self._producer = Producer({"bootstrap.servers": self.bootstrap_servers, "linger.ms": 5})
        self.started = self.clock()
        for topic in self.topics:
            for p in range(topic.partitions):
                self.produced[(topic.name, p)] = 0.0
        self._runs = [_GroupRun(p) for p in self.plans if p.behaviour not in SHARE_BEHAVIOURS]
        share_records = ShareRecords()
        self._queues = [
            ShareQueue(p.group, p.behaviour, p.topic, self._partitions(p.topic),
                       next(t.rate for t in self.topics if t.name == p.topic), share_records)
            for p in self.plans
            if p.behaviour in SHARE_BEHAVIOURS
        ]  # fmt: skip
        self._prefill()
        try:
            self._txn_producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap_servers,
                    "transactional.id": "offsetwatch-demo-txn",
                    "transaction.timeout.ms": 60_000,
                }
            )
            self._txn_producer.init_transactions(10)
        except KafkaException:
            self.transactions_supported = False
            self._txn_producer = None

    def _prefill(self) -> None:
        # some history so every topic has messages before groups start committing
        for topic in self.topics:
            for p in range(topic.partitions):
                self._produce_data(topic.name, p, 50)

    def _produce_data(self, topic: str, partition: int, count: int) -> None:
        for _ in range(count):
            self._producer.produce(topic, b"x" * 32, partition=partition)
        self.produced[(topic, partition)] = self.produced.get((topic, partition), 0.0) + count
        self._producer.poll(0)

    def _write(self, group: str, records: list[KeyValue], producer: Any = None) -> None:
        target = producer or self._producer
        partition = partition_for(group, self.offsets_partitions)
        for key, value in records:
            target.produce(OFFSETS_TOPIC, value, key, partition=partition)
        target.poll(0)

    def _partitions(self, topic: str) -> int:
        return next(t.partitions for t in self.topics if t.name == topic)

    def _log_end(self, topic: str, partition: int) -> int:
        return int(self.produced[(topic, partition)])

    def tick(self, elapsed_s: float = 1.0) -> None:
        """Advance the workload by one step (call about once a second)."""
        for topic in self.topics:
            if topic.rate <= 0:
                continue
            for p in range(topic.partitions):
                self._produce_data(topic.name, p, int(topic.rate * elapsed_s))
        # the data is in the log before any consumer commits past it, and the commits are
        # stamped after that, as a real consumer only commits what it read: else a log-end
        # sample taken after a commit's time but before the data it counts sees committed >
        # log end, Kafka's sign of a truncated log (ERR); a sampler in step with the 1 s tick
        # saw it for seconds
        self._producer.flush(5)
        now_ms = int(self.clock() * 1000)
        age = self.clock() - self.started
        for run in self._runs:
            self._step(run, now_ms, age)
        write_state = state_writer(self._producer)
        for queue in self._queues:
            queue.step(self._log_end, self._write, write_state)
        self._producer.flush(5)

    def _step(self, run: _GroupRun, now_ms: int, age: float) -> None:
        plan = run.plan
        if run.deleted:
            return
        n = self._partitions(plan.topic)
        ends = {p: self._log_end(plan.topic, p) for p in range(n)}
        members = [
            Member(f"{plan.group}-member-{i}", f"{plan.group}-client", f"/10.0.0.{i + 1}",
                   ((plan.topic, tuple(p for p in range(n) if p % 2 == i)),))
            for i in range(min(2, n))
        ]  # fmt: skip
        if plan.behaviour == "stuck-member":
            members = [
                Member(f"enricher-{i}-{plan.group}", f"enricher-{i}", f"/10.1.2.{i + 5}",
                       ((plan.topic, tuple(p for p in range(n) if p % 3 == i)),))
                for i in range(3)
            ]  # fmt: skip
        if plan.behaviour == "streams-stuck-task":
            # two Kafka Streams instances; the second's stream thread hangs on its tasks
            members = [
                Member(f"wordcount-{i}-{plan.group}", f"wordcount-{i}-StreamThread-1-consumer",
                       f"/10.3.0.{i + 1}",
                       ((plan.topic, tuple(p for p in range(n) if p % 2 == i)),))
                for i in range(2)
            ]  # fmt: skip
        if not run.consumed:
            run.consumed = {p: float(ends[p]) for p in range(n)}
            if plan.behaviour == "streams-stuck-task":
                self._write(
                    plan.group, self.factory.streams_group(plan.group, 2, members, plan.topic)
                )
            elif plan.behaviour == "kip848":
                self._write(
                    plan.group,
                    self.factory.consumer_group(plan.group, 3, members, {plan.topic: n}),
                )
            elif plan.behaviour != "stopped":
                self._write(
                    plan.group, [self.factory.classic_group(plan.group, 1, members, now_ms)]
                )
        behaviour = plan.behaviour
        if behaviour == "storm" and age >= run.next_rejoin:
            run.next_rejoin = age + STORM_PERIOD_S
            self._rejoin(run, members, now_ms)
        if behaviour == "stopped" and age > 5:
            return
        if behaviour == "deleted" and age > 30:
            self._delete(run)
            return
        for p in range(n):
            if behaviour in ("healthy", "kip848", "idle", "deleted", "transactional", "stopped"):
                run.consumed[p] = float(ends[p])
            elif behaviour == "lagging":
                topic_rate = next(t.rate for t in self.topics if t.name == plan.topic)
                run.consumed[p] = min(float(ends[p]), run.consumed[p] + 0.5 * topic_rate)
            elif (behaviour == "stuck-member" and p % 3 != 2) or (
                behaviour == "streams-stuck-task" and p % 2 == 0
            ):
                run.consumed[p] = float(ends[p])
            elif behaviour == "rewind":
                # an offset reset every minute, then re-processing faster than production
                topic_rate = next(t.rate for t in self.topics if t.name == plan.topic)
                if int(age) % 60 == 20:
                    run.consumed[p] = max(0.0, ends[p] - 60 * topic_rate)
                else:
                    run.consumed[p] = min(float(ends[p]), run.consumed[p] + 1.5 * topic_rate)
            # "stalled", "storm" and the stuck member's partitions: the offset never moves
        commits = [
            self.factory.commit(plan.group, plan.topic, p, int(run.consumed[p]), now_ms)
            for p in range(n)
        ]
        if behaviour == "transactional" and self.transactions_supported:
            self._commit_transactionally(run, commits)
            return
        self._write(plan.group, commits)

    def _rejoin(self, run: _GroupRun, members: list[Member], now_ms: int) -> None:
        """A crash-looping instance: it joins (new member id) and is gone the next time, each
        a new generation; its partitions move back and forth and nothing is consumed."""
        run.generation += 1
        flapping = run.generation % 2 == 0
        if flapping:
            crashing = Member(
                f"indexer-crashy-{run.generation}",
                "indexer-crashy",
                "/10.1.3.9",
                ((run.plan.topic, ()),),
            )
            members = [*members, crashing]
        self._write(
            run.plan.group,
            [self.factory.classic_group(run.plan.group, run.generation, members, now_ms)],
        )

    def delete_group(self, group: str) -> None:
        """Delete a group now, as `kafka-consumer-groups --delete` does: tombstones for its
        offsets and its metadata; the simulator stops committing for it."""
        self._delete(next(run for run in self._runs if run.plan.group == group))

    def _delete(self, run: _GroupRun) -> None:
        plan = run.plan
        n = self._partitions(plan.topic)
        records = [self.factory.commit_tombstone(plan.group, plan.topic, p) for p in range(n)]
        records.append(self.factory.classic_group_tombstone(plan.group))
        self._write(plan.group, records)
        self._producer.flush(5)
        run.deleted = True

    def _commit_transactionally(self, run: _GroupRun, commits: list[KeyValue]) -> None:
        producer = self._txn_producer
        producer.begin_transaction()
        self._write(run.plan.group, commits, producer)
        producer.commit_transaction(10)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
        if self._txn_producer is not None:
            self._txn_producer.flush(5)
