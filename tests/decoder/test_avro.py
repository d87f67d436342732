"""Avro form of the canonical record: generated schema, round trips, framing, container files."""

from __future__ import annotations

import base64
import copy
import gc
import io
import struct
import time
from collections import Counter
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetwatch.decoder import Canonical, Codec
from offsetwatch.decoder.avro import (
    DOC_BEGIN,
    DOC_END,
    SCHEMA_FILE,
    AvroCodec,
    AvroError,
    avro_schema,
    container_codecs,
    key_classes,
    main,
    schema_json,
    schema_markdown,
    update_doc,
    value_classes,
)
from offsetwatch.decoder.canonical import dumps
from offsetwatch.decoder.layout import Kind, Tags, field_layouts
from offsetwatch.decoder.records import (
    AnyRecord,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    GroupMemberKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    ShareGroupMetadataValue,
    ShareGroupMetadataWithHashValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupStatePartitionMetadataWithInitializingValue,
    TopicPartitions,
    UnknownRecord,
)
from offsetwatch.decoder.registry import RECORD_TYPES
from tests.conformance_data import decode_run, run_names

Canon = dict[str, Any]

DOC_FILE = Path(__file__).resolve().parents[2] / "docs" / "canonical-schema.md"
REGENERATE_SCHEMA = "python -m offsetwatch.decoder.avro > decoder/offsetwatch_record.avsc"
REGENERATE_DOC = "python -m offsetwatch.decoder.avro --doc docs/canonical-schema.md"


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def avro() -> AvroCodec:
    return AvroCodec()


@pytest.fixture(scope="module")
def canonical() -> Canonical:
    return Canonical()


@pytest.fixture(scope="module")
def conformance_records(conformance_dir: Path, canonical: Canonical) -> list[Canon]:
    """Every record of every conformance run, as canonical dicts."""
    out: list[Canon] = [
        canonical.to_dict(record)
        for run in run_names(conformance_dir)
        for record in decode_run(conformance_dir, run)
    ]
    assert out, f"no records.jsonl under {conformance_dir}"
    return out


def same(actual: Canon, expected: Canon) -> None:
    """Equal, and equal as canonical JSON (same key order at every level)."""
    assert actual == expected
    assert dumps(actual) == dumps(expected)


def sample_key(key_class: type) -> Any:
    sample = {Kind.STRING: "grp-é", Kind.INT32: 7}
    return key_class(**{f.name: sample[f.wire.kind] for f in field_layouts(key_class)})


# ---------------------------------------------------------------------------------------------
# The schema


def test_schema_file_is_up_to_date() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_json(), (
        f"{SCHEMA_FILE.name} is stale: regenerate it with `{REGENERATE_SCHEMA}`"
    )


def test_doc_tables_are_up_to_date() -> None:
    text = DOC_FILE.read_text(encoding="utf-8")
    assert DOC_BEGIN in text and DOC_END in text
    generated = text.split(DOC_BEGIN, 1)[1].split(DOC_END, 1)[0]
    assert generated.strip() == schema_markdown().strip(), (
        f"docs/canonical-schema.md tables are stale: regenerate them with `{REGENERATE_DOC}`"
    )


