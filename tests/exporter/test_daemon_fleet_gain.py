"""A partition a running fleet replica gains shows its groups once the log-end sampler has
sampled their topics, not before: with no log end a partition is ERR (rule 1), so a stalled
group read ERR at its new owner until the sampler's next round (up to a sample interval)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.serve.api import group_detail
from offsetwatch.exporter.sources.kafka_source import (
    PartitionEof,
    PartitionsAssigned,
    SourceBatch,
)
from offsetwatch.record_factory import RecordFactory
from tests.exporter.state.test_ingest_speedups import Message

PARTITIONS = 3
T0 = 1_800_000_000_000
WINDOW_S = 10.0


def _group(partition: int) -> str:
    return next(f"g-{i}" for i in range(1000) if partition_for(f"g-{i}", PARTITIONS) == partition)


class Clock:
    now = T0 + 60_000

    def __call__(self) -> int:
        return self.now


def _replica(clock: Clock, asked: list[int]) -> tuple[Exporter, Any]:
    config = ExporterConfig(
        bootstrap_servers="127.0.0.1:9", sample_interval_s=1.0, status_window_s=WINDOW_S
    )
    exporter = Exporter(config, clock_ms=clock)
    exporter.fleet = SimpleNamespace()  # type: ignore[assignment]
    exporter.readers.request_sample = lambda: asked.append(clock.now)
    exporter.stats.mark_ready(clock.now)
    source = SimpleNamespace(
        cluster_id="c", partition_count=lambda: PARTITIONS, assigned_partitions=lambda: {0, 1, 2}
    )
    reader = SimpleNamespace(source=source)
    exporter.readers.offsets = reader  # type: ignore[assignment]
    return exporter, reader


def _status(exporter: Exporter, group: str, now: int) -> str | None:
    detail = group_detail(exporter.judge.judge(exporter.store, now, ready=True), group)
    return None if detail is None else str(detail["status"])


def test_a_gained_partition_shows_its_groups_once_their_topics_are_sampled() -> None:
    clock, asked = Clock(), []
    exporter, reader = _replica(clock, asked)
    group = _group(0)
    factory = RecordFactory()
    # a stalled consumer: offset 2 committed every second for 30 s, records waiting behind it
    messages = []
    for i in range(30):
        key, value = factory.commit(group, "orders", 0, 2, T0 + 30_000 + i * 1000)
        messages.append(Message(0, i, T0 + 30_000 + i * 1000, key, value))
    exporter._ingest(reader, SourceBatch(events=[PartitionsAssigned((0,))]))
    exporter._ingest(reader, SourceBatch(messages=messages, events=[PartitionEof(0, 30)]))

    # read to its end, its topic not sampled yet: hidden (not ERR), and a round asked for now
    assert asked == [clock.now]
    assert ("orders", 0) in exporter.readers.tracked
    assert _status(exporter, group, clock.now) is None
    # a round that started before the partition was read to its end knew nothing of it
    exporter.readers.samples.put((clock.now - 1, {}))
    exporter._apply_samples()
    assert _status(exporter, group, clock.now) is None

    # the round asked for: its rebuilt history first, then its sample: STALL at once
    read_at = clock.now
    clock.now += 300
    history = [(T0 + 30_000 + i * 1000, {("orders", 0): 10 + i}) for i in range(30)]
    exporter.readers.backfills.put(history)
    exporter.readers.samples.put((read_at, {("orders", 0): 40}))
    exporter._apply_samples()
    assert exporter.schedule.next_snapshot_ms == 0  # served now
    assert _status(exporter, group, clock.now) == "STALL"


def test_a_sampler_that_fails_hides_the_groups_three_sample_intervals_at_most() -> None:
    clock, asked = Clock(), []
    exporter, reader = _replica(clock, asked)
    group = _group(1)
    key, value = RecordFactory().commit(group, "orders", 0, 2, clock.now)
    exporter._ingest(reader, SourceBatch(events=[PartitionsAssigned((1,))]))
    exporter._ingest(
        reader,
        SourceBatch(messages=[Message(1, 0, clock.now, key, value)], events=[PartitionEof(1, 1)]),
    )
    clock.now += 2_999
    exporter._apply_samples()
    assert _status(exporter, group, clock.now) is None
    clock.now += 1
    exporter._apply_samples()
    assert _status(exporter, group, clock.now) == "ERR"  # what is known: no log end


def test_before_ready_and_when_revoked_nothing_waits() -> None:
    clock, asked = Clock(), []
    exporter, reader = _replica(clock, asked)
    exporter.stats.ready = False
    group = _group(2)
    key, value = RecordFactory().commit(group, "orders", 0, 2, clock.now)
    exporter._ingest(reader, SourceBatch(events=[PartitionsAssigned((2,))]))
    exporter._ingest(
        reader,
        SourceBatch(messages=[Message(2, 0, clock.now, key, value)], events=[PartitionEof(2, 1)]),
    )
    # the start waits for every log end before ready (Exporter._check_ready): not here
    assert asked == []
    assert _status(exporter, group, clock.now) == "ERR"
