"""The alert ledger's index: what a batch knows was emitted before it, without re-reading
every earlier file (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

from offsetwatch.spark_jobs.alerts.model import Alert
from offsetwatch.spark_jobs.streaming import emitted_before, update_ledger_index, write_ledger


def _alert(alert_id: str, active: bool, ends_at: int | None = None) -> Alert:
    return Alert(
        alert_id=alert_id,
        name="OffsetwatchConsumerStalled",
        severity="warning",
        group="g",
        topic="t",
        partitions="0",
        starts_at=1_000,
        ends_at=ends_at,
        active=active,
        value=1.0,
        summary="s",
        description="d",
        runbook_url=None,
    )


def test_the_index_answers_like_the_files(tmp_path: Path) -> None:
    write_ledger(tmp_path, 0, [_alert("a", True), _alert("b", True)])
    write_ledger(tmp_path, 1, [_alert("a", False, ends_at=5_000)])
    write_ledger(tmp_path, 2, [_alert("c", True)])
    by_files = emitted_before(tmp_path, 3)
    assert by_files == {"a": True, "b": False, "c": False}

    update_ledger_index(tmp_path, 2, horizon_ms=None)  # folds batches 0 and 1, not 2
    assert emitted_before(tmp_path, 3) == by_files
    assert emitted_before(tmp_path, 2) == {"a": True, "b": False}  # a re-run of batch 2
    # old files may go (rotated away by the operator): the index still knows them
    for old in ("batch-000000000000.jsonl", "batch-000000000001.jsonl"):
        (tmp_path / old).unlink()
    assert emitted_before(tmp_path, 3) == by_files


def test_alerts_that_ended_before_the_history_leave_the_index(tmp_path: Path) -> None:
    write_ledger(tmp_path, 0, [_alert("old", False, ends_at=1_000), _alert("open", True)])
    write_ledger(tmp_path, 1, [_alert("recent", False, ends_at=9_000)])
    update_ledger_index(tmp_path, 2, horizon_ms=5_000)
    (tmp_path / "batch-000000000000.jsonl").unlink()
    (tmp_path / "batch-000000000001.jsonl").unlink()
    assert emitted_before(tmp_path, 2) == {"open": False, "recent": True}


def test_an_index_ahead_of_the_batch_is_not_trusted(tmp_path: Path) -> None:
    write_ledger(tmp_path, 0, [_alert("a", True)])
    write_ledger(tmp_path, 1, [_alert("b", True)])
    update_ledger_index(tmp_path, 2, horizon_ms=None)
    assert emitted_before(tmp_path, 1) == {"a": False}