def test_update_doc_rewrites_only_the_generated_part(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{DOC_BEGIN}\nstale\n{DOC_END}\noutro\n", encoding="utf-8")
    assert update_doc(doc)
    text = doc.read_text(encoding="utf-8")
    assert text.startswith(f"intro\n{DOC_BEGIN}\n") and text.endswith(f"{DOC_END}\noutro\n")
    assert "stale" not in text and "#### OffsetCommitValue" in text
    assert not update_doc(doc)
    doc.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(ValueError, match="markers"):
        update_doc(doc)


def test_cli_prints_schema_and_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert capsys.readouterr().out == schema_json()
    assert main(["--markdown"]) == 0
    assert capsys.readouterr().out == schema_markdown()


def _named_records(node: Any, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            _named_records(item, found)
    elif isinstance(node, dict):
        if node.get("type") == "record":
            found.append(node)
            for f in node["fields"]:
                _named_records(f["type"], found)
        elif node.get("type") == "array":
            _named_records(node["items"], found)
    return found


def test_schema_shape() -> None:
    schema = avro_schema()
    fastavro.parse_schema(schema)  # valid Avro, every reference resolvable
    assert (schema["namespace"], schema["name"]) == ("offsetwatch", "CanonicalRecord")
    top = {f["name"]: f["type"] for f in schema["fields"]}
    assert list(top) == [
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
    ]
    assert top["type"] == "string" and top["key_type"] == "int"
    assert top["value_version"] == ["null", "int"] and top["group"] == ["null", "string"]
    assert top["tombstone"] == top["newer_version"] == "boolean"
    assert top["partition"] == "int" and top["offset"] == top["timestamp"] == "long"

    def branch_name(branch: Any) -> str:
        return str(branch["name"] if isinstance(branch, dict) else branch).split(".")[-1]

    key_branches = [branch_name(b) for b in top["key"]]
    # offsetwatch's own types (log-end samples), then __share_group_state's, come last:
    # older branch numbers never move
    assert key_branches == [c.__name__ for c in key_classes()] + [
        "UnknownKey",
        "LogEndKey",
        "SharePartitionKey",
    ]
    value_branches = [branch_name(b) for b in top["value"]]
    assert value_branches == ["null"] + [c.__name__ for c in value_classes()] + [
        "UnknownValue",
        "LogEndValue",
        "ShareSnapshotValue",
        "ShareSnapshotWithTimestampsValue",
        "ShareUpdateValue",
        "ShareUpdateWideEpochValue",
    ]
    # every layout of every record type has its branch
    for rtype in RECORD_TYPES.values():
        assert rtype.key_class.__name__ in key_branches
        assert all(c.__name__ in value_branches for c in rtype.value_classes)

    records = _named_records(schema, [])
    names = [r["name"] for r in records]
    assert len(names) == len(set(names)), "a named record defined twice"
    assert "TopicPartitions" in names and "UnknownTag" in names


def test_schema_fields_follow_the_layouts() -> None:
    records = {r["name"]: r for r in _named_records(avro_schema(), [])}
    expected_type = {
        Kind.INT8: "int",
        Kind.INT16: "int",
        Kind.INT32: "int",
        Kind.UINT16: "int",
        Kind.INT64: "long",
        Kind.BOOL: "boolean",
        Kind.STRING: "string",
        Kind.BYTES: "bytes",
        Kind.UUID: "string",
    }
    for cls in (*key_classes(), *value_classes()):
        avro_fields = {f["name"]: f for f in records[cls.__name__]["fields"]}
        layout = field_layouts(cls)
        wire_names = [f.name for f in layout]
        assert list(avro_fields)[: len(wire_names)] == wire_names, cls.__name__
        has_tags = any(f.name == "tags" for f in dataclass_fields(cls))
        assert ("unknown_tags" in avro_fields) == has_tags, cls.__name__
        for f in layout:
            avro_type = avro_fields[f.name]["type"]
            if f.wire.kind in expected_type:
                plain = (
                    [t for t in avro_type if t != "null"]
                    if isinstance(avro_type, list)
                    else [avro_type]
                )
                assert plain == [expected_type[f.wire.kind]], (cls.__name__, f.name)

    commit = {f["name"]: f for f in records["OffsetCommitValue"]["fields"]}
    assert commit["offset"]["type"] == "long" and "default" not in commit["offset"]
    assert commit["leader_epoch"] == {"name": "leader_epoch", "type": "int", "default": -1}
    assert commit["topic_id"]["default"] == "AAAAAAAAAAAAAAAAAAAAAA"
    group = {f["name"]: f for f in records["GroupMetadataValue"]["fields"]}
    assert group["protocol"]["type"] == ["null", "string"]
    member = [f["name"] for f in records["MemberMetadata"]["fields"]]
    assert member[-3:] == ["unknown_tags", "subscription_decoded", "assignment_decoded"]
    subscription = [f["name"] for f in records["ConsumerProtocolSubscription"]["fields"]]
    assert subscription[0] == "version"


# ---------------------------------------------------------------------------------------------
# Round trips of everything a Kafka 4.0 broker wrote


def test_conformance_covers_the_interesting_shapes(conformance_records: list[Canon]) -> None:
    types = Counter(r["type"] for r in conformance_records)
    assert types["offset_commit"] and types["group_metadata"]
    assert any(t.startswith("share_group") for t in types)
    assert any(r["tombstone"] for r in conformance_records)
    assert any(
        m["subscription_decoded"] is not None
        for r in conformance_records
        if r["type"] == "group_metadata" and r["value"] is not None
        for m in r["value"]["members"]
    )


def test_conformance_round_trip_schemaless(
    avro: AvroCodec, conformance_records: list[Canon]
) -> None:
    for record in conformance_records:
        original = copy.deepcopy(record)
        body = avro.encode(record)
        assert record == original, "encode must not modify its input"
        same(avro.decode(body), record)


def test_conformance_round_trip_confluent(
    avro: AvroCodec, conformance_records: list[Canon]
) -> None:
    for record in conformance_records:
        framed = avro.encode_confluent(record, 4711)
        assert framed[:5] == b"\x00" + struct.pack(">I", 4711)
        assert framed[5:] == avro.encode(record)
        schema_id, back = avro.decode_confluent(framed)
        assert schema_id == 4711
        same(back, record)


@pytest.mark.parametrize("codec", container_codecs())
def test_conformance_round_trip_container_file(
    avro: AvroCodec, conformance_records: list[Canon], tmp_path: Path, codec: str
) -> None:
    path = tmp_path / f"records-{codec}.avro"
    assert avro.write_container(path, iter(conformance_records), codec=codec) == len(
        conformance_records
    )
    back = list(avro.read_container(path))
    assert len(back) == len(conformance_records)
    for actual, expected in zip(back, conformance_records, strict=True):
        same(actual, expected)
    # and readable by plain fastavro, with our schema in the header
    with path.open("rb") as data:
        reader = fastavro.reader(data)
        assert reader.codec == codec
        assert sum(1 for _ in reader) == len(conformance_records)


def test_container_file_objects(avro: AvroCodec, conformance_records: list[Canon]) -> None:
    sample = conformance_records[:200]
    buffer = io.BytesIO()
    avro.write_container(buffer, sample, metadata={"offsetwatch.source": "test"})
    buffer.seek(0)
    assert list(avro.read_container(buffer)) == sample
    buffer.seek(0)
    assert fastavro.reader(buffer).metadata["offsetwatch.source"] == "test"
    empty = io.BytesIO()
    assert avro.write_container(empty, [], codec="null") == 0
    empty.seek(0)
    assert list(avro.read_container(empty)) == []


def test_container_codec_not_available(avro: AvroCodec) -> None:
    with pytest.raises(AvroError, match="not available"):
        avro.write_container(io.BytesIO(), [], codec="lzma-please")
    if "zstandard" not in container_codecs():
        with pytest.raises(AvroError, match="zstandard"):
            avro.write_container(io.BytesIO(), [], codec="zstandard")


def test_container_written_with_an_older_schema_is_resolved(
    avro: AvroCodec, conformance_records: list[Canon]
) -> None:
    """A file from a schema without OffsetCommitValue.topic_id reads with its Avro default."""
    older = avro_schema()
    for record in _named_records(older, []):
        if record["name"] == "OffsetCommitValue":
            record["fields"] = [f for f in record["fields"] if f["name"] != "topic_id"]
    commits = [r for r in conformance_records if r["type"] == "offset_commit" and r["value"]][:50]
    assert commits
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(older), [avro.to_avro_dict(r) for r in commits])
    buffer.seek(0)
    back = list(avro.read_container(buffer))
    assert [r["value"]["topic_id"] for r in back] == ["AAAAAAAAAAAAAAAAAAAAAA"] * len(commits)
    for actual, expected in zip(back, commits, strict=True):
        assert {**actual, "value": None} == {**expected, "value": None}
        assert {**actual["value"], "topic_id": None} == {**expected["value"], "topic_id": None}

    with pytest.raises(AvroError, match="another schema"):
        list(avro.read_container(_Unseekable(buffer.getvalue())))


class _Unseekable(io.BytesIO):
    def seekable(self) -> bool:
        return False


# ---------------------------------------------------------------------------------------------
# Records Kafka 4.0 did not write in the conformance runs


def _round_trip(avro: AvroCodec, record: Canon) -> Canon:
    back = avro.decode(avro.encode(record))
    same(back, record)
    buffer = io.BytesIO()
    avro.write_container(buffer, [record])
    buffer.seek(0)
    (from_file,) = avro.read_container(buffer)
    same(from_file, record)
    return back


def test_unknown_record_types(avro: AvroCodec, canonical: Canonical) -> None:
    for value in (b"\x00\x01payload", None, b""):
        record = UnknownRecord(99, b"\x00\x63some key", value, 3, 42, 1_700_000_000_000)
        as_dict = canonical.to_dict(record)
        back = _round_trip(avro, as_dict)
        assert back["type"] == "unknown" and back["key"] == {"raw": b"\x00\x63some key"}
        assert back["value"] == (None if value is None else {"raw": value})
        assert back["tombstone"] is (value is None)
        assert avro.to_avro_dict(as_dict)["key"][0] == "offsetwatch.UnknownKey"


def test_tombstones_of_every_record_type(avro: AvroCodec, canonical: Canonical) -> None:
    for key_type, rtype in RECORD_TYPES.items():
        record = Record(key_type, sample_key(rtype.key_class), None, None, 1, 2, 3)
        back = _round_trip(avro, canonical.to_dict(record))
        assert back["tombstone"] and back["value"] is None and back["value_version"] is None
        assert back["type"] == rtype.name and back["group"] == "grp-é"


def test_unknown_tags_are_kept(avro: AvroCodec, canonical: Canonical) -> None:
    tags = Tags(unknown=((7, b"\x01\x02"), (9, b"")))
    commit = Record(
        1,
        OffsetCommitKey("g", "t", 0),
        4,
        OffsetCommitValue(5, -1, "", 10, -1, "AAAAAAAAAAAAAAAAAAAAAA", tags),
    )
    back = _round_trip(avro, canonical.to_dict(commit))
    assert back["value"]["unknown_tags"] == [
        {"tag": 7, "data": b"\x01\x02"},
        {"tag": 9, "data": b""},
    ]
    nested = Record(
        8,
        GroupMemberKey("g", "m"),
        0,
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=3,
            previous_member_epoch=2,
            state=0,
            assigned_partitions=(
                TopicPartitions("AAAAAAAAAAAAAAAAAAAAAQ", (0, 1), None, tags),
                TopicPartitions("AAAAAAAAAAAAAAAAAAAAAg", (2,), (5,)),
            ),
            partitions_pending_revocation=(),
        ),
    )
    back = _round_trip(avro, canonical.to_dict(nested))
    first, second = back["value"]["assigned_partitions"]
    assert "unknown_tags" in first and "unknown_tags" not in second
    assert "unknown_tags" not in back["value"]


