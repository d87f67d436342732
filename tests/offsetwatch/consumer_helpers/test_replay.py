"""ReplayController: replay ids and the metadata a real broker returns, and on the mock
cluster what the real-broker tests do not cover: a snapshot start with clamping (the mock
deletes records in one call) and auto-commit of stored offsets.

Replays from the beginning and from a time, once across a member joining, for eager,
cooperative and KIP-848 groups, are tested on the real broker (test_real_broker.py), with
the naive seek as the control that does replay twice.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from offsetwatch.consumer_helpers import (
    FromBeginning,
    FromSnapshot,
    ReplayController,
    replay_id_of,
    replay_metadata,
)
from offsetwatch.mock_cluster import MockCluster
from tests.kafka_fixtures import create_data_topic, kafka_cluster  # noqa: F401
from tests.offsetwatch.consumer_helpers.clients import (
    Reader,
    make_consumer,
    poll_until,
    produce_timed,
)

TOPIC = "orders"
PARTITIONS = 4
PER_PARTITION = 60
EVERYTHING = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}


def test_replay_id_survives_the_trailing_nul_of_a_real_broker(conformance_dir: Path) -> None:
    groups = json.loads(
        (conformance_dir / "runs" / "main" / "groups-final.json").read_text(encoding="utf-8")
    )
    with_nul = [
        row["metadata"]
        for record in groups.values()
        for row in record.get("offsets", [])
        if (row["metadata"] or "").endswith("\x00")
    ]
    # What Kafka 4.0 returned for metadata committed by confluent-kafka 2.16.1.
    assert "manual-rewind\x00" in with_nul
    assert all(replay_id_of(text) is None for text in with_nul)
    assert replay_id_of(replay_metadata("fix-1234") + "\x00") == "fix-1234"
    assert replay_id_of(replay_metadata("fix-1234")) == "fix-1234"
    assert replay_id_of("") is None
    assert replay_id_of(None) is None


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\x00b"])
def test_replay_ids_are_checked(bad: str) -> None:
    with pytest.raises(ValueError, match="replay id"):
        ReplayController(bad, FromBeginning())


def _single_replay(
    bootstrap: str, group: str, controller: ReplayController, expected: set[tuple[int, int]]
) -> tuple[Reader, list[TopicPartition]]:
    reader = Reader(make_consumer(bootstrap, group, "consumer"))
    reader.on_message = lambda message: controller.commit(reader.consumer, message)
    controller.subscribe(reader.consumer, [TOPIC])
    try:
        poll_until([reader], lambda: set(reader.read) >= expected)
        # One more message per partition: nothing older may come first.
        produce_timed(bootstrap, TOPIC, {p: [10**13] for p in range(PARTITIONS)})
        poll_until([reader], lambda: len(reader.read) >= len(expected) + PARTITIONS)
        committed = reader.consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
    finally:
        reader.consumer.close()
    return reader, committed


@pytest.mark.kafka
def test_snapshot_start_with_clamping_and_untouched_partitions(
    kafka_cluster: MockCluster,  # noqa: F811
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    create_data_topic(kafka_cluster, TOPIC, [PER_PARTITION] * PARTITIONS)
    kafka_cluster.delete_records(TOPIC, 2, 20)  # log start of partition 2 moves to 20
    group = f"snapshot-{uuid.uuid4().hex}"
    consumer = make_consumer(bootstrap, group, "consumer")
    consumer.commit(offsets=[TopicPartition(TOPIC, 3, 50)], asynchronous=False)
    consumer.close()
    # partition 1 beyond its end -> 60; partition 2 before its start -> 20; 3 not in it.
    snapshot = {(TOPIC, 0): 10, (TOPIC, 1): 999, (TOPIC, 2): 5}
    expected = (
        {(0, o) for o in range(10, 60)}
        | {(2, o) for o in range(20, 60)}
        | {(3, o) for o in range(50, 60)}
    )
    reader, committed = _single_replay(
        bootstrap, group, ReplayController("snap", FromSnapshot(snapshot)), expected
    )
    assert sorted(reader.read) == sorted(expected | {(p, 60) for p in range(PARTITIONS)})
    assert {replay_id_of(c.metadata) for c in committed} == {"snap"}


@pytest.mark.kafka
def test_auto_commit_of_stored_offsets_keeps_the_mark(kafka_cluster: MockCluster) -> None:  # noqa: F811
    """store() + enable.auto.offset.store=false: librdkafka's auto-commit sends the stored
    metadata along, so auto-committing applications keep the replay mark too."""
    bootstrap = kafka_cluster.bootstrap_servers
    create_data_topic(kafka_cluster, TOPIC, [PER_PARTITION] * PARTITIONS)
    controller = ReplayController("auto", FromBeginning())
    reader = Reader(
        make_consumer(
            bootstrap,
            f"auto-{uuid.uuid4().hex}",
            "consumer",
            **{
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 50,
                "enable.auto.offset.store": False,
            },
        )
    )
    reader.on_message = lambda message: controller.store(reader.consumer, message)
    controller.subscribe(reader.consumer, [TOPIC])
    wanted = {(PER_PARTITION, "auto")}
    keys = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

    def committed() -> set[tuple[int, str | None]]:
        found = reader.consumer.committed(keys, timeout=10)
        return {(c.offset, replay_id_of(c.metadata)) for c in found}

    try:
        poll_until([reader], lambda: set(reader.read) >= EVERYTHING and committed() == wanted)
    finally:
        reader.consumer.close()
