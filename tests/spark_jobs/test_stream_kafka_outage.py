"""`spark stream` over a topic, with a real Alertmanager, while the broker goes away and comes
back (issue 21 §4): the stream keeps going and alerts exactly as without the outage.

One streaming query (trigger 1 s) on a real Kafka 4.0 broker of the module's own (it is
SIGKILLed). The topic holds canonical records as the exporter republishes them: a stuck group
stalls in the first half, then catches up. Each half is written in one transaction, so every
micro-batch holds a whole half (the source reads read_committed) and the run without the
outage is the same two batches: `spark stream` over archive files of the same records, two
runs from one checkpoint (as tests/spark_jobs/test_streaming.py does).

The broker is killed once the stall has reached Alertmanager, and restarted only after a
trigger started while it was down has ended (a progress event after the kill): the source
then asked a dead cluster for its latest offsets. Before the fix that trigger failed the
query ("cannot read the metadata of topic ..."); now it finds no new data and the stream
goes on. Without Kafka, the source's side of it: a trigger, an AvailableNow run and a planned
batch while the cluster does not answer.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from offsetwatch.spark_jobs.alerts.alertmanager import AlertmanagerSink
from offsetwatch.spark_jobs.alerts.outbox import Outbox
from offsetwatch.spark_jobs.schema import canonical_struct
from offsetwatch.spark_jobs.sources import kafka as kafka_source
from offsetwatch.spark_jobs.sources.kafka import ClusterUnavailable, KafkaStreamReader
from offsetwatch.spark_jobs.sources.kafka_ranges import OffsetRange, Watermarks
from offsetwatch.spark_jobs.streaming import (
    AlertSinks,
    StreamSettings,
    archive_stream,
    kafka_stream,
    start_stream,
)
from tests.exporter.daemon_helpers import wait_for
from tests.real_broker import Broker, own_broker, unique
from tests.spark_jobs.alertmanager_kit import RunningAlertmanager, alertmanager
from tests.spark_jobs.stream_data import MINUTE, minutes, publish

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.listener import StreamingQueryProgress
    from pyspark.sql.streaming.query import StreamingQuery

#: `cluster`: in `make test-cluster` with the other fault tiers (a broker of its own killed
#: under a streaming query), whose time it does not add to `make test`
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.prometheus, pytest.mark.cluster]

STALL: Final = "OffsetwatchConsumerStalled"
#: generous: under `make test` this module's JVM starts beside four other Spark JVMs and
#: several brokers on two cores: the whole module then took 520 s (124 s alone) and the first
#: wait once ran past 300 s; a bound for a hung query, never a figure
DEADLINE_S: Final = 900.0
TRIGGER_S: Final = 1.0

Alerts = list[dict[str, Any]]


@dataclass(slots=True)
class OutageRun:
    #: the two halves of the records (canonical dicts), as the topic holds them
    halves: tuple[list[dict[str, Any]], list[dict[str, Any]]]
    ledger: Alerts
    am: RunningAlertmanager
    outbox_pending: int
    #: (start, input rows) of the triggers that started while the broker was down
    during_outage: list[tuple[str, int]]
    query_exception: str | None
    #: seconds from the restarted broker serving to the resolution in the stream's ledger
    recovery_s: float
    timings: dict[str, float] = field(default_factory=dict)


def _ledger(alerts_dir: Path) -> Alerts:
    if not alerts_dir.is_dir():
        return []
    return [
        json.loads(line)
        for path in sorted(alerts_dir.glob("batch-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def _produce_in_one_transaction(broker: Broker, topic: str, records: Alerts) -> None:
    """One transaction: a read_committed reader sees all of `records` or none of them."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": unique("stream-outage-txn")}
    )
    # generous: right after a restart the transaction coordinator loads its state first
    producer.init_transactions(120)
    producer.begin_transaction()
    for record in records:
        producer.produce(topic, value=json.dumps(record).encode(), partition=0)
    producer.commit_transaction(120)


def _started_after(progress: StreamingQueryProgress, wall_s: float) -> bool:
    started = datetime.fromisoformat(progress.timestamp.replace("Z", "+00:00"))
    return started.timestamp() > wall_s


def _stall_reached(am: RunningAlertmanager, alerts_dir: Path) -> bool:
    stalls = [a for a in _ledger(alerts_dir) if a["name"] == STALL and a["active"]]
    return bool(stalls) and am.webhook.statuses(stalls[0]["alert_id"]) == ["firing"]


