"""Checkpoints: exact round trips of real state, torn/corrupt files, crashes mid-write, scale."""

from __future__ import annotations

import json
import os
import struct
import time
from array import array
from pathlib import Path
from typing import Any

import pytest

import offsetwatch.core.atomic as atomic_module
import offsetwatch.exporter.sinks.checkpoint as checkpoint_module
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.sinks.checkpoint import (
    COLUMNS,
    FORMAT_VERSION,
    MAGIC,
    CheckpointError,
    CheckpointMeta,
    CheckpointMismatch,
    CheckpointNotFound,
    LoadedCheckpoint,
    bootstrap_fingerprint,
    load_checkpoint,
    save_checkpoint,
)
from offsetwatch.exporter.state.offset_state import GroupState, OffsetState, PartitionTable
from tests.conformance_data import decode_run

META = CheckpointMeta.for_cluster("__consumer_offsets", "cluster-A", "kafka-1:9092,kafka-2:9092")

# --------------------------------------------------------------------------------- helpers


def conformance_records(conformance_dir: Path) -> list[Record]:
    decoded = decode_run(conformance_dir)
    records = [record for record in decoded if isinstance(record, Record)]
    assert len(records) == len(decoded), "the main run holds only known record types"
    return records


def state_of(records: list[Record]) -> tuple[OffsetState, dict[int, int]]:
    state = OffsetState()
    positions: dict[int, int] = {}
    for record in records:
        state.apply(record)
        positions[record.partition] = record.offset + 1
    return state, positions


def assert_same_state(actual: OffsetState, expected: OffsetState) -> None:
    assert actual.counters == expected.counters
    assert actual.window_clock == expected.window_clock
    assert list(actual.groups) == list(expected.groups)
    for group_id, want in expected.groups.items():
        got = actual.groups[group_id]
        assert got.group_id == want.group_id
        assert got.commits_total == want.commits_total, group_id
        assert got.last_record_ts == want.last_record_ts, group_id
        assert got.records == want.records, group_id
        assert list(got.records) == list(want.records), group_id
        assert list(got.topics) == list(want.topics), group_id
        for topic, want_table in want.topics.items():
            got_table = got.topics[topic]
            for name, code in COLUMNS:
                got_column: Any = getattr(got_table, name)
                want_column: Any = getattr(want_table, name)
                assert got_column == want_column, (group_id, topic, name)
                assert type(got_column).__name__ == ("bytearray" if code == "B" else "array")
                if code != "B":
                    assert got_column.typecode == want_column.typecode
            assert got_table.metadata == want_table.metadata, (group_id, topic)
            assert len(got_table) == len(want_table)


def commit(group: str, topic: str, partition: int, offset: int, metadata: str = "") -> Record:
    return Record(
        1,
        OffsetCommitKey(group, topic, partition),
        3,
        OffsetCommitValue(offset, 5, metadata, 1_700_000_000_000 + offset, -1, ZERO_UUID),
        partition=7,
        offset=offset,
        timestamp=1_700_000_000_000 + offset,
    )


@pytest.fixture(scope="module")
def records(conformance_dir: Path) -> list[Record]:
    return conformance_records(conformance_dir)


@pytest.fixture
def saved(tmp_path: Path, records: list[Record]) -> tuple[Path, OffsetState, dict[int, int]]:
    state, positions = state_of(records)
    path = tmp_path / "state.ckpt"
    save_checkpoint(path, state, positions, meta=META)
    return path, state, positions


# --------------------------------------------------------------------------------- round trips


def test_round_trip_of_the_conformance_state(
    saved: tuple[Path, OffsetState, dict[int, int]],
) -> None:
    path, state, positions = saved
    # the run exercises every part of the format
    assert any(g.records for g in state.groups.values())
    assert any(g.topics for g in state.groups.values())
    assert state.counters.tombstones > 0

    loaded = load_checkpoint(path, expect=META)

    assert isinstance(loaded, LoadedCheckpoint)
    assert loaded.positions == positions
    assert loaded.meta.topic == META.topic
    assert loaded.meta.cluster_id == META.cluster_id
    assert loaded.meta.bootstrap_fingerprint == META.bootstrap_fingerprint
    assert abs(loaded.meta.created_ms - time.time() * 1000) < 60_000
    assert_same_state(loaded.state, state)


