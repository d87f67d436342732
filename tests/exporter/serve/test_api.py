"""What /readyz and the group API say when the cluster stops confirming the state, of
`__consumer_offsets` and of `__share_group_state` (the share groups')."""

from __future__ import annotations

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.decoder.records import (
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    StateBatch,
)
from offsetwatch.exporter.judge.group_views import GroupView
from offsetwatch.exporter.judge.share_snapshot import ShareStatusConfig, share_group
from offsetwatch.exporter.judge.snapshot import GroupSnapshot, Snapshot
from offsetwatch.exporter.judge.status import Status
from offsetwatch.exporter.serve.api import freshness_json, group_detail, groups_list, readiness
from offsetwatch.exporter.state.share_state import ShareStateStore
from offsetwatch.exporter.stats import Freshness, PipelineStats

NOW = 1_800_000_000_000
GROUP = "orders-service"
PARTITION = partition_for(GROUP, 50)


def _freshness(stale_partition: int | None) -> Freshness:
    confirmed = {p: NOW - 2_000 for p in range(50)}
    causes = {}
    if stale_partition is not None:
        confirmed[stale_partition] = NOW - 95_000
        causes[stale_partition] = "its leader did not answer for its log end: timed out"
    return Freshness(
        tracked=tuple(range(50)),
        partition_count=50,
        confirmed_ms=confirmed,
        causes=causes,
        stale_after_ms=30_000,
        since_ms=NOW - 600_000,
    )


def _ready_stats(freshness: Freshness) -> PipelineStats:
    stats = PipelineStats(source_up=True, freshness=freshness)
    stats.mark_ready(NOW - 500_000)
    stats.set_position(PARTITION, 10)
    stats.set_high_watermark(PARTITION, 10)
    return stats


def test_ready_while_every_partition_is_confirmed() -> None:
    ready, body = readiness(_ready_stats(_freshness(None)), NOW)
    assert ready
    assert body["stale_partitions"] == 0 and "stale" not in body


def test_a_stale_partition_makes_the_exporter_not_ready_and_says_why() -> None:
    ready, body = readiness(_ready_stats(_freshness(PARTITION)), NOW)
    assert not ready
    assert body["caught_up"] is True and body["source_up"] is True
    assert body["reason"].startswith(
        "stale: the cluster has not confirmed 1 of 50 __consumer_offsets partitions for more "
        "than 30 s"
    )
    assert f"partition {PARTITION}, 95 s: its leader did not answer" in body["reason"]
    assert body["stale_partitions"] == 1
    (stale,) = body["stale"]
    assert stale["partition"] == PARTITION
    assert stale["age_seconds"] == 95.0
    assert stale["confirmed_at"].endswith("Z")


def test_the_groups_of_a_stale_partition_are_marked() -> None:
    other = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 50) != PARTITION)
    snapshot = Snapshot(
        time_ms=NOW, ready=True, groups=(), tracked_partitions=0, freshness=_freshness(PARTITION)
    )
    mine = freshness_json(snapshot.freshness, GROUP, NOW)
    assert mine == {
        "offsets_partition": PARTITION,
        "confirmed_at": mine["confirmed_at"] if mine else None,
        "age_seconds": 95.0,
        "stale": True,
        "cause": "its leader did not answer for its log end: timed out",
    }
    theirs = freshness_json(snapshot.freshness, other, NOW)
    assert theirs is not None and theirs["stale"] is False and theirs["cause"] is None
    assert theirs["age_seconds"] == 2.0
    assert groups_list(snapshot) == []


def test_no_freshness_before_the_partitions_are_known() -> None:
    assert freshness_json(Freshness(), GROUP, NOW) is None


def test_source_down_says_librdkafka_reason_and_what_to_check_for_credentials() -> None:
    stats = PipelineStats(source_up=False, ready=True)
    assert readiness(stats)[1]["reason"] == "source down"
    stats.source_last_error = "_TRANSPORT: 127.0.0.1:9092/1: Connection refused"
    assert readiness(stats)[1]["reason"] == (
        "source down: _TRANSPORT: 127.0.0.1:9092/1: Connection refused"
    )
    stats.source_last_error = "_AUTHENTICATION: SASL authentication error: Authentication failed"
    reason = readiness(stats)[1]["reason"]
    assert reason.startswith("source down: _AUTHENTICATION: SASL authentication error")
    assert "check the credentials" in reason and "file is replaced" in reason
    stats.source_last_error = (
        "ssl://127.0.0.1:9093/1: Receive failed: error:0A000416:SSL routines::ssl/tls alert "
        "certificate unknown: SSL alert number 46"
    )
    assert "check the TLS files" in readiness(stats)[1]["reason"]
    # a refused connection to a TLS listener is no TLS problem
    stats.source_last_error = "ssl://127.0.0.1:9093/1: Connect failed: Connection refused"
    assert readiness(stats)[1]["reason"].endswith("Connection refused")


