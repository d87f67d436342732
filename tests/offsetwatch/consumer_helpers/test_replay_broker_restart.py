"""A replay (`ReplayController`) across a crash and restart of the real broker still replays
once: each record processed exactly once, for eager, cooperative and KIP-848 members.

The broker is the module's own (SIGKILL and restart would disturb every other test of the
shared one). Each group had read its whole input (committed at the log end, untagged); a
replay from the beginning starts. Every member processes the first half of each partition,
committing each record through the controller, and holds; the broker is SIGKILLed and
restarted on the same data (its group coordinator reloads the groups from
__consumer_offsets); the members go on. The classic members lose their partitions while the
coordinator is away (librdkafka's session timeout) and take them again through on_assign: a
partition taken again must continue from the replay's tagged commit, never from the replay's
start (with the mark ignored, each classic group processed its first 24 records twice). The
KIP-848 member keeps its assignment across the restart (the broker reloads it) and goes on
from its fetch positions.

`broker restart` gives up after 30 s while the JVM goes on recovering, which a loaded machine
exceeds: the module waits for the broker to serve instead.

The three groups run side by side in one polling loop, so that one restart serves all.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Message, TopicPartition

from offsetwatch.consumer_helpers import FromBeginning, ReplayController, replay_id_of
from tests.offsetwatch.consumer_helpers.clients import (
    PROTOCOLS,
    Reader,
    hold,
    make_consumer,
    poll_until,
    release,
)
from tests.real_broker import Broker, broker_script, own_broker, unique, wait_serving

pytestmark = pytest.mark.broker

PARTITIONS = 2
PER_PARTITION = 30
HALF = 12
REPLAY_ID = "restart-1"
#: generous: a restart recovers the logs and reloads the coordinators on a loaded machine
WAIT_S = 180.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with own_broker(tmp_path_factory.mktemp("replay-restart") / "broker") as own:
        yield own


class CountingController(ReplayController):
    """Counts the partitions each on_assign hands over (to show the restart moved them)."""

    __slots__ = ("given",)

    def __init__(self) -> None:
        super().__init__(REPLAY_ID, FromBeginning())
        self.given: list[int] = []

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.given.append(len(partitions))
        super().on_assign(consumer, partitions)


def restart(broker: Broker) -> None:
    """`broker restart`, waiting as long as log recovery takes: the script gives up after 30 s
    (the JVM goes on starting), which a loaded machine exceeds."""
    done = subprocess.run(
        [str(broker_script()), "restart", str(broker.directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0 and "not started after" not in done.stderr:
        raise AssertionError(f"broker restart failed: {done.stderr}")
    wait_serving(broker, timeout_s=WAIT_S)


def tagged_commits(broker: Broker, group: str) -> dict[tuple[str, int], tuple[int, str | None]]:
    """Kafka's OffsetFetch: each partition's offset and the replay id its metadata carries."""
    admin = broker.admin()  # kept alive until its future answers
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=30
    )[group]
    return {
        (tp.topic, tp.partition): (tp.offset, replay_id_of(tp.metadata))
        for tp in future.result(timeout=60).topic_partitions
    }


def test_a_replay_across_a_broker_restart_processes_each_record_once(
    broker: Broker, record_property: Callable[[str, object], None]
) -> None:
    topic = unique("replayed")
    broker.create_topic(topic, PARTITIONS)
    broker.produce(topic, [PER_PARTITION] * PARTITIONS)
    everything = sorted(f"{p}:{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION))
    groups = {protocol: unique(f"replay-{protocol}") for protocol in PROTOCOLS}
    for group in groups.values():  # each group had read its whole input
        broker.commit(group, {(topic, p): PER_PARTITION for p in range(PARTITIONS)})

    processed: dict[str, list[str]] = {protocol: [] for protocol in PROTOCOLS}
    readers: dict[str, Reader] = {}
    controllers: dict[str, CountingController] = {}
    for protocol, group in groups.items():
        consumer = make_consumer(broker.bootstrap, group, protocol)
        controller = controllers[protocol] = CountingController()

        def process(
            message: Message,
            consumer: object = consumer,
            controller: ReplayController = controller,
            seen: list[str] = processed[protocol],
        ) -> None:
            raw = message.value()
            assert isinstance(raw, bytes)
            seen.append(raw.decode())
            controller.commit(consumer, message)  # type: ignore[arg-type]

        readers[protocol] = Reader(consumer, process, pause_each_after=HALF)
        controller.subscribe(consumer, [topic])
    try:
        poll_until(
            readers.values(),
            lambda: all(len(seen) == HALF * PARTITIONS for seen in processed.values()),
            WAIT_S,
        )
        held = {protocol: hold(reader) for protocol, reader in readers.items()}
        halfway = {protocol: sorted(seen) for protocol, seen in processed.items()}
        expected_half = sorted(f"{p}:{i}" for p in range(PARTITIONS) for i in range(HALF))
        assert halfway == dict.fromkeys(PROTOCOLS, expected_half)

        assigns_before = {protocol: len(c.given) for protocol, c in controllers.items()}
        broker.control("kill")
        restart(broker)
        back = time.monotonic()
        for protocol, reader in readers.items():
            release(reader, held[protocol])
        poll_until(
            readers.values(),
            lambda: all(set(seen) == set(everything) for seen in processed.values()),
            WAIT_S,
        )
        # measured, never asserted: the README's Reliability table reports it
        recovery_s = round(time.monotonic() - back, 1)
        record_property("recovery_s", recovery_s)
        print(f"replay across a broker restart: replay done {recovery_s} s after it was back")
        # classic members lose their partitions while the coordinator is away (librdkafka's
        # session timeout) and take them again through on_assign, where the replay's mark
        # is all that keeps them from starting over; a KIP-848 member may keep them
        for protocol in ("eager", "cooperative"):
            again = controllers[protocol].given[assigns_before[protocol] :]
            assert any(again), f"{protocol}: no partition assigned again after the restart"
        # committed at the log end, as part of this replay: nothing is left to read again
        end = (PER_PARTITION, REPLAY_ID)
        for group in groups.values():
            assert tagged_commits(broker, group) == {(topic, p): end for p in range(PARTITIONS)}
    finally:
        for reader in readers.values():
            reader.consumer.close()
    twice = {
        protocol: sorted(value for value, count in Counter(seen).items() if count > 1)
        for protocol, seen in processed.items()
    }
    assert twice == {protocol: [] for protocol in PROTOCOLS}, "processed twice after the restart"
    assert {protocol: sorted(seen) for protocol, seen in processed.items()} == {
        protocol: everything for protocol in PROTOCOLS
    }
