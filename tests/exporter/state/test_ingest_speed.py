"""The speed-ups of the exporter's ingest and snapshots give the same answers as before.

* `LogEndHistory.lag_s` (a float, no objects) equals `lag_seconds(...).seconds`;
* a `PartitionTable` with spare capacity (amortised growth) snapshots exactly like one sized
  to its highest partition, whatever order the partitions arrive in;
* before ready the daemon serves a counters-only snapshot (no rows, lag or status).
"""

from __future__ import annotations

import random

from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.judge.snapshot import SnapshotBuilder
from offsetwatch.exporter.state.lag import LogEndHistory, lag_seconds
from offsetwatch.exporter.state.offset_state import OffsetState, PartitionTable

T0 = 1_700_000_000_000


def commit(group: str, topic: str, partition: int, offset: int, ts: int, meta: str = "") -> Record:
    return Record(
        1,
        OffsetCommitKey(group, topic, partition),
        3,
        OffsetCommitValue(offset, 5, meta, ts, -1, ZERO_UUID),
        timestamp=ts,
    )


def test_lag_s_equals_lag_seconds_everywhere() -> None:
    rng = random.Random(22)
    for _ in range(50):
        h = LogEndHistory(*rng.choice(((8, 2), (64, 16), (720, 90))))
        t, end = T0, rng.randrange(0, 50)
        for _ in range(rng.randrange(0, 200)):
            t += rng.choice((1, 500, 5_000, 30_000))
            end += rng.choice((0, 0, 1, 7, 1_000))
            h.record(t, end)
        for offset in range(-2, end + 3, max(1, end // 97)):
            for now in (t - 10_000, t, t + 1, t + 3_600_000):
                assert h.lag_s(offset, now) == lag_seconds(h, offset, now).seconds


def test_growth_leaves_spare_slots_absent() -> None:
    state = OffsetState()
    for p in range(1000):
        state.apply(commit("g", "t", p, p, T0))
    table = state.groups["g"].topics["t"]
    assert len(table) == 1000
    assert list(table.partitions()) == list(range(1000))
    # amortised: at most 1/8 + 8 spare slots, each absent
    assert 1000 <= len(table.present) <= 1000 + 1000 // 8 + 8
    assert table.present.count(0) == len(table.present) - 1000


def _rows(state: OffsetState, histories: dict[tuple[str, int], LogEndHistory], now: int) -> object:
    snapshot = SnapshotBuilder().build(state, histories, now, ready=True)
    return [
        (
            g.view.group_id,
            g.status,
            g.total_lag,
            g.max_lag_seconds,
            [
                (
                    t.topic,
                    list(t.partitions),
                    list(t.committed),
                    list(t.log_end),
                    list(t.lag),
                    list(t.lag_seconds),
                    list(t.status),
                    list(t.metadata),
                )
                for t in g.topics
            ],
        )
        for g in snapshot.groups
    ]


def test_spare_capacity_snapshots_like_an_exact_table() -> None:
    rng = random.Random(7)
    commits = [
        commit(f"g{g}", "t", p, rng.randrange(0, 900), T0 + rng.randrange(0, 60_000), m)
        for g in range(4)
        for p in rng.sample(range(300), 200 + 25 * g)
        for m in (("", "meta")[g % 2],)
    ]
    histories = {("t", p): LogEndHistory() for p in range(300)}
    for p, history in histories.items():
        history.record(T0, 100)
        history.record(T0 + 60_000, 1_000 + p[1])
    now = T0 + 90_000
    grown = OffsetState()
    grown.apply_many(commits)
    exact = OffsetState()
    exact.apply_many(commits)
    for group in exact.groups.values():
        for topic, table in list(group.topics.items()):
            # a table sized to its highest partition, as one-slot growth left it
            size = table.present.rfind(1) + 1
            trimmed = PartitionTable()
            for name in PartitionTable.__slots__:
                column = getattr(table, name)
                setattr(trimmed, name, None if column is None else column[:size])
            assert len(trimmed.present) == size
            group.topics[topic] = trimmed
    assert any(
        len(t.present) > t.present.rfind(1) + 1
        for g in grown.groups.values()
        for t in g.topics.values()
    )
    assert _rows(grown, histories, now) == _rows(exact, histories, now)


def test_catching_up_snapshot_has_counters_only() -> None:
    state = OffsetState()
    state.apply(commit("g", "t", 0, 5, T0))
    builder = SnapshotBuilder()
    snapshot = builder.catching_up(state, T0 + 1)
    assert not snapshot.ready
    assert snapshot.groups == ()
    assert snapshot.time_ms == T0 + 1
    assert snapshot.tracked_partitions == 0
