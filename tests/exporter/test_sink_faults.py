"""Failing sinks on the real broker: ingestion goes on, the sink is named, nothing is lost.

Before: `export --publish-topic 'bad topic name!'` logged one ERROR per record and stopped
ingesting with a main-loop traceback while /readyz said "source down"; a full archive disk
did the same. Here the publish topic cannot exist (its name collides with an existing
topic's: '.' and '_' are one character in Kafka's metric names, so Kafka refuses to create it
and every delivery; a name Kafka never allows is now refused at start) and the
archive refuses writes for a while (as a full disk does): the API still equals Kafka's
OffsetFetch, /readyz stays ready and names both sinks, the metrics say which sink fails, and
once the disk is back the archive holds every record exactly once.
"""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.service import ExporterService
from offsetwatch.exporter.sinks import archive as archive_module
from offsetwatch.exporter.sinks.sink_guard import PartialWrite
from offsetwatch.exporter.state.ingest import Encoded
from tests.exporter.daemon_helpers import (
    api_group,
    exporter_config,
    readyz,
    running_exporter,
    scrape,
    wait_for,
)
from tests.real_broker import Broker, unique

pytestmark = pytest.mark.broker


class DiskSwitch:
    """Makes ArchiveWriter.write fail with ENOSPC while `full`, and its batched
    `write_encoded` (the commits the C ingest loop encoded) take nothing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = True
        real_write = archive_module.ArchiveWriter.write
        real_write_encoded = archive_module.ArchiveWriter.write_encoded

        def write(
            writer: archive_module.ArchiveWriter,
            canonical: dict[str, Any],
            source: tuple[int, int] | None = None,
        ) -> None:
            if self.full:
                raise OSError(errno.ENOSPC, "No space left on device")
            real_write(writer, canonical, source)

        def write_encoded(writer: archive_module.ArchiveWriter, items: list[Encoded]) -> None:
            if self.full:
                raise PartialWrite(0, OSError(errno.ENOSPC, "No space left on device"))
            real_write_encoded(writer, items)

        monkeypatch.setattr(archive_module.ArchiveWriter, "write", write)
        monkeypatch.setattr(archive_module.ArchiveWriter, "write_encoded", write_encoded)


def api_offsets(service: ExporterService, group: str) -> dict[tuple[str, int], int] | None:
    answer = api_group(service, group)
    if answer.status != 200:
        return None
    return {(r["topic"], r["partition"]): r["committed"] for r in answer.json()["partitions"]}


def commit_positions(broker: Broker, group: str) -> set[tuple[int, int]]:
    """(partition, offset) of every record of `group`'s __consumer_offsets partition, read
    as the exporter reads (read_committed)."""
    partition = partition_for(group)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("probe"),
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(OFFSETS_TOPIC, partition, 0)])
        out: set[tuple[int, int]] = set()
        while True:
            message = consumer.poll(10)
            assert message is not None, "no end of partition within 10 s"
            if message.error() is not None:
                break
            out.add((message.partition(), message.offset()))
        return out
    finally:
        consumer.close()


def archived_positions(directory: Path) -> list[tuple[int, int]]:
    out = []
    for file in sorted(directory.rglob("*.jsonl")):
        if file.name.startswith("."):
            continue
        # "\n" only: a record's text may hold U+2028, which str.splitlines() also splits at
        for line in filter(None, file.read_text(encoding="utf-8").split("\n")):
            record = json.loads(line)
            if record.get("partition", -1) >= 0 and record.get("type") != "log_end":
                out.append((record["partition"], record["offset"]))
    return out


def test_failing_sinks_are_named_and_never_stop_ingestion(
    kafka_broker: Broker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Callable[[str, object], None],
) -> None:
    disk = DiskSwitch(monkeypatch)
    topic, group = unique("orders"), unique("sinks")
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(topic, [10, 10])
    kafka_broker.commit(group, {(topic, 0): 2, (topic, 1): 3})
    archive = tmp_path / "archive"
    taken = unique("sink_collides")
    kafka_broker.create_topic(taken, 1)
    config = exporter_config(
        kafka_broker.bootstrap,
        publish_topic=taken.replace("_", "."),
        archive_dir=archive,
        archive_roll_s=1.0,
    )
    with running_exporter(config) as service:
        wait_for(
            lambda: api_offsets(service, group) == kafka_broker.committed(group),
            "the group in the API while both sinks fail",
        )
        kafka_broker.commit(group, {(topic, 0): 7})
        wait_for(
            lambda: api_offsets(service, group) == kafka_broker.committed(group),
            "a later commit ingested too",
        )

        def sinks_named() -> bool:
            body = readyz(service).json()
            failing = {sink["sink"] for sink in body.get("failing_sinks", [])}
            return bool(body["ready"]) and failing == {"archive", "publish"}

        wait_for(sinks_named, "/readyz ready, naming the archive and the publish topic")
        body = readyz(service).json()
        assert body["source_up"] is True and "reason" not in body
        publish = next(s for s in body["failing_sinks"] if s["sink"] == "publish")
        # Kafka's own words (the brokers refused the topic, then the client knows it unknown)
        assert "topic" in publish["error"].lower() and "KafkaError{" not in publish["error"]
        metrics = scrape(service)
        assert metrics.value("offsetwatch_sink_up", sink="archive") == 0
        assert metrics.value("offsetwatch_sink_up", sink="publish") == 0
        assert metrics.value("offsetwatch_sink_up", sink="checkpoint") is None  # not configured
        assert metrics.value("offsetwatch_source_up") == 1
        assert metrics.value("offsetwatch_loop_errors_total") == 0
        assert (metrics.value("offsetwatch_publish_errors_total") or 0) > 0
        assert metrics.value("offsetwatch_published_total") == 0

        disk.full = False  # space again: the kept records go to the archive, in order
        back = time.monotonic()
        wait_for(
            lambda: scrape(service).value("offsetwatch_sink_up", sink="archive") == 1,
            "the archive working again",
        )
        # measured, never asserted: the README's Reliability table reports it
        recovery_s = round(time.monotonic() - back, 1)
        record_property("recovery_s", recovery_s)
        print(f"archive disk full: archiving again {recovery_s} s after space came back")
        assert scrape(service).value("offsetwatch_sink_backlog_records", sink="archive") == 0
        # the group's partition as it is now, while the exporter runs: other tests' groups on
        # the shared broker may share it and write more after this exporter has stopped
        expected = commit_positions(kafka_broker, group)
        wait_for(
            lambda: expected <= set(archived_positions(archive)),
            "every record of the group's __consumer_offsets partition archived",
        )
    positions = archived_positions(archive)
    assert len(positions) == len(set(positions)), "a record archived twice"
    assert expected <= set(positions)