def test_resuming_from_a_checkpoint_equals_reading_everything(
    tmp_path: Path, records: list[Record]
) -> None:
    """Checkpoint halfway, load, apply the rest: same as applying every record."""
    half = len(records) // 2
    first, positions = state_of(records[:half])
    path = tmp_path / "half.ckpt"
    save_checkpoint(path, first, positions, meta=META)
    resumed = load_checkpoint(path).state
    for record in records[half:]:
        resumed.apply(record)
    everything, _ = state_of(records)
    assert_same_state(resumed, everything)
    # windows roll the same way on both too, and the clock survives another round trip
    for now in (1_900_000_000_000, 1_900_000_300_000, 1_900_000_600_000):
        resumed.roll_windows(now, 600_000)
        everything.roll_windows(now, 600_000)
    assert_same_state(resumed, everything)
    save_checkpoint(path, resumed, positions, meta=META)
    assert_same_state(load_checkpoint(path).state, everything)


def test_metadata_strings_sparse_tables_and_odd_names(tmp_path: Path) -> None:
    state = OffsetState()
    state.apply(commit("g-ünïcödé", "orders", 9, 100, metadata="host=a;gen=3"))
    state.apply(commit("g-ünïcödé", "orders", 2, 50))
    state.apply(commit("g-ünïcödé", "orders", 2, 40))  # rewind
    state.apply(commit("g\udcff-raw-bytes", "t\udc80", 0, 1))  # invalid UTF-8 kept as escapes
    tombstone = Record(1, OffsetCommitKey("g-ünïcödé", "orders", 9), None, None, 7, 999, 1)
    state.apply(tombstone)
    table = state.groups["g-ünïcödé"].topics["orders"]
    assert table.metadata is not None and table.metadata[9] == "host=a;gen=3"
    assert table.present[9] == 0

    path = tmp_path / "c"
    save_checkpoint(path, state, {0: 5, 49: 17}, meta=CheckpointMeta())
    loaded = load_checkpoint(path)
    assert_same_state(loaded.state, state)
    assert loaded.positions == {0: 5, 49: 17}