@pytest.mark.parametrize(
    ("key_type", "value"),
    [
        (11, ShareGroupMetadataValue(epoch=4)),
        (11, ShareGroupMetadataWithHashValue(epoch=4, metadata_hash=-(2**63))),
        (15, ShareGroupStatePartitionMetadataValue(initialized_topics=(), deleting_topics=())),
        (
            15,
            ShareGroupStatePartitionMetadataWithInitializingValue(
                initializing_topics=(), initialized_topics=(), deleting_topics=()
            ),
        ),
    ],
)
def test_layout_variants_take_their_own_branch(
    avro: AvroCodec, canonical: Canonical, key_type: int, value: Any
) -> None:
    record = canonical.to_dict(
        Record(key_type, sample_key(RECORD_TYPES[key_type].key_class), 0, value)
    )
    assert avro.to_avro_dict(record)["value"][0] == f"offsetwatch.{type(value).__name__}"
    _round_trip(avro, record)


def test_invalid_utf8_becomes_replacement_characters(avro: AvroCodec, canonical: Canonical) -> None:
    """Text the decoder kept as surrogate escapes is written as valid UTF-8 (U+FFFD)."""
    codec = Codec()
    written = Record(
        1,
        OffsetCommitKey("grp\udcff", "topic", 0),
        3,
        OffsetCommitValue(5, 1, "meta\udcc3\udca9\udce9", 10, -1, "AAAAAAAAAAAAAAAAAAAAAA"),
    )
    key, value = codec.encode(written)
    assert b"grp\xff" in key  # the wire really holds invalid UTF-8
    record = canonical.to_dict(codec.decode(key, value, 0, 1, 2))
    assert record["group"] == "grp\udcff"
    expected = copy.deepcopy(record)
    expected["group"] = expected["key"]["group"] = "grp\ufffd"
    expected["value"]["metadata"] = "metaé\ufffd"
    same(avro.decode(avro.encode(record)), expected)
    same(avro.decode_confluent(avro.encode_confluent(record, 1))[1], expected)
    buffer = io.BytesIO()
    avro.write_container(buffer, [record, record])
    buffer.seek(0)
    assert list(avro.read_container(buffer)) == [expected, expected]

    member = Record(
        5,
        GroupMemberKey("g", "m"),
        0,
        ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id="r\udc80",
            client_id="c",
            client_host="h",
            subscribed_topic_names=("ok", "bad\udcfe"),
            subscribed_topic_regex=None,
            rebalance_timeout_ms=1,
            server_assignor=None,
            classic_member_metadata=None,
        ),
    )
    as_dict = canonical.to_dict(member)
    buffer = io.BytesIO()
    avro.write_container(buffer, [as_dict])
    buffer.seek(0)
    (back,) = avro.read_container(buffer)
    assert back["value"]["rack_id"] == "r\ufffd"
    assert back["value"]["subscribed_topic_names"] == ["ok", "bad\ufffd"]
    assert avro.decode(avro.encode(as_dict)) == back


