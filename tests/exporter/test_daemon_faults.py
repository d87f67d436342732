"""Corrupt records in `__consumer_offsets`: quarantined to the dead-letter topic, counted, and
nothing else disturbed or lost.

Real `ExporterService` with publishing on (output topic + dead-letter topic on the same mock
cluster), real librdkafka clients, real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.canonical import Canonical, identity_key
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import Record
from offsetwatch.exporter.sinks.publisher import (
    HEADER_ERROR,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
)
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.mock_cluster import MockCluster
from tests.exporter.daemon_helpers import (
    Raw,
    Workload,
    api_group,
    consume_all,
    create_workload_topics,
    exporter_config,
    log_ends,
    running_exporter,
    scrape,
    state_projection,
    wait_for,
    wait_ready_with_log_ends,
    without_log_ends,
)
from tests.kafka_fixtures import produce_raw

pytestmark = pytest.mark.kafka

PARTITIONS = 3
OUTPUT = "offsets-canonical"
OUTPUT_PARTITIONS = 3
DLQ = "offsets-dlq"


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        yield mock


def _corrupt_records(workload: Workload) -> dict[str, Raw]:
    """One bad record per decode-error reason, each in a group's own partition."""
    factory = workload.factory
    key, value = factory.commit("billing-0", "orders", 1, 99, 1_700_000_100_000)
    assert value is not None
    truncated = (workload.partition_of("billing-0"), key, value[:-5])
    trailing = (workload.partition_of("billing-1"), key, value + b"\x00")
    [metadata_key, metadata_value] = factory.consumer_group("cg-new", 3, [], {})[0]
    assert metadata_value is not None and metadata_value[:2] == b"\x00\x00"
    # ConsumerGroupMetadata (type 3) knows value version 0 only and reads no newer ones
    unknown_version = (
        workload.partition_of("cg-new"),
        metadata_key,
        b"\x00\x09" + metadata_value[2:],
    )
    return {"truncated": truncated, "trailing": trailing, "version": unknown_version}


def _workload() -> tuple[list[Raw], dict[str, Raw], Workload]:
    workload = Workload(PARTITIONS)
    corrupt = _corrupt_records(workload)
    records: list[Raw] = []
    for index in range(4):
        records += workload.join(f"billing-{index}")
        records += workload.commits(f"billing-{index}", 2)
    records.append(corrupt["truncated"])
    records += workload.commits("billing-0", 2)  # applied after the bad one
    records.append(corrupt["version"])
    # a record type this decoder does not know (a future Kafka): republished, not quarantined
    records.append((0, b"\x00\x63future-key", b"\x00\x00future-value"))
    records += workload.delete("billing-3")
    records += workload.commits("billing-1", 1)
    records.append(corrupt["trailing"])  # the very last record of its partition
    return records, corrupt, workload


