"""The foreachBatch function of `offsetwatch spark stream` (package docs), its settings and
sinks, and the query that runs it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.spark_jobs.alerts.alertmanager import AlertmanagerSink
from offsetwatch.spark_jobs.alerts.build import AlertSettings, alerts_from_episodes
from offsetwatch.spark_jobs.alerts.kafka import KafkaAlertSink
from offsetwatch.spark_jobs.alerts.model import Alert
from offsetwatch.spark_jobs.analytics.analyze import analyze
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.streaming.ledger import (
    emitted_before,
    new_alerts,
    update_ledger_index,
    write_ledger,
)
from offsetwatch.spark_jobs.streaming.sources import with_watermark
from offsetwatch.spark_jobs.streaming.state import TABLES, StreamState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery


@dataclass(slots=True)
class AlertSinks:
    """Where emitted alerts go besides the ledger files; any may be None."""

    alertmanager: AlertmanagerSink | None = None
    kafka: KafkaAlertSink | None = None
    #: the resend timer and the batches both deliver: one at a time
    lock: threading.Lock = field(default_factory=threading.Lock)

    def emit(self, alerts: list[Alert]) -> None:
        with self.lock:
            if self.alertmanager is not None:
                self.alertmanager.deliver(alerts)
            if self.kafka is not None and alerts:
                self.kafka.send(alerts)

    def resend(self) -> None:
        """Re-send active alerts on schedule (Alertmanager resolves silent ones by itself)."""
        with self.lock:
            if self.alertmanager is not None:
                self.alertmanager.deliver([])


@dataclass(frozen=True, slots=True)
class StreamSettings:
    checkpoint_dir: str
    alerts_dir: str
    trigger_s: float = 30.0
    watermark: str = "1 hour"
    #: event time kept for detection: episodes need the status window and trailing baselines
    history_ms: int = 6 * 3600 * 1000
    analytics: AnalyticsSettings = field(default_factory=AnalyticsSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)


@dataclass(slots=True)
class AlertBatch:
    """The foreachBatch function (runs on the driver; package docs)."""

    settings: StreamSettings
    sinks: AlertSinks

    @property
    def state(self) -> StreamState:
        return StreamState(
            Path(self.settings.checkpoint_dir) / "offsetwatch", self.settings.history_ms
        )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        state = self.state
        state.store(spark, batch, batch_id)
        commits, log_ends, group_events = (
            state.history(spark, table, batch_id) for table in TABLES
        )
        result = analyze(commits, log_ends, group_events, self.settings.analytics)
        # with the cause and suspects of each episode (the exporter's diagnosis rules)
        rows = alerts_from_episodes(result.diagnosed_episodes, self.settings.alerts).collect()
        alerts_dir = Path(self.settings.alerts_dir)
        fresh = new_alerts((Alert.from_row(r) for r in rows), emitted_before(alerts_dir, batch_id))
        # sinks first: they are idempotent (outbox, keyed messages); the ledger last, so a
        # crash in between repeats this batch rather than losing its alerts
        self.sinks.emit(fresh)
        write_ledger(alerts_dir, batch_id, fresh)
        latest = state.prune(batch_id)
        horizon = None if latest is None else latest - self.settings.history_ms
        update_ledger_index(alerts_dir, batch_id, horizon)


def start_stream(
    records: DataFrame, settings: StreamSettings, sinks: AlertSinks, available_now: bool = False
) -> StreamingQuery:
    """Starts the query: watermarked records, foreachBatch `AlertBatch`, checkpointed.

    `available_now`: process what is there, then stop (a catch-up run, and the tests)."""
    writer = (
        with_watermark(records, settings.watermark)
        .writeStream.foreachBatch(AlertBatch(settings, sinks))
        .option("checkpointLocation", settings.checkpoint_dir)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.trigger_s:g} seconds")
    return writer.start()
