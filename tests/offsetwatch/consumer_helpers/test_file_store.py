"""FileOffsetStore: atomic per-partition files, damage detected, a failed save keeps the old."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from offsetwatch.consumer_helpers import (
    ConsumerHelperError,
    FileOffsetStore,
    StoredPartition,
    file_store,
)


def test_round_trip(tmp_path: Path) -> None:
    store = FileOffsetStore(tmp_path / "offsets")
    entries = {
        ("orders", 0): StoredPartition(42, b"\x00\xffbinary\nstate"),
        ("orders.v2-x", 11): StoredPartition(0, b""),
    }
    store.save(entries)
    assert store.load([("orders", 0), ("orders.v2-x", 11), ("orders", 1)]) == entries
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == [
        "orders-0.offset",
        "orders.v2-x-11.offset",
    ]
    store.save({("orders", 0): StoredPartition(43, b"next")})
    assert FileOffsetStore(tmp_path / "offsets").load([("orders", 0)]) == {
        ("orders", 0): StoredPartition(43, b"next")
    }


def test_each_save_fsyncs_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(file_store, "fsync_directory", synced.append)
    store = FileOffsetStore(tmp_path)
    store.save({("t", 0): StoredPartition(1, b"a"), ("t", 1): StoredPartition(2, b"b")})
    store.save({})
    assert synced == [tmp_path]


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_save_leaves_the_previous_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    store = FileOffsetStore(tmp_path)
    store.save({("t", 0): StoredPartition(10, b"old state")})

    def crash(*args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError, match="disk gone"):
        store.save({("t", 0): StoredPartition(20, b"new state")})
    monkeypatch.undo()
    assert store.load([("t", 0)]) == {("t", 0): StoredPartition(10, b"old state")}


def test_damage_is_reported_with_the_file(tmp_path: Path) -> None:
    store = FileOffsetStore(tmp_path)
    store.save({("t", 0): StoredPartition(10, b"state bytes")})
    path = store.path_of(("t", 0))
    good = path.read_bytes()

    path.write_bytes(good[:-1] + b"X")
    with pytest.raises(ConsumerHelperError, match=r"t-0\.offset: damaged"):
        store.load([("t", 0)])
    path.write_bytes(good[:-3])
    with pytest.raises(ConsumerHelperError, match="damaged"):
        store.load([("t", 0)])
    path.write_bytes(b"hello\n")
    with pytest.raises(ConsumerHelperError, match="not an offsetwatch offset-store file"):
        store.load([("t", 0)])
    store.path_of(("t", 1)).write_bytes(good)
    with pytest.raises(ConsumerHelperError, match=r"holds t\[0\], not t\[1\]"):
        store.load([("t", 1)])
