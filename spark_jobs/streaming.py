"""`offsetwatch spark stream`: alerts continuously, with Structured Streaming.

Input: the exporter's archive directory (Spark's file stream over the JSON-lines files with
the canonical schema) or a Kafka topic (the `offsetwatch` data source's stream reader, whose
Kafka offsets are the stream's offsets). Records get an event-time column and a watermark.

Each micro-batch (`AlertBatch`, run by foreachBatch on the driver) does, under
`STATE = <checkpoint>/offsetwatch`:

1. flatten the batch into commits, log ends and group events (the lake's own functions) and
   write them to `STATE/<table>/batch=<id>` - overwritten if Spark runs the batch again, so a
   re-run is idempotent. Group events continue from the group states the previous batch saved;
2. run the analytics (episode detection) over the state of the last `history_ms` of event
   time up to this batch;
3. turn the episodes into alerts and keep those not emitted by an earlier batch: an open
   episode once as active, an ended one once as ended. The earlier batches' alert files
   (`<alerts_dir>/batch-<id>.jsonl`, written atomically) are the ledger, so a batch Spark runs
   again after a crash writes the same file again and a restart from the checkpoint neither
   repeats nor loses an alert;
4. hand them to the sinks: Alertmanager (through its persistent outbox) and Kafka;
5. drop the state no later batch reads (parts older than the history, superseded group
   states), so the state stays the size of `history_ms` however long the stream runs, and
   fold the earlier ledger files into `.ledger-index.json` (alerts that ended before the
   history are dropped from it), so a batch reads the index and the newest files rather
   than every file ever written; the files stay (they are also the JSON-lines alert sink).

`warm_up` runs that work once on a made-up history before the query starts, so that the first
real batch does not also pay for code generation and the Python workers' start.

Spark's checkpoint records which input each batch covered; this module's state and ledger
record what each batch produced. Both are keyed by the batch id, which is what makes the
restart exact.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import functions as F

from offsetwatch.core.atomic import atomic_write, write_text_atomic
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.alerts.alertmanager import AlertmanagerSink
from offsetwatch.spark_jobs.alerts.build import AlertSettings, alerts_from_episodes
from offsetwatch.spark_jobs.alerts.kafka import KafkaAlertSink
from offsetwatch.spark_jobs.alerts.model import Alert
from offsetwatch.spark_jobs.analytics.analyze import analyze
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.lake_flatten import (
    GROUP_STATE_SCHEMA,
    derive_group_events,
    flatten_commits,
    flatten_log_ends,
    group_records,
    split_events,
)
from offsetwatch.spark_jobs.schema import CanonicalRows, canonical_struct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

#: the archive's JSON-lines files (gzipped too); hidden in-progress files never match
ARCHIVE_GLOB: Final = "date=*/hour=*/*.jsonl*"
EVENT_TIME: Final = "event_time"
_LEDGER_NAME: Final = re.compile(r"batch-(\d+)\.jsonl")
#: hidden, so that globs of the alert files (a JSON-lines sink) do not see it
_INDEX_NAME: Final = ".ledger-index.json"
_TABLES: Final = {
    ls.COMMITS: ls.COMMITS_SCHEMA,
    ls.LOG_ENDS: ls.LOG_ENDS_SCHEMA,
    ls.GROUP_EVENTS: ls.GROUP_EVENTS_SCHEMA,
}
_GROUP_STATE: Final = "group_state"
#: the event-time column of each table
_TIME: Final = {ls.COMMITS: "record_ts", ls.LOG_ENDS: "sampled_at_ms", ls.GROUP_EVENTS: "ts"}
#: per batch, the latest event time of each table's part (what pruning decides on)
_LATEST: Final = "latest"


def _write_latest(path: str, times: Mapping[str, int | None]) -> None:
    target = Path(path)
    target.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target / "times.json", json.dumps(times))


def _read_latest(path: Path) -> dict[str, int | None]:
    try:
        times = json.loads((path / "times.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a batch cut short before it: keep its parts
        return {}
    return {str(k): v for k, v in times.items() if v is None or isinstance(v, int)}


def archive_stream(spark: SparkSession, directory: str) -> DataFrame:
    """The archive's canonical records as a stream (new files as they are published)."""
    frame: DataFrame = (
        spark.readStream.schema(canonical_struct())
        .option("mode", "DROPMALFORMED")
        .json(f"{directory.rstrip('/')}/{ARCHIVE_GLOB}")
    )
    return frame


def kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The canonical records of a Kafka topic as a stream (the `kafka` source's options)."""
    frame: DataFrame = (
        spark.readStream.format("offsetwatch").option("source", "kafka").options(**options).load()
    )
    return frame


def with_watermark(records: DataFrame, delay: str) -> DataFrame:
    """Adds the event time (the record's timestamp) and a watermark `delay` behind it."""
    return records.withColumn(EVENT_TIME, F.timestamp_millis(F.col("timestamp"))).withWatermark(
        EVENT_TIME, delay
    )


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
class LedgerIndex:
    """What the ledger files of batches up to `upto` say, kept small: alert id -> [end
    emitted, ends_at]. Without it every batch re-read every earlier batch's file (one a
    batch, for ever); with it a batch reads the index and the files written since."""

    upto: int = -1
    alerts: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, row: Mapping[str, Any]) -> None:
        known = self.alerts.get(row["alert_id"], [False, None])
        ended = bool(known[0]) or not row["active"]
        self.alerts[row["alert_id"]] = [ended, row.get("ends_at") if ended else None]

    @staticmethod
    def read(alerts_dir: Path) -> LedgerIndex:
        try:
            data = json.loads((alerts_dir / _INDEX_NAME).read_text(encoding="utf-8"))
            return LedgerIndex(int(data["upto"]), dict(data["alerts"]))
        except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: rebuild
            return LedgerIndex()

    def write(self, alerts_dir: Path) -> None:
        write_text_atomic(
            alerts_dir / _INDEX_NAME, json.dumps({"upto": self.upto, "alerts": self.alerts})
        )


def _ledger_files(alerts_dir: Path, after: int, before: int) -> list[tuple[int, Path]]:
    """(batch id, path) of the ledger files of batches after < id < before, in order."""
    found = []
    for path in alerts_dir.iterdir():
        match = _LEDGER_NAME.fullmatch(path.name)
        if match is not None and after < int(match.group(1)) < before:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _with_files(index: LedgerIndex, alerts_dir: Path, before: int) -> LedgerIndex:
    """`index` plus the ledger files it does not cover yet, up to batch `before` (excluded)."""
    out = LedgerIndex(index.upto, {k: list(v) for k, v in index.alerts.items()})
    for batch, path in _ledger_files(alerts_dir, index.upto, before):
        for line in path.read_text(encoding="utf-8").splitlines():
            out.add(json.loads(line))
        out.upto = batch
    return out


def emitted_before(alerts_dir: Path, batch_id: int) -> dict[str, bool]:
    """alert id -> whether its end was emitted, from the ledger of earlier batches (the index
    and the files written after it)."""
    if not alerts_dir.is_dir():
        return {}
    index = LedgerIndex.read(alerts_dir)
    if index.upto >= batch_id:  # an index ahead of this batch cannot say what preceded it
        index = LedgerIndex()
    return {k: bool(v[0]) for k, v in _with_files(index, alerts_dir, batch_id).alerts.items()}


def update_ledger_index(alerts_dir: Path, batch_id: int, horizon_ms: int | None) -> None:
    """Fold the ledger files before `batch_id` into the index (never this batch's: a re-run
    of it must still see what preceded it), dropping alerts that ended before `horizon_ms`:
    their episodes lie outside the history every later batch reads, so they never recur."""
    index = _with_files(LedgerIndex.read(alerts_dir), alerts_dir, batch_id)
    if horizon_ms is not None:
        index.alerts = {
            k: v
            for k, v in index.alerts.items()
            if not (v[0] and v[1] is not None and v[1] < horizon_ms)
        }
    index.write(alerts_dir)


