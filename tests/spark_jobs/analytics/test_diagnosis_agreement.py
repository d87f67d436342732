"""The exporter and Spark diagnose the same history the same way.

One history of real-format `__consumer_offsets` records (RecordFactory bytes, decoded) with
four groups - one stuck member of three (classic), a rebalance storm, an offset reset of an
empty group, one stuck member of a KIP-848 group (records in Kafka 4.0's order) - goes

* through the exporter: `OffsetState` (the ingest), log ends sampled every 10 s, windows rolled
  and a snapshot built every 10 s, as the daemon does;
* into the lake: `commits`, `group_events` (spark_jobs/lake_group_events.py, as `compact` derives
  them from the canonical records) and `log_ends`, then `analyze`.

At the end of the history, the causes and suspects of the episodes still open equal the
exporter's diagnosis of their groups, and both count the same rebalances with the same joins
and leaves. The rebalance and per-episode checks run without Spark; one test runs the job.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.exporter.judge.diagnosis import Diagnosis
from offsetwatch.exporter.judge.snapshot import Snapshot, SnapshotBuilder
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.record_factory import KeyValue, Member, RecordFactory
from offsetwatch.spark_jobs.analytics.diagnosis import (
    _EVENT_COLUMNS,
    diagnose_episode,
    replay,
)
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.lake_group_events import GroupState, events_for_group

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MINUTE = 60_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
END = T0 + 38 * MINUTE
STEP = 10_000
PARTITIONS = 6
RATE = 10  # messages per second per partition


def log_end(partition: int, ts: int) -> int:
    return 1_000 + 100 * partition + RATE * (ts - T0) // 1000


def members(prefix: str, count: int) -> list[Member]:
    return [
        Member(
            f"{prefix}-m{i}",
            f"{prefix}-{i}",
            f"/10.1.{len(prefix)}.{i + 1}",
            (("orders", tuple(p for p in range(PARTITIONS) if p % count == i)),),
        )
        for i in range(count)
    ]


def kafka_order(factory: RecordFactory, records: list[KeyValue]) -> list[KeyValue]:
    """Member records before the epoch bump they cause, as Kafka 4.0 writes them."""
    codec = factory.codec
    return sorted(records, key=lambda kv: codec.decode(kv[0], kv[1]).key_type != 5)


@dataclass(slots=True)
class History:
    """Records in log order (one __consumer_offsets partition), each with its time."""

    factory: RecordFactory = field(default_factory=RecordFactory)
    timed: list[tuple[int, KeyValue]] = field(default_factory=list)

    def add(self, ts: int, *records: KeyValue) -> None:
        self.timed.extend((ts, record) for record in records)

    def commit(self, group: str, ts: int, offsets: dict[int, int]) -> None:
        for p, offset in offsets.items():
            self.add(ts, self.factory.commit(group, "orders", p, offset, ts))

    def records(self) -> list[Record]:
        codec = Codec()
        ordered = sorted(enumerate(self.timed), key=lambda item: (item[1][0], item[0]))
        out = []
        for offset, (_, (ts, (key, value))) in enumerate(ordered):
            record = codec.decode(key, value, 0, offset, ts)
            assert isinstance(record, Record)
            out.append(record)
        return out


@cache
def history() -> tuple[Record, ...]:
    h = History()
    f = h.factory
    # enricher: one stuck member of three (partitions 2 and 5 never move)
    h.add(T0, f.classic_group("enricher", 1, members("enricher", 3), T0))
    # indexer: a crash-looping instance rejoins every minute; nothing moves
    h.add(T0, f.classic_group("indexer", 1, members("indexer", 2), T0))
    for minute in range(1, 38):
        crashy = Member(f"crashy-{minute}", "crashy", "/10.9.9.9", (("orders", ()),))
        extra = [crashy] if minute % 2 else []
        ts = T0 + minute * MINUTE
        h.add(ts, f.classic_group("indexer", minute + 1, members("indexer", 2) + extra, ts))
    # reset: consumes, everyone leaves at 20 min, an offset reset to 0 at 30 min
    h.add(T0, f.classic_group("reset", 1, members("reset", 2), T0))
    h.add(T0 + 20 * MINUTE, f.classic_group("reset", 2, [], T0 + 20 * MINUTE))
    h.commit("reset", T0 + 30 * MINUTE, dict.fromkeys(range(PARTITIONS), 0))
    # kip: KIP-848, member 1 of 3 stuck (partitions 1 and 4)
    h.add(T0, *kafka_order(f, f.consumer_group("kip", 3, members("kip", 3), {"orders": 6})))
    for ts in range(T0, END + 1, 30_000):
        h.commit("enricher", ts, {p: 500 if p % 3 == 2 else log_end(p, ts) for p in range(6)})
        h.commit("indexer", ts, dict.fromkeys(range(PARTITIONS), 500))
        if ts < T0 + 20 * MINUTE:
            h.commit("reset", ts, {p: log_end(p, ts) for p in range(PARTITIONS)})
        h.commit("kip", ts, {p: 500 if p % 3 == 1 else log_end(p, ts) for p in range(6)})
    return tuple(h.records())


# -- the exporter ---------------------------------------------------------------------------


@cache
def exporter_end() -> tuple[Snapshot, OffsetState]:
    snapshots, state = exporter_run()
    return snapshots[END], state


@cache
def exporter_run() -> tuple[dict[int, Snapshot], OffsetState]:
    """Every snapshot (by time) of the replay, and the final state."""
    state = OffsetState()
    snapshots = {}
    histories = {("orders", p): LogEndHistory() for p in range(PARTITIONS)}
    builder = SnapshotBuilder()
    records = iter(history())
    pending = next(records, None)
    for now in range(T0, END + 1, STEP):
        for p, log in histories.items():
            log.record(now, log_end(p[1], now))
        while pending is not None and pending.timestamp <= now:
            state.apply(pending)
            pending = next(records, None)
        state.roll_windows(now, builder.status_config.window_ms)
        snapshots[now] = builder.build(state, histories, now, ready=True)
    return snapshots, state


def exporter_diagnosis(group: str) -> Diagnosis:
    found = exporter_end()[0].group(group)
    assert found is not None
    return found.diagnosis


def exporter_suspects(group: str) -> dict[str, set[tuple[str, int]]]:
    return {s.member_id: set(s.partitions) for s in exporter_diagnosis(group).suspects}


# -- the lake -------------------------------------------------------------------------------


@cache
def lake_events() -> dict[str, list[tuple[Any, ...]]]:
    """group -> its group_events rows (GROUP_EVENTS_SCHEMA without `date`)."""
    canonical = Canonical()
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in history():
        if record.key_type not in (0, 1):
            data = canonical.to_dict(record)
            by_group[data["group"]].append(data)
    return {
        group: [
            (
                e.group,
                e.group_type,
                e.event,
                e.ts,
                e.generation,
                e.state,
                e.member_id,
                e.client_id,
                e.client_host,
                e.detail,
                e.source_partition,
                e.source_offset,
            )
            for e in events_for_group(group, GroupState(), records)
        ]
        for group, records in by_group.items()
    }


def event_rows(group: str) -> list[tuple[Any, ...]]:
    """The rows `episode_diagnoses` reads (its _EVENT_COLUMNS)."""
    names = ("group", "group_type", "event", "ts", "generation", "state", "member_id")
    columns = (*names, "client_id", "client_host", "detail", "source_partition", "source_offset")
    index = [columns.index(name) for name in _EVENT_COLUMNS]
    return [tuple(row[i] for i in index) for row in lake_events()[group]]


# -- without Spark: the same rebalances, the same diagnosis of each episode ------------------


@pytest.mark.parametrize("group", ["enricher", "indexer", "reset", "kip"])
def test_both_count_the_same_rebalances_with_the_same_joins_and_leaves(group: str) -> None:
    exported = exporter_end()[1].groups[group].history
    assert exported is not None
    spark = replay(event_rows(group)).rebalances
    assert [
        (r.ts, r.generation, [j[0] for j in r.joined], [x[0] for x in r.left], r.members)
        for r in spark[-len(exported.rebalances) :]
    ] == [
        (
            r.time_ms,
            r.generation,
            [m.member_id for m in r.joined],
            [m.member_id for m in r.left],
            r.members,
        )
        for r in exported.rebalances
    ]
    assert len(spark) == exported.rebalances_total


def spark_side(group: str, kind: str, partition: int | None, start_ms: int) -> tuple[Any, Any]:
    return diagnose_episode(
        replay(event_rows(group)), kind, "orders", partition, start_ms, AnalyticsSettings()
    )


@pytest.mark.parametrize(("group", "stuck"), [("enricher", (2, 5)), ("kip", (1, 4))])
def test_a_stuck_member_is_named_alike(group: str, stuck: tuple[int, ...]) -> None:
    exported = exporter_diagnosis(group)
    assert exported.cause is not None and exported.cause.value == "stuck_member"
    union: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for p in stuck:
        cause, suspects = spark_side(group, "stall", p, T0 + 15 * MINUTE)
        assert cause == "stuck_member"
        for s in suspects:
            union[s["member_id"]] |= {(x["topic"], x["partition"]) for x in s["partitions"]}
    assert dict(union) == exporter_suspects(group)


def test_a_storm_is_named_alike() -> None:
    exported = exporter_diagnosis("indexer")
    assert exported.cause is not None and exported.cause.value == "rebalance_storm"
    cause, suspects = spark_side("indexer", "stall", 0, T0 + 15 * MINUTE)
    assert cause == "rebalance_storm"
    assert [(s["client_id"], s["host"]) for s in suspects] == [
        (s.client_id, s.host) for s in exported.suspects
    ]


def test_a_reset_of_an_empty_group_is_named_alike() -> None:
    exported = exporter_diagnosis("reset")
    assert exported.cause is not None and exported.cause.value == "rewind_by_reset"
    assert spark_side("reset", "rewind", 0, T0 + 30 * MINUTE) == ("rewind_by_reset", [])


# -- with Spark: the job's open episodes at the end --------------------------------------------


def _day(ts: int) -> dt.date:
    return dt.datetime.fromtimestamp(ts / 1000, dt.UTC).date()


@pytest.mark.spark
def test_the_spark_job_and_the_exporter_agree(spark: SparkSession) -> None:
    from offsetwatch.spark_jobs.analytics import analyze
    from offsetwatch.spark_jobs.lake_schema import (
        COMMITS_SCHEMA,
        GROUP_EVENTS_SCHEMA,
        LOG_ENDS_SCHEMA,
    )

    commits = []
    for r in history():
        if isinstance(r.key, OffsetCommitKey) and isinstance(r.value, OffsetCommitValue):
            k, v = r.key, r.value
            commits.append(
                (k.group, k.topic, k.partition, "commit", v.offset, v.leader_epoch, v.metadata,
                 v.commit_timestamp, None, r.timestamp, "none", r.partition, r.offset,
                 _day(r.timestamp))
            )  # fmt: skip
    events = [(*row, _day(row[3])) for rows in lake_events().values() for row in rows]
    ends = [
        ("orders", p, log_end(p, ts), ts, _day(ts))
        for p in range(PARTITIONS)
        for ts in range(T0, END + 1, STEP)
    ]
    result = analyze(
        spark.createDataFrame(commits, COMMITS_SCHEMA),
        spark.createDataFrame(ends, LOG_ENDS_SCHEMA),
        spark.createDataFrame(events, GROUP_EVENTS_SCHEMA),
    )
    episodes = [e for e in result.diagnosed_episodes.collect() if e.cause is not None]
    assert {e.group for e in episodes} == {"enricher", "indexer", "reset", "kip"}
    snapshots = exporter_run()[0]
    for e in episodes:
        # what the exporter said when the episode began (the alert is sent then)
        group = snapshots[e.start_ms].group(e.group)
        assert group is not None
        exported = group.diagnosis
        assert exported.cause is not None, e
        assert e.cause == exported.cause.value, (e, exported.reason)
        suspects = json.loads(e.suspects)
        if e.cause in ("stuck_member", "rewind_by_consumer"):
            # an episode is one partition: its suspect is that partition's owner
            owners = {s.member_id: set(s.partitions) for s in exported.suspects}
            [one] = suspects
            assert ("orders", e.partition) in owners[one["member_id"]]
        else:
            assert [(x["client_id"], x["host"]) for x in suspects] == [
                (x.client_id, x.host) for x in exported.suspects
            ]
    at_end = {(e.group, e.cause) for e in episodes if e.end_ms is None}
    assert at_end >= {
        ("enricher", "stuck_member"),
        ("kip", "stuck_member"),
        ("indexer", "rebalance_storm"),
        ("reset", "rewind_by_reset"),
    }
    # and the alerts `spark stream` sends carry them
    from offsetwatch.spark_jobs.alerts.build import alerts_from_episodes

    alerts = alerts_from_episodes(result.diagnosed_episodes).collect()
    stalled = [
        a
        for a in alerts
        if a.group == "enricher" and a.active and a.name == "OffsetwatchConsumerStalled"
    ]
    assert {a.partitions for a in stalled} == {"2", "5"}
    for a in stalled:
        assert (
            f"Cause: stuck_member; suspects: enricher-2 on /10.1.8.3 (enricher-m2) "
            f"[orders {a.partitions}]." in a.description
        ), a.description
