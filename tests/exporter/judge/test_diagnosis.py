"""The diagnosis: one scenario per cause and per false positive of docs/diagnosis.md.

Every scenario writes real-format records (RecordFactory, the encoder that round-trips Kafka
4.0's bytes), decodes them and applies them to the state the daemon keeps; log ends are
sampled every second, the windows roll and a snapshot is built every second, as the daemon
does with shorter intervals. The conformance capture's real classic and KIP-848 groups are
checked at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    Record,
)
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.judge import snapshot as snapshot_module
from offsetwatch.exporter.judge.diagnosis import Cause, DiagnosisConfig, members_at
from offsetwatch.exporter.judge.snapshot import GroupSnapshot, Snapshot, SnapshotBuilder
from offsetwatch.exporter.judge.status import Status, StatusConfig
from offsetwatch.exporter.serve.api import group_detail, groups_list
from offsetwatch.exporter.serve.metrics import SnapshotCollector, suspect_hosts
from offsetwatch.exporter.sinks.checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint
from offsetwatch.exporter.state.diagnosis_history import RING_SIZE, GroupHistory, MemberRef
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import PipelineStats
from offsetwatch.record_factory import KeyValue, Member, RecordFactory
from tests.conformance_data import decode_run

T0 = 1_800_000_000_000
W = 60_000
SECOND = 1_000
GRACE = 5_000


def members(group: str, count: int, partitions: int, topic: str = "orders") -> list[Member]:
    """`count` members, member i owning the partitions p with p % count == i."""
    return [
        Member(
            f"{group}-m{i}",
            f"{group}-client-{i}",
            f"/10.1.2.{i + 1}",
            ((topic, tuple(p for p in range(partitions) if p % count == i)),),
        )
        for i in range(count)
    ]


@dataclass(slots=True)
class Scenario:
    """A cluster clock, topics with steady production, and the exporter's state."""

    topics: dict[str, tuple[int, int]] = field(default_factory=lambda: {"orders": (6, 10)})
    codec: Codec = field(default_factory=Codec)
    factory: RecordFactory = field(default_factory=RecordFactory)
    state: OffsetState = field(default_factory=OffsetState)
    histories: dict[tuple[str, int], LogEndHistory] = field(default_factory=dict)
    builder: SnapshotBuilder = field(
        default_factory=lambda: SnapshotBuilder(
            status_config=StatusConfig(window_ms=W),
            diagnosis_config=DiagnosisConfig(rebalance_grace_ms=GRACE),
        )
    )
    second: int = 0
    snapshot: Snapshot | None = None

    @property
    def now(self) -> int:
        return T0 + self.second * SECOND

    def log_end(self, topic: str, partition: int) -> int:
        return 100 + self.topics[topic][1] * self.second

    def apply(self, records: Iterable[KeyValue]) -> None:
        for key, value in records:
            self.state.apply(self.codec.decode(key, value, 0, 0, self.now))  # type: ignore[arg-type]

    def classic(self, group: str, generation: int, owners: list[Member]) -> None:
        self.apply([self.factory.classic_group(group, generation, owners, self.now)])

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.apply([self.factory.commit(group, topic, partition, offset, self.now)])

    def commit_all(self, group: str, offset: int) -> None:
        for p in range(self.topics["orders"][0]):
            self.commit(group, "orders", p, offset)

    def run(self, seconds: int, step: Callable[[int], object]) -> None:
        """Every second: sample the log ends, `step(second)`, roll, snapshot."""
        for _ in range(seconds):
            for topic, (partitions, _rate) in self.topics.items():
                for p in range(partitions):
                    history = self.histories.setdefault((topic, p), LogEndHistory())
                    history.record(self.now, self.log_end(topic, p))
            step(self.second)
            self.state.roll_windows(self.now, W)
            self.snapshot = self.builder.build(self.state, self.histories, self.now, True)
            self.second += 1

    def group(self, group_id: str) -> GroupSnapshot:
        assert self.snapshot is not None
        found = self.snapshot.group(group_id)
        assert found is not None
        return found


def consume(
    scenario: Scenario, group: str, stuck: set[int], every: int = 2
) -> Callable[[int], None]:
    """Commit every `every` seconds: caught up, except the `stuck` partitions (stay at 100)."""

    def step(second: int) -> None:
        if second % every:
            return
        partitions = scenario.topics["orders"][0]
        for p in range(partitions):
            offset = 100 if p in stuck else scenario.log_end("orders", p) - 5
            scenario.commit(group, "orders", p, offset)

    return step


