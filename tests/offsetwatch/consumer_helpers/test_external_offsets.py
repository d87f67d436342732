"""ExternalOffsets with FileOffsetStore on the mock cluster: state and position come back
after a restart, partitions moving between members carry their state, and stored offsets
outside the log restart at the log start.

The state of each partition is the list of offsets it has processed, so "exactly once" is
checked directly: after any restart or rebalance it must be 0, 1, 2, ... with no repeat.
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
    PROTOCOLS,
    Reader,
    hold,
    make_consumer,
    poll_until,
    produce_in_small_batches,
    release,
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


def _complete(*states: ExternalOffsets[Processed]) -> bool:
    held = [(o, key) for o in states for key in o.partitions]
    return len(held) == PARTITIONS and all(len(o.state(*key)) == PER_PARTITION for o, key in held)


def test_state_and_position_come_back_after_a_restart(
    kafka_cluster: MockCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    create_data_topic(kafka_cluster, TOPIC, [PER_PARTITION] * PARTITIONS)
    store = FileOffsetStore(tmp_path / "offsets")

    before = _offsets(store)
    crashed = _reader(bootstrap, f"run1-{uuid.uuid4().hex}", "consumer", before)
    poll_until([crashed], lambda: len(crashed.read) >= 40)
    saved = store.load([(TOPIC, p) for p in range(PARTITIONS)])
    # Work done after the last save is lost with the process: it must be done again.
    crashed.on_message = lambda message: before.update(message, [-1])
    poll_until([crashed], lambda: len(crashed.read) >= 45)
    assert store.load([(TOPIC, p) for p in range(PARTITIONS)]) == saved

    # The restarted process (a new group, so the crashed member does not hold partitions):
    # offsets come from the store only.
    after = _offsets(store)
    restarted = _reader(bootstrap, f"run2-{uuid.uuid4().hex}", "consumer", after)
    try:
        poll_until([restarted], lambda: _complete(after))
        states = {key[1]: after.state(*key) for key in after.partitions}
    finally:
        restarted.consumer.close()
        crashed.consumer.close()
    # Each partition resumed exactly at its saved offset, or at the log start when it was
    # never saved (the mock hands out whole stored batches, so some partitions were finished
    # before the crash and others not begun).
    resumed = {p: saved[(TOPIC, p)].offset if (TOPIC, p) in saved else 0 for p in range(PARTITIONS)}
    assert sorted(restarted.read) == sorted(
        (p, o) for p in range(PARTITIONS) for o in range(resumed[p], PER_PARTITION)
    )
    assert states == {p: list(range(PER_PARTITION)) for p in range(PARTITIONS)}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_partitions_moving_to_a_new_member_carry_their_state(
    kafka_cluster: MockCluster,  # noqa: F811
    tmp_path: Path,
    protocol: str,
) -> None:
    """Revoked partitions are saved and dropped by the old owner, restored by the new one."""
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(TOPIC, PARTITIONS)
    produce_in_small_batches(bootstrap, TOPIC, PARTITIONS, PER_PARTITION)
    store = FileOffsetStore(tmp_path / "offsets")
    group = f"ext-{uuid.uuid4().hex}"
    # No save per message: what the first member did reaches the store through on_revoke.
    first_offsets, second_offsets = _offsets(store), _offsets(store)
    first = _reader(bootstrap, group, protocol, first_offsets, save=False)
    first.pause_each_after = PER_PARTITION // 4  # until `hold`: every partition begins
    readers = [first]
    try:
        # Every partition begun, none finished: whichever moves has state to carry.
        poll_until([first], lambda: {p for p, _ in first.read} == set(range(PARTITIONS)))
        held = hold(first)
        second = _reader(bootstrap, group, protocol, second_offsets, save=False)
        readers.append(second)
        poll_until(
            [first, second],
            lambda: (
                bool(second.assigned())
                and len(first_offsets.partitions) + len(second_offsets.partitions) == PARTITIONS
            ),
        )
        release(first, held)
        moved = set(second_offsets.partitions)
        assert not moved & set(first_offsets.partitions), "the old owner still holds state"
        carried = {key: second_offsets.state(*key) for key in moved}
        assert all(carried.values()), "the new owner restored what the old one saved"
        poll_until([first, second], lambda: _complete(first_offsets, second_offsets))
    finally:
        for reader in readers:
            reader.consumer.close()
    everything = first.read + second.read
    assert len(everything) == len(set(everything)) == PARTITIONS * PER_PARTITION
    # close() revoked everything: every partition is saved complete.
    assert {
        key: (entry.offset, json.loads(entry.state))
        for key, entry in store.load([(TOPIC, p) for p in range(PARTITIONS)]).items()
    } == {(TOPIC, p): (PER_PARTITION, list(range(PER_PARTITION))) for p in range(PARTITIONS)}


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