# ---------------------------------------------------------------------------------------------
# Errors


def test_confluent_framing_errors(avro: AvroCodec, conformance_records: list[Canon]) -> None:
    framed = avro.encode_confluent(conformance_records[0], 7)
    with pytest.raises(AvroError, match="magic byte 0x01"):
        avro.decode_confluent(b"\x01" + framed[1:])
    with pytest.raises(AvroError, match="shorter than the 5-byte"):
        avro.decode_confluent(b"\x00\x00\x00")
    for bad_id in (-1, 2**31):
        with pytest.raises(AvroError, match="schema id"):
            avro.encode_confluent(conformance_records[0], bad_id)
    with pytest.raises(AvroError, match="decode_confluent"):
        avro.decode(framed)  # a framed message is not a bare body


def test_decode_errors(avro: AvroCodec, conformance_records: list[Canon]) -> None:
    body = avro.encode(conformance_records[0])
    with pytest.raises(AvroError, match="bytes after"):
        avro.decode(body + b"\x00")
    with pytest.raises(AvroError, match="not an Avro"):
        avro.decode(body[: len(body) // 2])
    with pytest.raises(AvroError, match="not an Avro container"):
        list(avro.read_container(io.BytesIO(b"not avro at all")))


def test_encode_errors(avro: AvroCodec, conformance_records: list[Canon]) -> None:
    record = next(r for r in conformance_records if r["type"] == "offset_commit" and r["value"])
    with pytest.raises(AvroError, match="unknown record type 'nope'"):
        avro.encode({**record, "type": "nope"})
    broken = {**record, "value": {**record["value"], "offset": "not a number"}}
    with pytest.raises(AvroError, match="offset_commit record at partition"):
        avro.encode(broken)
    share = {**record, "type": "share_group_metadata", "value": {"epoch": 1, "extra": 2}}
    with pytest.raises(AvroError, match="matches none of its layouts"):
        avro.encode(share)
    # the codec stays usable after an error
    same(avro.decode(avro.encode(record)), record)


# ---------------------------------------------------------------------------------------------
# Properties


_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_text = st.text(max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    group=_text,
    topic=_text,
    partition=_int32,
    version=st.integers(0, 4),
    value=st.builds(
        OffsetCommitValue,
        offset=_int64,
        leader_epoch=_int32,
        metadata=_text,
        commit_timestamp=_int64,
        expire_timestamp=_int64,
        topic_id=st.binary(min_size=16, max_size=16).map(
            lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        ),
    ),
    position=st.tuples(_int32, _int64, _int64),
)
def test_offset_commits_round_trip(
    avro: AvroCodec,
    canonical: Canonical,
    group: str,
    topic: str,
    partition: int,
    version: int,
    value: OffsetCommitValue,
    position: tuple[int, int, int],
) -> None:
    record: AnyRecord = Record(
        1, OffsetCommitKey(group, topic, partition), version, value, *position
    )
    as_dict = canonical.to_dict(record)
    same(avro.decode(avro.encode(as_dict)), as_dict)


# ---------------------------------------------------------------------------------------------
# Throughput, for information only (no timed assertions: benchmarks/ measures speed)


def test_report_offset_commit_throughput(
    avro: AvroCodec, conformance_records: list[Canon], capsys: pytest.CaptureFixture[str]
) -> None:
    commits = [r for r in conformance_records if r["type"] == "offset_commit" and r["value"]]
    batch = (commits * (20_000 // len(commits) + 1))[:20_000]
    encode, decode = avro.encode, avro.decode
    gc.collect()
    start = time.perf_counter()
    bodies = [encode(r) for r in batch]
    encoded = time.perf_counter() - start
    start = time.perf_counter()
    for body in bodies:
        decode(body)
    decoded = time.perf_counter() - start
    with capsys.disabled():
        print(
            f"\n[avro] offset commits: encode {len(batch) / encoded:,.0f} records/s, "
            f"decode {len(batch) / decoded:,.0f} records/s, "
            f"{sum(map(len, bodies)) / len(bodies):.0f} bytes/record"
        )