def _resolved(am: RunningAlertmanager, alerts_dir: Path) -> bool:
    ledger = _ledger(alerts_dir)
    ended = [a for a in ledger if a["name"] == STALL and not a["active"]]
    return bool(ended) and "resolved" in am.webhook.statuses(ended[0]["alert_id"])


def _live(
    spark: SparkSession, broker: Broker, am: RunningAlertmanager, work: Path, t0: int
) -> OutageRun:
    topic = unique("stream-outage-records")
    broker.create_topic(topic, 1)
    halves = (minutes(t0, 0, 25, stuck_until=40), minutes(t0, 26, 50, stuck_until=40))
    _produce_in_one_transaction(broker, topic, halves[0])
    checkpoint, alerts_dir = work / "checkpoint", work / "alerts"
    settings = StreamSettings(str(checkpoint), str(alerts_dir), trigger_s=TRIGGER_S)
    sinks = AlertSinks(alertmanager=AlertmanagerSink(am.url, checkpoint / "am-outbox.json"))
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "topic": topic,
        "startingOffsets": "earliest",
    }
    started = time.monotonic()
    query: StreamingQuery = start_stream(kafka_stream(spark, options), settings, sinks)
    timings: dict[str, float] = {}
    try:
        wait_for(
            lambda: not query.isActive or _stall_reached(am, alerts_dir),
            "the stall at Alertmanager",
            DEADLINE_S,
            describe=lambda: (_ledger(alerts_dir), len(query.recentProgress), query.exception()),
        )
        assert query.isActive, f"the stream stopped: {query.exception()}"
        timings["first_batch_s"] = round(time.monotonic() - started, 1)
        killed_at = time.time()
        broker.control("kill")
        # a trigger begun after the kill and ended: it asked the dead cluster for offsets
        wait_for(
            lambda: (
                not query.isActive
                or any(_started_after(p, killed_at) for p in query.recentProgress)
            ),
            "a trigger of the stream while the broker is down",
            DEADLINE_S,
        )
        during = [
            (p.timestamp, p.numInputRows)
            for p in query.recentProgress
            if _started_after(p, killed_at)
        ]
        assert query.isActive, f"the stream stopped: {query.exception()}"
        timings["down_s"] = round(time.time() - killed_at, 1)
        restarting = time.monotonic()
        broker.control("restart")
        back = time.monotonic()
        timings["restart_s"] = round(back - restarting, 1)
        _produce_in_one_transaction(broker, topic, halves[1])
        wait_for(
            lambda: not query.isActive or _resolved(am, alerts_dir),
            "the stall resolved at Alertmanager after the restart",
            DEADLINE_S,
        )
        recovery_s = time.monotonic() - back
        exception = query.exception()
    finally:
        query.stop()
    return OutageRun(
        halves,
        _ledger(alerts_dir),
        am,
        len(Outbox.load(checkpoint / "am-outbox.json").pending),
        during,
        None if exception is None else str(exception),
        recovery_s,
        timings,
    )


def _without_outage(spark: SparkSession, halves: tuple[Alerts, Alerts], work: Path) -> Alerts:
    """The same records as two archive files, one stream run after each (no broker)."""
    archive, alerts_dir = work / "archive", work / "alerts"
    settings = StreamSettings(str(work / "checkpoint"), str(alerts_dir))
    for seq, half in enumerate(halves):
        publish(archive, half, seq)
        query = start_stream(archive_stream(spark, str(archive)), settings, AlertSinks(), True)
        query.awaitTermination()
        assert query.exception() is None
    return _ledger(alerts_dir)


@dataclass(slots=True)
class Runs:
    live: OutageRun
    reference: Alerts


