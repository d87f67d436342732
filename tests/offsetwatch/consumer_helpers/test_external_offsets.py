"""ExternalOffsets with FileOffsetStore on the mock cluster: stored offsets outside the log
(the mock deletes records in one call) restart at the log start.

State and position coming back after a crash and a restart, and partitions moving between
members carrying their state, are tested on the real broker for eager, cooperative and
KIP-848 groups (test_real_broker.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Message

from offsetwatch.consumer_helpers import (
    ExternalOffsets,
    FileOffsetStore,
    OutOfRange,
    StoredPartition,
)
from offsetwatch.mock_cluster import MockCluster
from tests.kafka_fixtures import create_data_topic, kafka_cluster  # noqa: F401
from tests.offsetwatch.consumer_helpers.clients import (
    Reader,
    make_consumer,
    poll_until,
)

pytestmark = pytest.mark.kafka

TOPIC = "clicks"
PARTITIONS = 3
PER_PARTITION = 30

Processed = list[int]


def _offsets(
    store: FileOffsetStore,
    on_out_of_range: Callable[[OutOfRange, Processed], Processed] | None = None,
) -> ExternalOffsets[Processed]:
    return ExternalOffsets(
        store,
        initial=list,
        encode=lambda state: json.dumps(state).encode(),
        decode=json.loads,
        on_out_of_range=on_out_of_range,
    )


def _reader(
    bootstrap: str,
    group: str,
    protocol: str,
    offsets: ExternalOffsets[Processed],
    save: bool = True,
) -> Reader:
    reader = Reader(make_consumer(bootstrap, group, protocol))

    def process(message: Message) -> None:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None and partition is not None and offset is not None
        offsets.update(message, [*offsets.state(topic, partition), offset])
        if save:
            offsets.save()

    reader.on_message = process
    offsets.subscribe(reader.consumer, [TOPIC])
    return reader


def test_stored_offsets_outside_the_log_restart_at_the_log_start(
    kafka_cluster: MockCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    create_data_topic(kafka_cluster, TOPIC, [PER_PARTITION] * PARTITIONS)
    kafka_cluster.delete_records(TOPIC, 1, 10)  # retention: partition 1 now starts at 10
    store = FileOffsetStore(tmp_path / "offsets")
    store.save(
        {
            (TOPIC, 0): StoredPartition(500, b"[1, 2, 3]"),  # beyond the end: topic recreated
            (TOPIC, 1): StoredPartition(2, b"[0, 1]"),  # below the start
            (TOPIC, 2): StoredPartition(7, json.dumps(list(range(7))).encode()),
        }
    )
    events: list[tuple[OutOfRange, Processed]] = []

    def on_out_of_range(event: OutOfRange, stored: Processed) -> Processed:
        events.append((event, stored))
        return []

    offsets = _offsets(store, on_out_of_range=on_out_of_range)
    reader = _reader(bootstrap, f"oor-{uuid.uuid4().hex}", "eager", offsets, save=False)
    try:
        poll_until([reader], lambda: len(reader.read) >= 30 + 20 + 23)
        states = {key[1]: offsets.state(*key) for key in offsets.partitions}
        offsets.save()
        saved = store.load([(TOPIC, p) for p in range(PARTITIONS)])
    finally:
        reader.consumer.close()
    assert sorted(events, key=lambda e: e[0].partition) == [
        (OutOfRange(TOPIC, 0, 500, 0, PER_PARTITION), [1, 2, 3]),
        (OutOfRange(TOPIC, 1, 2, 10, PER_PARTITION), [0, 1]),
    ]
    assert states == {0: list(range(30)), 1: list(range(10, 30)), 2: list(range(30))}
    assert len(reader.read) == len(set(reader.read)) == 30 + 20 + 23
    assert {key[1]: (entry.offset, json.loads(entry.state)) for key, entry in saved.items()} == {
        p: (PER_PARTITION, state) for p, state in states.items()
    }
