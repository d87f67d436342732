"""Share-partition state of the exporter: Kafka's combiner, the store, rows and statuses.

The combiner cases are those of Kafka's own PersisterStateBatchCombiner (one per branch of
its merge); the store and row tests drive the pure code with decoded records.
"""

from __future__ import annotations

import math

import pytest

from offsetwatch.decoder.records import (
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateValue,
    StateBatch,
)
from offsetwatch.decoder.share_combine import combine
from offsetwatch.decoder.share_state import ShareStateCodec
from offsetwatch.exporter.judge.group_views import GroupView, MemberView
from offsetwatch.exporter.judge.share_snapshot import ShareStatusConfig, share_group
from offsetwatch.exporter.judge.status import Status
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.share_ingest import ShareIngestor
from offsetwatch.exporter.state.share_state import ShareStateStore

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


@pytest.mark.parametrize(
    ("old", "new", "start", "expected"),
    [
        # the start offset prunes and cuts
        ([(100, 109, 1, 0)], [], 105, [(105, 109, 1, 0)]),
        ([(100, 104, 1, 2)], [], 110, []),
        # -1: nothing pruned
        ([(100, 104, 1, 2)], [], -1, [(100, 104, 1, 2)]),
        # same info, contiguous: one batch
        ([(100, 104, 1, 2)], [(105, 109, 1, 2)], 100, [(100, 109, 1, 2)]),
        # same first offset, acknowledged part wins, the rest stays available
        ([(100, 109, 1, 0)], [(100, 104, 1, 2)], 100, [(100, 104, 1, 2), (105, 109, 1, 0)]),
        # same range: the higher delivery info wins
        ([(100, 109, 1, 0)], [(100, 109, 2, 0)], 100, [(100, 109, 2, 0)]),
        # a higher-priority batch inside another splits it in three
        (
            [(100, 119, 1, 0)],
            [(105, 109, 2, 4)],
            100,
            [(100, 104, 1, 0), (105, 109, 2, 4), (110, 119, 1, 0)],
        ),
        # a lower-priority batch inside another disappears
        ([(100, 119, 2, 0)], [(105, 109, 1, 2)], 100, [(100, 119, 2, 0)]),
        # last offsets aligned
        ([(100, 119, 1, 0)], [(110, 119, 1, 2)], 100, [(100, 109, 1, 0), (110, 119, 1, 2)]),
        # candidate reaches further, higher priority
        ([(100, 109, 1, 0)], [(105, 114, 2, 0)], 100, [(100, 104, 1, 0), (105, 114, 2, 0)]),
        # candidate reaches further, lower priority: only its tail survives
        ([(100, 109, 2, 0)], [(105, 114, 1, 0)], 100, [(100, 109, 2, 0), (110, 114, 1, 0)]),
        # disjoint batches stay apart, in order
        ([(100, 104, 1, 2)], [(110, 114, 1, 0)], 100, [(100, 104, 1, 2), (110, 114, 1, 0)]),
    ],
)
def test_combine_like_kafka(
    old: list[tuple[int, int, int, int]],
    new: list[tuple[int, int, int, int]],
    start: int,
    expected: list[tuple[int, int, int, int]],
) -> None:
    assert combine(old, new, start) == expected


def _batch(first: int, last: int, state: int, count: int) -> StateBatch:
    return StateBatch(first, last, state, count)


def _snapshot(
    start: int, *batches: StateBatch, ts: int = 1_000, partition: int = 0
) -> ShareStateRecord:
    value = ShareSnapshotValue(0, 1, 0, start, tuple(batches))
    return ShareStateRecord(0, SharePartitionKey("g", TOPIC_ID, partition), 0, value, 0, 0, ts)


def _update(
    start: int, *batches: StateBatch, ts: int = 2_000, partition: int = 0
) -> ShareStateRecord:
    value = ShareUpdateValue(0, -1, start, tuple(batches))
    return ShareStateRecord(1, SharePartitionKey("g", TOPIC_ID, partition), 0, value, 0, 0, ts)