@pytest.fixture(scope="module")
def runs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    work = tmp_path_factory.mktemp("stream-outage")
    # recent event times: Alertmanager drops alerts that ended long ago
    t0 = (int(time.time() * 1000) // MINUTE - 55) * MINUTE
    # one partition of each internal topic: short start-up, transactions and log recovery
    internal = ("offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1")
    with own_broker(work / "broker", *internal) as broker, alertmanager(work) as am:
        live = _live(spark, broker, am, work / "live", t0)
        began = time.monotonic()
        reference = _without_outage(spark, live.halves, work / "reference")
        live.timings["reference_s"] = round(time.monotonic() - began, 1)
        print(f"stream across a broker outage: recovery_s={live.recovery_s:.1f} {live.timings}")
        yield Runs(live, reference)


def test_the_stream_keeps_going_through_the_outage(
    runs: Runs, record_property: Callable[[str, object], None]
) -> None:
    record_property("recovery_s", round(runs.live.recovery_s, 1))
    assert runs.live.query_exception is None
    assert runs.live.during_outage, "no trigger ran while the broker was down"
    assert all(rows == 0 for _start, rows in runs.live.during_outage)


def test_the_alerts_are_those_of_the_stream_without_the_outage(runs: Runs) -> None:
    """Field by field, in order: nothing lost, nothing emitted twice, nothing extra."""
    ledger = runs.live.ledger
    assert ledger == runs.reference
    assert all(n == 1 for n in Counter((a["alert_id"], a["active"]) for a in ledger).values())
    fired = [a for a in ledger if a["name"] == STALL and a["active"]]
    assert [a["group"] for a in fired] == ["stuck"]
    assert any(a["alert_id"] == fired[0]["alert_id"] and not a["active"] for a in ledger)


def _is(now: Callable[[], object], expected: object) -> bool:
    return now() == expected


def test_alertmanager_notified_each_alert_once(runs: Runs) -> None:
    """Every episode that fired was notified firing once, then resolved once; the outbox
    holds nothing more to send."""
    ledger, am = runs.live.ledger, runs.live.am
    for alert in ledger:
        if alert["active"]:
            statuses = partial(am.webhook.statuses, alert["alert_id"])
            wait_for(
                partial(_is, statuses, ["firing", "resolved"]),
                f"{alert['name']} {alert['alert_id']} notified firing, then resolved",
                60,
                describe=statuses,
            )
    assert runs.live.outbox_pending == 0


class _AwayCluster:
    """TopicMetadata's questions, unanswered the first `away` times (a cluster restarting)."""

    def __init__(self, away: int) -> None:
        self.away = away
        self.asked = 0

    def _answer(self) -> None:
        self.asked += 1
        if self.asked <= self.away:
            raise ClusterUnavailable("cannot read the offsets of t[0] from b:9092: _TRANSPORT")

    def partitions(self, timeout_s: float = 30.0) -> list[int]:
        self._answer()
        return [0]

    def watermarks(self, partitions: Sequence[int], timeout_s: float = 30.0) -> dict[int, Any]:
        self._answer()
        return dict.fromkeys(partitions, Watermarks(0, 40))

    def close(self) -> None:
        pass


def _reader(cluster: _AwayCluster, **options: str) -> KafkaStreamReader:
    reader = KafkaStreamReader(
        canonical_struct(), {"kafka.bootstrap.servers": "b:9092", "topic": "t", **options}
    )
    reader._metadata = cluster  # type: ignore[assignment]
    return reader


def test_a_trigger_without_the_cluster_has_no_new_data(caplog: pytest.LogCaptureFixture) -> None:
    """Without Kafka: the trigger returns its start (Spark runs no batch) and says so once;
    the next trigger with the cluster back reads on, and says that once too."""
    reader = _reader(_AwayCluster(away=2))
    start = {"t": {"0": 12}}
    with caplog.at_level(logging.WARNING):
        assert reader.latestOffset(start, ReadAllAvailable()) == start
        assert reader.latestOffset(start, ReadAllAvailable()) == start
        assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 40}}
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "waits for it" in said[0] and "answers again" in said[1], said


def test_available_now_without_the_cluster_fails_rather_than_end_early() -> None:
    reader = _reader(_AwayCluster(away=0))
    reader.prepareForTriggerAvailableNow()
    reader._metadata = _AwayCluster(away=1)  # type: ignore[assignment]
    with pytest.raises(ClusterUnavailable):
        reader.latestOffset({"t": {"0": 12}}, ReadAllAvailable())


def test_a_planned_batch_waits_for_the_cluster_up_to_the_poll_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batch's offsets are in Spark's checkpoint already: its ranges are planned once
    the cluster answers (not failed at once), up to kafkaConsumer.pollTimeoutMs."""
    monkeypatch.setattr(kafka_source, "_RETRY_PAUSE_S", 0.0)
    cluster = _AwayCluster(away=3)
    planned = _reader(cluster).partitions({"t": {"0": 12}}, {"t": {"0": 40}})
    assert [p.offsets for p in planned] == [OffsetRange(0, 12, 40)]  # type: ignore[attr-defined]
    assert cluster.asked == 4
    never = _reader(_AwayCluster(away=10**9), **{"kafkaConsumer.pollTimeoutMs": "50"})
    with pytest.raises(ClusterUnavailable):
        never.partitions({"t": {"0": 12}}, {"t": {"0": 40}})
