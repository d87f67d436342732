"""One `__consumer_offsets` partition moves between two exporters' parts: its groups and
position (state), the sinks' resume marks, and only once the sinks have taken its records."""

from __future__ import annotations

from typing import Any

import pytest

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter, NotDrained
from offsetwatch.exporter.serve.api import group_detail
from offsetwatch.exporter.sinks.publisher import (
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    RecordPublisher,
)
from offsetwatch.exporter.sinks.record_sinks import SinkPartition
from offsetwatch.exporter.sinks.resume_dedup import SinceMarks
from offsetwatch.record_factory import RecordFactory
from tests.exporter.sinks.test_resume_dedup import FakeProducer
from tests.exporter.state.test_ingest_speedups import Message

PARTITIONS = 3
T0 = 1_800_000_000_000
FACTORY = RecordFactory()


def group_in(partition: int, prefix: str) -> str:
    return next(
        f"{prefix}-{i}"
        for i in range(1000)
        if partition_for(f"{prefix}-{i}", PARTITIONS) == partition
    )


def commits(group: str, start: int, count: int) -> list[Message]:
    partition = partition_for(group, PARTITIONS)
    out = []
    for i in range(count):
        key, value = FACTORY.commit(group, "orders", i % 2, 100 + i, T0 + i)
        out.append(Message(partition, start + i, T0 + i, key, value))
    return out


class SlowProducer(FakeProducer):
    """Confirms deliveries at a poll only once `confirming` (the brokers answered)."""

    confirming = True

    def poll(self, _timeout: float = 0) -> int:
        return super().poll() if self.confirming else 0


def exporter_with_publisher() -> tuple[Exporter, list[SlowProducer]]:
    exporter = Exporter(ExporterConfig(bootstrap_servers="127.0.0.1:9", publish_topic="out"))
    producers: list[SlowProducer] = []

    def factory(config: dict[str, object]) -> SlowProducer:
        producers.append(SlowProducer(config))
        return producers[-1]

    sinks = exporter.sinks
    sinks.publisher = RecordPublisher({}, output_topic="out", producer_factory=factory)
    sinks._guard("publish", sinks.publish, "")
    exporter.store.ingestor.sinks.extend(sinks.guards)
    return exporter, producers


def detail(exporter: Exporter, group: str) -> dict[str, Any] | None:
    snapshot = exporter.judge.judge(exporter.store, T0 + 60_000, ready=True)
    return group_detail(snapshot, group)


def test_a_partition_moves_with_its_groups_position_and_resume_marks() -> None:
    a, a_producers = exporter_with_publisher()
    b, b_producers = exporter_with_publisher()
    moving, staying = group_in(0, "moving"), group_in(1, "staying")
    a_producers[0].confirming = False
    a.store.ingest(commits(moving, 0, 6) + commits(staying, 0, 4))
    b.store.ingest(commits(group_in(2, "b-own"), 0, 3))
    # the crash read-back found (0, 9) written before: the mark moves with the partition
    a.sinks.put(SinkPartition(0, SinceMarks(start_ms=T0).take(0), frozenset({9}), frozenset()))

    # its records are produced, not confirmed: the partition cannot move yet
    with pytest.raises(NotDrained):
        a.take_partition(0, PARTITIONS)
    a_producers[0].confirming = True
    handover = a.take_partition(0, PARTITIONS)

    assert set(handover.state.groups) == {moving}
    assert handover.state.position == 6
    assert handover.sinks.published_skip == frozenset({9})
    # A keeps the rest and holds nothing of partition 0 any more
    assert moving not in a.store.offsets.groups and staying in a.store.offsets.groups
    assert 0 not in a.store.positions and a.store.positions[1] == 4
    assert detail(a, moving) is None

    b.put_partition(handover, PARTITIONS)
    assert b.store.positions[0] == 6
    moved = detail(b, moving)
    assert moved is not None
    committed = {(p["topic"], p["partition"]): p["committed"] for p in moved["partitions"]}
    assert committed == {("orders", 0): 104, ("orders", 1): 105}
    assert detail(b, group_in(2, "b-own")) is not None

    # B reads on from the position: the record the crashed run wrote is not published twice
    b.store.ingest(commits(moving, 6, 4))
    b_producers[0].poll()
    published = [dict(p["headers"]) for p in b_producers[0].produced]
    assert [
        int(h[HEADER_SOURCE_OFFSET]) for h in published if h[HEADER_SOURCE_PARTITION] == b"0"
    ] == [6, 7, 8]
    assert b.sinks.publisher is not None
    assert b.sinks.publisher.confirmed_positions()[0] == 10
    # and the resume bound of A's start came along (a restart reads back from then)
    bounds = b.sinks.since_bounds({0: 6}, {0: 10})
    assert bounds[0] <= T0


def test_a_group_of_another_partition_is_refused() -> None:
    a, _ = exporter_with_publisher()
    b, _ = exporter_with_publisher()
    a.store.ingest(commits(group_in(1, "g"), 0, 2))
    a.sinks.publisher.poll(0)  # type: ignore[union-attr]
    handover = a.take_partition(1, PARTITIONS)
    handover.state.partition = 2
    with pytest.raises(ValueError, match="belongs to partition 1"):
        b.put_partition(handover, PARTITIONS)
