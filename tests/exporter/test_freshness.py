"""The exporter never serves unconfirmed state as fresh: with the cluster gone, /readyz, the
group API and the metrics say which `__consumer_offsets` (and `__share_group_state`)
partitions are stale, since when and why; with it back, they are fresh again. A real
`ExporterService` (sampler and main loop running) on the mock cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.service import ExporterService
from offsetwatch.mock_cluster import MockCluster
from tests.exporter.daemon_helpers import (
    Workload,
    api_group,
    api_groups,
    create_workload_topics,
    exporter_config,
    readyz,
    running_exporter,
    scrape,
    wait_for,
    wait_ready_with_log_ends,
)
from tests.kafka_fixtures import produce_raw

pytestmark = pytest.mark.kafka

PARTITIONS = 3
GROUPS = ("billing", "shipping", "audit")


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        yield mock


def test_a_silent_cluster_makes_every_partition_stale_and_an_answer_fresh_again(
    cluster: MockCluster,
) -> None:
    bootstrap = cluster.bootstrap_servers
    create_workload_topics(cluster, bootstrap, PARTITIONS)
    workload = Workload(PARTITIONS)
    records = []
    for group in GROUPS:
        records += workload.join(group) + workload.commits(group, 2)
    produce_raw(bootstrap, records)
    config = exporter_config(bootstrap, sample_interval_s=0.5, stale_after_s=1.0)
    with running_exporter(config) as service:
        wait_ready_with_log_ends(service)
        body = readyz(service).json()
        assert body["stale_partitions"] == 0 and "stale" not in body
        # no __share_group_state here (no share group yet, or Kafka 3.9): nothing of it is
        # tracked, so nothing of it is stale, now or with the cluster gone
        assert body["share_state_stale_partitions"] == 0
        metrics = scrape(service)
        assert metrics.value("offsetwatch_source_stale_partitions") == 0
        assert metrics.value("offsetwatch_share_state_stale_partitions") == 0
        for partition in range(PARTITIONS):
            age = metrics.value("offsetwatch_source_staleness_seconds", partition=str(partition))
            assert age is not None and age >= 0
        detail = api_group(service, "billing").json()
        assert detail["freshness"]["offsets_partition"] == partition_for("billing", PARTITIONS)
        assert detail["freshness"]["stale"] is False
        assert not any(g["stale"] for g in api_groups(service))

        cluster.set_down()
        wait_for(
            lambda: readyz(service).json()["stale_partitions"] == PARTITIONS,
            "every partition stale",
            describe=lambda: readyz(service).body,
        )
        answer = readyz(service)
        assert answer.status == 503
        body = answer.json()
        assert body["ready"] is False
        assert {s["partition"] for s in body["stale"]} == set(range(PARTITIONS))
        assert all(s["cause"] and s["age_seconds"] > 1.0 for s in body["stale"])
        wait_for(
            lambda: all(g["stale"] for g in api_groups(service)),
            "every group marked stale in the API",
        )
        freshness = api_group(service, "billing").json()["freshness"]
        assert freshness["stale"] is True and freshness["cause"]
        assert scrape(service).value("offsetwatch_source_stale_partitions") == PARTITIONS
        assert body["share_state_stale_partitions"] == 0 and "share_state_stale" not in body
        assert scrape(service).value("offsetwatch_share_state_stale_partitions") == 0

        cluster.set_up()
        wait_for(
            lambda: readyz(service).status == 200,
            "ready again once the cluster answers",
            describe=lambda: readyz(service).body,
        )
        assert readyz(service).json()["stale_partitions"] == 0
        wait_for(
            lambda: not any(g["stale"] for g in api_groups(service)),
            "no group stale any more",
        )


SHARE_STATE_PARTITIONS = 2


def test_share_state_partitions_go_stale_with_the_cluster_and_fresh_again(
    cluster: MockCluster,
) -> None:
    """`__share_group_state` (here empty: the share reader reaches its ends at once) is
    confirmed per partition by the sampler's rounds like `__consumer_offsets`; with the
    cluster gone /readyz names its partitions too, and with it back they are fresh."""
    bootstrap = cluster.bootstrap_servers
    create_workload_topics(cluster, bootstrap, PARTITIONS)
    cluster.create_topic(SHARE_STATE_TOPIC, SHARE_STATE_PARTITIONS)
    workload = Workload(PARTITIONS)
    produce_raw(bootstrap, workload.join("billing") + workload.commits("billing", 2))
    config = exporter_config(bootstrap, sample_interval_s=0.5, stale_after_s=1.0)
    with running_exporter(config) as service:
        wait_ready_with_log_ends(service)
        wait_for(
            lambda: (
                set(service.exporter.stats.share_state_freshness.confirmed_ms)
                == set(range(SHARE_STATE_PARTITIONS))
            ),
            "every __share_group_state partition confirmed",
            describe=lambda: service.exporter.stats.share_state_freshness,
        )
        body = readyz(service).json()
        assert body["share_state_stale_partitions"] == 0 and "share_state_stale" not in body
        metrics = scrape(service)
        assert metrics.value("offsetwatch_share_state_stale_partitions") == 0
        for partition in range(SHARE_STATE_PARTITIONS):
            age = metrics.value(
                "offsetwatch_share_state_staleness_seconds", partition=str(partition)
            )
            assert age is not None and age >= 0

        cluster.set_down()
        wait_for(
            lambda: (
                readyz(service).json()["share_state_stale_partitions"] == SHARE_STATE_PARTITIONS
            ),
            "every __share_group_state partition stale",
            describe=lambda: readyz(service).body,
        )
        answer = readyz(service)
        assert answer.status == 503
        body = answer.json()
        assert {s["partition"] for s in body["share_state_stale"]} == set(
            range(SHARE_STATE_PARTITIONS)
        )
        assert all(s["cause"] and s["age_seconds"] > 1.0 for s in body["share_state_stale"])
        assert (
            scrape(service).value("offsetwatch_share_state_stale_partitions")
            == SHARE_STATE_PARTITIONS
        )

        cluster.set_up()
        wait_for(
            lambda: readyz(service).status == 200,
            "ready again once the cluster answers",
            describe=lambda: readyz(service).body,
        )
        assert readyz(service).json()["share_state_stale_partitions"] == 0


def test_a_share_state_topic_created_while_running_is_not_stale_as_it_appears(
    cluster: MockCluster,
) -> None:
    """`__share_group_state` is created with the first share group, maybe long after the
    exporter started: the share reader picks it up, its partitions are confirmed, and every
    /readyz answer on the way is ready with none stale. (That they age from when they appear
    is tests/exporter/test_daemon_share_freshness.py's, deterministically: here the empty
    partitions are usually confirmed by an end of partition before the next view.)"""
    bootstrap = cluster.bootstrap_servers
    create_workload_topics(cluster, bootstrap, PARTITIONS)
    workload = Workload(PARTITIONS)
    produce_raw(bootstrap, workload.join("billing") + workload.commits("billing", 2))
    config = exporter_config(bootstrap, sample_interval_s=0.5, stale_after_s=30.0)

    def started_an_hour_ago(service: ExporterService) -> None:
        service.exporter.store.share_freshness.since_ms -= 3_600_000

    with running_exporter(config, started_an_hour_ago) as service:
        wait_ready_with_log_ends(service)
        assert readyz(service).json()["share_state_stale_partitions"] == 0
        cluster.create_topic(SHARE_STATE_TOPIC, SHARE_STATE_PARTITIONS)
        seen: list[int] = []

        def confirmed() -> bool:
            # every answer on the way is ready and names no stale share-state partition
            answer = readyz(service)
            seen.append(answer.json()["share_state_stale_partitions"])
            assert answer.status == 200 and seen[-1] == 0, answer.body
            freshness = service.exporter.stats.share_state_freshness
            return set(freshness.confirmed_ms) == set(range(SHARE_STATE_PARTITIONS))

        wait_for(
            confirmed,
            "the new __share_group_state partitions confirmed",
            describe=lambda: service.exporter.stats.share_state_freshness,
        )
        assert scrape(service).value("offsetwatch_share_state_stale_partitions") == 0
