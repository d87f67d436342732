"""The stream's state under `<checkpoint>/offsetwatch`: each batch's lake parts (commits, log
ends, group events, written to `<table>/batch=<id>`, overwritten when Spark runs the batch
again), the group states the next batch continues from, the history of `history_ms` of event
time a batch reads, and the pruning that keeps the state that size however long the stream
runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pyspark.sql import functions as F

from offsetwatch.core.atomic import write_text_atomic
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.lake_flatten import (
    GROUP_STATE_SCHEMA,
    derive_group_events,
    flatten_commits,
    flatten_log_ends,
    group_records,
    split_events,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TABLES: Final = {
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


@dataclass(frozen=True, slots=True)
class StreamState:
    """The state directory of one stream and the event time its batches look back over."""

    state_dir: Path
    history_ms: int

    def _batch_path(self, table: str, batch_id: int) -> str:
        return str(self.state_dir / table / f"batch={batch_id}")

    def store(self, spark: SparkSession, batch: DataFrame, batch_id: int) -> None:
        """The batch's lake parts and group states, and the latest event time of each."""
        batch = batch.persist()
        combined: DataFrame | None = None
        try:
            prior = self._prior_group_states(spark, batch_id)
            # derived once (Python workers replay each group's records), written twice
            combined = derive_group_events(spark, group_records(batch), prior).persist()
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
            if combined is not None:
                combined.unpersist()
            batch.unpersist()

    def _latest_times(self, spark: SparkSession, batch_id: int) -> dict[str, int | None]:
        """The latest event time each table's part of this batch holds."""
        out: dict[str, int | None] = {}
        for table in TABLES:
            path = self._batch_path(table, batch_id)
            latest = spark.read.schema(TABLES[table]).parquet(path).agg(F.max(_TIME[table]))
            row = latest.first()
            out[table] = None if row is None or row[0] is None else int(row[0])
        return out

    def prune(self, batch_id: int) -> int | None:
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
                old = value is None or (horizon is not None and value < horizon - self.history_ms)
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
            gone = not any(Path(self._batch_path(t, earlier)).exists() for t in TABLES)
            if earlier < batch_id and gone:
                shutil.rmtree(self._batch_path(_LATEST, earlier), ignore_errors=True)
        return max(latest.values(), default=None)

    def _prior_group_states(self, spark: SparkSession, batch_id: int) -> DataFrame | None:
        for earlier in range(batch_id - 1, -1, -1):
            path = Path(self._batch_path(_GROUP_STATE, earlier))
            if path.is_dir():
                return spark.read.schema(GROUP_STATE_SCHEMA).parquet(str(path))
        return None

    def history(self, spark: SparkSession, table: str, batch_id: int) -> DataFrame:
        """`table`'s rows up to this batch, limited to the last `history_ms` of event time."""
        schema = TABLES[table]
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
        return rows.where(F.col(time_column) >= int(latest[0]) - self.history_ms)


def _latest_states(prior: DataFrame, new: DataFrame) -> DataFrame:
    """Group states after a batch: the batch's where it has one, else the prior one."""
    kept = prior.join(new.select("group"), on="group", how="left_anti")
    return kept.unionByName(new)
