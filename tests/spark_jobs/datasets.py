"""Deterministic lake tables (commits, group_events, log_ends) from compact scenario scripts.

A `ScenarioBuilder` describes producers (messages per second per topic-partition, in phases)
and what each group does (follow the log end, stick at one offset, rewind, stop, rebalance,
get deleted); `build()` turns that into rows in the lake schemas (spark_jobs/lake_schema.py)
with log-end samples every `sample_every_ms`, and `frames()` into DataFrames. Record order in
`__consumer_offsets` (source_offset) follows time, as on a real broker.

`known_episodes()` is the reference history: one group per kind of behaviour with the
episodes each one must (and must not) produce - see its docstring.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from offsetwatch.spark_jobs.lake_schema import (
    COMMITS_SCHEMA,
    GROUP_EVENTS_SCHEMA,
    LOG_ENDS_SCHEMA,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MINUTE = 60_000
#: 2026-01-01T00:00:00Z: scenario times are minutes after it
T0 = 1_767_225_600_000


def at(minutes: float) -> int:
    """Epoch ms `minutes` after T0."""
    return T0 + round(minutes * MINUTE)


def day_of(ts: int) -> dt.date:
    return dt.datetime.fromtimestamp(ts / 1000, dt.UTC).date()


@dataclass(frozen=True, slots=True)
class Commit:
    group: str
    topic: str
    partition: int
    ts: int
    offset: int | None  # None: the offset was deleted
    txn: str = "none"


@dataclass(frozen=True, slots=True)
class GroupEvent:
    group: str
    event: str
    ts: int
    generation: int | None = None
    state: str | None = None
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class LogEnd:
    topic: str
    partition: int
    ts: int
    offset: int


@dataclass(frozen=True, slots=True)
class Scenario:
    commits: tuple[Commit, ...]
    group_events: tuple[GroupEvent, ...]
    log_ends: tuple[LogEnd, ...]
    start_ms: int
    end_ms: int


class LakeFrames(NamedTuple):
    commits: DataFrame
    group_events: DataFrame
    log_ends: DataFrame


@dataclass(slots=True)
class _Producer:
    #: (from_ms, messages per second), ascending
    phases: list[tuple[int, float]]
    offset0: int


@dataclass(slots=True)
class ScenarioBuilder:
    start_ms: int = T0
    end_ms: int = T0 + 180 * MINUTE
    sample_every_ms: int = 10_000
    _producers: dict[tuple[str, int], _Producer] = field(default_factory=dict)
    _commits: list[Commit] = field(default_factory=list)
    _events: list[GroupEvent] = field(default_factory=list)

    # -- producers ---------------------------------------------------------------------------

    def produce(
        self, topic: str, partition: int, phases: list[tuple[int, float]], offset0: int = 0
    ) -> ScenarioBuilder:
        """A topic-partition whose log end starts at offset0 at start_ms and grows at each
        phase's rate (messages/s) from the phase's start; rate 0 is an idle stretch."""
        self._producers[(topic, partition)] = _Producer(sorted(phases), offset0)
        return self

    def log_end(self, topic: str, partition: int, ts: int) -> int:
        """The true log end at ts (messages appended in [start_ms, ts])."""
        producer = self._producers[(topic, partition)]
        total = 0.0
        bounds = [*producer.phases, (max(ts, self.end_ms) + 1, 0.0)]
        for (begin, rate), (end, _) in itertools.pairwise(bounds):
            begin = max(begin, self.start_ms)
            if ts <= begin:
                break
            total += rate * (min(ts, end) - begin) / 1000
        return producer.offset0 + int(total)

    # -- consumers ---------------------------------------------------------------------------

    def commit(self, group: str, topic: str, partition: int, ts: int, offset: int | None) -> None:
        self._commits.append(Commit(group, topic, partition, ts, offset))

    def follow(
        self,
        group: str,
        topic: str,
        partition: int,
        start_ms: int,
        end_ms: int,
        every_ms: int = 5_000,
        behind_ms: int = 2_000,
    ) -> ScenarioBuilder:
        """Commit every `every_ms` in [start, end) the log end of `behind_ms` earlier."""
        for ts in range(start_ms, end_ms, every_ms):
            self.commit(group, topic, partition, ts, self.log_end(topic, partition, ts - behind_ms))
        return self

    def hold(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        start_ms: int,
        end_ms: int,
        every_ms: int = 5_000,
    ) -> ScenarioBuilder:
        """Keep committing the same offset (a consumer stuck on a message, or auto-commit of
        an idle consumer)."""
        for ts in range(start_ms, end_ms, every_ms):
            self.commit(group, topic, partition, ts, offset)
        return self

    def catch_up(
        self,
        group: str,
        topic: str,
        partition: int,
        from_offset: int,
        start_ms: int,
        end_ms: int,
        rate: float,
        every_ms: int = 5_000,
        behind_ms: int = 2_000,
    ) -> ScenarioBuilder:
        """Consume from from_offset at `rate` messages/s until level with the log end of
        `behind_ms` earlier, then follow it; commit every `every_ms` in [start, end)."""
        for ts in range(start_ms, end_ms, every_ms):
            reached = from_offset + int(rate * (ts - start_ms) / 1000)
            level = self.log_end(topic, partition, ts - behind_ms)
            self.commit(group, topic, partition, ts, min(reached, level))
        return self

    def event(self, group: str, event: str, ts: int, **fields: object) -> ScenarioBuilder:
        self._events.append(GroupEvent(group, event, ts, **fields))  # type: ignore[arg-type]
        return self

    def join(self, group: str, ts: int, members: int = 1, generation: int = 1) -> ScenarioBuilder:
        """A classic group forms: members join, a generation, state Stable."""
        for i in range(members):
            self.event(group, "member_join", ts, member_id=f"{group}-m{i}")
        self.event(group, "generation", ts, generation=generation)
        return self.event(group, "state", ts, state="Stable")

    def delete_group(self, group: str, ts: int) -> ScenarioBuilder:
        return self.event(group, "group_deleted", ts)

    # -- output ------------------------------------------------------------------------------

    def build(self) -> Scenario:
        samples = [
            LogEnd(topic, partition, ts, self.log_end(topic, partition, ts))
            for (topic, partition) in sorted(self._producers)
            for ts in range(self.start_ms, self.end_ms + 1, self.sample_every_ms)
        ]
        return Scenario(
            tuple(sorted(self._commits, key=lambda c: (c.ts, c.group, c.topic, c.partition))),
            tuple(self._events),
            tuple(samples),
            self.start_ms,
            self.end_ms,
        )


def frames(spark: SparkSession, scenario: Scenario) -> LakeFrames:
    """The scenario as lake tables. One __consumer_offsets partition (0) holds everything,
    in time order (events before commits at the same instant)."""
    ordered: list[tuple[int, int, int, Commit | GroupEvent]] = [
        (e.ts, 0, i, e) for i, e in enumerate(scenario.group_events)
    ] + [(c.ts, 1, i, c) for i, c in enumerate(scenario.commits)]
    ordered.sort(key=lambda row: row[:3])
    commits: list[tuple[object, ...]] = []
    events: list[tuple[object, ...]] = []
    for source_offset, (_, _, _, row) in enumerate(ordered):
        if isinstance(row, Commit):
            kind = "commit" if row.offset is not None else "delete"
            commit_ts = row.ts if row.offset is not None else None
            commits.append(
                (row.group, row.topic, row.partition, kind, row.offset, 0, "",
                 commit_ts, None, row.ts, row.txn, 0, source_offset, day_of(row.ts))
            )  # fmt: skip
        else:
            events.append(
                (row.group, "classic", row.event, row.ts, row.generation, row.state,
                 row.member_id, None, None, None, 0, source_offset, day_of(row.ts))
            )  # fmt: skip
    log_ends = [(s.topic, s.partition, s.offset, s.ts, day_of(s.ts)) for s in scenario.log_ends]
    return LakeFrames(
        spark.createDataFrame(commits, COMMITS_SCHEMA),
        spark.createDataFrame(events, GROUP_EVENTS_SCHEMA),
        spark.createDataFrame(log_ends, LOG_ENDS_SCHEMA),
    )


def known_episodes() -> ScenarioBuilder:
    """Three hours (T0 .. T0+180 min), log ends sampled every 10 s, commits every 5 s of the
    log end 2 s earlier unless said otherwise; status window 10 min (the exporter's).

    group       topic/partition   behaviour                              episodes
    healthy     orders/0 (10/s)   follows all along                      none
    idle        audit/0 (idle)    caught up; stops committing at 30 min  none
    staller     payments/0 (10/s) stuck at one offset 60..90 min         stall, lag_slo
    stopper     shipments/0 (10/s) no commit after 100 min               stop, lag_slo (open)
    rewinder    clicks/0 (10/s)   rewinds 2000 offsets at 120 min        rewind
    stormy      events/0 (10/s)   7 rebalances 30 s apart from 30 min    rebalance_storm
    gone        orders/0          stops at 40 min, deleted at 45 min     none
    doomed      payments/0        stuck from 20 min, deleted at 50 min   stall, lag_slo (end 50)
    slowpoke    metrics/0 (10/s)  commits every 60 s from 150 min        commit_rate_anomaly
    """
    b = ScenarioBuilder()
    start, end = b.start_ms, b.end_ms
    for topic in ("orders", "payments", "shipments", "clicks", "events", "metrics"):
        b.produce(topic, 0, [(start, 10.0)])
    b.produce("audit", 0, [(start, 0.0)], offset0=500)

    b.join("healthy", start).follow("healthy", "orders", 0, start, end)

    b.join("idle", start).hold("idle", "audit", 0, 500, start, at(30))

    stuck = b.log_end("payments", 0, at(60) - 2_000)
    b.join("staller", start).follow("staller", "payments", 0, start, at(60))
    b.hold("staller", "payments", 0, stuck, at(60), at(90))
    b.follow("staller", "payments", 0, at(90), end)

    b.join("stopper", start).follow("stopper", "shipments", 0, start, at(100) + 1)

    b.join("rewinder", start).follow("rewinder", "clicks", 0, start, at(120))
    rewound = b.log_end("clicks", 0, at(120) - 2_000) - 2_000
    b.catch_up("rewinder", "clicks", 0, rewound, at(120), end, rate=30.0)

    b.join("stormy", start).follow("stormy", "events", 0, start, end)
    for i in range(7):
        b.event("stormy", "generation", at(30) + i * 30_000, generation=2 + i)

    b.join("gone", start).follow("gone", "orders", 0, start, at(40))
    b.delete_group("gone", at(45))

    doomed_at = b.log_end("payments", 0, at(20) - 2_000)
    b.join("doomed", start).follow("doomed", "payments", 0, start, at(20))
    b.hold("doomed", "payments", 0, doomed_at, at(20), at(50))
    b.delete_group("doomed", at(50))

    b.join("slowpoke", start).follow("slowpoke", "metrics", 0, start, at(150))
    b.follow("slowpoke", "metrics", 0, at(150), end, every_ms=60_000)
    return b
