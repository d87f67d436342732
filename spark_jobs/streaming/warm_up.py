"""`warm_up`: one micro-batch's whole work on a made-up history before the query starts."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.log_end import log_end_record
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.spark_jobs.schema import CanonicalRows, canonical_struct
from offsetwatch.spark_jobs.streaming.alert_batch import AlertBatch, AlertSinks, StreamSettings
from offsetwatch.spark_jobs.streaming.sources import with_watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the made-up history: a partition committed twice while its log end moved
_WARM_UP_T0: Final = 1_767_225_600_000
_GROUP: Final = "offsetwatch-warm-up"


def _warm_up_records(spark: SparkSession) -> DataFrame:
    canonical = Canonical()
    records = []
    for n in range(2):
        at = _WARM_UP_T0 + n * 60_000
        commit = OffsetCommitValue(10 * n, -1, "", at, -1, ZERO_UUID)
        key = OffsetCommitKey(_GROUP, "t", 0)
        records.append(canonical.to_dict(Record(1, key, 3, commit, 0, n, at)))
        records.append(log_end_record("t", 0, 20 * n, at, -1))
    rows = CanonicalRows(canonical_struct())
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
