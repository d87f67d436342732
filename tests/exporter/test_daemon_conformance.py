"""End to end against Kafka 4.0.0's own ground truth: a real broker's `__consumer_offsets`
replayed into a mock cluster, read by the running exporter, checked over HTTP.

The conformance vectors (`/work/shared/conformance/kafka-4.0.0`, see its README) hold every
record a real Kafka 4.0.0 broker wrote to `__consumer_offsets` during a scripted workload, and
`groups-final.json`: what the broker's OffsetFetch / ListOffsets / ListGroups answered at the
end (committed offset, log end, lag, metadata, group type and state). The exporter, reading
only the topic, must arrive at exactly that.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from offsetwatch.exporter.service import ExporterService
from offsetwatch.mock_cluster import MockCluster
from tests.exporter.daemon_helpers import (
    ConformanceRun,
    Workload,
    api_group,
    api_groups,
    create_workload_topics,
    expected_rows,
    exporter_config,
    load_run,
    readyz,
    replay_run,
    running_exporter,
    scrape,
    transaction_outcomes,
    wait_for,
    wait_ready_with_log_ends,
)
from tests.kafka_fixtures import produce_raw

pytestmark = pytest.mark.kafka


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        yield mock


def _check_api(service: ExporterService, run: ConformanceRun) -> None:
    listed = {g["group"]: g for g in api_groups(service)}
    for group_id, expected in run.groups_with_offsets().items():
        answer = api_group(service, group_id)
        assert answer.status == 200, (group_id, answer)
        detail = answer.json()
        assert (detail["kind"], detail["state"]) == (expected["type"], expected["state"]), group_id
        assert (listed[group_id]["kind"], listed[group_id]["state"]) == (
            expected["type"],
            expected["state"],
        )
        rows = {(r["topic"], r["partition"]): r for r in detail["partitions"]}
        want = expected_rows(expected)
        assert rows.keys() == want.keys(), group_id
        for key, row in want.items():
            got = rows[key]
            actual = (got["committed"], got["log_end"], got["lag"], got["metadata"])
            wanted = (
                row["committed_offset"],
                row["log_end_offset"],
                row["lag"],
                row["metadata"],
            )
            assert actual == wanted, (group_id, key)
            leader_epoch = None if row["leader_epoch"] < 0 else row["leader_epoch"]
            assert got["leader_epoch"] == leader_epoch, (group_id, key)
        assert detail["total_lag"] == sum(r["lag"] for r in want.values()), group_id
    for group_id in run.gone_groups():
        assert api_group(service, group_id).status == 404, group_id
        assert group_id not in listed
    # nothing else either: the exporter lists exactly the groups the broker listed (share
    # groups included, which have no offsets)
    assert set(listed) == set(run.groups_final)


def _check_metrics(service: ExporterService, run: ConformanceRun) -> None:
    metrics = scrape(service)
    labels = ("group", "topic", "partition")
    committed = metrics.by("offsetwatch_group_partition_committed_offset", *labels)
    lag = metrics.by("offsetwatch_group_partition_lag", *labels)
    want_committed: dict[tuple[str, ...], float] = {}
    want_lag: dict[tuple[str, ...], float] = {}
    for group_id, expected in run.groups_with_offsets().items():
        for (topic, partition), row in expected_rows(expected).items():
            key = (group_id, topic, str(partition))
            want_committed[key] = row["committed_offset"]
            want_lag[key] = row["lag"]
    # equal dicts: the right values, and no series of deleted groups, offsets or topics
    assert committed == want_committed
    assert lag == want_lag
    info = metrics.by("offsetwatch_group_info", "group", "kind", "state")
    for group_id, expected in run.groups_with_offsets().items():
        assert info.get((group_id, expected["type"], expected["state"])) == 1.0, group_id
    gone = run.gone_groups()
    assert not {key[0] for key in info} & gone
    assert metrics.value("offsetwatch_ready") == 1.0
    assert metrics.value("offsetwatch_source_up") == 1.0
    assert not metrics.series("offsetwatch_decode_errors_total")


@pytest.mark.parametrize("run_name", ["main", "expiry"])
def test_exporter_matches_kafka_ground_truth(
    cluster: MockCluster, conformance_dir: Path, run_name: str
) -> None:
    """Every group's committed offset, lag, metadata, kind and state equal Kafka's answers.

    The run's `records.jsonl` is produced byte for byte into a mock `__consumer_offsets` with
    run.json's partition count, each record into its recorded partition and in order; the data
    topics get as many messages as groups-final.json's log ends. Then a real `ExporterService`
    (daemon loop, log-end sampler, HTTP server) reads it, and once /readyz is 200 and the
    snapshot knows every log end, the JSON API (/api/v1/groups/{group}) and /metrics (parsed
    with prometheus_client's parser) must give, for every group with offsets in
    groups-final.json: the committed offset per (topic, partition), the lag, the metadata
    string exactly (including the trailing NUL that confluent-kafka appends), the leader epoch,
    the group kind (CLASSIC/CONSUMER) and state (EMPTY/STABLE); deleted and expired groups
    (in the manifest, not listed by the broker) must be absent.

    Transactions: records of ABORTED and of still-OPEN transactions (batches.jsonl: the batch
    is transactional and the producer's next marker in that partition is ABORT, or there is
    none) are left out of the replay. A real broker hides them from a read_committed reader
    (the exporter's source relies on that), but librdkafka's mock cannot: its Fetch reports no
    aborted transactions and LastStableOffset = HighWatermark, so a read_committed consumer
    would receive them. The resolution logic itself (markers, aborts, open transactions) is
    proven on the same captures by the segment-file path's TransactionResolver
    (tests/decoder/test_segments.py::test_conformance_transactions_resolve_like_the_markers);
    this test is about the running daemon arriving at Kafka's answers.
    """
    run = load_run(conformance_dir, run_name)
    written = replay_run(cluster, run, cluster.bootstrap_servers)
    outcomes = transaction_outcomes(run.batches)
    assert written == len(run.records) - sum(1 for o in outcomes.values() if o != "COMMIT")
    config = exporter_config(cluster.bootstrap_servers)
    with running_exporter(config) as service:
        wait_ready_with_log_ends(service)
        _check_api(service, run)
        _check_metrics(service, run)
        stats = service.exporter.stats
        assert stats.total_records == written
        assert stats.quarantined_total == 0


def test_conformance_data_has_what_the_test_relies_on(conformance_dir: Path) -> None:
    """Guards the assumptions above: a changed capture must fail loudly, not weaken the test."""
    main = load_run(conformance_dir, "main")
    assert main.gone_groups() == {"del-consumer-c727", "share-deleted-e50d"}
    outcomes = transaction_outcomes(main.batches)
    assert sorted(outcomes.values()).count("ABORT") == 3
    assert sorted(outcomes.values()).count("OPEN") == 3
    kinds = {(g["type"], g["state"]) for g in main.groups_with_offsets().values()}
    assert kinds == {
        ("CLASSIC", "EMPTY"),
        ("CLASSIC", "STABLE"),
        ("CONSUMER", "EMPTY"),
        ("CONSUMER", "STABLE"),
    }
    metadata = [
        row["metadata"] for g in main.groups_with_offsets().values() for row in g["offsets"]
    ]
    assert any(m.endswith("\x00") for m in metadata)
    expiry = load_run(conformance_dir, "expiry")
    assert expiry.gone_groups() == {
        "exp-classic-6033",
        "exp-consumer-d325",
        "exp-legacy-short-4c3b",
        "exp-simple-5a34",
    }


def test_ready_means_the_lag_is_known(cluster: MockCluster) -> None:
    """/readyz 200 promises meaningful lag: every committed partition's lag is exported."""
    create_workload_topics(cluster, cluster.bootstrap_servers, 3)
    workload = Workload(3)
    records = []
    for index in range(3):
        records += workload.join(f"billing-{index}") + workload.commits(f"billing-{index}", 2)
    produce_raw(cluster.bootstrap_servers, records)
    # a long interval makes the first (startup) round the only one during the test
    config = exporter_config(
        cluster.bootstrap_servers, sample_interval_s=60.0, status_window_s=120.0
    )
    with running_exporter(config) as service:
        wait_for(lambda: readyz(service).status == 200, "/readyz 200")
        wait_for(
            lambda: service.exporter.snapshot.ready,
            "a snapshot built after readiness",
        )
        metrics = scrape(service)
        committed = metrics.by("offsetwatch_group_partition_committed_offset", "group")
        assert len(committed) == 3
        lag = metrics.series("offsetwatch_group_partition_lag")
        assert len(lag) == len(metrics.series("offsetwatch_group_partition_committed_offset"))
