"""KafkaJson.dump_log_text / console_text: exactly the lines `dumps` makes of the dicts.

`offsetwatch decode --format dump-log|console` prints the text renderers' output; the dict
renderers (`dump_log`, `console`) are the reference checked against Kafka's own tools in
test_conformance.py. Here the text must equal `canonical.dumps(dict)` byte for byte: for every
record a real broker wrote, for generated records of every type and version, for consumer
groups with decodable and undecodable blobs, and for invalid UTF-8.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetwatch.decoder import Codec, DecodeError, KafkaJson, kafka_json
from offsetwatch.decoder.canonical import dumps
from offsetwatch.decoder.consumer_protocol import ConsumerProtocolSubscription, TopicPartitionList
from offsetwatch.decoder.layout import field_layouts
from offsetwatch.decoder.records import (
    AnyRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    UnknownRecord,
)
from offsetwatch.decoder.registry import RECORD_TYPES
from tests.decoder import strategies as S
from tests.decoder.strategies import real_records

#: per type and version (about 30 of them): 20 examples each, this module and its twin under a
#: minute alone (40 took 65 s for the two modules, 20 take 40 s); every run draws new ones
TEXT = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_same(kafka: KafkaJson, record: AnyRecord) -> None:
    assert kafka.dump_log_text(record) == dumps(kafka.dump_log(record))
    console = kafka.console(record)
    assert kafka.console_text(record) == (None if console is None else dumps(console))


def _replace(obj: Any, **changes: Any) -> Any:
    fields = {f.name: getattr(obj, f.name) for f in field_layouts(type(obj))}
    fields.update(changes)
    if hasattr(obj, "tags"):
        fields.setdefault("tags", obj.tags)
    return type(obj)(**fields)


def test_every_conformance_record(conformance_dir: Path) -> None:
    codec = Codec()
    kafka = KafkaJson()
    records = real_records(conformance_dir)
    assert records
    checked = 0
    for r in records:
        try:
            record = codec.decode(r.key, r.value, r.partition, r.offset, r.timestamp)
        except DecodeError:  # pragma: no cover - test_conformance.py reports those
            continue
        assert_same(kafka, record)
        # twice: the second time from the key and value caches
        assert_same(kafka, record)
        checked += 1
    assert checked == len(records)


def test_conformance_records_with_a_fresh_renderer_per_record(conformance_dir: Path) -> None:
    codec = Codec()
    for r in real_records(conformance_dir, "main"):
        assert_same(KafkaJson(), codec.decode(r.key, r.value, r.partition, r.offset))


@pytest.mark.parametrize(("key_type", "version"), S.all_type_versions())
@TEXT
@given(data=st.data())
def test_generated_records(key_type: int, version: int, data: st.DataObject) -> None:
    kafka = KafkaJson()
    records = data.draw(st.lists(S.records(key_type, version), min_size=1, max_size=4))
    for record in records:
        assert_same(kafka, record)
    for record in records:  # again, from the caches
        assert_same(kafka, record)


@TEXT
@given(record=S.records())
def test_generated_records_of_any_type(record: Record) -> None:
    assert_same(KafkaJson(), record)


@pytest.mark.parametrize("value_version", range(5))
@pytest.mark.parametrize("protocol_version", S.PROTOCOL_VERSIONS)
# 12 per (value, protocol) version: the parametrisation carries the breadth, and with 25 each
# the module was the suite's most expensive one outside Spark (2026-12-07)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_consumer_groups_blobs_decoded(
    value_version: int, protocol_version: int, data: st.DataObject
) -> None:
    value, _blobs = data.draw(S.consumer_groups(value_version, protocol_version))
    key = data.draw(S.keys(RECORD_TYPES[2]))
    assert_same(KafkaJson(), Record(2, key, value_version, value))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=S.values(RECORD_TYPES[2], 3),
    subscription=st.binary(max_size=12),
    assignment=st.binary(max_size=12),
)
def test_consumer_groups_undecodable_blobs_stay_base64(
    value: GroupMetadataValue, subscription: bytes, assignment: bytes
) -> None:
    member = MemberMetadata(
        "m", None, "c", "h", 1, 2, subscription=subscription, assignment=assignment
    )
    group = _replace(value, protocol_type="consumer", members=(member, *value.members))
    assert_same(KafkaJson(), Record(2, GroupMetadataKey("g"), 3, group))


@pytest.mark.parametrize("version", [0, 3, 5, 0x7FFF])
def test_blob_versions_decode_like_the_dicts(version: int) -> None:
    """Blobs newer than the consumer protocol we know are read with the newest layout."""
    subscription = ConsumerProtocolSubscription(
        ("t1", "t\u00e9"), b"\x01", (TopicPartitionList("t1", (0, 2)),), 5, "rack"
    )
    raw = version.to_bytes(2, "big") + S.PROTOCOL.encode(3, subscription)[2:]
    member = MemberMetadata("m", None, "c", "h", 1, 2, raw, b"\x00\x05\x00\x00\x00\x00")
    group = GroupMetadataValue("consumer", 1, "range", "m", -1, (member,))
    kafka = KafkaJson()
    record = Record(2, GroupMetadataKey("g"), 3, group)
    assert_same(kafka, record)
    assert '"subscription":{"topics":["t1","t\u00e9"]' in kafka.dump_log_text(record)


invalid_utf8 = st.binary(max_size=10).map(lambda b: b.decode("utf-8", "surrogateescape"))


@TEXT
@given(group=invalid_utf8, topic=invalid_utf8, metadata=invalid_utf8)
def test_invalid_utf8_becomes_replacement_characters(group: str, topic: str, metadata: str) -> None:
    key = OffsetCommitKey(group, topic, 7)
    value = OffsetCommitValue(1, 2, metadata, 3, -1, "AAAAAAAAAAAAAAAAAAAAAA")
    assert_same(KafkaJson(), Record(1, key, 3, value))


def test_unknown_record_types() -> None:
    kafka = KafkaJson()
    for record in (UnknownRecord(99, b"\x00\x63", b"\x01", 0, 12), UnknownRecord(300, b"", None)):
        assert_same(kafka, record)
        assert kafka.console_text(record) is None


def test_console_skips_newer_types_and_marks_unknown_versions() -> None:
    kafka = KafkaJson()
    key = OffsetCommitKey("g", "t", 0)
    value = OffsetCommitValue(1, 2, "", 3, -1, "AAAAAAAAAAAAAAAAAAAAAA")
    newer = Record(1, key, 5, value)
    assert_same(kafka, newer)
    assert kafka.console_text(newer) == (
        '{"key":{"type":1,"data":{"group":"g","topic":"t","partition":0}},'
        '"value":{"version":5,"data":"unknown"}}'
    )
    tombstone = Record(1, key, None, None)
    assert_same(kafka, tombstone)
    assert kafka.dump_log_text(tombstone).endswith('"payload":"<DELETE>"}')


def test_one_key_object_under_two_key_types_and_versions() -> None:
    kafka = KafkaJson()
    key = OffsetCommitKey("g", "t", 0)
    v3 = OffsetCommitValue(1, 2, "m", 3, -1, "AAAAAAAAAAAAAAAAAAAAAA")
    v1 = OffsetCommitValue(1, -1, "m", 3, 4, "AAAAAAAAAAAAAAAAAAAAAA")
    v4 = OffsetCommitValue(1, 2, "m", 3, -1, "q83vEjRWeJCrze8SNFZ4kA")
    for record in (
        Record(1, key, 3, v3),
        Record(0, key, 3, v3),
        Record(0, key, 1, v1),
        Record(1, key, 4, v4),
        Record(1, key, None, None),
        Record(1, key, 3, v3),
        Record(1, key, 5, v4),  # newer than known: console prints "unknown"
        Record(1, key, 3, v3),
        Record(1, OffsetCommitKey("g", "t", 0), 3, v3),  # equal key, another object
        UnknownRecord(1, b"\x00\x01", None, 0, 5),  # a known type's number, by hand
        Record(1, key, 4, v4),
    ):
        assert_same(kafka, record)


def test_key_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_json, "KEY_TEXT_CACHE_SIZE", 3)
    kafka = KafkaJson()
    value = OffsetCommitValue(1, 2, "", 3, -1, "AAAAAAAAAAAAAAAAAAAAAA")
    keys = [OffsetCommitKey("g", "t", p) for p in range(10)]
    for _ in range(2):
        for key in keys:
            assert_same(kafka, Record(1, key, 3, value))