def new_alerts(alerts: Iterable[Alert], emitted: Mapping[str, bool]) -> list[Alert]:
    """Alerts not emitted in this state yet: a new open episode, or an end not yet emitted."""
    out = []
    for alert in alerts:
        ended_before = emitted.get(alert.alert_id)
        if ended_before is None or (not alert.active and not ended_before):
            out.append(alert)
    return sorted(out, key=lambda a: (a.starts_at, a.alert_id))


def write_ledger(alerts_dir: Path, batch_id: int, alerts: list[Alert]) -> Path:
    """`batch-<id>.jsonl`, replaced atomically (a re-run of the batch writes the same)."""
    alerts_dir.mkdir(parents=True, exist_ok=True)
    target = alerts_dir / f"batch-{batch_id:012d}.jsonl"
    with atomic_write(target, "w") as out:
        for alert in alerts:
            out.write(json.dumps(alert.to_dict(), separators=(",", ":")) + "\n")
    return target


@dataclass(slots=True)
class AlertBatch:
    """The foreachBatch function (runs on the driver; module docs)."""

    settings: StreamSettings
    sinks: AlertSinks

    @property
    def state_dir(self) -> Path:
        return Path(self.settings.checkpoint_dir) / "offsetwatch"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        self._store(spark, batch, batch_id)
        commits, log_ends, group_events = (
            self._history(spark, table, batch_id) for table in _TABLES
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
        latest = self._prune(batch_id)
        horizon = None if latest is None else latest - self.settings.history_ms
        update_ledger_index(alerts_dir, batch_id, horizon)

    def _batch_path(self, table: str, batch_id: int) -> str:
        return str(self.state_dir / table / f"batch={batch_id}")

    def _store(self, spark: SparkSession, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            prior = self._prior_group_states(spark, batch_id)
            combined = derive_group_events(spark, group_records(batch), prior)
            events, states = split_events(combined)
            for table, rows in (
                (ls.COMMITS, flatten_commits(batch)),
                (ls.LOG_ENDS, flatten_log_ends(batch)),
                (ls.GROUP_EVENTS, events),
            ):
                rows.write.mode("overwrite").parquet(self._batch_path(table, batch_id))
            merged = states if prior is None else _latest_states(prior, states)
            merged.write.mode("overwrite").parquet(self._batch_path(_GROUP_STATE, batch_id))
            _write_latest(self._batch_path(_LATEST, batch_id), self._latest_times(spark, batch_id))
        finally:
            batch.unpersist()

    def _latest_times(self, spark: SparkSession, batch_id: int) -> dict[str, int | None]:
        """The latest event time each table's part of this batch holds."""
        out: dict[str, int | None] = {}
        for table in _TABLES:
            path = self._batch_path(table, batch_id)
            latest = spark.read.schema(_TABLES[table]).parquet(path).agg(F.max(_TIME[table]))
            row = latest.first()
            out[table] = None if row is None or row[0] is None else int(row[0])
        return out

    def _prune(self, batch_id: int) -> int | None:
        """Drop the state no later batch reads: a batch's table part whose rows are all older
        than the history any batch looks at (the newest event time only grows), and group
        states older than the newest one before this batch (a re-run of this batch starts
        from that one). Without this the state, and each batch's listing, grows forever.
        Returns the newest event time the state holds (None when it holds none)."""
        latest: dict[str, int] = {}
        parts = sorted(
            (int(p.name.removeprefix("batch=")), _read_latest(p))
            for p in (self.state_dir / _LATEST).glob("batch=*")
        )
        for _, times in parts:
            for table, value in times.items():
                if value is not None:
                    latest[table] = max(latest.get(table, value), value)
        for earlier, times in parts:
            if earlier >= batch_id:
                continue
            for table, value in times.items():
                horizon = latest.get(table)
                old = value is None or (
                    horizon is not None and value < horizon - self.settings.history_ms
                )
                if old:
                    shutil.rmtree(self._batch_path(table, earlier), ignore_errors=True)
        states = sorted(
            int(p.name.removeprefix("batch="))
            for p in (self.state_dir / _GROUP_STATE).glob("batch=*")
        )
        before = [b for b in states if b < batch_id]
        for earlier in before[:-1]:
            shutil.rmtree(self._batch_path(_GROUP_STATE, earlier), ignore_errors=True)
        for earlier, _ in parts:
            gone = not any(Path(self._batch_path(t, earlier)).exists() for t in _TABLES)
            if earlier < batch_id and gone:
                shutil.rmtree(self._batch_path(_LATEST, earlier), ignore_errors=True)
        return max(latest.values(), default=None)

    def _prior_group_states(self, spark: SparkSession, batch_id: int) -> DataFrame | None:
        for earlier in range(batch_id - 1, -1, -1):
            path = Path(self._batch_path(_GROUP_STATE, earlier))
            if path.is_dir():
                return spark.read.schema(GROUP_STATE_SCHEMA).parquet(str(path))
        return None

    def _history(self, spark: SparkSession, table: str, batch_id: int) -> DataFrame:
        schema = _TABLES[table]
        root = self.state_dir / table
        paths = [
            str(p)
            for p in root.glob("batch=*")
            if p.is_dir() and int(p.name.removeprefix("batch=")) <= batch_id
        ]
        rows = (
            spark.read.schema(schema).parquet(*paths)
            if paths
            else spark.createDataFrame([], schema)
        )
        time_column = _TIME[table]
        latest = rows.agg(F.max(time_column)).first()
        if latest is None or latest[0] is None:
            return rows
        return rows.where(F.col(time_column) >= int(latest[0]) - self.settings.history_ms)


def _latest_states(prior: DataFrame, new: DataFrame) -> DataFrame:
    """Group states after a batch: the batch's where it has one, else the prior one."""
    kept = prior.join(new.select("group"), on="group", how="left_anti")
    return kept.unionByName(new)


#: the made-up history of `warm_up`: a partition committed twice while its log end moved
_WARM_UP_T0: Final = 1_767_225_600_000


def _warm_up_records(spark: SparkSession) -> DataFrame:
    rows = CanonicalRows(canonical_struct())
    key = {"group": "offsetwatch-warm-up", "topic": "t", "partition": 0}
    records = [
        {
            "type": "offset_commit",
            "key_type": 1,
            "value_version": 3,
            "tombstone": False,
            "newer_version": False,
            "partition": 0,
            "offset": n,
            "timestamp": _WARM_UP_T0 + n * 60_000,
            "group": key["group"],
            "key": key,
            "value": {
                "offset": 10 * n,
                "leader_epoch": -1,
                "metadata": "",
                "commit_timestamp": _WARM_UP_T0 + n * 60_000,
                "expire_timestamp": -1,
            },
        }
        for n in range(2)
    ] + [
        {
            "type": "log_end",
            "key_type": -1,
            "value_version": 0,
            "tombstone": False,
            "newer_version": False,
            "partition": -1,
            "offset": -1,
            "timestamp": _WARM_UP_T0 + n * 60_000,
            "group": None,
            "key": {"topic": "t", "partition": 0},
            "value": {"log_end_offset": 20 * n, "sampled_at_ms": _WARM_UP_T0 + n * 60_000},
        }
        for n in range(2)
    ]
    return spark.createDataFrame([rows.to_row(r) for r in records], canonical_struct())


def warm_up(spark: SparkSession, settings: StreamSettings) -> None:
    """One micro-batch's whole work (store, analytics, alerts; no sink) on a made-up history
    in a scratch directory. A cold stream's first batch took 3.4 trigger intervals to reach
    Alertmanager (benchmarks/spark_streaming.py), the later ones about 1: the difference is
    the JVM's first runs of the plans and the Python workers' start, paid here instead."""
    with tempfile.TemporaryDirectory(prefix="offsetwatch-warm-up-") as scratch:
        scratch_settings = replace(
            settings,
            checkpoint_dir=str(Path(scratch) / "checkpoint"),
            alerts_dir=str(Path(scratch) / "alerts"),
        )
        batch = with_watermark(_warm_up_records(spark), settings.watermark)
        AlertBatch(scratch_settings, AlertSinks())(batch, 0)


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


__all__ = [
    "AlertBatch",
    "AlertSinks",
    "StreamSettings",
    "archive_stream",
    "kafka_stream",
    "start_stream",
    "warm_up",
]
