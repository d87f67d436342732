"""Helpers for comparing `offsetwatch groups|offsets` with `kafka-consumer-groups.sh` on the
real broker: Kafka's whitespace tables parsed into dicts, live group members kept in threads,
and waiting for a group to settle (with a deadline, never a fixed sleep)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException

from tests.real_broker import Broker

#: Kafka prints "-" for an unknown value (no committed offset, no owner)
MISSING = "-"
# The one column title with a space in it; its values ("127.0.0.1:9092  (1)") have one too.
_COORDINATOR = "COORDINATOR (ID)"


def _cell(text: str) -> str | int | None:
    if text == MISSING:
        return None
    return int(text) if text.lstrip("-").isdigit() else text


def parse_table(output: str) -> list[dict[str, str | int | None]]:
    """Every row of every table Kafka's tool printed, as {column title: value}: numbers as
    int, "-" as None. Lines that are not table rows (notes like "Consumer group 'x' has no
    active members.") are left out; `--describe` of several groups prints one table each."""
    rows: list[dict[str, str | int | None]] = []
    header: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("GROUP "):
            header = line.replace(_COORDINATOR, _COORDINATOR.replace(" ", "\0")).split()
            header = [title.replace("\0", " ") for title in header]
            continue
        tokens = line.split()
        if header is None or not tokens:
            continue
        if _COORDINATOR in header:
            # "127.0.0.1:9092", "(1)" -> "127.0.0.1:9092 (1)", our spelling of the same pair
            at = header.index(_COORDINATOR)
            if len(tokens) > at + 1 and tokens[at + 1].startswith("("):
                tokens[at : at + 2] = [f"{tokens[at]} {tokens[at + 1]}"]
        if len(tokens) != len(header):
            continue
        rows.append(dict(zip(header, map(_cell, tokens), strict=True)))
    return rows


def consumer_groups_tool(broker: Broker, *args: str) -> str:
    """`kafka-consumer-groups.sh ARGS` on `broker`, with a timeout for a loaded machine (its
    default, 5 s, runs out while other JVMs start). The tool exits 0 after printing
    "Error: ..." for a failed call: that is a failed run here too."""
    output = broker.tool("kafka-consumer-groups.sh", "--timeout", "60000", *args)
    if "\nError: " in f"\n{output}":
        raise AssertionError(f"kafka-consumer-groups.sh {' '.join(args)}: {output.strip()}")
    return output


def tools_in_parallel(broker: Broker, calls: Sequence[Sequence[str]]) -> list[str]:
    """Several `kafka-consumer-groups.sh` runs at once: each is a JVM start (seconds of CPU),
    the runs only read; a part of each run waits for the broker, so three share two cores."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(lambda args: consumer_groups_tool(broker, *args), calls))


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    """Until `condition()` holds; the deadline is generous (a shared, loaded machine)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(0.3)


def describe(broker: Broker, group: str) -> Any:
    """Kafka's DescribeGroups / ConsumerGroupDescribe answer for one group."""
    admin = broker.admin()  # kept alive until its future answers
    return admin.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=60)


def settled(broker: Broker, group: str, members: int, partitions: int) -> bool:
    """The group is Stable with `members` members that own `partitions` partitions, each
    once, and (KIP-848) every member has reached its target assignment."""
    try:
        found = describe(broker, group)
    except KafkaException:
        return False  # the coordinator is still loading right after the broker's start
    if str(found.state.name) != "STABLE" or len(found.members) != members:
        return False
    owned = [
        (tp.topic, tp.partition) for m in found.members for tp in m.assignment.topic_partitions
    ]
    targets_reached = all(
        m.target_assignment is None
        or sorted((tp.topic, tp.partition) for tp in m.target_assignment.topic_partitions)
        == sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        for m in found.members
    )
    return len(owned) == len(set(owned)) == partitions and targets_reached


@dataclass(slots=True)
class LiveMembers:
    """Consumers that stay in their groups (polling in threads) until `stop()`. They never
    commit: the groups' offsets are committed before they join, so nothing moves while the
    tests compare."""

    broker: Broker
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _errors: list[BaseException] = field(default_factory=list)

    def join(self, group: str, topics: Sequence[str], client_id: str, protocol: str) -> None:
        settings: dict[str, object] = {"client.id": client_id, "log_level": 0}
        if protocol == "consumer":
            settings["group.protocol"] = "consumer"  # KIP-848: the broker assigns, no barrier
        else:
            # the broker's minimum session; heartbeats run on librdkafka's own thread
            settings.update({"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000})
        consumer = self.broker.consumer(group, **settings)
        consumer.subscribe(list(topics))
        thread = threading.Thread(target=self._poll, args=(consumer,), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _poll(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set():
                consumer.poll(0.2)
        except BaseException as error:  # reported by stop(): a silent death would look stable
            self._errors.append(error)
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        if self._errors:
            raise self._errors[0]


@contextmanager
def live_members(broker: Broker) -> Iterator[LiveMembers]:
    members = LiveMembers(broker)
    try:
        yield members
    finally:
        members.stop()
