"""What /readyz and the group API say when the cluster stops confirming the state."""

from __future__ import annotations

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.judge.snapshot import Snapshot
from offsetwatch.exporter.serve.api import freshness_json, groups_list, readiness
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
