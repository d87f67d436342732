"""The exporter never serves unconfirmed state as fresh: with the cluster gone, /readyz, the
group API and the metrics say which `__consumer_offsets` partitions are stale, since when
and why; with it back, they are fresh again. A real `ExporterService` (sampler and main loop
running) on the mock cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from offsetwatch.decoder.partitioner import partition_for
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
        metrics = scrape(service)
        assert metrics.value("offsetwatch_source_stale_partitions") == 0
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