def test_update_applies_to_snapshot_and_counts() -> None:
    store = ShareStateStore()
    store.apply(_snapshot(100, _batch(100, 109, 0, 1)))
    store.apply(_update(-1, _batch(100, 104, 2, 1), _batch(105, 106, 4, 1)))
    store.apply(_update(103, _batch(107, 107, 0, 3)))
    p = store.partitions[("g", TOPIC_ID, 0)]
    assert p.start_offset == 103
    assert p.batches == [(103, 104, 1, 2), (105, 106, 1, 4), (107, 107, 3, 0), (108, 109, 1, 0)]
    assert p.counts() == (3, 2, 2, 0)
    assert p.max_delivery_count() == 3
    assert p.oldest_pending() == 107
    assert store.applied == {"share_snapshot": 1, "share_update": 2}
    assert not any(store.errors.values())


def test_bad_input_is_counted_and_shown() -> None:
    store = ShareStateStore()
    # an update before any snapshot: applied as Kafka does, counted
    store.apply(_update(50, _batch(50, 59, 0, 1)))
    # a batch running backwards: left out, counted; an unknown state: kept, counted
    store.apply(_update(-1, _batch(70, 60, 2, 1), _batch(60, 61, 9, 1)))
    p = store.partitions[("g", TOPIC_ID, 0)]
    assert p.start_offset == 50
    assert p.counts() == (10, 0, 0, 2)
    assert store.errors == {
        "update_without_snapshot": 1,
        "backwards_batch": 1,
        "unknown_delivery_state": 1,
    }
    assert p.problems == store.errors
    # a tombstone removes the partition
    store.apply(ShareStateRecord(0, SharePartitionKey("g", TOPIC_ID, 0), None, None, 0, 0, 3))
    assert not store.partitions


def test_undecodable_record_is_quarantined_and_counted() -> None:
    class Message:
        def __init__(self, key: bytes, value: bytes | None, offset: int) -> None:
            self._k, self._v, self._o = key, value, offset

        def partition(self) -> int:
            return 3

        def offset(self) -> int:
            return self._o

        def timestamp(self) -> tuple[int, int]:
            return 1, 5

        def key(self) -> bytes:
            return self._k

        def value(self) -> bytes | None:
            return self._v

    codec = ShareStateCodec()
    key, value = codec.encode(_snapshot(10, _batch(10, 12, 0, 1)))
    quarantined = []
    ingestor = ShareIngestor(ShareStateStore(), quarantine=[quarantined.append])
    assert ingestor.ingest([Message(key, b"\x00", 7), Message(key, value, 8)]) == 2
    assert len(quarantined) == 1 and quarantined[0].offset == 7
    assert sum(ingestor.decode_errors.values()) == 1
    assert ingestor.positions == {3: 9}
    assert ingestor.store.partitions[("g", TOPIC_ID, 0)].start_offset == 10


def test_checkpoint_round_trip() -> None:
    store = ShareStateStore()
    store.apply(_snapshot(100, _batch(100, 109, 0, 2)))
    store.apply(_update(-1, _batch(60, 50, 2, 1)))
    store.roll_windows(10_000, 1_000)
    again = ShareStateStore.from_json(store.to_json())
    assert again.to_json() == store.to_json()
    assert again.partitions == store.partitions


def _view(members: int) -> GroupView:
    return GroupView(
        "g",
        "SHARE",
        "STABLE" if members else "EMPTY",
        "share",
        "",
        1,
        1,
        False,
        tuple(
            MemberView(f"m{i}", f"c{i}", "/127.0.0.1", None, None, 1, (("t", (0,)),))
            for i in range(members)
        ),
    )


def _rows(store: ShareStateStore, history: LogEndHistory | None, members: int, now: int) -> object:
    histories = {} if history is None else {("t", 0): history}
    return share_group(
        None,
        _view(members),
        store.groups()["g"],
        histories,
        now,
        store.window_clock.window_ms,
        ShareStatusConfig(window_ms=1_000, delivery_limit=3),
        {TOPIC_ID: "t"},
    )