# -- share groups: the freshness of `__share_group_state` ----------------------------------

QUEUE = "orders-queue"
QUEUE_TOPIC_ID = "Ka5iZpX1TpOuKhN2w1Q3vA"
#: the share coordinator's partitions of (QUEUE, QUEUE_TOPIC_ID, 0) and (..., 7) of 50
#: (tests/decoder/test_partitioner.py, answered by Kafka's own code)
STATE_PARTITIONS = {0: 36, 7: 43}


def _share_freshness(stale_partition: int | None) -> Freshness:
    confirmed = {p: NOW - 1_500 for p in range(50)}
    causes = {}
    if stale_partition is not None:
        confirmed[stale_partition] = NOW - 64_000
        causes[stale_partition] = (
            "not read up to the log end its leader answered (12; read up to offset 9)"
        )
    return Freshness(
        tracked=tuple(range(50)),
        partition_count=50,
        confirmed_ms=confirmed,
        causes=causes,
        stale_after_ms=30_000,
        since_ms=NOW - 600_000,
    )


def _queue_snapshot(share_freshness: Freshness, offsets: Freshness | None = None) -> Snapshot:
    """One share group (QUEUE, share partitions 0 and 7 of one topic) and one consumer group."""
    store = ShareStateStore()
    for partition in STATE_PARTITIONS:
        key = SharePartitionKey(QUEUE, QUEUE_TOPIC_ID, partition)
        value = ShareSnapshotValue(0, 1, 0, 10, (StateBatch(10, 11, 2, 1),))
        store.apply(ShareStateRecord(0, key, 0, value, 0, 0, NOW - 5_000))
    view = GroupView(QUEUE, "SHARE", "EMPTY", "share", "", 1, 1, False, ())
    share = share_group(
        None, view, store.groups()[QUEUE], {}, NOW, NOW - 60_000, ShareStatusConfig(),
        {QUEUE_TOPIC_ID: "orders"},
    )  # fmt: skip
    queue = GroupSnapshot(view, (), share.status, 0, 0, 0.0, 0, 0.0, share=share)
    classic = GroupSnapshot(
        GroupView(GROUP, "CLASSIC", "STABLE", "consumer", "range", 1, 1, False, ()),
        (),
        Status.OK,
        0,
        0,
        0.0,
        0,
        0.0,
    )
    return Snapshot(
        time_ms=NOW,
        ready=True,
        groups=(classic, queue),
        tracked_partitions=0,
        freshness=offsets or _freshness(None),
        share_freshness=share_freshness,
    )


def _ready_share_stats(share_freshness: Freshness) -> PipelineStats:
    stats = _ready_stats(_freshness(None))
    stats.share_state_freshness = share_freshness
    return stats


def test_a_stale_share_state_partition_makes_the_exporter_not_ready_and_says_why() -> None:
    ready, body = readiness(_ready_share_stats(_share_freshness(STATE_PARTITIONS[7])), NOW)
    assert not ready
    assert body["stale_partitions"] == 0 and "stale" not in body
    assert body["reason"].startswith(
        "stale: the cluster has not confirmed 1 of 50 __share_group_state partitions for more "
        "than 30 s, so what is served for their share groups may be old (partition 43, 64 s: "
        "not read up to the log end its leader answered (12"
    )
    assert body["share_state_stale_partitions"] == 1
    (stale,) = body["share_state_stale"]
    assert stale["partition"] == 43 and stale["age_seconds"] == 64.0
    assert stale["confirmed_at"].endswith("Z") and stale["cause"].startswith("not read up")


def test_stale_consumer_offsets_is_named_first_and_both_are_listed() -> None:
    stats = _ready_share_stats(_share_freshness(STATE_PARTITIONS[0]))
    stats.freshness = _freshness(PARTITION)
    ready, body = readiness(stats, NOW)
    assert not ready and "__consumer_offsets partitions" in body["reason"]
    assert body["stale_partitions"] == 1 and body["share_state_stale_partitions"] == 1
    assert [s["partition"] for s in body["share_state_stale"]] == [36]