def test_empty_state(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    save_checkpoint(path, OffsetState(), {}, meta=CheckpointMeta(created_ms=123))
    loaded = load_checkpoint(path)
    assert loaded.state.groups == {}
    assert loaded.positions == {}
    assert loaded.meta.created_ms == 123


def test_byteswapped_path_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The big-endian code path (swap on save and load) keeps the values."""
    state = OffsetState()
    for p in range(5):
        state.apply(commit("g", "t", p, 1_000_000_000_000 + p))
    plain = tmp_path / "plain"
    save_checkpoint(plain, state, {}, meta=CheckpointMeta(created_ms=1))
    monkeypatch.setattr(checkpoint_module, "_SWAP", True)
    swapped = tmp_path / "swapped"
    save_checkpoint(swapped, state, {}, meta=CheckpointMeta(created_ms=1))
    assert plain.read_bytes() != swapped.read_bytes()
    assert_same_state(load_checkpoint(swapped).state, state)


def test_columns_cover_every_partition_table_slot() -> None:
    """A new PartitionTable column must be added to the format (with a new version)."""
    assert {name for name, _ in COLUMNS} | {"metadata"} == set(PartitionTable.__slots__)
    table = PartitionTable()
    for name, code in COLUMNS:
        column = getattr(table, name)
        assert (code == "B") == isinstance(column, bytearray)
        if code != "B":
            assert column.typecode == code


# --------------------------------------------------------------------------------- bad files


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFound, match="no checkpoint at"):
        load_checkpoint(tmp_path / "nothing")


@pytest.mark.parametrize("keep", [0, 7, 31, 32, 100, -1])
def test_truncated_file(saved: tuple[Path, OffsetState, dict[int, int]], keep: int) -> None:
    path, _, _ = saved
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    with pytest.raises(CheckpointError, match=r"truncated|torn"):
        load_checkpoint(path)


def test_trailing_garbage(saved: tuple[Path, OffsetState, dict[int, int]]) -> None:
    path, _, _ = saved
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(CheckpointError, match="trailing garbage"):
        load_checkpoint(path)


@pytest.mark.parametrize("where", ["header", "directory", "columns", "records"])
def test_flipped_byte_is_caught_by_the_crc(
    saved: tuple[Path, OffsetState, dict[int, int]], where: str
) -> None:
    path, _, _ = saved
    data = bytearray(path.read_bytes())
    header_len = struct.unpack_from("<I", data, 12)[0]
    header = json.loads(bytes(data[32 : 32 + header_len]))
    lengths = dict(header["sections"])
    body = 32 + header_len
    position = {
        "header": 40,
        "directory": body + 10,
        "columns": body + lengths["directory"] + lengths["present"] + 3,
        "records": len(data) - 5,
    }[where]
    data[position] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="CRC mismatch"):
        load_checkpoint(path)


def test_unknown_format_version(saved: tuple[Path, OffsetState, dict[int, int]]) -> None:
    path, _, _ = saved
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 8, FORMAT_VERSION + 1)
    path.write_bytes(bytes(data))
    with pytest.raises(
        CheckpointError, match=r"format version 3; this offsetwatch reads version 2 .*newer"
    ):
        load_checkpoint(path)


def test_a_version_1_checkpoint_is_refused_so_the_daemon_rebuilds(
    saved: tuple[Path, OffsetState, dict[int, int]],
) -> None:
    """Version 1 had a tumbling status window; its columns do not describe the sliding one."""
    path, _, _ = saved
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 8, 1)
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"format version 1; .*older"):
        load_checkpoint(path)


@pytest.mark.parametrize("content", [b"hello world, not a checkpoint at all.....", b"{}"])
def test_not_a_checkpoint(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="not an offsetwatch checkpoint"):
        load_checkpoint(path)


def test_magic_detects_text_mode_mangling() -> None:
    assert MAGIC.endswith(b"\r\n")


# --------------------------------------------------------------------------------- identity


def test_checkpoint_of_another_cluster_is_refused(
    saved: tuple[Path, OffsetState, dict[int, int]],
) -> None:
    path, _, _ = saved
    other = CheckpointMeta.for_cluster("__consumer_offsets", "cluster-B", "kafka-1:9092")
    with pytest.raises(CheckpointMismatch, match=r"cluster 'cluster-A'.*cluster 'cluster-B'"):
        load_checkpoint(path, expect=other)


def test_checkpoint_of_another_topic_is_refused(
    saved: tuple[Path, OffsetState, dict[int, int]],
) -> None:
    path, _, _ = saved
    other = CheckpointMeta.for_cluster("copy_of_offsets", "cluster-A", "kafka-1:9092")
    with pytest.raises(CheckpointMismatch, match="topic '__consumer_offsets', not 'copy_of"):
        load_checkpoint(path, expect=other)


def test_same_cluster_id_with_other_bootstrap_servers_is_accepted(
    saved: tuple[Path, OffsetState, dict[int, int]],
) -> None:
    path, _, _ = saved
    moved = CheckpointMeta.for_cluster("__consumer_offsets", "cluster-A", "kafka-9:9093")
    assert load_checkpoint(path, expect=moved).state.groups


def test_without_cluster_ids_the_bootstrap_fingerprint_decides(tmp_path: Path) -> None:
    path = tmp_path / "c"
    meta = CheckpointMeta.for_cluster("__consumer_offsets", None, "a:1,b:2")
    save_checkpoint(path, OffsetState(), {}, meta=meta)
    same = CheckpointMeta.for_cluster("__consumer_offsets", None, " B:2 , a:1")
    load_checkpoint(path, expect=same)
    other = CheckpointMeta.for_cluster("__consumer_offsets", None, "c:3")
    with pytest.raises(CheckpointMismatch, match="other bootstrap servers"):
        load_checkpoint(path, expect=other)


def test_bootstrap_fingerprint_ignores_order_case_and_spaces() -> None:
    assert bootstrap_fingerprint("A:1, b:2") == bootstrap_fingerprint("b:2,a:1")
    assert bootstrap_fingerprint("a:1") != bootstrap_fingerprint("a:2")


# --------------------------------------------------------------------------------- crashes


def test_failed_replace_leaves_previous_checkpoint_and_no_temp(
    saved: tuple[Path, OffsetState, dict[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, state, positions = saved
    before = path.read_bytes()

    def crash(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    state.apply(commit("new-group", "t", 0, 1))
    with pytest.raises(OSError, match="No space"):
        save_checkpoint(path, state, {0: 10**9}, meta=META)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert load_checkpoint(path).positions == positions


def test_crash_during_fsync_leaves_previous_checkpoint(
    saved: tuple[Path, OffsetState, dict[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, positions = saved

    def crash(_fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError):
        save_checkpoint(path, OffsetState(), {0: 1}, meta=META)
    monkeypatch.undo()
    assert load_checkpoint(path).positions == positions


def test_temp_file_left_by_a_killed_writer_is_ignored_then_removed(
    saved: tuple[Path, OffsetState, dict[int, int]],
) -> None:
    path, state, positions = saved
    # what a kill -9 in the middle of save leaves: a half-written temp file next to it
    half = path.read_bytes()[: path.stat().st_size // 2]
    leftover = path.with_name(f".{path.name}.4242.123456789.tmp")
    leftover.write_bytes(half)

    loaded = load_checkpoint(path)
    assert loaded.positions == positions
    assert_same_state(loaded.state, state)

    save_checkpoint(path, state, {0: 1}, meta=META)
    assert not leftover.exists()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert load_checkpoint(path).positions == {0: 1}


def test_save_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename is the only way the target changes, and the directory is fsynced after."""
    calls: list[str] = []
    real_replace = os.replace
    real_fsync_directory = atomic_module.fsync_directory

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append(f"replace {Path(src).name} -> {Path(dst).name}")
        real_replace(src, dst)

    def fsync_directory(directory: Path) -> None:
        calls.append("fsync dir")
        real_fsync_directory(directory)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(atomic_module, "fsync_directory", fsync_directory)
    save_checkpoint(tmp_path / "c", OffsetState(), {}, meta=META)
    assert len(calls) == 2
    assert calls[0].startswith("replace .c.") and calls[0].endswith(".tmp -> c")
    assert calls[1] == "fsync dir"


# --------------------------------------------------------------------------------- scale


def big_state(groups: int, topics: int, partitions: int) -> OffsetState:
    """groups x topics x partitions committed partitions, columns filled directly."""
    state = OffsetState()
    offsets = array("q", range(10_000, 10_000 + partitions))
    times = array("q", range(1_700_000_000_000, 1_700_000_000_000 + partitions))
    epochs = array("i", [3] * partitions)
    never = array("q", [-1] * partitions)
    present = bytes([1]) * partitions
    for g in range(groups):
        group = GroupState(f"consumer-group-{g:06d}", commits_total=partitions * topics)
        group.last_record_ts = 1_700_000_000_000
        for t in range(topics):
            table = PartitionTable()
            table.present = bytearray(present)
            table.committed = array("q", offsets)
            table.commit_ts = array("q", times)
            table.leader_epoch = array("i", epochs)
            table.window_offset = array("q", offsets)
            table.window_commits = array("i", epochs)
            table.next_offset = array("q", offsets)
            table.next_commits = array("i", epochs)
            table.bucket_offset = array("q", offsets)
            table.bucket_commits = array("i", epochs)
            table.first_commit_ts = array("q", times)
            table.rewind_ts = array("q", never)
            table.move_ts = array("q", times)
            group.topics[f"topic-{(g * topics + t) % 5000:05d}"] = table
        state.groups[group.group_id] = group
    return state


@pytest.mark.parametrize(
    ("groups", "topics", "partitions"),
    [(200, 10, 50), (2_000, 5, 10)],
    ids=["few-big-tables", "many-small-tables"],
)
def test_a_large_state_round_trips(
    tmp_path: Path, groups: int, topics: int, partitions: int
) -> None:
    """100,000 partitions, in large and in small (group, topic) tables. (Save and load times
    at 1,000,000: benchmarks/exporter.py.)"""
    state = big_state(groups, topics, partitions)
    assert state.tracked_count() == 100_000
    path = tmp_path / "big.ckpt"
    positions = {p: 10**9 + p for p in range(50)}
    save_checkpoint(path, state, positions, meta=META)
    loaded = load_checkpoint(path, expect=META)
    assert loaded.state.tracked_count() == 100_000
    assert loaded.positions == positions
    assert_same_state(loaded.state, state)