def test_lag_status_and_poison() -> None:
    store = ShareStateStore()
    store.apply(_snapshot(100, _batch(100, 104, 2, 1), _batch(105, 105, 4, 3), ts=0))
    history = LogEndHistory()
    history.record(0, 100)
    history.record(1_000, 120)
    group = _rows(store, history, 1, 1_500)
    (row,) = group.partitions  # type: ignore[attr-defined]
    # KIP-1226: 120 - 100 - 5 acknowledged - 1 archived
    assert row.lag == 14 and row.acknowledged == 5 and row.archived == 1
    assert row.poison == ((105, 105, 3, 4),)
    assert row.status is Status.WARN and group.diagnosis.cause.value == "poison_records"  # type: ignore[attr-defined]
    assert row.lag_seconds > 0
    # no members: STOP
    assert _rows(store, history, 0, 1_500).status is Status.STOP  # type: ignore[attr-defined]
    # unknown log end: ERR, lag unknown
    unknown = _rows(store, None, 1, 1_500).partitions[0]  # type: ignore[attr-defined]
    assert unknown.status is Status.ERR and unknown.lag == -1 and math.isnan(unknown.lag_seconds)


def test_stall_when_start_offset_does_not_move() -> None:
    store = ShareStateStore()
    store.apply(_snapshot(100, ts=0))
    history = LogEndHistory()
    history.record(0, 110)
    history.record(5_000, 110)
    store.roll_windows(1, 1_000)
    store.roll_windows(2_000, 1_000)
    assert _rows(store, history, 1, 2_000).status is Status.STALL  # type: ignore[attr-defined]
    store.apply(_update(110, ts=2_100))
    assert _rows(store, history, 1, 2_200).status is Status.OK  # type: ignore[attr-defined]


def test_a_window_start_before_the_history_is_bounded_by_its_first_sample() -> None:
    # Start-up: the window start predates the first log-end sample. One with nothing waiting
    # says nothing waited then either (a log end never goes down), so the records that came
    # since are not a STALL yet; read as unknown, the queue went STALL, then OK at the next
    # boundary (no backlog there), then STALL.
    store = ShareStateStore()
    store.apply(_snapshot(100, ts=0))
    store.roll_windows(1, 1_000)
    store.roll_windows(2_000, 1_000)
    assert store.window_clock.window_ms == 1
    caught_up = LogEndHistory()
    caught_up.record(500, 100)
    caught_up.record(1_500, 110)
    assert _rows(store, caught_up, 1, 2_000).status is Status.OK  # type: ignore[attr-defined]
    # a first sample with records waiting bounds nothing: unknown, as before the history
    behind = LogEndHistory()
    behind.record(500, 105)
    behind.record(1_500, 110)
    assert _rows(store, behind, 1, 2_000).status is Status.STALL  # type: ignore[attr-defined]


def test_uninitialised_start_counts_lag_from_offset_zero() -> None:
    # Kafka 4.0 writes start -1 until it persists a share partition's state (acquired records
    # are not persisted): the real-broker test saw lag 4 for 3 held records (3 - (-1))
    store = ShareStateStore()
    store.apply(_snapshot(-1, ts=0))
    history = LogEndHistory()
    history.record(0, 3)
    (row,) = _rows(store, history, 1, 500).partitions  # type: ignore[attr-defined]
    assert row.start_offset == -1 and row.lag == 3


def test_state_past_the_sampled_log_end_proves_the_log_end() -> None:
    """A snapshot newer than the last log-end sample holds batches past it: the records
    exist, so the log end is at least one past the last batch. The demo read 0 lag with 10
    records waiting (log end 5650, batches up to 5679)."""
    store = ShareStateStore()
    store.apply(_snapshot(5650, _batch(5650, 5659, 0, 2), _batch(5665, 5679, 2, 1), ts=0))
    history = LogEndHistory()
    history.record(0, 5650)
    (row,) = _rows(store, history, 1, 500).partitions  # type: ignore[attr-defined]
    # 5680 - 5650 - 15 acknowledged; 10 available and 5 not yet delivered wait
    assert (row.log_end, row.lag) == (5680, 15)