def test_no_share_state_topic_means_ready_and_nothing_stale() -> None:
    """No `__share_group_state` (no share group yet, or Kafka 3.9): nothing tracked."""
    stats = _ready_stats(_freshness(None))
    assert stats.share_state_freshness == Freshness()
    ready, body = readiness(stats, NOW)
    assert ready
    assert body["share_state_stale_partitions"] == 0 and "share_state_stale" not in body
    listed = {g["group"]: g for g in groups_list(_queue_snapshot(Freshness()))}
    assert listed[QUEUE]["stale"] is False
    assert listed[QUEUE]["share_state_stale"] is False
    assert listed[QUEUE]["share_state_age_seconds"] is None
    detail = group_detail(_queue_snapshot(Freshness()), QUEUE)
    assert detail is not None
    assert detail["share"]["stale"] is False and detail["share"]["state_freshness"] == []
    assert [row["state_partition"] for row in detail["share"]["partitions"]] == [None, None]


def test_the_share_groups_of_a_stale_state_partition_are_marked_in_the_list() -> None:
    listed = {g["group"]: g for g in groups_list(_queue_snapshot(_share_freshness(43)))}
    queue = listed[QUEUE]
    assert queue["stale"] is True and queue["share_state_stale"] is True
    assert queue["share_state_age_seconds"] == 64.0
    assert queue["share_state_cause"].startswith("not read up to the log end")
    # a consumer group has no share state: none of its fields, and not stale
    assert listed[GROUP]["stale"] is False and "share_state_stale" not in listed[GROUP]
    fresh = {g["group"]: g for g in groups_list(_queue_snapshot(_share_freshness(None)))}
    assert fresh[QUEUE]["stale"] is False and fresh[QUEUE]["share_state_stale"] is False
    assert fresh[QUEUE]["share_state_age_seconds"] == 1.5
    assert fresh[QUEUE]["share_state_cause"] is None
    # a state partition holding none of its share partitions does not touch it
    other = {g["group"]: g for g in groups_list(_queue_snapshot(_share_freshness(5)))}
    assert other[QUEUE]["stale"] is False


def test_a_stale_offsets_partition_still_marks_a_share_group() -> None:
    snapshot = _queue_snapshot(_share_freshness(None), _freshness(partition_for(QUEUE, 50)))
    (queue,) = [g for g in groups_list(snapshot) if g["group"] == QUEUE]
    assert queue["stale"] is True and queue["share_state_stale"] is False


def test_a_share_groups_detail_names_its_state_partitions_and_their_freshness() -> None:
    detail = group_detail(_queue_snapshot(_share_freshness(43)), QUEUE)
    assert detail is not None
    share = detail["share"]
    assert [(r["partition"], r["state_partition"]) for r in share["partitions"]] == [
        (0, 36),
        (7, 43),
    ]
    assert share["stale"] is True
    fresh, stale = share["state_freshness"]
    assert fresh == {
        "state_partition": 36,
        "confirmed_at": fresh["confirmed_at"],
        "age_seconds": 1.5,
        "stale": False,
        "cause": None,
    }
    assert fresh["confirmed_at"].endswith("Z")
    assert stale["state_partition"] == 43 and stale["stale"] is True
    assert stale["age_seconds"] == 64.0 and stale["cause"].startswith("not read up")


GRANT = "kafka-acls.sh --bootstrap-server k:9092 --add --allow-principal User:m --operation Read"


def test_a_refused_offsets_topic_is_not_ready_and_names_the_grant() -> None:
    stats = PipelineStats(source_up=True, freshness=_freshness(None))
    stats.refused_sources = {
        "__consumer_offsets": ("TOPIC_AUTHORIZATION_FAILED: denied", f"{GRANT} --topic x")
    }
    ready, body = readiness(stats, NOW)
    assert not ready
    assert body["reason"].startswith("not authorized to read __consumer_offsets (TOPIC_AUTH")
    assert body["reason"].endswith(f"grant it: {GRANT} --topic x")
    assert body["not_authorized"][0]["operation"] == "Read"


def test_a_refused_share_state_topic_is_listed_and_still_ready() -> None:
    """Kafka cannot tell whether __share_group_state exists to a principal it refuses: the
    consumer groups are right, so still ready; the share groups say it themselves."""
    stats = _ready_stats(_freshness(None))
    stats.refused_sources = {"__share_group_state": ("TOPIC_AUTHORIZATION_FAILED: x", GRANT)}
    stats.denied_topics = {"orders": ("TOPIC_AUTHORIZATION_FAILED: y", "describe grant")}
    ready, body = readiness(stats, NOW)
    assert ready
    assert [(x["name"], x["operation"]) for x in body["not_authorized"]] == [
        ("__share_group_state", "Read"),
        ("orders", "Describe"),
    ]
