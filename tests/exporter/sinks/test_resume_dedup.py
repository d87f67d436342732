"""Exactly once across an exporter crash, without Kafka: the time bounds of checkpoints, the
positions skipped, the headers read back, the archive files read back, and the daemon's sinks
skipping what they already hold (the real crash: tests/exporter/test_exporter_crash_real.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.exporter.sinks.checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint
from offsetwatch.exporter.sinks.log_end_records import LogEndRecords
from offsetwatch.exporter.sinks.publisher import (
    HEADER_SOURCE_CLUSTER,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
    RecordPublisher,
)
from offsetwatch.exporter.sinks.record_sinks import SinkPartition
from offsetwatch.exporter.sinks.resume_dedup import (
    MARGIN_MS,
    MAX_MARKS,
    SinceMarks,
    SkipSet,
    scan_archive,
    source_position,
)
from offsetwatch.exporter.state.offset_state import OffsetState


def commit(partition: int, offset: int, timestamp: int = 1_767_225_000_000) -> Record:
    return Record(
        1,
        OffsetCommitKey("g", "orders", 0),
        3,
        OffsetCommitValue(offset, 5, "", timestamp, -1, ZERO_UUID),
        partition=partition,
        offset=offset,
        timestamp=timestamp,
    )


# ------------------------------------------------------------------------------------------
# SinceMarks
# ------------------------------------------------------------------------------------------


def test_the_bound_is_the_newest_mark_at_or_below_the_position() -> None:
    marks = SinceMarks(start_ms=100)
    marks.note({0: 10, 1: 5}, 1_000)
    marks.note({0: 20, 1: 5}, 2_000)  # partition 1 read nothing: still true, and later
    marks.note({0: 30, 1: 9}, 3_000)
    assert marks.bounds({0: 25, 1: 5, 2: 0}) == {0: 2_000, 1: 2_000, 2: 100}
    # below every mark: nothing reached the sinks before the start
    assert SinceMarks(start_ms=100).bounds({0: 7}) == {0: 100}
    # the next checkpoint (positions move forward) still finds what it needs after pruning
    assert marks.bounds({0: 30, 1: 9}) == {0: 3_000, 1: 3_000}


def test_an_idle_partition_first_read_late_gets_a_recent_bound() -> None:
    # the daemon names partitions nothing was read from yet with position 0
    marks = SinceMarks(start_ms=0)
    for second in range(1, 6):
        marks.note({0: 0, 1: 10 * second}, 1_000 * second)
    assert marks.bounds({0: 7, 1: 30}) == {0: 5_000, 1: 3_000}


def test_marks_are_taken_once_a_second_unless_forced() -> None:
    marks = SinceMarks(start_ms=0)
    assert marks.due(0)
    marks.note({0: 10}, 1_000)
    assert not marks.due(1_999) and marks.due(2_000)
    marks.note({0: 20}, 1_500)  # within the interval: ignored
    assert marks.bounds({0: 20}) == {0: 1_000}
    marks.note({0: 20}, 1_600, force=True)
    assert marks.bounds({0: 20}) == {0: 1_600}


def test_a_bound_below_a_mark_dropped_for_memory_is_looser_never_later() -> None:
    marks = SinceMarks(start_ms=5)
    for i in range(MAX_MARKS + 10):
        marks.note({0: i + 1}, 10_000 + i, force=True)
    # the marks of positions 1..10 were dropped: the start is a valid (looser) bound
    assert marks.bounds({0: 3}) == {0: 5}
    assert marks.bounds({0: 20}) == {0: 10_019}


def test_records_found_after_a_restart_keep_their_bound_until_the_checkpoint_passes_them() -> None:
    marks = SinceMarks(start_ms=50_000)
    marks.found(0, 40, 20_000)  # the previous run wrote positions up to 40 from 20 000 on
    marks.note({0: 10}, 60_000)
    assert marks.bounds({0: 30}) == {0: 20_000}
    assert marks.bounds({0: 40}) == {0: 20_000}
    assert marks.bounds({0: 41}) == {0: 60_000}  # passed: the floor is gone
    assert marks.bounds({0: 41}) == {0: 60_000}


def test_reset_forgets_marks_and_floors() -> None:
    marks = SinceMarks(start_ms=0)
    marks.note({0: 10}, 1_000)
    marks.found(0, 40, 500)
    marks.reset(9_000)
    assert marks.bounds({0: 12}) == {0: 9_000}


# ------------------------------------------------------------------------------------------
# SkipSet and headers
# ------------------------------------------------------------------------------------------


def test_each_found_position_is_skipped_once() -> None:
    skip = SkipSet.of([(0, 5), (0, 7), (1, 3)])
    assert len(skip) == 3 and skip.last_offsets() == {0: 7, 1: 3}
    assert [skip.take(0, o) for o in (4, 5, 5, 6, 7, 8)] == [False, True, False, False, True, False]
    assert not skip.take(2, 0)
    assert skip.take(1, 3) and not skip and skip.skipped == 3


def test_reading_past_the_last_found_position_drops_the_partition() -> None:
    # position 5 was compacted away before the restart read it again: never seen, not kept
    skip = SkipSet.of([(0, 5), (0, 9)])
    assert skip.take(0, 9)
    assert not skip.take(0, 10)
    assert not skip


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            [
                (HEADER_SOURCE_TOPIC, b"__consumer_offsets"),
                (HEADER_SOURCE_PARTITION, b"3"),
                (HEADER_SOURCE_OFFSET, b"42"),
                (HEADER_SOURCE_CLUSTER, b"abc"),
            ],
            (3, 42),
        ),
        ([(HEADER_SOURCE_PARTITION, b"3"), (HEADER_SOURCE_OFFSET, b"42")], (3, 42)),
        # another cluster's exporter writing to the same topic: not ours to skip
        (
            [
                (HEADER_SOURCE_PARTITION, b"3"),
                (HEADER_SOURCE_OFFSET, b"42"),
                (HEADER_SOURCE_CLUSTER, b"other"),
            ],
            None,
        ),
        (
            [
                (HEADER_SOURCE_TOPIC, b"other_offsets"),
                (HEADER_SOURCE_PARTITION, b"3"),
                (HEADER_SOURCE_OFFSET, b"42"),
            ],
            None,
        ),
        ([(HEADER_SOURCE_PARTITION, b"x"), (HEADER_SOURCE_OFFSET, b"42")], None),
        ([(HEADER_SOURCE_PARTITION, b"3")], None),
        ([], None),
        (None, None),
    ],
)
def test_source_position_of_headers(headers: Any, expected: tuple[int, int] | None) -> None:
    assert source_position(headers, "__consumer_offsets", "abc") == expected


# ------------------------------------------------------------------------------------------
# The archive read back
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "gz"), [("jsonl", False), ("jsonl", True), ("avro", False)])
def test_archive_files_written_since_the_bound_are_read_back(
    tmp_path: Path, fmt: Any, gz: bool
) -> None:
    canonical = Canonical()
    old = ArchiveWriter(tmp_path, fmt, gzip=gz)
    for offset in range(0, 5):
        old.write(canonical.to_dict(commit(0, offset)))
    old.close()
    for file in tmp_path.rglob("offsetwatch-*"):
        os.utime(file, ns=(0, 0))  # written long before the bound
    writer = ArchiveWriter(tmp_path, fmt, gzip=gz)
    for partition, offset in [(0, 5), (0, 6), (1, 2), (0, 7)]:
        writer.write(canonical.to_dict(commit(partition, offset)))
    for sample in LogEndRecords(0).records(1_767_225_000_000, {("orders", 0): 9}):
        writer.write(sample)
    writer.flush(fsync=True)  # then the crash: the files stay in progress
    since = 2 * MARGIN_MS
    # before the restart the in-progress files are hidden; the new writer salvages them
    restarted = ArchiveWriter(tmp_path, fmt, gzip=gz)
    assert restarted.recovered
    # positions 0:0-4 are old files; 0:5 lies below the checkpoint; log-end samples are no
    # source records
    assert scan_archive(tmp_path, {0: 6, 1: 0}, since) == {(0, 6), (0, 7), (1, 2)}


def test_an_archive_file_that_cannot_be_read_is_left_out(tmp_path: Path) -> None:
    directory = tmp_path / "date=2026-01-01" / "hour=00"
    directory.mkdir(parents=True)
    (directory / "offsetwatch-0000000000001-000000.jsonl").write_text('{"partition": 0, "of')
    (directory / "offsetwatch-0000000000001-000001.jsonl").write_text(
        '{"type":"offset_commit","partition":0,"offset":3}\n'
    )
    assert scan_archive(tmp_path, {}, MARGIN_MS) == {(0, 3)}


# ------------------------------------------------------------------------------------------
# The checkpoint and the daemon
# ------------------------------------------------------------------------------------------


def test_the_checkpoint_keeps_the_bounds_and_old_checkpoints_have_none(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    save_checkpoint(
        path, OffsetState(), {0: 5, 3: 9}, meta=CheckpointMeta(), resume_since_ms={0: 7, 3: 8}
    )
    assert load_checkpoint(path).resume_since_ms == {0: 7, 3: 8}
    save_checkpoint(path, OffsetState(), {0: 5}, meta=CheckpointMeta())
    assert load_checkpoint(path).resume_since_ms is None


class FakeProducer:
    """Records what is produced and confirms it at the next poll."""

    def __init__(self, _config: dict[str, object]) -> None:
        self.produced: list[dict[str, Any]] = []
        self._pending: list[Any] = []

    def produce(self, topic: str, **kwargs: Any) -> None:
        self.produced.append({"topic": topic, **kwargs})
        self._pending.append(kwargs["on_delivery"])

    def poll(self, _timeout: float = 0) -> int:
        pending, self._pending = self._pending, []
        for callback in pending:
            callback(None, None)
        return len(pending)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


def test_the_sinks_skip_what_they_held_before_the_crash(tmp_path: Path) -> None:
    exporter = Exporter(
        ExporterConfig(bootstrap_servers="127.0.0.1:9", publish_topic="out", archive_dir=tmp_path)
    )
    fake: list[FakeProducer] = []

    def factory(config: dict[str, object]) -> FakeProducer:
        fake.append(FakeProducer(config))
        return fake[0]

    sinks = exporter.sinks
    sinks.publisher = publisher = RecordPublisher({}, output_topic="out", producer_factory=factory)
    publisher.source_cluster_id = "abc"
    sinks.archive = ArchiveWriter(tmp_path)
    sinks.put(SinkPartition(2, SinceMarks().take(2), frozenset({11, 12}), frozenset({11})))
    for offset in (10, 11, 12, 13):
        sinks.publish(commit(2, offset))
        sinks.write_archive(commit(2, offset))
    publisher.poll(0)
    produced = fake[0].produced
    assert [dict(p["headers"])[HEADER_SOURCE_OFFSET] for p in produced] == [b"10", b"13"]
    assert dict(produced[0]["headers"]) == {
        HEADER_SOURCE_TOPIC: b"__consumer_offsets",
        HEADER_SOURCE_PARTITION: b"2",
        HEADER_SOURCE_OFFSET: b"10",
        HEADER_SOURCE_CLUSTER: b"abc",
    }
    # the skipped records are done: the checkpoint may pass them
    assert publisher.confirmed_positions() == {2: 14}
    sinks.archive.close()
    assert scan_archive(tmp_path, {}, MARGIN_MS) == {(2, 10), (2, 12), (2, 13)}