def steps(*each: Callable[[int], object]) -> Callable[[int], None]:
    def step(second: int) -> None:
        for one in each:
            one(second)

    return step


# -- the causes -----------------------------------------------------------------------------


def test_one_stuck_member_of_three_is_the_suspect_with_its_partitions() -> None:
    s = Scenario()
    owners = members("g", 3, 6)
    s.run(1, lambda _: s.classic("g", 1, owners))
    s.run(3 * W // SECOND, consume(s, "g", stuck={2, 5}))
    group = s.group("g")
    assert group.status is Status.STALL
    d = group.diagnosis
    assert d.cause is Cause.STUCK_MEMBER
    assert [(x.member_id, x.client_id, x.host, x.partitions) for x in d.suspects] == [
        ("g-m2", "g-client-2", "/10.1.2.3", (("orders", 2), ("orders", 5)))
    ]
    assert "partitions 2 and 5 of orders" in d.reason
    assert "g-client-2 on 10.1.2.3" in d.reason
    assert "the other 2 members progress" in d.reason
    # the stuck partitions' lag grows: the group as a whole is not catching up
    assert d.catch_up_seconds is None and d.falling_behind


def test_a_member_that_owns_only_idle_partitions_is_not_a_suspect() -> None:
    s = Scenario(topics={"orders": (6, 10), "audit": (2, 0)})
    owners = [
        *members("g", 2, 6),
        Member("g-idle", "idle-client", "/10.9.9.9", (("audit", (0, 1)),)),
    ]

    def step(second: int) -> None:
        consume(s, "g", stuck={1})(second)
        if second == 0:  # caught up once on a topic nobody writes to, never again
            for p in (0, 1):
                s.commit("g", "audit", p, s.log_end("audit", p))

    s.run(1, lambda _: s.classic("g", 1, owners))
    s.run(3 * W // SECOND, step)
    d = s.group("g").diagnosis
    assert d.cause is Cause.STUCK_MEMBER
    assert [x.member_id for x in d.suspects] == ["g-m1"]
    assert "the other member progress" not in d.reason  # g-m0 progresses; g-idle has no work
    assert "the other 1 member progress" in d.reason


def test_every_member_stuck_is_the_whole_group() -> None:
    s = Scenario()
    s.run(1, lambda _: s.classic("g", 1, members("g", 2, 6)))
    s.run(3 * W // SECOND, consume(s, "g", stuck=set(range(6))))
    d = s.group("g").diagnosis
    assert d.cause is Cause.STUCK_MEMBER
    assert {x.member_id for x in d.suspects} == {"g-m0", "g-m1"}
    assert "whole group" in d.reason


def test_an_empty_group_with_lag_is_group_empty() -> None:
    s = Scenario()
    s.run(1, lambda _: s.classic("g", 1, members("g", 2, 6)))
    s.run(10, consume(s, "g", stuck=set()))
    s.run(1, lambda _: s.classic("g", 2, []))  # everyone left: Empty, generation 2
    s.run(3 * W // SECOND, lambda _: None)
    group = s.group("g")
    assert group.status is Status.STOP
    d = group.diagnosis
    assert d.cause is Cause.GROUP_EMPTY and d.suspects == ()
    assert [(r.generation, len(r.joined), len(r.left)) for r in d.rebalances] == [
        (2, 0, 2),
        (1, 2, 0),
    ]


def test_a_simple_group_that_stops_is_group_empty_and_says_it_never_joined() -> None:
    s = Scenario()
    s.run(10, consume(s, "simple", stuck=set()))
    s.run(3 * W // SECOND, lambda _: None)
    d = s.group("simple").diagnosis
    assert d.cause is Cause.GROUP_EMPTY
    assert "never joined" in d.reason


def flapping(s: Scenario, group: str) -> Callable[[int], None]:
    """A step for `Scenario.run` from second 0: `group`'s two steady members stay stuck, and
    every 8 s a rebalance (generation 1, 2, ...) in which a third instance crashes and
    restarts, with a new member id every time."""
    steady = members(group, 2, 6)

    def step(second: int) -> None:
        consume(s, group, stuck={0, 1, 2, 3, 4, 5})(second)
        if second % 8 == 0:
            generation = second // 8 + 1
            flapper = Member(f"{group}-flap-{generation}", "flappy", "/10.7.7.7", (("orders", ()),))
            s.classic(group, generation, steady + ([flapper] if generation % 2 else []))

    return step


def test_a_rebalance_storm_names_the_instance_that_keeps_coming_back() -> None:
    s = Scenario()
    s.run(3 * W // SECOND, flapping(s, "g"))
    d = s.group("g").diagnosis
    assert d.cause is Cause.REBALANCE_STORM
    assert (d.suspects[0].client_id, d.suspects[0].host) == ("flappy", "/10.7.7.7")
    assert len(d.rebalances) == 10  # the last ten, newest first
    assert d.rebalances[0].generation == (s.second - 1) // 8 + 1
    assert d.rebalances[0].time_ms > d.rebalances[1].time_ms


def test_the_storm_threshold_and_the_grace_come_from_the_exporters_settings() -> None:
    """The settings behind --storm-rebalances and --rebalance-grace-s reach the diagnosis: the
    storm above (a rebalance every 8 s, 7 or 8 in the window) is none for a threshold of 20."""
    config = ExporterConfig(status_window_s=W / 1000, storm_rebalances=20, rebalance_grace_s=0.5)
    exporter = Exporter(config)
    assert exporter.judge.builder.diagnosis_config == DiagnosisConfig(
        storm_rebalances=20, rebalance_grace_ms=500
    )
    s = Scenario(builder=exporter.judge.builder)
    s.run(3 * W // SECOND, flapping(s, "g"))
    d = s.group("g").diagnosis
    assert d.cause is not Cause.REBALANCE_STORM
    assert len(d.rebalances) == 10


def test_a_rewind_while_empty_is_a_reset_and_with_members_is_the_consumer() -> None:
    s = Scenario()
    s.run(
        1,
        steps(
            lambda _: s.classic("reset", 1, members("reset", 2, 6)),
            lambda _: s.classic("seek", 1, members("seek", 2, 6)),
        ),
    )
    s.run(
        2 * W // SECOND,
        steps(consume(s, "reset", set()), consume(s, "seek", set())),
    )
    s.run(1, lambda _: s.classic("reset", 2, []))
    s.run(5, lambda _: None)
    # the reset tool commits offset 0 to every partition of the empty group; the other group
    # has its consumer seek partition 3 back
    s.run(1, lambda _: s.commit_all("reset", 0))
    s.run(1, lambda _: s.commit("seek", "orders", 3, 0))
    s.run(5, lambda _: None)
    reset = s.group("reset")
    assert reset.status is Status.REWIND
    assert reset.diagnosis.cause is Cause.REWIND_BY_RESET
    assert reset.diagnosis.suspects == ()
    seek = s.group("seek")
    assert seek.status is Status.REWIND
    assert seek.diagnosis.cause is Cause.REWIND_BY_CONSUMER
    assert [(x.member_id, x.partitions) for x in seek.diagnosis.suspects] == [
        ("seek-m1", (("orders", 3),))
    ]


def test_catch_up_seconds_is_lag_over_the_net_consume_rate() -> None:
    s = Scenario()
    s.run(1, lambda _: s.classic("g", 1, members("g", 1, 6)))
    s.run(W // SECOND, consume(s, "g", set()))
    s.run(1, lambda _: s.commit_all("g", 100))  # back to the start
    # then 15 msg/s per partition against 10 produced: the lag shrinks by 5 per second
    base = s.second

    def drain(second: int) -> None:
        for p in range(6):
            s.commit("g", "orders", p, 100 + 15 * (second - base + 1))

    s.run(3 * W // (2 * SECOND), drain)
    group = s.group("g")
    d = group.diagnosis
    assert d.catch_up_seconds is not None and not d.falling_behind
    lag_per_partition = group.total_lag / 6
    assert abs(d.catch_up_seconds - lag_per_partition / 5) < 0.1 * lag_per_partition / 5


def test_a_slow_consumer_is_warn_falling_behind_with_its_members() -> None:
    s = Scenario()
    s.run(1, lambda _: s.classic("g", 1, members("g", 2, 6)))

    def slow(second: int) -> None:
        if second % 2 == 0:
            for p in range(6):
                s.commit("g", "orders", p, 100 + 5 * second)  # half the production rate

    s.run(3 * W // SECOND, slow)
    group = s.group("g")
    assert group.status is Status.WARN
    d = group.diagnosis
    assert d.cause is Cause.SLOW_CONSUMER
    assert d.catch_up_seconds is None and d.falling_behind
    assert "every member (whole group)" in d.reason


def test_partitions_nobody_owns_are_partition_unowned() -> None:
    s = Scenario()
    # the assignment only covers partitions 0-3: 4 and 5 are not read by anyone
    owners = [
        Member("g-m0", "c0", "/10.0.0.1", (("orders", (0, 1)),)),
        Member("g-m1", "c1", "/10.0.0.2", (("orders", (2, 3)),)),
    ]
    s.run(1, lambda _: s.classic("g", 1, owners))
    s.run(3 * W // SECOND, consume(s, "g", stuck={4, 5}))
    d = s.group("g").diagnosis
    assert d.cause is Cause.PARTITION_UNOWNED
    assert "partitions 4 and 5 of orders" in d.reason and d.suspects == ()


def test_a_rebalance_in_progress_blames_nobody() -> None:
    s = Scenario()
    owners = members("g", 2, 6)
    s.run(1, lambda _: s.classic("g", 1, owners))
    s.run(3 * W // SECOND, consume(s, "g", stuck={4, 5}))
    s.run(1, lambda _: s.classic("g", 2, owners[:1]))  # a member left: reassignment under way
    d = s.group("g").diagnosis
    assert d.cause is Cause.UNKNOWN
    assert "rebalance is in progress" in d.reason and d.suspects == ()
    s.run(GRACE // SECOND + 1, consume(s, "g", stuck={4, 5}))
    assert s.group("g").diagnosis.cause is Cause.STUCK_MEMBER  # it settled: g-m0 owns them


def test_a_partition_without_log_end_is_topic_deleted() -> None:
    s = Scenario()
    s.run(1, lambda _: s.classic("g", 1, members("g", 1, 6)))
    s.run(5, consume(s, "g", set()))
    s.run(1, lambda _: s.commit("g", "gone", 0, 7))  # a topic the sampler never finds
    d = s.group("g").diagnosis
    assert s.group("g").status is Status.ERR
    assert d.cause is Cause.TOPIC_DELETED
    assert "partition 0 of gone" in d.reason


# -- bad input ------------------------------------------------------------------------------


def test_an_undecodable_assignment_still_gives_a_diagnosis_and_is_counted_once() -> None:
    s = Scenario()
    bad = MemberMetadata("g-m0", None, "c0", "/10.0.0.1", 300_000, 45_000, b"", b"\x00\x07junk")
    value = GroupMetadataValue("consumer", 1, "range", "g-m0", T0, (bad,))
    record = s.codec.encode(Record(2, GroupMetadataKey("g"), 3, value))
    s.run(1, lambda _: s.apply([record]))
    s.run(3 * W // SECOND, consume(s, "g", stuck={0}))
    assert s.snapshot is not None
    assert s.snapshot.assignment_decode_errors == 1  # once per record, not per snapshot
    d = s.group("g").diagnosis
    assert d.cause is Cause.UNKNOWN
    assert "undecodable" in d.reason
    assert [(x.member_id, x.partitions) for x in d.suspects] == [("g-m0", ())]


def test_a_connect_group_names_its_members_without_partitions() -> None:
    s = Scenario()
    worker = MemberMetadata("w-1", None, "connect-1", "/10.3.3.3", 300_000, 45_000, b"", b"xx")
    value = GroupMetadataValue("connect", 1, "sessioned", "w-1", T0, (worker,))
    s.run(1, lambda _: s.apply([s.codec.encode(Record(2, GroupMetadataKey("g"), 3, value))]))
    s.run(3 * W // SECOND, consume(s, "g", stuck={0}))
    d = s.group("g").diagnosis
    assert s.snapshot is not None and s.snapshot.assignment_decode_errors == 0
    assert d.cause is Cause.UNKNOWN
    assert "protocol connect" in d.reason
    assert [(x.member_id, x.partitions) for x in d.suspects] == [("w-1", ())]


def test_a_diagnosis_that_fails_does_not_stop_the_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(snapshot_module, "diagnose", broken)
    s = Scenario()
    s.run(1, lambda _: s.classic("g", 1, members("g", 1, 6)))
    s.run(3 * W // SECOND, consume(s, "g", stuck={0}))
    assert s.group("g").status is Status.STALL
    assert s.group("g").diagnosis.cause is Cause.UNKNOWN
    assert s.snapshot is not None and s.snapshot.diagnosis_errors > 0


def test_membership_older_than_the_ring_is_not_guessed() -> None:
    history = GroupHistory()
    for i in range(RING_SIZE + 3):
        history.join(MemberRef(f"m{i}", "c", "h"))
        history.rebalance(T0 + i * SECOND, i + 1, 1)
    assert members_at(history, T0 - SECOND, 1) is None
    assert members_at(history, T0 + 5 * SECOND, 1) == 1


# -- KIP-848 --------------------------------------------------------------------------------


def kafka_order(records: list[KeyValue]) -> list[KeyValue]:
    """Member records before the epoch bump they cause, as Kafka 4.0 writes them (the
    conformance capture: member metadata, then group epoch); RecordFactory writes the epoch
    first."""
    codec = Codec()
    members_first = sorted(records, key=lambda kv: codec.decode(kv[0], kv[1]).key_type != 5)
    return members_first


def test_kip848_stuck_member_and_epochs_as_rebalances() -> None:
    s = Scenario()
    owners = members("k", 3, 6)
    s.run(
        1, lambda _: s.apply(kafka_order(s.factory.consumer_group("k", 3, owners, {"orders": 6})))
    )
    s.run(3 * W // SECOND, consume(s, "k", stuck={1, 4}))
    group = s.group("k")
    assert group.view.kind == "CONSUMER"
    d = group.diagnosis
    assert d.cause is Cause.STUCK_MEMBER
    assert [(x.member_id, x.partitions) for x in d.suspects] == [
        ("k-m1", (("orders", 1), ("orders", 4)))
    ]
    assert group.rebalances_total == 1 and group.members_joined_total == 3
    assert [(r.generation, len(r.joined)) for r in d.rebalances] == [(3, 3)]


# -- where it shows ---------------------------------------------------------------------------


def stuck_snapshot() -> Scenario:
    s = Scenario()
    s.run(
        1,
        steps(
            lambda _: s.classic("g", 1, members("g", 3, 6)),
            lambda _: s.classic("ok", 1, members("ok", 1, 6)),
        ),
    )
    s.run(3 * W // SECOND, steps(consume(s, "g", {2, 5}), consume(s, "ok", set())))
    return s


def test_the_api_has_exactly_the_diagnosis_keys_and_the_list_has_the_cause() -> None:
    s = stuck_snapshot()
    assert s.snapshot is not None
    detail = group_detail(s.snapshot, "g")
    assert detail is not None
    diagnosis = detail["diagnosis"]
    assert list(diagnosis) == [
        "status",
        "cause",
        "reason",
        "suspects",
        "catch_up_seconds",
        "falling_behind",
        "rebalances",
    ]
    assert diagnosis["status"] == "STALL" and diagnosis["cause"] == "stuck_member"
    assert diagnosis["suspects"] == [
        {
            "member_id": "g-m2",
            "client_id": "g-client-2",
            "host": "/10.1.2.3",
            "partitions": [
                {"topic": "orders", "partition": 2},
                {"topic": "orders", "partition": 5},
            ],
        }
    ]
    [rebalance] = diagnosis["rebalances"]
    assert list(rebalance) == ["time", "generation", "joined", "left"]
    assert rebalance["generation"] == 1 and rebalance["left"] == []
    assert [m["member_id"] for m in rebalance["joined"]] == ["g-m0", "g-m1", "g-m2"]
    json.dumps(detail, allow_nan=False)
    ok = group_detail(s.snapshot, "ok")
    assert ok is not None and ok["diagnosis"]["cause"] is None
    causes = {row["group"]: row["cause"] for row in groups_list(s.snapshot)}
    assert causes == {"g": "stuck_member", "ok": None}


def test_metrics_carry_the_cause_and_hosts_never_member_ids() -> None:
    s = stuck_snapshot()
    snapshot = s.snapshot
    assert snapshot is not None
    text = SnapshotCollector(lambda: (snapshot, PipelineStats())).render().body.decode()
    info = 'offsetwatch_group_diagnosis_info{group="g",cause="stuck_member",'
    assert info + 'suspect_hosts="/10.1.2.3"} 1' in text
    assert 'offsetwatch_group_diagnosis_info{group="ok"' not in text
    assert 'offsetwatch_group_rebalances_total{group="g"} 1' in text
    assert 'offsetwatch_group_members_joined_total{group="g"} 3' in text
    assert 'offsetwatch_group_members_left_total{group="g"} 0' in text
    assert 'offsetwatch_group_falling_behind{group="g"} 1' in text
    # keeping pace with a steady lag of a commit interval: not catching up, not falling behind
    assert 'offsetwatch_group_catch_up_seconds{group="ok"}' not in text
    assert 'offsetwatch_group_falling_behind{group="ok"} 0' in text
    assert "offsetwatch_assignment_decode_errors_total 0" in text
    assert "g-m2" not in text


def test_suspect_hosts_label_is_bounded() -> None:
    assert suspect_hosts(["b", "a", "a", ""]) == "a,b"
    assert suspect_hosts([f"h{i}" for i in range(8)]) == "h0,h1,h2,h3,h4,+3 more"


# -- checkpoints ----------------------------------------------------------------------------


def test_the_rebalance_history_survives_a_checkpoint_and_old_checkpoints_load(
    tmp_path: Path,
) -> None:
    s = stuck_snapshot()
    path = tmp_path / "state"
    save_checkpoint(path, s.state, {0: 1}, meta=CheckpointMeta())
    loaded = load_checkpoint(path).state
    before, after = s.state.groups["g"].history, loaded.groups["g"].history
    assert before is not None and after is not None
    assert after.to_json() == before.to_json()
    assert list(after.rebalances) == list(before.rebalances)
    # a checkpoint written before the diagnosis existed has no "histories" in its header
    old = tmp_path / "old"
    save_checkpoint(old, s.state, {0: 1}, meta=CheckpointMeta())
    _strip_histories(old)
    assert load_checkpoint(old).state.groups["g"].history is None


def _strip_histories(path: Path) -> None:
    import struct
    import zlib

    from offsetwatch.exporter.sinks.checkpoint import _PREAMBLE

    data = path.read_bytes()
    magic, version, flags, header_len, body_len, _hcrc, body_crc = _PREAMBLE.unpack_from(data)
    header = json.loads(data[_PREAMBLE.size : _PREAMBLE.size + header_len])
    del header["histories"]
    new_header = json.dumps(header, separators=(",", ":")).encode("ascii")
    body = data[_PREAMBLE.size + header_len :]
    preamble = _PREAMBLE.pack(
        magic, version, flags, len(new_header), body_len, zlib.crc32(new_header), body_crc
    )
    assert struct.calcsize("<8sHHIQII") == _PREAMBLE.size
    path.write_bytes(preamble + new_header + body)


# -- real Kafka 4.0 records -----------------------------------------------------------------


def _conformance_state(conformance_dir: Path) -> OffsetState:
    state = OffsetState()
    for record in decode_run(conformance_dir):
        if isinstance(record, Record):
            state.apply(record)
    return state


def test_real_classic_and_kip848_rebalances(conformance_dir: Path) -> None:
    state = _conformance_state(conformance_dir)
    # 3 members join one by one (generations 1..3), one leaves (4), then the rest (Empty)
    classic = state.groups["cls-range-3-c62d"].history
    assert classic is not None
    ring = list(classic.rebalances)
    assert [r.generation for r in ring] == sorted(r.generation for r in ring)
    assert ring[0].generation == 1 and ring[-1].members == 0
    assert classic.joined_total == 3 and classic.left_total == 3
    assert max(r.members for r in ring) == 3
    # KIP-848: member 2 joins, member 1 leaves, member 2 leaves; epochs increase
    kip848 = state.groups["cg-two-range-7ff0"].history
    assert kip848 is not None
    epochs = [r.generation for r in kip848.rebalances]
    assert epochs == sorted(epochs) and len(epochs) >= 3
    assert kip848.joined_total == 2 and kip848.left_total == 2
    assert kip848.rebalances[-1].members == 0


def test_real_cli_reset_to_earliest_is_a_rewind_by_reset(conformance_dir: Path) -> None:
    state = _conformance_state(conformance_dir)
    group = state.groups["cli-reset-earliest-a12f"]
    history = group.history
    assert history is not None and history.rebalances[-1].members == 0
    table = group.topics["orders"]
    for p in table.partitions():
        assert table.committed[p] == 0
        assert table.rewind_ts[p] > history.rebalances[-1].time_ms
        assert members_at(history, table.rewind_ts[p], 0) == 0
