"""The live record ring: watchers read at their own pace, the main loop never waits."""

from __future__ import annotations

import json

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.records import Record
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.serve.console_api import MAX_VALUE_CHARS, record_event
from offsetwatch.exporter.serve.live_records import LiveRecords, RecordFilter
from tests.exporter.serve.test_metrics import classic_group, commit, delete_offset


def positioned(record: Record, partition: int, offset: int) -> Record:
    return Record(
        record.key_type, record.key, record.value_version, record.value, partition, offset, 1
    )


def test_a_watcher_sees_what_was_appended_after_it_subscribed() -> None:
    hub = LiveRecords(capacity=8)
    hub.append(commit("before", "t", 0, 1))
    cursor = hub.subscribe()
    assert hub.watched()
    records = [commit("g", "t", p, p) for p in range(3)]
    for record in records:
        hub.append(record)
    assert cursor.take(100) == records
    assert cursor.take(100) == []
    assert cursor.dropped == 0
    cursor.close()
    assert not hub.watched()


def test_a_slow_watcher_loses_the_oldest_and_counts_them() -> None:
    hub = LiveRecords(capacity=4)
    slow = hub.subscribe()
    fast = hub.subscribe()
    records = [commit("g", "t", 0, i) for i in range(10)]
    for record in records[:3]:
        hub.append(record)
    assert fast.take(100) == records[:3]
    for record in records[3:]:
        hub.append(record)
    assert slow.take(100) == records[6:]
    assert slow.dropped == 6
    assert fast.take(2) == records[8:]  # the limit keeps the newest
    assert fast.dropped == 5
    assert hub.dropped_total == 11
    slow.close()
    fast.close()
    assert hub.dropped_total == 11  # gone watchers still count


def test_filters() -> None:
    record = positioned(commit("billing-eu", "orders", 3, 42), 7, 1000)
    assert RecordFilter().matches(record)
    assert RecordFilter(group="billing").matches(record)
    assert not RecordFilter(group="payments").matches(record)
    assert RecordFilter(type="offset_commit", partition=7, min_offset=1000).matches(record)
    assert not RecordFilter(type="group_metadata").matches(record)
    assert not RecordFilter(partition=6).matches(record)
    assert not RecordFilter(min_offset=1001).matches(record)


def test_record_event_is_compact_json() -> None:
    canonical = Canonical()
    event = json.loads(record_event(canonical, positioned(commit("g", "orders", 3, 42), 7, 9)))
    assert event["type"] == "offset_commit"
    assert (event["partition"], event["offset"], event["group"]) == (7, 9, "g")
    assert event["key"] == {"topic": "orders", "partition": 3}
    assert event["value"]["offset"] == 42
    tombstone = json.loads(record_event(canonical, delete_offset("g", "orders", 3)))
    assert tombstone["tombstone"] is True and tombstone["value"] is None
    members = [(f"m-{i}", f"client-{i}", f"/10.0.{i}.1", {"orders": [i]}) for i in range(100)]
    big = json.loads(record_event(canonical, classic_group("g", members)))
    assert big["type"] == "group_metadata"
    assert big["value"]["truncated"] is True and big["value"]["chars"] > MAX_VALUE_CHARS


def test_the_daemon_feeds_the_ring_only_while_watched() -> None:
    exporter = Exporter(ExporterConfig(bootstrap_servers="unused:9092"))
    sinks = exporter.store.ingestor.sinks
    exporter._watch_live()
    assert exporter.live.append not in sinks
    cursor = exporter.live.subscribe()
    exporter._watch_live()
    assert sinks.count(exporter.live.append) == 1
    exporter._watch_live()
    assert sinks.count(exporter.live.append) == 1
    cursor.close()
    exporter._watch_live()
    assert exporter.live.append not in sinks