def test_corrupt_records_are_dead_lettered_and_nothing_is_lost(cluster: MockCluster) -> None:
    """Three undecodable records (a truncated OffsetCommitValue, a value with trailing bytes,
    a ConsumerGroupMetadata value of an unknown version) among good ones:

    * each lands in the dead-letter topic unchanged (key and value bytes) with headers naming
      the error and its source topic/partition/offset;
    * offsetwatch_decode_errors_total{reason} counts one per reason,
      offsetwatch_quarantined_total and offsetwatch_dlq_total count three;
    * every other record is applied: the exporter's state equals the state of the good records
      applied in order by hand, and the API shows the commits after a bad record;
    * the output topic holds exactly one canonical JSON record per good input record, keyed by
      its identity, equal to what the decoder makes of the source bytes; with the dead
      letters, every source offset is accounted for exactly once and the delivery-confirmed
      positions reach the log ends (the last record of a partition is a dead letter).
    """
    create_workload_topics(cluster, cluster.bootstrap_servers, PARTITIONS)
    cluster.create_topic(OUTPUT, OUTPUT_PARTITIONS)
    cluster.create_topic(DLQ, 1)
    records, corrupt, _ = _workload()
    produce_raw(cluster.bootstrap_servers, records)
    source = consume_all(cluster.bootstrap_servers, OFFSETS_TOPIC, PARTITIONS)
    assert len(source) == len(records)
    bad_bytes = {(p, k, v) for p, k, v in corrupt.values()}
    bad = [m for m in source if (m.partition, m.key, m.value) in bad_bytes]
    good = [m for m in source if (m.partition, m.key, m.value) not in bad_bytes]
    assert len(bad) == 3
    ends = log_ends(cluster.bootstrap_servers, OFFSETS_TOPIC, PARTITIONS)

    config = exporter_config(cluster.bootstrap_servers, publish_topic=OUTPUT, publish_dlq_topic=DLQ)
    with running_exporter(config) as service:
        wait_ready_with_log_ends(service)
        publisher = service.exporter.sinks.publisher
        assert publisher is not None
        wait_for(
            lambda: publisher.confirmed_positions() == {p: e for p, e in ends.items() if e},
            f"every source record confirmed up to the log ends {ends}",
            describe=publisher.confirmed_positions,
        )
        metrics = scrape(service)
        assert metrics.by("offsetwatch_decode_errors_total", "reason") == {
            ("truncated",): 1.0,
            ("trailing",): 1.0,
            ("version",): 1.0,
        }
        assert metrics.value("offsetwatch_quarantined_total") == 3.0
        assert metrics.value("offsetwatch_dlq_total") == 3.0
        assert metrics.value("offsetwatch_published_total") == len(good)
        assert metrics.value("offsetwatch_publish_errors_total") == 0.0
        assert sum(metrics.series("offsetwatch_records_total").values()) == len(good)
        assert metrics.value("offsetwatch_records_total", type="unknown", version="-1") == 1.0

        # the commits after the truncated record were applied
        detail = api_group(service, "billing-0").json()
        rows = {(r["topic"], r["partition"]): r for r in detail["partitions"]}
        assert rows[("orders", 1)]["metadata"] == "billing-0/4"
        assert api_group(service, "billing-3").status == 404
        assert publisher.stats().failed == 0
    state = state_projection(service.exporter.store.offsets)  # the main loop has stopped

    # every good record applied, in order, and nothing else
    codec = Codec()
    reference = OffsetState()
    decoded = {}
    for message in sorted(good, key=lambda m: (m.partition, m.offset)):
        record = codec.decode(
            message.key, message.value, message.partition, message.offset, message.timestamp
        )
        decoded[(message.partition, message.offset)] = record
        if isinstance(record, Record):
            reference.apply(record)
    assert state == state_projection(reference)

    # the dead letters: original bytes, the error and where the record came from
    dead = consume_all(cluster.bootstrap_servers, DLQ, 1)
    assert len(dead) == 3
    by_source = {}
    for letter in dead:
        headers = dict(letter.headers)
        assert headers[HEADER_SOURCE_TOPIC] == OFFSETS_TOPIC.encode()
        position = (int(headers[HEADER_SOURCE_PARTITION]), int(headers[HEADER_SOURCE_OFFSET]))
        by_source[position] = (letter.key, letter.value, headers[HEADER_ERROR].decode())
    assert by_source.keys() == {(m.partition, m.offset) for m in bad}
    reasons = {"truncated": "truncated", "trailing": "trailing", "version": "unsupported value"}
    for reason, raw in corrupt.items():
        [position] = [(m.partition, m.offset) for m in bad if (m.partition, m.key, m.value) == raw]
        _, key, value = raw
        letter_key, letter_value, error = by_source[position]
        assert (letter_key, letter_value) == (key, value)
        assert reasons[reason] in error, error

    # the output: one canonical record per good input record, keyed by identity
    output = without_log_ends(consume_all(cluster.bootstrap_servers, OUTPUT, OUTPUT_PARTITIONS))
    assert len(output) == len(good)
    canonical = Canonical()
    seen = set()
    for message in output:
        assert message.value is not None
        position = (
            json.loads(message.value)["partition"],
            json.loads(message.value)["offset"],
        )
        assert position not in seen
        seen.add(position)
        record = decoded[position]
        assert message.key == identity_key(record)
        assert message.value == canonical.to_json(record).encode()
    assert seen == set(decoded)
    # nothing lost: every source offset is either republished or dead-lettered
    assert seen | set(by_source) == {(m.partition, m.offset) for m in source}
