"""`offsetwatch spark stream` over an archive directory: files arrive in two steps with a
restart from the checkpoint in between, and every alert is emitted exactly once. The stream
over a topic (the republished one, on a real broker) is in test_path_matrix_live.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyspark.sql import SparkSession

from offsetwatch.spark_jobs.streaming import (
    AlertSinks,
    StreamSettings,
    alert_batch,
    archive_stream,
    start_stream,
    state,
    warm_up,
)
from tests.spark_jobs.stream_data import minutes, publish

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000


def _ledger(alerts_dir: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted(alerts_dir.glob("batch-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def _run(spark: SparkSession, archive: Path, settings: StreamSettings) -> None:
    query = start_stream(archive_stream(spark, str(archive)), settings, AlertSinks(), True)
    query.awaitTermination()
    assert query.exception() is None


def test_restart_from_checkpoint_emits_each_alert_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    archive, alerts_dir = tmp_path / "archive", tmp_path / "alerts"
    settings = StreamSettings(str(tmp_path / "checkpoint"), str(alerts_dir))
    publish(archive, minutes(T0, 0, 25, stuck_until=40), 0)
    _run(spark, archive, settings)
    first = _ledger(alerts_dir)
    stalls = [a for a in first if a["name"] == "OffsetwatchConsumerStalled"]
    assert [(a["group"], a["active"]) for a in stalls] == [("stuck", True)]
    assert all(a["group"] == "stuck" for a in first), "no alert for the healthy group"

    # more data after a restart: the stuck group catches up, its episodes end
    publish(archive, minutes(T0, 26, 50, stuck_until=40), 1)
    _run(spark, archive, settings)
    everything = _ledger(alerts_dir)
    assert everything[: len(first)] == first
    pairs = Counter((a["alert_id"], a["active"]) for a in everything)
    assert all(n == 1 for n in pairs.values()), pairs
    # every alert that fired is resolved once, in the second run
    fired = {a["alert_id"] for a in everything if a["active"]}
    resolved = {a["alert_id"] for a in everything[len(first) :] if not a["active"]}
    assert stalls[0]["alert_id"] in resolved and fired <= resolved
    assert all(a["group"] == "stuck" for a in everything)

    # a third run with no new file emits nothing
    _run(spark, archive, settings)
    assert _ledger(alerts_dir) == everything


def test_warm_up_touches_nothing_of_the_stream(spark: SparkSession, tmp_path: Path) -> None:
    """The warm-up runs a batch's work in a scratch directory: the stream's checkpoint and
    alert ledger stay empty, and the stream then emits as without it."""
    settings = StreamSettings(str(tmp_path / "checkpoint"), str(tmp_path / "alerts"))
    warm_up(spark, settings)
    assert not (tmp_path / "checkpoint").exists()
    assert not (tmp_path / "alerts").exists()
    archive = tmp_path / "archive"
    publish(archive, minutes(T0, 0, 25, stuck_until=40), 0)
    _run(spark, archive, settings)
    assert {a["name"] for a in _ledger(tmp_path / "alerts")} >= {"OffsetwatchConsumerStalled"}


def _run_keeping_everything(
    spark: SparkSession, archive: Path, settings: StreamSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same stream with nothing dropped: no state part removed, no ended alert folded
    out of the ledger index; what it reads is still limited to `history_ms`."""
    with monkeypatch.context() as patch:
        patch.setattr(state, "shutil", SimpleNamespace(rmtree=lambda *_a, **_k: None))
        fold = alert_batch.update_ledger_index
        patch.setattr(alert_batch, "update_ledger_index", lambda d, b, _h: fold(d, b, None))
        _run(spark, archive, settings)


def test_state_older_than_the_history_is_pruned(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three batches an hour of event time apart with a 30-minute history: the first batch's
    parts are dropped once nothing reads them, group states keep the newest ones only, and
    the alerts are those of the same stream that kept everything."""
    archive = tmp_path / "archive"
    history_ms = 30 * 60_000
    pruned = StreamSettings(
        str(tmp_path / "pruned"), str(tmp_path / "alerts"), history_ms=history_ms
    )
    kept = StreamSettings(
        str(tmp_path / "kept"), str(tmp_path / "alerts-kept"), history_ms=history_ms
    )
    for step in range(3):
        start = 60 * step
        publish(archive, minutes(T0, start, start + 25, stuck_until=start + 40), step)
        _run(spark, archive, pruned)
        _run_keeping_everything(spark, archive, kept, monkeypatch)
    state = tmp_path / "pruned" / "offsetwatch"
    assert not (state / "commits" / "batch=0").exists()
    assert (state / "commits" / "batch=2").exists()
    assert sorted(p.name for p in (state / "group_state").iterdir()) == ["batch=1", "batch=2"]
    assert not (state / "latest" / "batch=0").exists()
    everything = tmp_path / "kept" / "offsetwatch"
    assert sorted(p.name for p in (everything / "commits").iterdir()) == [
        "batch=0",
        "batch=1",
        "batch=2",
    ]
    alerts = _ledger(tmp_path / "alerts")
    assert alerts == _ledger(tmp_path / "alerts-kept")
    stalls = [a for a in alerts if a["name"] == "OffsetwatchConsumerStalled"]
    assert len(stalls) == 3
    assert len({a["alert_id"] for a in alerts}) == len(alerts)
