"""Alerts from episodes, their file and Kafka sinks, and a real Alertmanager receiving them,
re-sent while active, resolved once, and kept in the outbox while Alertmanager is down."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from offsetwatch.mock_cluster import MockCluster
from offsetwatch.spark_jobs.alerts.alertmanager import AlertmanagerSink, to_alertmanager
from offsetwatch.spark_jobs.alerts.build import AlertSettings, alerts_from_episodes
from offsetwatch.spark_jobs.alerts.files import write_alert_files
from offsetwatch.spark_jobs.alerts.kafka import KafkaAlertSink
from offsetwatch.spark_jobs.alerts.model import Alert
from offsetwatch.spark_jobs.alerts.outbox import Outbox
from offsetwatch.spark_jobs.lake_schema import ALERTS_SCHEMA, EPISODES_SCHEMA
from tests.exporter.daemon_helpers import consume_all
from tests.spark_jobs.alertmanager_kit import alertmanager, free_port, wait_for

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MIN = 60_000

EPISODES = [
    # kind, group, topic, partition, start, end, size, unit, detail
    ("stall", "billing", "orders", 3, T0, None, 120.0, "messages", None),
    (
        "rewind",
        "billing",
        "orders",
        1,
        T0 + 5 * MIN,
        T0 + 9 * MIN,
        500.0,
        "offsets",
        '{"from":900,"to":400}',
    ),
    ("rebalance_storm", "search", None, None, T0 + MIN, T0 + 11 * MIN, 6.0, "rebalances", None),
]


def _episodes(spark: SparkSession, rows: list[tuple[object, ...]] = EPISODES) -> DataFrame:
    return spark.createDataFrame(rows, EPISODES_SCHEMA)


def _alerts(spark: SparkSession, rows: list[tuple[object, ...]] = EPISODES) -> list[Alert]:
    frame = alerts_from_episodes(
        _episodes(spark, rows), AlertSettings(runbook_base="https://runbooks.example/offsetwatch")
    )
    return sorted((Alert.from_row(r) for r in frame.collect()), key=lambda a: a.starts_at)


def test_one_alert_per_episode(spark: SparkSession) -> None:
    frame = alerts_from_episodes(_episodes(spark))
    # Spark cannot narrow nullability with a cast: names and types are the contract here
    assert [(f.name, f.dataType) for f in frame.schema] == [
        (f.name, f.dataType) for f in ALERTS_SCHEMA
    ]
    stall, storm, rewind = _alerts(spark)
    assert (stall.name, stall.severity, stall.active, stall.ends_at) == (
        "OffsetwatchConsumerStalled",
        "critical",
        True,
        None,
    )
    assert (stall.topic, stall.partitions, stall.value) == ("orders", "3", 120.0)
    assert (
        stall.summary
        == "Consumer group billing stalled: no progress while messages arrived on orders[3]"
    )
    assert stall.description == "Since 2026-01-01T00:00:00Z, still open. Size: 120 messages."
    assert stall.runbook_url == "https://runbooks.example/offsetwatch#stall"
    assert (rewind.name, rewind.severity, rewind.active) == (
        "OffsetwatchConsumerRewound",
        "warning",
        False,
    )
    assert rewind.ends_at == T0 + 9 * MIN
    assert rewind.description.endswith('Detail: {"from":900,"to":400}')
    assert (storm.group, storm.topic, storm.partitions) == ("search", None, None)
    assert storm.summary == "Consumer group search is in a rebalance storm"
    ids = {a.alert_id for a in (stall, storm, rewind)}
    assert len(ids) == 3
    # the same episode, found again once it ended, keeps its id
    ended = list(EPISODES[0])
    ended[5] = T0 + 30 * MIN
    again = _alerts(spark, [tuple(ended)])[0]
    assert again.alert_id == stall.alert_id and not again.active
    assert alerts_from_episodes(_episodes(spark)).where("runbook_url IS NOT NULL").count() == 0


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_alert_files(spark: SparkSession, tmp_path: Path, file_format: str) -> None:
    frame = alerts_from_episodes(_episodes(spark))
    target = str(tmp_path / "alerts")
    write_alert_files(frame, target, file_format)  # type: ignore[arg-type]
    write_alert_files(frame, target, file_format)  # type: ignore[arg-type]  # appends
    reader = spark.read.schema(ALERTS_SCHEMA)
    back = reader.json(target) if file_format == "jsonl" else reader.parquet(target)
    assert back.count() == 6
    assert sorted(back.distinct().collect()) == sorted(frame.collect())


def test_alertmanager_payload(spark: SparkSession) -> None:
    stall, storm, rewind = _alerts(spark)
    posted = to_alertmanager(rewind, "http://exporter:9380/")
    assert posted["labels"] == {
        "alertname": "OffsetwatchConsumerRewound",
        "severity": "warning",
        "group": "billing",
        "topic": "orders",
        "partition": "1",
        "episode": rewind.alert_id,
        "source": "offsetwatch-spark",
    }
    assert posted["startsAt"] == "2026-01-01T00:05:00.000Z"
    assert posted["endsAt"] == "2026-01-01T00:09:00.000Z"
    assert posted["generatorURL"] == "http://exporter:9380/api/v1/groups/billing"
    assert set(posted["annotations"]) == {"summary", "description", "runbook_url", "value"}
    assert "endsAt" not in to_alertmanager(stall, "http://x")
    assert {"topic", "partition"}.isdisjoint(to_alertmanager(storm, "http://x")["labels"])


@pytest.mark.prometheus
def test_alertmanager_receives_resends_and_resolves(spark: SparkSession, tmp_path: Path) -> None:
    """Real Alertmanager: the open stall fires, the ended episodes arrive resolved; the stall is
    re-sent on schedule (Alertmanager pushes its end time out) and later resolved once."""
    # the alerts are built with real (recent) times: Alertmanager drops alerts that ended long ago
    now = int(time.time() * 1000)
    rows = [
        (k, g, t, p, now - 60_000 + i, (None if e is None else now - 1000 + i), s, u, d)
        for i, (k, g, t, p, _s, e, s, u, d) in enumerate(EPISODES)
    ]
    alerts = _alerts(spark, rows)
    stall = next(a for a in alerts if a.active)
    clock = [now]
    with alertmanager(tmp_path) as am:
        sink = AlertmanagerSink(
            am.url, tmp_path / "outbox.json", resend_interval_ms=30_000, clock_ms=lambda: clock[0]
        )
        report = sink.deliver(alerts)
        assert (report.sent, report.pending, report.error) == (3, 1, None)
        held = am.by_episode()
        assert set(held) == {stall.alert_id}  # the ended ones are resolved at once
        assert held[stall.alert_id]["status"]["state"] == "active"
        assert held[stall.alert_id]["labels"]["alertname"] == "OffsetwatchConsumerStalled"
        wait_for(lambda: am.webhook.statuses(stall.alert_id) == ["firing"], "the stall notified")

        # within the resend interval nothing is due; after it the stall goes out again
        assert sink.deliver([]).sent == 0
        first_end = held[stall.alert_id]["endsAt"]
        time.sleep(1.1)  # Alertmanager stamps the resend in its own clock
        clock[0] += 30_000
        assert sink.deliver([]).sent == 1
        assert am.by_episode()[stall.alert_id]["endsAt"] > first_end

        # the episode ends: resolved once, then forgotten by the outbox
        ended = Alert.from_dict(stall.to_dict() | {"ends_at": now, "active": False})
        assert sink.deliver([ended]).sent == 1
        wait_for(lambda: stall.alert_id not in am.by_episode(), "the stall resolved")
        wait_for(
            lambda: am.webhook.statuses(stall.alert_id) == ["firing", "resolved"],
            "the resolution notified",
        )
        again = sink.deliver([ended, *alerts])  # a re-run finding the same episodes again
        assert (again.sent, again.pending) == (0, 0)


@pytest.mark.prometheus
def test_alertmanager_down_keeps_alerts_and_retries(spark: SparkSession, tmp_path: Path) -> None:
    alerts = _alerts(spark)
    outbox = tmp_path / "outbox.json"
    down = AlertmanagerSink(f"http://127.0.0.1:{free_port()}", outbox, timeout_s=2)
    report = down.deliver(alerts)
    assert report.sent == 0 and report.pending == 3
    assert report.error is not None and "unreachable" in report.error
    assert set(Outbox.load(outbox).pending) == {a.alert_id for a in alerts}
    # the next batch, with Alertmanager back, delivers what was kept (nothing new given)
    with alertmanager(tmp_path) as am:
        back = AlertmanagerSink(am.url, outbox)
        assert back.deliver([]).sent == 3
        assert len(Outbox.load(outbox).pending) == 1  # the open stall stays, to be re-sent


@pytest.mark.kafka
def test_kafka_sink(spark: SparkSession) -> None:
    alerts = _alerts(spark)
    with MockCluster() as cluster:
        cluster.create_topic("alerts", 1)
        sink = KafkaAlertSink({"bootstrap.servers": cluster.bootstrap_servers}, "alerts")
        assert sink.send(alerts) == 3
        sink.close()
        received = consume_all(cluster.bootstrap_servers, "alerts", 1, expected=3)
    assert {m.key for m in received} == {a.alert_id.encode() for a in alerts}
    by_id = {a.alert_id: a for a in alerts}
    for message in received:
        assert (
            Alert.from_dict(json.loads(message.value or b""))
            == by_id[(message.key or b"").decode()]
        )
