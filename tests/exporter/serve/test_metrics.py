"""Prometheus metrics: names, labels and values of both renderings, caching, the ready gate."""

from __future__ import annotations

import gzip
import json
import math
import re
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from offsetwatch.decoder.consumer_protocol import (
    ConsumerProtocol,
    ConsumerProtocolAssignment,
    TopicPartitionList,
)
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from offsetwatch.exporter.judge.group_views import GroupView, MemberView
from offsetwatch.exporter.judge.snapshot import GroupSnapshot, Snapshot, SnapshotBuilder, TopicRows
from offsetwatch.exporter.judge.status import Status
from offsetwatch.exporter.serve.api import owner_index
from offsetwatch.exporter.serve.metrics import (
    ALIAS_FAMILIES,
    FAMILIES,
    MetricsConfig,
    SnapshotCollector,
    escape_label_value,
)
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import Freshness, PipelineStats
from tests.conformance_data import decode_run

REPO = Path(__file__).resolve().parents[3]
NOW = 1_800_000_000_000
MINUTE = 60_000
VERSION = "9.9.9-test"

SampleKey = tuple[str, tuple[tuple[str, str], ...]]

# ------------------------------------------------------------------------------- builders


def commit(
    group: str,
    topic: str,
    partition: int,
    offset: int,
    ts: int = NOW - 5_000,
    epoch: int = 7,
    metadata: str = "",
) -> Record:
    value = OffsetCommitValue(
        offset=offset,
        leader_epoch=epoch,
        metadata=metadata,
        commit_timestamp=ts,
        expire_timestamp=-1,
        topic_id=ZERO_UUID,
    )
    return Record(1, OffsetCommitKey(group, topic, partition), 3, value, timestamp=ts)


def delete_offset(group: str, topic: str, partition: int) -> Record:
    return Record(1, OffsetCommitKey(group, topic, partition), None, None)


Assignment = dict[str, list[int]]


def classic_group(
    group: str, members: list[tuple[str, str, str, Assignment]], generation: int = 4
) -> Record:
    protocol = ConsumerProtocol()
    metas = tuple(
        MemberMetadata(
            member_id=member_id,
            group_instance_id=None,
            client_id=client_id,
            client_host=host,
            rebalance_timeout=300_000,
            session_timeout=45_000,
            subscription=b"",
            assignment=protocol.encode(
                0,
                ConsumerProtocolAssignment(
                    tuple(TopicPartitionList(t, tuple(ps)) for t, ps in assignment.items()),
                    None,
                ),
            ),
        )
        for member_id, client_id, host, assignment in members
    )
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=generation,
        protocol="range",
        leader=metas[0].member_id if metas else None,
        current_state_timestamp=NOW - MINUTE,
        members=metas,
    )
    return Record(2, GroupMetadataKey(group), 3, value, timestamp=NOW - MINUTE)


def delete_group(group: str) -> Record:
    return Record(2, GroupMetadataKey(group), None, None)


def histories(ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], LogEndHistory]:
    out = {}
    for tp, end in ends.items():
        history = LogEndHistory()
        history.record(NOW - 2 * MINUTE, max(0, end - 100))
        history.record(NOW - 1_000, end)
        out[tp] = history
    return out


ODD_GROUP = 'odd "group" \\ with\nnewline ✓'

ENDS = {("orders", 0): 100, ("orders", 1): 100, ("orders", 2): 50, ("payments", 0): 10}


def sample_state() -> OffsetState:
    """Three groups: a live classic group, a stopped simple group, an oddly named one."""
    state = OffsetState()
    records = [
        classic_group(
            "live",
            [
                ("m-1", "client-a", "/10.0.0.1", {"orders": [0, 1]}),
                ("m-2", "client-b", "/10.0.0.2", {"orders": [2]}),
            ],
        ),
        commit("live", "orders", 0, 90),
        commit("live", "orders", 1, 100),
        commit("live", "orders", 2, 20, metadata="meta"),
        commit("live", "payments", 0, 3),  # nobody owns payments-0
        commit("stopped", "orders", 0, 40, ts=NOW - 30 * MINUTE),
        commit("stopped", "unsampled", 0, 5),  # no log end known: lag unknown, ERR
        commit(ODD_GROUP, "orders", 1, 99),
    ]
    for record in records:
        state.apply(record)
    return state


