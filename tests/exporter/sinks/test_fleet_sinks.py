"""A fleet replica's sinks across its partitions' owners (exporter/sinks/fleet_sinks.py) and
the skip set's floors and closed partitions (exporter/sinks/resume_dedup.py), without Kafka:
the producer is a fake and the read-back of the publish topic is replaced."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.fleet.sink_commits import SinkCommit
from offsetwatch.exporter.sinks import fleet_sinks
from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.exporter.sinks.fleet_sinks import FleetSinks, archive_dirs
from offsetwatch.exporter.sinks.publisher import HEADER_SOURCE_OFFSET, RecordPublisher
from offsetwatch.exporter.sinks.resume_dedup import MARGIN_MS, SkipSet, scan_archive
from tests.exporter.sinks.test_resume_dedup import FakeProducer, commit


def test_a_floor_skips_everything_below_it_and_goes_once_read_past() -> None:
    skip = SkipSet()
    assert not skip
    skip.floor(3, 10)
    skip.floor(4, 0)  # nothing below 0: no floor
    assert skip
    assert [skip.take(3, o) for o in (0, 9, 10, 11)] == [True, True, False, False]
    assert not skip  # read past: the fast path again
    assert skip.skipped == 2


def test_a_closed_partition_skips_everything_until_it_is_taken() -> None:
    skip = SkipSet.of([(1, 5)])
    skip.close(2)
    assert skip.take(2, 0) and skip.take(2, 99)
    assert not skip.take(1, 4) and skip.take(1, 5)
    skip.clear()  # a rebuild: still not ours to write
    assert skip.take(2, 100)
    assert skip.take_partition(2) == frozenset()
    assert not skip.take(2, 101) and not skip


def _replica(tmp_path: Path, name: str) -> tuple[Exporter, FleetSinks, list[FakeProducer]]:
    exporter = Exporter(
        ExporterConfig(
            bootstrap_servers="127.0.0.1:9",
            publish_topic="out",
            archive_dir=tmp_path,
            fleet="f",
            fleet_replica=name,
            http_port=1,
        )
    )
    fake: list[FakeProducer] = []

    def factory(config: dict[str, object]) -> FakeProducer:
        fake.append(FakeProducer(config))
        return fake[0]

    sinks = exporter.sinks
    sinks.publisher = RecordPublisher({}, output_topic="out", producer_factory=factory)
    sinks.archive = ArchiveWriter(tmp_path / name)
    return exporter, FleetSinks(sinks, tmp_path), fake


def _offsets(fake: list[FakeProducer]) -> list[int]:
    return [int(dict(p["headers"])[HEADER_SOURCE_OFFSET]) for p in fake[0].produced]


def test_a_partition_gained_writes_only_what_its_earlier_owners_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the earlier owner r1 archived 10-12 after its commit at 10 and published 10-11
    earlier = ArchiveWriter(tmp_path / "r1")
    for offset in (8, 9, 10, 11, 12):
        record = commit(2, offset)
        earlier.write(exporter_canonical(record), (2, offset))
    earlier.close()
    scanned: list[Any] = []

    def published_since(*args: Any, **kwargs: Any) -> set[tuple[int, int]]:
        scanned.append((args[1], args[2], args[3]))
        return {(2, 10), (2, 11), (5, 3)}  # another partition's: not this gain's

    monkeypatch.setattr(fleet_sinks, "scan_topics", published_since)
    since = time.time_ns() // 1_000_000 - 5_000
    exporter, fleet, fake = _replica(tmp_path, "r0")
    sinks = exporter.sinks
    fleet.gain((SinkCommit(2, 10, since),), {}, "abc")
    assert scanned == [(["out"], {2: 10}, since)]
    assert (fleet.found_published, fleet.found_archived) == (2, 3)
    for offset in range(15):  # the new owner reads the partition from its start
        sinks.publish(commit(2, offset))
        sinks.write_archive(commit(2, offset))
    sinks.publisher.poll(0)  # type: ignore[union-attr]
    assert _offsets(fake) == [12, 13, 14]
    sinks.archive.close()
    assert scan_archive(tmp_path / "r0", {}, MARGIN_MS) == {(2, 13), (2, 14)}

    # a commit before the earlier owner's last record keeps its bound (that record was
    # written before this owner's marks); one past them all has this owner's own
    before = fleet.commits({2: 12}, {2: 15})
    assert before == [SinkCommit(2, 12, since)]
    past = fleet.commits({2: 15}, {2: 15})
    assert [(c.partition, c.offset) for c in past] == [(2, 15)]
    assert past[0].since_ms > since


def exporter_canonical(record: Any) -> dict[str, Any]:
    from offsetwatch.decoder.canonical import Canonical

    return Canonical().to_dict(record)


def test_a_commit_never_moves_behind_the_one_the_partition_came_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_sinks, "scan_topics", lambda *a, **k: set())
    exporter, fleet, _fake = _replica(tmp_path, "r0")
    fleet.gain((SinkCommit(4, 100, 1),), {}, None)
    for offset in range(40):  # still below the earlier owners' position
        exporter.sinks.publish(commit(4, offset))
    assert fleet.commits({4: 40}, {4: 40}) == []
    # handed over before reaching it: the earlier commit stands, nothing more is written
    assert fleet.hand_over((4,), {4: 40}, {4: 40}, timeout_s=1) == []
    exporter.sinks.publish(commit(4, 200))
    assert exporter.sinks.publisher is not None
    exporter.sinks.publisher.poll(0)


def test_a_hand_over_writes_nothing_more_and_commits_what_was_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_sinks, "scan_topics", lambda *a, **k: set())
    exporter, fleet, fake = _replica(tmp_path, "r0")
    sinks = exporter.sinks
    fleet.gain((SinkCommit(1, 0, 1), SinkCommit(3, 0, 1)), {}, None)
    for offset in range(5):
        sinks.publish(commit(1, offset))
        sinks.publish(commit(3, offset))
    commits = fleet.hand_over((1,), {1: 5, 3: 5}, {1: 5, 3: 5}, timeout_s=1)
    assert [(c.partition, c.offset) for c in commits] == [(1, 5)]
    for offset in (5, 6):  # records of it still in a batch the main loop ingests
        sinks.publish(commit(1, offset))
        sinks.write_archive(commit(1, offset))
    sinks.publish(commit(3, 5))
    sinks.publisher.poll(0)  # type: ignore[union-attr]
    assert len(fake[0].produced) == 11  # 5 + 5 + partition 3's sixth
    sinks.archive.close()
    assert scan_archive(tmp_path / "r0", {}, MARGIN_MS) == set()
    # the daemon drops the partition: a later gain of it writes again
    sinks.take(1)
    assert not sinks._published_skip.take(1, 7)


def test_every_replica_s_archive_is_read_back(tmp_path: Path) -> None:
    for name in ("r1", "r0", ".hidden", "date=2026-12-07"):
        (tmp_path / name).mkdir()
    assert archive_dirs(tmp_path) == [tmp_path, tmp_path / "r0", tmp_path / "r1"]
    assert archive_dirs(tmp_path / "missing") == [tmp_path / "missing"]
