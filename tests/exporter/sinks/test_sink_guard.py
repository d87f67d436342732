"""A failing sink keeps its records, says so at a bounded rate, and never raises into ingestion."""

from __future__ import annotations

import logging

import pytest

from offsetwatch.decoder.records import Record
from offsetwatch.exporter.sinks import sink_guard
from offsetwatch.exporter.sinks.sink_guard import GuardedSink


def record(partition: int, offset: int) -> Record:
    return Record(0, None, None, None, partition, offset)  # type: ignore[arg-type]


class FlakyDisk:
    """A sink that fails while `full` is set, and remembers what it took."""

    def __init__(self) -> None:
        self.full = False
        self.written: list[tuple[int, int]] = []

    def __call__(self, rec: Record) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        self.written.append((rec.partition, rec.offset))


def test_records_refused_are_kept_in_order_and_written_when_the_sink_works_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = FlakyDisk()
    guard = GuardedSink("archive", disk, "free space in /data", clock_ms=lambda: 1_000)
    guard(record(0, 0))
    disk.full = True
    with caplog.at_level(logging.ERROR):
        for offset in range(1, 6):
            guard(record(0, offset))
        guard(record(1, 7))
        guard.retry()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1  # the first failure; the others are counted, not logged
    assert "archive sink failing" in errors[0] and "free space in /data" in errors[0]
    health = guard.health
    assert not health.up and health.backlog == 6 and health.errors_total == 2
    # a checkpoint never goes past what the sink has not taken
    assert guard.cap_positions({0: 6, 1: 8, 2: 3}) == {0: 1, 1: 7, 2: 3}

    disk.full = False
    guard(record(0, 6))  # still behind the backlog: kept, order preserved
    guard.retry()
    assert disk.written == [(0, o) for o in range(7) if o < 6] + [(1, 7), (0, 6)]
    assert health.up and health.backlog == 0 and health.dropped_total == 0
    assert guard.cap_positions({0: 7, 1: 8}) == {0: 7, 1: 8}


def test_a_full_backlog_drops_and_counts_and_the_checkpoint_stays_before_the_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sink_guard, "MAX_BACKLOG", 3)
    disk = FlakyDisk()
    disk.full = True
    guard = GuardedSink("publish", disk)
    for offset in range(10, 16):
        guard(record(2, offset))
    assert guard.health.backlog == 3 and guard.health.dropped_total == 3
    disk.full = False
    guard.retry()
    guard(record(2, 16))
    assert disk.written == [(2, 10), (2, 11), (2, 12), (2, 16)]
    assert guard.health.up
    # 13..15 were dropped: a restart from the checkpoint must read them again
    assert guard.cap_positions({2: 17}) == {2: 10}
    guard.forget()  # rebuilt from the topic's start: everything comes again
    assert guard.cap_positions({2: 17}) == {2: 17}


def test_a_failure_outside_a_record_is_counted_and_cleared_by_the_next_write() -> None:
    disk = FlakyDisk()
    guard = GuardedSink("archive", disk)
    guard.note_failure(OSError(28, "No space left on device"))
    assert not guard.health.up and guard.health.errors_total == 1
    guard.retry()  # nothing kept: no proof that it works yet
    assert not guard.health.up
    guard(record(0, 1))
    assert guard.health.up and disk.written == [(0, 1)]
