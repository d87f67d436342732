"""offsetwatch's canonical record shape (decoder/canonical.py docstring) on real records."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.decoder import Canonical, Codec, contract, group_of, identity_key
from offsetwatch.decoder.layout import field_layouts
from offsetwatch.decoder.records import (
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    UnknownRecord,
)
from offsetwatch.decoder.registry import RECORD_TYPES
from tests.decoder.strategies import RealRecord, real_records

TOP_LEVEL = {
    "type",
    "key_type",
    "value_version",
    "tombstone",
    "newer_version",
    "partition",
    "offset",
    "timestamp",
    "group",
    "key",
    "value",
    "transaction",
    "schema_version",
}

Pick = Callable[[Record], bool]


def _is_consumer_group_metadata(record: Record) -> bool:
    value = record.value
    return (
        isinstance(value, GroupMetadataValue)
        and value.protocol_type == "consumer"
        and len(value.members) > 0
    )


SAMPLES: dict[str, Pick] = {
    "offset_commit": lambda r: r.key_type == 1 and r.value_version == 3,
    "offset_commit_v1": lambda r: r.key_type == 1 and r.value_version == 1,
    "group_metadata_with_blobs": _is_consumer_group_metadata,
    "tombstone": lambda r: r.key_type == 1 and r.value is None,
    "group_metadata_tombstone": lambda r: r.key_type == 2 and r.value is None,
    "kip848_member": lambda r: r.key_type == 5 and r.value is not None,
    "kip848_assignment": lambda r: r.key_type == 8 and r.value is not None,
    "share_member": lambda r: r.key_type == 10 and r.value is not None,
    "share_assignment": lambda r: r.key_type == 14 and r.value is not None,
    "regex": lambda r: r.key_type == 16 and r.value is not None,
}


@pytest.fixture(scope="module")
def decoded(conformance_dir: Path) -> list[tuple[RealRecord, Record]]:
    codec = Codec()
    out = []
    for r in real_records(conformance_dir):
        record = codec.decode(r.key, r.value, r.partition, r.offset, r.timestamp)
        assert isinstance(record, Record)
        out.append((r, record))
    return out


def _first(decoded: list[tuple[RealRecord, Record]], pick: Pick) -> tuple[RealRecord, Record]:
    for pair in decoded:
        if pick(pair[1]):
            return pair
    raise AssertionError("no such record in the conformance runs")


def _check_bytes_are_base64(original: Any, rendered: Any) -> int:
    """Walk the dict and its JSON rendering together; every bytes value must be base64 text."""
    if isinstance(original, bytes):
        assert isinstance(rendered, str)
        assert base64.b64decode(rendered, validate=True) == original
        return 1
    if isinstance(original, dict):
        assert set(original) == set(rendered)
        return sum(_check_bytes_are_base64(v, rendered[k]) for k, v in original.items())
    if isinstance(original, list):
        assert len(original) == len(rendered)
        return sum(_check_bytes_are_base64(a, b) for a, b in zip(original, rendered, strict=True))
    assert original == rendered
    return 0


def _snake_fields(cls: type) -> set[str]:
    return {f.name for f in field_layouts(cls)}


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_canonical_shape(decoded: list[tuple[RealRecord, Record]], sample: str) -> None:
    real, record = _first(decoded, SAMPLES[sample])
    canonical = Canonical()
    out = canonical.to_dict(record)
    assert set(out) == TOP_LEVEL
    assert out["type"] == RECORD_TYPES[record.key_type].name
    assert out["key_type"] == record.key_type
    assert out["value_version"] == record.value_version
    assert out["tombstone"] is (real.value is None)
    assert out["newer_version"] is False
    assert (out["partition"], out["offset"], out["timestamp"]) == (
        real.partition,
        real.offset,
        real.timestamp,
    )
    assert out["group"] == group_of(record)
    assert isinstance(out["group"], str) and out["group"]
    assert set(out["key"]) == _snake_fields(type(record.key))
    if record.value is None:
        assert out["value"] is None
        assert out["value_version"] is None
    else:
        # every field of the layout, even those absent from the record's version
        assert set(out["value"]) == _snake_fields(type(record.value))
    text = canonical.to_json(record)
    parsed = json.loads(text)
    assert json.loads(json.dumps(parsed)) == parsed
    _check_bytes_are_base64(out, parsed)


def test_offset_commit_values(decoded: list[tuple[RealRecord, Record]]) -> None:
    _, v3 = _first(decoded, SAMPLES["offset_commit"])
    out = Canonical().to_dict(v3)
    assert isinstance(v3.value, OffsetCommitValue)
    assert out["type"] == "offset_commit"
    assert out["value"]["offset"] == v3.value.offset
    assert out["value"]["expire_timestamp"] == -1  # absent from v3: its default
    assert out["key"] == {
        "group": v3.key.group,  # type: ignore[union-attr]
        "topic": v3.key.topic,  # type: ignore[union-attr]
        "partition": v3.key.partition,  # type: ignore[union-attr]
    }
    _, v1 = _first(decoded, SAMPLES["offset_commit_v1"])
    out = Canonical().to_dict(v1)
    assert out["value_version"] == 1
    assert out["value"]["expire_timestamp"] > 0
    assert out["value"]["leader_epoch"] == -1  # absent from v1: its default


def test_group_metadata_blobs_are_decoded(decoded: list[tuple[RealRecord, Record]]) -> None:
    real, record = _first(decoded, SAMPLES["group_metadata_with_blobs"])
    out = Canonical().to_dict(record)
    assert isinstance(record.value, GroupMetadataValue)
    members = out["value"]["members"]
    assert len(members) == len(record.value.members)
    dump_members = real.expected["payload"]["data"]["members"]
    for member, raw, kafka in zip(members, record.value.members, dump_members, strict=True):
        assert member["subscription"] == raw.subscription  # bytes kept as bytes in the dict
        assert isinstance(member["subscription"], bytes)
        sub = member["subscription_decoded"]
        asg = member["assignment_decoded"]
        assert sub is not None and asg is not None
        assert isinstance(sub["version"], int)
        assert sub["topics"] == kafka["subscription"]["topics"]
        assert isinstance(asg["version"], int)
        assert [
            {"topic": tp["topic"], "partitions": tp["partitions"]}
            for tp in asg["assigned_partitions"]
        ] == kafka["assignment"]["assignedPartitions"]
    parsed = json.loads(Canonical().to_json(record))
    assert parsed["value"]["members"][0]["subscription"] == base64.b64encode(
        record.value.members[0].subscription
    ).decode("ascii")


def test_non_consumer_group_blobs_are_not_decoded() -> None:
    value = bytes.fromhex(
        "0003 0007 636f6e6e656374 00000001 0007 64656661756c74 00026d31 0000018bcfe57b88"
        " 00000001 00026d31 ffff 00026331 00026868 000493e0 0000afc8 00000002 0000"
        " 00000002 0000".replace(" ", "")
    )
    record = Codec().decode(bytes.fromhex("000200026731"), value)
    out = Canonical().to_dict(record)
    (member,) = out["value"]["members"]
    assert out["value"]["protocol_type"] == "connect"
    assert member["subscription_decoded"] is None
    assert member["assignment_decoded"] is None
    assert member["subscription"] == b"\x00\x00"


def test_tombstone(decoded: list[tuple[RealRecord, Record]]) -> None:
    _, record = _first(decoded, SAMPLES["tombstone"])
    out = Canonical().to_dict(record)
    assert out["tombstone"] is True
    assert out["value"] is None
    assert out["value_version"] is None
    assert out["type"] == "offset_commit"


def test_unknown_record_is_kept_raw() -> None:
    record = Codec().decode(b"\x00\x63\x00\x01g", b"\x00\x00\xff", 1, 2, 3)
    assert isinstance(record, UnknownRecord)
    out = Canonical().to_dict(record)
    assert list(out) == list(contract.ENVELOPE)
    assert set(out) == TOP_LEVEL
    assert out["type"] == "unknown"
    assert out["group"] is None
    assert out["key"] == {"raw": b"\x00\x63\x00\x01g"}
    parsed = json.loads(Canonical().to_json(record))
    assert base64.b64decode(parsed["key"]["raw"]) == b"\x00\x63\x00\x01g"
    assert base64.b64decode(parsed["value"]["raw"]) == b"\x00\x00\xff"


def test_newer_version_flag() -> None:
    value = bytes.fromhex("0005 0000000000000064 00000005 01 0000018bcfe56800 00".replace(" ", ""))
    record = Codec().decode(bytes.fromhex("00010002673100017400000000"), value)
    out = Canonical().to_dict(record)
    assert out["newer_version"] is True
    assert out["value_version"] == 5


def test_unknown_tags_are_kept() -> None:
    value = bytes.fromhex(
        "0004 0000000000000064 00000005 01 0000018bcfe56800 01 07 02 beef".replace(" ", "")
    )
    record = Codec().decode(bytes.fromhex("00010002673100017400000000"), value)
    out = Canonical().to_dict(record)
    assert out["value"]["unknown_tags"] == [{"tag": 7, "data": b"\xbe\xef"}]
    assert json.loads(Canonical().to_json(record))["value"]["unknown_tags"] == [
        {"tag": 7, "data": "vu8="}
    ]


# -- identity keys -------------------------------------------------------------------------------


def test_identity_key_equal_for_commits_of_the_same_partition(
    decoded: list[tuple[RealRecord, Record]],
) -> None:
    by_key: dict[tuple[str, str, int], list[Record]] = {}
    for _, record in decoded:
        if isinstance(record.key, OffsetCommitKey) and record.value is not None:
            key = record.key
            by_key.setdefault((key.group, key.topic, key.partition), []).append(record)
    repeated = [records for records in by_key.values() if len(records) >= 2]
    assert repeated
    for records in repeated[:50]:
        first, second = records[0], records[-1]
        assert first.value != second.value or first.offset != second.offset
        assert identity_key(first) == identity_key(second)
    # different partitions of one group/topic differ
    idents = {identity_key(records[0]) for records in by_key.values()}
    assert len(idents) == len(by_key)


def test_identity_key_is_stable(decoded: list[tuple[RealRecord, Record]]) -> None:
    # the same bytes decoded by two codecs give the same identity, call after call
    other = Codec()
    for real, record in decoded[:500]:
        again = other.decode(real.key, real.value, 0, 0, 0)
        assert identity_key(record) == identity_key(again) == identity_key(record)
        assert isinstance(identity_key(record), bytes)
        json.loads(identity_key(record))


def test_identity_key_of_a_tombstone_matches_its_record() -> None:
    key = bytes.fromhex("00010002673100017400000000")
    value = bytes.fromhex("000300000000000000640000000500000000018bcfe56800")
    codec = Codec()
    live = codec.decode(key, value, 0, 1)
    dead = codec.decode(key, None, 0, 2)
    assert identity_key(live) == identity_key(dead)
    assert json.loads(identity_key(live)) == {
        "type": "offset_commit",
        "group": "g1",
        "topic": "t",
        "partition": 0,
    }
    # key type 0 and key type 1 name the same offset
    legacy = codec.decode(b"\x00\x00" + key[2:], value)
    assert identity_key(legacy) == identity_key(live)
    # a different partition or record type is a different identity
    other = codec.decode(key[:-1] + b"\x01", value)
    assert identity_key(other) != identity_key(live)
    group = codec.decode(bytes.fromhex("000200026731"), None)
    assert identity_key(group) != identity_key(live)


def test_identity_key_separates_member_records(decoded: list[tuple[RealRecord, Record]]) -> None:
    """Types 5, 7, 8 share the (group, member) key fields but are different identities."""
    member_records = [r for _, r in decoded if r.key_type in (5, 7, 8)]
    by_member: dict[Any, set[bytes]] = {}
    for record in member_records:
        by_member.setdefault(record.key, set()).add(identity_key(record))
    assert any(len(idents) == 3 for idents in by_member.values())


# -- invalid UTF-8 from the wire -------------------------------------------------------------------

#: OffsetCommit key with group b"g\xff" and a v3 value with metadata b"\xc3\xff" (invalid UTF-8;
#: Kafka never writes it, a corrupted or hand-made record can carry it)
BAD_UTF8_KEY = "0001 000267ff 000174 00000000"
BAD_UTF8_VALUE = "0003 0000000000000064 00000005 0002c3ff 0000018bcfe56800"


def _bad_utf8_record() -> Record:
    record = Codec().decode(
        bytes.fromhex(BAD_UTF8_KEY.replace(" ", "")), bytes.fromhex(BAD_UTF8_VALUE.replace(" ", ""))
    )
    assert isinstance(record, Record)
    return record


def test_invalid_utf8_survives_reencoding_and_identity() -> None:
    record = _bad_utf8_record()
    key, value = Codec().encode(record)
    assert key.hex() == BAD_UTF8_KEY.replace(" ", "")
    assert value is not None and value.hex() == BAD_UTF8_VALUE.replace(" ", "")
    assert b"g\xff" in identity_key(record)


def test_canonical_json_of_invalid_utf8_is_utf8_encodable() -> None:
    text = Canonical().to_json(_bad_utf8_record())
    data = text.encode("utf-8")  # what the republisher / jsonl archive must write
    parsed = json.loads(data)
    assert parsed["group"]
    assert parsed["value"]["metadata"]
