"""Log-end samples as `log_end` records: which rounds write what, and the daemon writing them to
the archive and the republished topic of a real exporter on librdkafka's mock cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.decoder.log_end import IDS_PER_MS
from offsetwatch.exporter.sinks.log_end_records import LogEndRecords
from offsetwatch.mock_cluster import MockCluster
from tests.exporter.daemon_helpers import (
    DATA_LOG_ENDS,
    DATA_TOPIC,
    Workload,
    consume_all,
    create_workload_topics,
    exporter_config,
    running_exporter,
    scrape,
    wait_for,
    wait_ready_with_log_ends,
)
from tests.kafka_fixtures import fill_partitions, produce_raw

T0 = 1_767_225_600_000


def _summary(records: list[dict[str, Any]]) -> list[tuple[str, int, int, int]]:
    return [
        (r["key"]["topic"], r["key"]["partition"], r["value"]["log_end_offset"], r["timestamp"])
        for r in records
    ]


def test_first_round_is_full_then_only_changes_until_the_next_full_round() -> None:
    recorder = LogEndRecords(full_round_ms=60_000)
    first = recorder.records(T0, {("b", 0): 5, ("a", 1): 7, ("a", 0): 3})
    assert _summary(first) == [("a", 0, 3, T0), ("a", 1, 7, T0), ("b", 0, 5, T0)]

    unchanged = recorder.records(T0 + 10_000, {("a", 0): 3, ("a", 1): 7, ("b", 0): 5})
    assert unchanged == []
    changed = recorder.records(T0 + 20_000, {("a", 0): 4, ("a", 1): 7, ("b", 0): 5})
    assert _summary(changed) == [("a", 0, 4, T0 + 20_000)]

    # a full round writes idle partitions again, so they stay visible to history jobs
    full = recorder.records(T0 + 60_000, {("a", 0): 4, ("a", 1): 7, ("b", 0): 5})
    assert _summary(full) == [
        ("a", 0, 4, T0 + 60_000),
        ("a", 1, 7, T0 + 60_000),
        ("b", 0, 5, T0 + 60_000),
    ]


def test_deleted_and_unlearned_partitions_write_nothing_and_come_back_when_seen() -> None:
    recorder = LogEndRecords(full_round_ms=600_000)
    recorder.records(T0, {("a", 0): 3, ("gone", 0): 9})
    # None: the topic was deleted; absent: not learned this round (timeout)
    assert recorder.records(T0 + 1000, {("a", 0): 3, ("gone", 0): None}) == []
    back = recorder.records(T0 + 2000, {("a", 0): 3, ("gone", 0): 0})
    assert _summary(back) == [("gone", 0, 0, T0 + 2000)]


def test_sample_envelope_can_never_pass_for_a_consumer_offsets_record() -> None:
    recorder = LogEndRecords(full_round_ms=600_000)
    records = recorder.records(T0, {("a", p): p for p in range(3)})
    records += recorder.records(T0, {("a", p): p + 1 for p in range(3)})  # same millisecond
    for record in records:
        assert record["type"] == "log_end"
        assert record["key_type"] == -1 and record["partition"] == -1
        assert record["group"] is None and record["tombstone"] is False
        assert record["value"]["sampled_at_ms"] == record["timestamp"] == T0
    # the usual dedupe on (partition, offset) keeps every sample
    positions = [(r["partition"], r["offset"]) for r in records]
    assert len(set(positions)) == len(records) == 6
    assert [r["offset"] for r in records] == list(range(T0 * IDS_PER_MS, T0 * IDS_PER_MS + 6))


# ---------------------------------------------------------------------------------------------
# The daemon on the mock cluster

OUTPUT = "offsets-canonical"


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        yield mock


def _archived(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.rglob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


@pytest.mark.kafka
def test_daemon_archives_and_publishes_log_end_samples(
    cluster: MockCluster, tmp_path: Path
) -> None:
    create_workload_topics(cluster, cluster.bootstrap_servers, 3)
    cluster.create_topic(OUTPUT, 1)
    workload = Workload(3)
    produce_raw(
        cluster.bootstrap_servers, workload.join("billing") + workload.commits("billing", 2)
    )
    archive = tmp_path / "archive"
    config = exporter_config(
        cluster.bootstrap_servers,
        archive_dir=archive,
        publish_topic=OUTPUT,
        log_end_full_round_s=3600.0,
    )
    with running_exporter(config) as service:
        wait_ready_with_log_ends(service)
        full_round = len(DATA_LOG_ENDS)
        wait_for(
            lambda: service.exporter.stats.log_end_records_total >= full_round,
            "the first (full) round written",
        )
        # only partition 1 moves: the following rounds write it alone
        fill_partitions(cluster.bootstrap_servers, DATA_TOPIC, {1: 4})
        wait_for(
            lambda: service.exporter.stats.log_end_records_total == full_round + 1,
            "the changed partition written once",
            describe=lambda: service.exporter.stats.log_end_records_total,
        )
        assert scrape(service).value("offsetwatch_log_end_records_total") == full_round + 1
    samples = [r for r in _archived(archive) if r["type"] == "log_end"]
    by_partition: dict[int, list[int]] = {}
    for sample in samples:
        assert sample["key"]["topic"] == DATA_TOPIC
        by_partition.setdefault(sample["key"]["partition"], []).append(
            sample["value"]["log_end_offset"]
        )
    expected = {p: [end] for p, end in enumerate(DATA_LOG_ENDS)}
    expected[1] = [DATA_LOG_ENDS[1], DATA_LOG_ENDS[1] + 4]
    assert by_partition == expected
    decoded = [r for r in _archived(archive) if r["type"] != "log_end"]
    assert decoded and all(r["partition"] >= 0 for r in decoded)

    published = consume_all(cluster.bootstrap_servers, OUTPUT, 1)
    republished = [json.loads(m.value) for m in published if m.value is not None]
    assert sorted(json.dumps(r) for r in republished if r["type"] == "log_end") == sorted(
        json.dumps(r) for r in samples
    )
    keys = {m.key for m in published if m.value is not None and b'"log_end"' in m.value}
    assert keys == {
        json.dumps(
            {"type": "log_end", "topic": DATA_TOPIC, "partition": p}, separators=(",", ":")
        ).encode()
        for p in range(len(DATA_LOG_ENDS))
    }