def build(state: OffsetState, ready: bool = True, now: int = NOW) -> Snapshot:
    return SnapshotBuilder().build(state, histories(ENDS), now, ready)


class Holder:
    """What the daemon would hold: the latest snapshot and the stats."""

    def __init__(self, snapshot: Snapshot, stats: PipelineStats | None = None) -> None:
        self.snapshot = snapshot
        self.stats = stats or PipelineStats(started_ms=NOW - 3_600_000)

    def __call__(self) -> tuple[Snapshot, PipelineStats]:
        return self.snapshot, self.stats


def collector(
    snapshot: Snapshot, config: MetricsConfig | None = None, stats: PipelineStats | None = None
) -> SnapshotCollector:
    return SnapshotCollector(
        Holder(snapshot, stats), config, version=VERSION, clock_ms=lambda: NOW + 2_000
    )


# -------------------------------------------------------------------------------- parsing


def parse(text: str) -> dict[SampleKey, float]:
    out: dict[SampleKey, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"duplicate series {key}"
            out[key] = float(s.value)  # Prometheus values are float64
    return out


def types_of(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def via_registry(c: SnapshotCollector) -> str:
    registry = CollectorRegistry()
    registry.register(c)
    return generate_latest(registry).decode()


def via_text(c: SnapshotCollector) -> str:
    return c.render().body.decode()


def series(samples: dict[SampleKey, float], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def value(samples: dict[SampleKey, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def names(samples: Iterable[SampleKey]) -> set[str]:
    return {name for name, _ in samples}


def groups_in(samples: Iterable[SampleKey]) -> set[str]:
    return {v for _, labels in samples for k, v in labels if k == "group"}


# ---------------------------------------------------------------------------------- tests


@pytest.fixture
def snapshot() -> Snapshot:
    return build(sample_state())


def test_partition_series(snapshot: Snapshot) -> None:
    s = parse(via_text(collector(snapshot)))
    gtp = {"group": "live", "topic": "orders", "partition": "0"}
    assert value(s, "offsetwatch_group_partition_committed_offset", **gtp) == 90
    assert value(s, "offsetwatch_group_partition_lag", **gtp) == 10
    assert value(s, "offsetwatch_group_partition_leader_epoch", **gtp) == 7
    assert value(s, "offsetwatch_group_partition_last_commit_timestamp_seconds", **gtp) == (
        (NOW - 5_000) / 1000
    )
    assert (
        value(s, "offsetwatch_group_partition_lag", group="live", topic="orders", partition="2")
        == 30
    )
    # caught up: lag 0 and lag in seconds 0.0, not absent
    caught_up = {"group": "live", "topic": "orders", "partition": "1"}
    assert value(s, "offsetwatch_group_partition_lag", **caught_up) == 0
    assert value(s, "offsetwatch_group_partition_lag_seconds", **caught_up) == 0.0
    assert value(s, "offsetwatch_group_partition_lag_seconds", **gtp) > 0
    # statuses are exported as the snapshot computed them
    rows = {(r.topic, p): Status(r.status[i]) for g in snapshot.groups for r in g.topics
            for i, p in enumerate(r.partitions) if g.view.group_id == "stopped"}  # fmt: skip
    assert rows[("orders", 0)] == Status.STOP
    assert rows[("unsampled", 0)] == Status.ERR
    stopped = {"group": "stopped", "topic": "orders", "partition": "0"}
    assert value(s, "offsetwatch_group_partition_status", **stopped) == Status.STOP
    unsampled = {"group": "stopped", "topic": "unsampled", "partition": "0"}
    assert value(s, "offsetwatch_group_partition_status", **unsampled) == Status.ERR
    # unknown log end: no lag, no lag seconds, no log end; the committed offset is still there
    for name in ("lag", "lag_seconds"):
        assert (f"offsetwatch_group_partition_{name}", tuple(sorted(unsampled.items()))) not in s
    assert value(s, "offsetwatch_group_partition_committed_offset", **unsampled) == 5
    # log ends once per (topic, partition), however many groups read it
    ends = series(s, "offsetwatch_partition_log_end_offset")
    assert ends == {(("partition", str(p)), ("topic", t)): end for (t, p), end in ENDS.items()}


def test_topic_and_group_series(snapshot: Snapshot) -> None:
    s = parse(via_text(collector(snapshot)))
    assert value(s, "offsetwatch_group_topic_lag", group="live", topic="orders") == 40
    assert value(s, "offsetwatch_group_topic_lag", group="live", topic="payments") == 7
    assert (
        value(s, "offsetwatch_group_topic_status", group="stopped", topic="orders") == Status.STOP
    )
    # a topic whose lag is unknown everywhere has no lag series, only a status
    assert ("offsetwatch_group_topic_lag", (("group", "stopped"), ("topic", "unsampled"))) not in s
    assert value(s, "offsetwatch_group_topic_status", group="stopped", topic="unsampled") == 5
    assert value(s, "offsetwatch_group_lag", group="live") == 47
    assert value(s, "offsetwatch_group_lag", group="stopped") == 60
    assert value(s, "offsetwatch_group_status", group="stopped") == Status.ERR
    assert value(s, "offsetwatch_group_commits_total", group="live") == 4
    assert value(s, "offsetwatch_group_members", group="live") == 2
    assert value(s, "offsetwatch_group_members", group="stopped") == 0
    assert value(s, "offsetwatch_group_generation", group="live") == 4
    assert value(s, "offsetwatch_group_assignment_epoch", group="live") == 4
    # a simple group has no generation: no series rather than -1
    assert ("offsetwatch_group_generation", (("group", "stopped"),)) not in s
    assert value(s, "offsetwatch_group_last_commit_timestamp_seconds", group="stopped") == (
        (NOW - 5_000) / 1000
    )
    assert value(s, "offsetwatch_group_seconds_since_last_commit", group="stopped") == 5.0
    info = series(s, "offsetwatch_group_info")
    assert (
        info[
            (
                ("group", "live"),
                ("kind", "CLASSIC"),
                ("protocol", "range"),
                ("protocol_type", "consumer"),
                ("state", "STABLE"),
            )
        ]
        == 1
    )
    assert series(s, "offsetwatch_group_state") == {
        (("group", "live"), ("state", "STABLE")): 1,
        (("group", "stopped"), ("state", "EMPTY")): 1,
        (("group", ODD_GROUP), ("state", "EMPTY")): 1,
    }
    rate = value(s, "offsetwatch_group_commit_rate", group="live")
    assert rate == pytest.approx(4 / 600)


def test_counter_exposition_names(snapshot: Snapshot) -> None:
    stats = PipelineStats()
    stats.count_record("offset_commit", 3)
    text = via_text(collector(snapshot, stats=stats))
    assert "# TYPE offsetwatch_group_commits_total counter\n" in text
    assert 'offsetwatch_group_commits_total{group="live"} 4\n' in text
    assert "# TYPE offsetwatch_records_total counter\n" in text
    assert "_created" not in text
    # the prometheus_client rendering names them the same way
    assert "# TYPE offsetwatch_group_commits_total counter\n" in via_registry(collector(snapshot))


@pytest.mark.parametrize("granularity", ["partition", "topic", "group"])
@pytest.mark.parametrize("aliases", [False, True])
def test_text_path_equals_collector_path(
    snapshot: Snapshot, granularity: str, aliases: bool
) -> None:
    stats = PipelineStats(started_ms=NOW - 1000, source_up=True, ready=True)
    stats.count_record("offset_commit", 3, 10)
    stats.count_record("group_metadata", None)
    stats.count_error("crc")
    stats.set_position(0, 10)
    stats.set_high_watermark(0, 12)
    stats.last_sample_ms = NOW - 500
    config = MetricsConfig(granularity=granularity, kafka_lag_exporter_aliases=aliases,  # type: ignore[arg-type]
                           cluster_name='prod "eu"')  # fmt: skip
    c = collector(snapshot, config, stats)
    text, reference = via_text(c), via_registry(c)
    assert parse(text) == parse(reference)
    assert types_of(text) == types_of(reference)
    assert ODD_GROUP in groups_in(parse(text))


def test_text_path_equals_collector_path_on_kafka_records(conformance_dir: Path) -> None:
    snapshot, _ = conformance_snapshot(conformance_dir)
    config = MetricsConfig(kafka_lag_exporter_aliases=True, cluster_name="main")
    c = collector(snapshot, config)
    text = via_text(c)
    assert parse(text) == parse(via_registry(c))
    assert "消费者-グループ-ünïcødé-✓" in groups_in(parse(text))


def test_granularity_controls_series(snapshot: Snapshot) -> None:
    def families(granularity: str) -> set[str]:
        config = MetricsConfig(granularity=granularity, kafka_lag_exporter_aliases=True)  # type: ignore[arg-type]
        return names(parse(via_text(collector(snapshot, config))))

    partition, topic, group = families("partition"), families("topic"), families("group")
    assert "offsetwatch_group_partition_lag" in partition
    assert "kafka_consumergroup_group_lag" in partition
    assert "offsetwatch_partition_log_end_offset" not in topic
    assert not any(n.startswith("offsetwatch_group_partition_") for n in topic)
    assert {"offsetwatch_group_topic_lag", "kafka_consumergroup_group_topic_sum_lag"} <= topic
    assert "kafka_consumergroup_group_lag" not in topic
    assert "kafka_partition_latest_offset" not in topic
    assert not any(n.startswith("offsetwatch_group_topic_") for n in group)
    assert "kafka_consumergroup_group_topic_sum_lag" not in group
    assert {"offsetwatch_group_lag", "kafka_consumergroup_group_sum_lag"} <= group
    with pytest.raises(ValueError, match="granularity"):
        MetricsConfig(granularity="member")  # type: ignore[arg-type]


def test_not_ready_exports_only_self_metrics(snapshot: Snapshot) -> None:
    not_ready = build(sample_state(), ready=False)
    config = MetricsConfig(kafka_lag_exporter_aliases=True)
    stats = PipelineStats(started_ms=NOW - 1000)
    stats.count_record("offset_commit", 3)
    for render in (via_text, via_registry):
        s = parse(render(collector(not_ready, config, stats)))
        exported = names(s)
        assert not any(
            n.startswith(("offsetwatch_group_", "offsetwatch_partition_")) for n in exported
        )
        assert not any(n.startswith("kafka_") for n in exported)
        assert value(s, "offsetwatch_ready") == 0
        assert value(s, "offsetwatch_groups") == 3  # progress of the catch-up is visible
        assert value(s, "offsetwatch_records_total", type="offset_commit", version="3") == 1
    ready = names(parse(via_text(collector(snapshot, config, stats))))
    assert "offsetwatch_group_partition_lag" in ready
    assert "kafka_consumergroup_group_lag" in ready


def test_deleted_group_series_disappear() -> None:
    state = sample_state()
    holder = Holder(build(state))
    c = SnapshotCollector(holder, MetricsConfig(kafka_lag_exporter_aliases=True), version=VERSION)
    assert "live" in groups_in(parse(c.render().body.decode()))
    # a group deleted with kafka-consumer-groups --delete: its offsets and metadata are tombstoned
    state.apply(delete_group("live"))
    for topic, partition in (("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0)):
        state.apply(delete_offset("live", topic, partition))
    assert "live" not in state.groups
    holder.snapshot = build(state)
    after = parse(c.render().body.decode())
    assert "live" not in groups_in(after)
    assert groups_in(after) == {"stopped", ODD_GROUP}
    assert value(after, "offsetwatch_groups") == 2
    # payments-0 was only read by the deleted group: its log end is gone too
    assert (("partition", "0"), ("topic", "payments")) not in series(
        after, "offsetwatch_partition_log_end_offset"
    )
    assert parse(c.render().body.decode()) == parse(via_registry(c))


def test_one_offset_tombstone_removes_one_partition(snapshot: Snapshot) -> None:
    state = sample_state()
    state.apply(delete_offset("live", "orders", 2))
    s = parse(via_text(collector(build(state))))
    lags = series(s, "offsetwatch_group_partition_lag")
    assert (("group", "live"), ("partition", "2"), ("topic", "orders")) not in lags
    assert (("group", "live"), ("partition", "1"), ("topic", "orders")) in lags
    assert value(s, "offsetwatch_group_topic_lag", group="live", topic="orders") == 10


def test_kafka_lag_exporter_aliases(snapshot: Snapshot) -> None:
    config = MetricsConfig(kafka_lag_exporter_aliases=True, cluster_name="prod")
    s = parse(via_text(collector(snapshot, config)))
    label_sets = {name: {tuple(k for k, _ in labels) for labels in series(s, name)}
                  for name in names(s) if name.startswith("kafka_")}  # fmt: skip
    member = (
        "client_id",
        "cluster_name",
        "consumer_id",
        "group",
        "member_host",
        "partition",
        "topic",
    )
    assert label_sets == {
        "kafka_consumergroup_group_offset": {member},
        "kafka_consumergroup_group_lag": {member},
        "kafka_consumergroup_group_lag_seconds": {member},
        "kafka_consumergroup_group_max_lag": {("cluster_name", "group")},
        "kafka_consumergroup_group_max_lag_seconds": {("cluster_name", "group")},
        "kafka_consumergroup_group_sum_lag": {("cluster_name", "group")},
        "kafka_consumergroup_group_topic_sum_lag": {("cluster_name", "group", "topic")},
        "kafka_partition_latest_offset": {("cluster_name", "partition", "topic")},
    }
    owned = {"cluster_name": "prod", "group": "live", "topic": "orders", "partition": "2",
             "member_host": "/10.0.0.2", "consumer_id": "m-2", "client_id": "client-b"}  # fmt: skip
    assert value(s, "kafka_consumergroup_group_offset", **owned) == 20
    assert value(s, "kafka_consumergroup_group_lag", **owned) == 30
    unowned = {"cluster_name": "prod", "group": "live", "topic": "payments", "partition": "0",
               "member_host": "", "consumer_id": "", "client_id": ""}  # fmt: skip
    assert value(s, "kafka_consumergroup_group_lag", **unowned) == 7
    assert value(s, "kafka_consumergroup_group_max_lag", cluster_name="prod", group="live") == 30
    assert value(s, "kafka_consumergroup_group_sum_lag", cluster_name="prod", group="live") == 47
    assert (
        value(
            s,
            "kafka_consumergroup_group_topic_sum_lag",
            cluster_name="prod",
            group="live",
            topic="orders",
        )
        == 40
    )
    assert (
        value(
            s, "kafka_partition_latest_offset", cluster_name="prod", topic="orders", partition="0"
        )
        == 100
    )
    assert value(
        s, "kafka_consumergroup_group_max_lag_seconds", cluster_name="prod", group="live"
    ) == value(s, "offsetwatch_group_lag_seconds", group="live")
    # same values as the native series
    for labels, v in series(s, "kafka_consumergroup_group_lag").items():
        d = dict(labels)
        assert v == value(s, "offsetwatch_group_partition_lag", group=d["group"], topic=d["topic"],
                          partition=d["partition"])  # fmt: skip
    # off by default
    assert not any(n.startswith("kafka_") for n in names(parse(via_text(collector(snapshot)))))


def test_owner_index_is_owner_of(snapshot: Snapshot, conformance_dir: Path) -> None:
    kafka, _ = conformance_snapshot(conformance_dir)
    checked = 0
    for group in (*snapshot.groups, *kafka.groups):
        index = owner_index(group.view)
        topics = {t for m in group.view.members for t, _ in m.assignment}
        topics |= {rows.topic for rows in group.topics}
        for topic in topics:
            for p in range(8):
                assert index.get((topic, p)) is group.view.owner_of(topic, p)
                checked += index.get((topic, p)) is not None
    assert checked > 5


def test_self_metrics(snapshot: Snapshot) -> None:
    stats = PipelineStats(started_ms=NOW - 10_000, source_up=True)
    stats.count_record("offset_commit", 3, 5)
    stats.count_record("offset_commit", None, 2)
    stats.count_error("crc")
    stats.count_error("truncated", 3)
    stats.quarantined_total = 4
    stats.set_position(0, 90)
    stats.set_high_watermark(0, 100)
    stats.set_position(1, 7)
    stats.set_high_watermark(1, 7)
    stats.set_high_watermark(2, 3)  # position not known yet
    stats.mark_ready(NOW - 1_000)
    stats.published_total, stats.publish_errors_total, stats.dlq_total = 11, 1, 2
    stats.archive_records_total = 13
    stats.snapshot_duration_s, stats.snapshot_time_ms = 0.25, NOW
    stats.sample_duration_s, stats.last_sample_ms = 0.5, NOW - 8_000
    stats.checkpoint_duration_s, stats.checkpoint_time_ms = 1.5, NOW - 60_000
    s = parse(via_text(collector(snapshot, stats=stats)))  # clock: NOW + 2 s
    assert value(s, "offsetwatch_records_total", type="offset_commit", version="3") == 5
    assert value(s, "offsetwatch_records_total", type="offset_commit", version="tombstone") == 2
    assert value(s, "offsetwatch_decode_errors_total", reason="truncated") == 3
    assert value(s, "offsetwatch_quarantined_total") == 4
    assert series(s, "offsetwatch_source_lag") == {
        (("partition", "0"),): 10,
        (("partition", "1"),): 0,
    }
    assert value(s, "offsetwatch_source_high_watermark", partition="2") == 3
    assert ("offsetwatch_source_position", (("partition", "2"),)) not in s
    assert value(s, "offsetwatch_source_up") == 1
    assert value(s, "offsetwatch_ready") == 1
    assert value(s, "offsetwatch_groups") == 3
    assert value(s, "offsetwatch_tracked_partitions") == 7
    assert value(s, "offsetwatch_published_total") == 11
    assert value(s, "offsetwatch_publish_errors_total") == 1
    assert value(s, "offsetwatch_dlq_total") == 2
    assert value(s, "offsetwatch_archive_records_total") == 13
    assert value(s, "offsetwatch_snapshot_age_seconds") == 2.0
    assert value(s, "offsetwatch_snapshot_duration_seconds") == 0.25
    assert value(s, "offsetwatch_log_end_sample_age_seconds") == 10.0
    assert value(s, "offsetwatch_log_end_sample_duration_seconds") == 0.5
    assert value(s, "offsetwatch_checkpoint_age_seconds") == 62.0
    assert value(s, "offsetwatch_checkpoint_duration_seconds") == 1.5
    assert value(s, "offsetwatch_start_time_seconds") == (NOW - 10_000) / 1000
    assert value(s, "offsetwatch_build_info", version=VERSION) == 1
    # never happened: no age rather than an age of 55 years
    fresh = parse(via_text(collector(snapshot, stats=PipelineStats())))
    for name in (
        "checkpoint_age_seconds",
        "log_end_sample_age_seconds",
        "checkpoint_duration_seconds",
    ):
        assert f"offsetwatch_{name}" not in names(fresh)


def test_share_state_freshness_metrics(snapshot: Snapshot) -> None:
    """Per `__share_group_state` partition its age, and how many are stale; with no such topic
    (no share group yet, or Kafka 3.9) no age series and 0 stale."""
    stats = PipelineStats(started_ms=NOW - 10_000, source_up=True)
    stats.share_state_freshness = Freshness(
        tracked=(0, 1, 2),
        partition_count=3,
        # clock NOW + 2 s: partition 1 last confirmed 95 s ago, 2 never (tracked for 40 s)
        confirmed_ms={0: NOW - 1_000, 1: NOW - 93_000},
        stale_after_ms=30_000,
        since_ms=NOW - 38_000,
    )
    s = parse(via_text(collector(snapshot, stats=stats)))
    assert series(s, "offsetwatch_share_state_staleness_seconds") == {
        (("partition", "0"),): 3.0,
        (("partition", "1"),): 95.0,
        (("partition", "2"),): 40.0,
    }
    assert value(s, "offsetwatch_share_state_stale_partitions") == 2
    # the consumer-offsets ones are their own
    assert value(s, "offsetwatch_source_stale_partitions") == 0
    none = parse(via_text(collector(snapshot, stats=PipelineStats(started_ms=NOW))))
    assert series(none, "offsetwatch_share_state_staleness_seconds") == {}
    assert value(none, "offsetwatch_share_state_stale_partitions") == 0


def test_rendered_snapshot_part_is_cached(snapshot: Snapshot) -> None:
    holder = Holder(snapshot)
    now = [NOW]
    c = SnapshotCollector(holder, version=VERSION, clock_ms=lambda: now[0])
    first = c.render()
    second = c.render()
    assert first.chunks[0] is second.chunks[0]  # snapshot part rendered once
    now[0] += 5_000
    holder.stats.count_record("offset_commit", 3)
    third = c.render()
    assert third.chunks[0] is first.chunks[0]
    assert third.chunks[1] != first.chunks[1]  # self-metrics are always fresh
    assert value(parse(third.body.decode()), "offsetwatch_snapshot_age_seconds") == 5.0
    # gzip: one valid member holding exactly the plain body
    zipped = c.render(gzip=True)
    assert zipped.gzipped
    assert gzip.decompress(zipped.body) == c.render().body
    assert c.render(gzip=True).chunks[0] is zipped.chunks[0]
    # a new snapshot object is rendered anew, even if equal
    holder.snapshot = build(sample_state())
    assert c.render().chunks[0] is not first.chunks[0]
    c.warm(gzip=True)
    assert gzip.decompress(c.render(gzip=True).body) == c.render().body


def test_register_never_collects() -> None:
    def source() -> tuple[Snapshot, PipelineStats]:
        raise AssertionError("collect() called at registration")

    registry = CollectorRegistry()
    registry.register(SnapshotCollector(source))


def test_label_value_escaping() -> None:
    assert escape_label_value("plain") == "plain"
    assert escape_label_value('a"b') == r"a\"b"
    assert escape_label_value("a\\b") == r"a\\b"
    assert escape_label_value("a\nb") == r"a\nb"
    assert escape_label_value('\\"\n') == r"\\\"\n"
    c = collector(build(sample_state()))
    text = via_text(c)
    escaped = escape_label_value(ODD_GROUP)
    assert f'offsetwatch_group_lag{{group="{escaped}"}} 1\n' in text
    assert value(parse(text), "offsetwatch_group_lag", group=ODD_GROUP) == 1


def test_non_finite_and_large_values() -> None:
    view = GroupView("g", "CLASSIC", "EMPTY", "", "", -1, -1, True, ())
    rows = TopicRows("t", array("q", [5000]), array("q", [2**62]), array("i", [-1]),
                     array("q", [NOW]), array("q", [2**62 + 10]), array("q", [10]),
                     array("d", [math.inf]), bytes([0]), ("",))  # fmt: skip
    group = GroupSnapshot(view, (rows,), Status.OK, 1, NOW, 0.0, 10, math.inf)
    c = collector(Snapshot(NOW, True, (group,), 1))
    text = via_text(c)
    assert 'partition="5000"' in text
    assert "+Inf" in text
    line = 'offsetwatch_group_partition_committed_offset{group="g",topic="t",partition="5000"}'
    assert f"{line} {2**62}\n" in text
    assert parse(text) == parse(via_registry(c))
    # leader epoch -1 (none) is not exported
    assert "offsetwatch_group_partition_leader_epoch" not in names(parse(text))


def test_docs_list_every_metric() -> None:
    """docs/metrics.md has one table row per metric, with its exact type and labels."""
    docs = (REPO / "docs" / "metrics.md").read_text()
    rows = {
        name: (kind, labels)
        for name, kind, labels in re.findall(
            r"^\| `((?:offsetwatch|kafka)_[a-z_]+)` \| (gauge|counter) \| ([^|]*) \|",
            docs,
            re.MULTILINE,
        )
    }
    assert set(rows) == {spec.name for spec in FAMILIES}
    for spec in FAMILIES:
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "-"
        assert rows[spec.name] == (spec.type, labels), spec.name
    assert {spec.name for spec in ALIAS_FAMILIES} < {spec.name for spec in FAMILIES}


def test_conformance_lag_matches_kafka(conformance_dir: Path) -> None:
    """Lag exported for Kafka 4.0's own records equals what Kafka's OffsetFetch reported."""
    snapshot, final = conformance_snapshot(conformance_dir)
    s = parse(via_text(collector(snapshot)))
    checked = 0
    for group, described in final.items():
        # read_uncommitted replay keeps commits of aborted/open transactions (state's concern)
        if "offsets" not in described or group.startswith("txn-"):
            continue
        for row in described["offsets"]:
            labels = {"group": group, "topic": row["topic"], "partition": str(row["partition"])}
            assert value(s, "offsetwatch_group_partition_lag", **labels) == row["lag"]
            assert (
                value(s, "offsetwatch_group_partition_committed_offset", **labels)
                == (row["committed_offset"])
            )
            checked += 1
        states = series(s, "offsetwatch_group_state")
        assert ((("group", group), ("state", described["state"]))) in states
    assert checked > 50


# ------------------------------------------------------------------- conformance snapshot


def conformance_snapshot(conformance_dir: Path) -> tuple[Snapshot, dict[str, Any]]:
    run = conformance_dir / "runs" / "main"
    state = OffsetState()
    latest = 0
    for record in decode_run(conformance_dir):
        latest = max(latest, record.timestamp)
        if isinstance(record, Record):
            state.apply(record)
    final = json.loads((run / "groups-final.json").read_text())
    now = latest + 60_000
    ends: dict[tuple[str, int], LogEndHistory] = {}
    for described in final.values():
        for row in described.get("offsets", ()):
            history = ends.setdefault((row["topic"], row["partition"]), LogEndHistory())
            if not len(history):
                history.record(now - 1_000, row["log_end_offset"])
    return SnapshotBuilder().build(state, ends, now, True), final


# -------------------------------------------------------------------------- at scale


def synthetic_snapshot(partitions: int, per_topic: int = 10, topics: int = 10) -> Snapshot:
    groups = []
    for g in range(partitions // (per_topic * topics)):
        all_rows = []
        for t in range(topics):
            ps = array("q", range(per_topic))
            all_rows.append(
                TopicRows(
                    f"topic-{g % 50}-{t}",
                    ps,
                    array("q", [1_000 + p for p in ps]),
                    array("i", [5] * per_topic),
                    array("q", [NOW - 1_000] * per_topic),
                    array("q", [2_000 + p for p in ps]),
                    array("q", [1_000] * per_topic),
                    array("d", [1.5 if p % 7 else math.nan for p in ps]),
                    bytes(p % 6 for p in ps),
                    ("",) * per_topic,
                )
            )
        members = tuple(
            MemberView(f"member-{g}-{m}", f"client-{m}", "/10.1.2.3", None, None, None,
                       tuple((rows.topic, tuple(range(m, per_topic, 4))) for rows in all_rows))
            for m in range(4)
        )  # fmt: skip
        view = GroupView(
            f"group-{g}", "CLASSIC", "STABLE", "consumer", "range", 3, 3, False, members
        )
        lag = 1_000 * topics * per_topic
        groups.append(GroupSnapshot(view, tuple(all_rows), Status.OK, 10, NOW, 1.0, lag, 2.5))
    return Snapshot(NOW, True, tuple(groups), partitions)


def test_text_path_at_scale_equals_prometheus_client() -> None:
    """10,000 series: the text path, cached and gzipped, says what generate_latest says.
    (Scrape times at ~100,000 series: benchmarks/exporter.py.)"""
    snapshot = synthetic_snapshot(1_600)  # 7 series per partition + topic/group series
    c = collector(snapshot)
    registry = CollectorRegistry()
    registry.register(c)
    reference = generate_latest(registry)
    first = c.render()
    again = c.render()
    zipped = c.render(gzip=True)
    lines = [line for line in first.body.split(b"\n") if line and not line.startswith(b"#")]
    assert len(lines) >= 10_000
    assert again.chunks[0] is first.chunks[0]
    assert gzip.decompress(zipped.body) == again.body
    assert parse(first.body.decode()) == parse(reference.decode())


def test_fleet_settings_mismatch_is_1_while_any_replica_differs(snapshot: Snapshot) -> None:
    from offsetwatch.exporter.stats import FleetFigures

    alone = parse(via_text(collector(snapshot, stats=PipelineStats(started_ms=NOW))))
    assert not series(alone, "offsetwatch_fleet_settings_mismatch")
    for mismatched, said in ((0, 0), (2, 1)):
        stats = PipelineStats(started_ms=NOW)
        stats.fleet = FleetFigures(10, 3, 0, settings_mismatched=mismatched)
        s = parse(via_text(collector(snapshot, stats=stats)))
        assert value(s, "offsetwatch_fleet_settings_mismatch") == said
