"""The archive on a real full filesystem (a small tmpfs this test mounts): a record counts as
written only once it is on disk, so no checkpoint passes a record that was only in a buffer,
and the failure is the archive's, naming its file.

Mounting needs root (CAP_SYS_ADMIN): elsewhere the tests skip, and fail under CI=true
(tests/full_disk.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.exporter.sinks.record_sinks import RecordSinks
from offsetwatch.exporter.sinks.resume_dedup import scan_archive
from offsetwatch.exporter.stats import PipelineStats
from tests.full_disk import fill, small_disk

__all__ = ["small_disk"]  # the fixture

ZERO_UUID = "A" * 22
#: ~600 KB of JSON lines: more than a nearly full disk takes, less than the empty one
RECORDS = 1000


def commit(partition: int, offset: int) -> Record:
    timestamp = 1_767_225_000_000 + offset
    return Record(
        1,
        OffsetCommitKey("a-group-with-a-long-name", "orders", offset % 50),
        3,
        OffsetCommitValue(offset, 5, "m" * 200, timestamp, -1, ZERO_UUID),
        partition=partition,
        offset=offset,
        timestamp=timestamp,
    )


def archived(directory: Path) -> set[int]:
    return {offset for _partition, offset in scan_archive(directory, {}, 0)}


@pytest.mark.parametrize("use_gzip", [False, True])
def test_no_checkpoint_passes_a_record_that_is_not_on_disk(
    small_disk: Path, use_gzip: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Records go to the archive while the disk fills; at every checkpoint, the process is
    "killed" (the writer dropped, as SIGKILL would) in a copy of the story: everything
    before the checkpointed position must then be in the files a restart salvages."""
    archive_dir = small_disk / "archive"
    config = ExporterConfig(
        bootstrap_servers="127.0.0.1:9", archive_dir=archive_dir, archive_gzip=use_gzip
    )
    sinks = RecordSinks(config, PipelineStats())
    sinks.open({})
    guard = sinks.guard("archive")
    filler = fill(small_disk, leave=64 * 1024)
    checkpoints: list[int] = []
    offset = 0
    with caplog.at_level(logging.WARNING):
        for _round in range(30):
            for _ in range(200):
                guard(commit(0, offset))
                offset += 1
            sinks.every_second()
            checkpoints.append(sinks.checkpoint_positions({0: offset})[0])
        health = guard.health
        assert health.failing_since_ms, "the disk never filled: the test proves nothing"
        assert str(archive_dir) in health.last_error and "No space left" in health.last_error
        assert "works again" not in caplog.text  # nothing was really written meanwhile
        # the last checkpoint, then a crash: the writer is dropped with its buffers
        last = checkpoints[-1]
        sinks.archive = None
    assert last < offset  # held back: the records after it were never on disk
    filler.unlink()
    ArchiveWriter(archive_dir, gzip=use_gzip).close()  # the restart's salvage
    assert set(range(last)) <= archived(archive_dir), "a checkpointed record was lost"
    assert checkpoints == sorted(checkpoints)


def test_space_freed_the_archive_writes_everything_and_says_so(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Full, then space again: the kept records and the buffered bytes are all written, the
    checkpoint reaches the end, and "works again" comes only then."""
    archive_dir = small_disk / "archive"
    sinks = RecordSinks(
        ExporterConfig(bootstrap_servers="127.0.0.1:9", archive_dir=archive_dir), PipelineStats()
    )
    sinks.open({})
    guard = sinks.guard("archive")
    filler = fill(small_disk, leave=32 * 1024)
    with caplog.at_level(logging.WARNING):
        for offset in range(RECORDS):
            guard(commit(0, offset))
        sinks.every_second()
        assert guard.health.failing_since_ms
        assert sinks.checkpoint_positions({0: RECORDS})[0] < RECORDS
        assert "works again" not in caplog.text
        filler.unlink()
        sinks.every_second()
        assert sinks.checkpoint_positions({0: RECORDS}) == {0: RECORDS}
        assert "archive sink works again" in caplog.text
    assert sinks.drain()
    assert archived(archive_dir) == set(range(RECORDS))
