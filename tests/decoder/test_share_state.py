"""`__share_group_state` (KIP-932): the decoder against a real Kafka 4.0 capture and its
kafka-dump-log --share-group-state-decoder text (tests/data/share_state, made by
scripts/capture_share_state.py), byte-exact round trips, the 4.1+ layouts, typed errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetwatch.cli import main
from offsetwatch.decoder import DecodeError
from offsetwatch.decoder.avro import AvroCodec
from offsetwatch.decoder.layout import Tags
from offsetwatch.decoder.records import (
    SharePartitionKey,
    ShareSnapshotValue,
    ShareSnapshotWithTimestampsValue,
    ShareStateRecord,
    ShareUpdateValue,
    ShareUpdateWideEpochValue,
    StateBatch,
    UnknownRecord,
)
from offsetwatch.decoder.registry import SHARE_STATE_TYPES
from offsetwatch.decoder.segments import SegmentReader
from offsetwatch.decoder.share_state import (
    ShareStateCodec,
    canonical,
    dump_log,
    share_partition_state,
)
from tests.decoder import strategies as S

CAPTURE = Path(__file__).resolve().parent.parent / "data" / "share_state"
STATE_DIR = CAPTURE / "__share_group_state-0"
#: one capture per release of the matrix with share groups after 4.0 (the 4.1 layouts)
RELEASE_CAPTURES = sorted((CAPTURE / "releases").glob("*/capture.json"))


def kafka_dump_log(text: str) -> list[tuple[int, Any, Any]]:
    """(offset, key JSON, payload JSON) of each record line of kafka-dump-log's text."""
    out = []
    for line in text.splitlines():
        if not line.startswith("| offset: "):
            continue
        offset = int(line.split()[2])
        head, _, payload = line.partition(" payload: ")
        key = head.split(" key: ", 1)[1]
        out.append((offset, json.loads(key), json.loads(payload)))
    return out


def captured(capture: Path = CAPTURE) -> list[tuple[int, int, bytes, bytes | None]]:
    """(offset, timestamp, key, value) of every record of the captured segments."""
    found = []
    for log in sorted((capture / "__share_group_state-0").glob("*.log")):
        for batch in SegmentReader(path=log):
            found += [(r.offset, r.timestamp, r.key, r.value) for r in batch.records]
    return found


def expected_lines(capture: Path = CAPTURE) -> list[tuple[int, Any, Any]]:
    lines = []
    for dump in sorted(capture.glob("dumplog-0-*.txt")):
        lines += kafka_dump_log(dump.read_text())
    return lines


@pytest.mark.parametrize(
    "capture",
    [CAPTURE, *(c.parent for c in RELEASE_CAPTURES)],
    ids=["4.0.0", *(c.parent.name for c in RELEASE_CAPTURES)],
)
def test_capture_decodes_like_kafka_dump_log_and_reencodes_exactly(capture: Path) -> None:
    """Each release's own share coordinator records against that release's dump-log."""
    codec = ShareStateCodec()
    kafka = expected_lines(capture)
    records = captured(capture)
    assert [offset for offset, *_ in records] == [offset for offset, *_ in kafka]
    types = set()
    for (offset, timestamp, key, value), (_, kafka_key, kafka_payload) in zip(
        records, kafka, strict=True
    ):
        record = codec.decode(key, value, 0, offset, timestamp)
        assert isinstance(record, ShareStateRecord)
        types.add(record.type_name)
        assert codec.encode(record) == (key, value)
        assert dump_log(record) == {"key": kafka_key, "payload": kafka_payload}
    # the capture holds both record types (the script drives reject, release and accept)
    assert types == {"share_snapshot", "share_update"}


def test_typed_view_follows_kafka_fields() -> None:
    codec = ShareStateCodec()
    for (offset, timestamp, key, value), (_, kafka_key, kafka_payload) in zip(
        captured(), expected_lines(), strict=True
    ):
        record = codec.decode(key, value, 0, offset, timestamp)
        assert isinstance(record, ShareStateRecord)
        state = share_partition_state(record)
        assert state is not None
        data = kafka_payload["data"]
        assert (state.group_id, state.topic_id, state.partition) == (
            kafka_key["data"]["groupId"],
            kafka_key["data"]["topicId"],
            kafka_key["data"]["partition"],
        )
        assert state.snapshot == (kafka_key["type"] == "0")
        assert state.state_epoch == data.get("stateEpoch")
        assert (state.snapshot_epoch, state.leader_epoch, state.start_offset) == (
            data["snapshotEpoch"],
            data["leaderEpoch"],
            data["startOffset"],
        )
        assert [
            [b.first_offset, b.last_offset, b.delivery_state, b.delivery_count]
            for b in state.batches
        ] == [
            [b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"]]
            for b in data["stateBatches"]
        ]
        # Kafka 4.0 writes neither the KIP-1226 count nor the timestamps
        assert state.delivery_complete_count is None and state.create_timestamp is None


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(["decode", *argv])
    captured_io = capsys.readouterr()
    return code, captured_io.out.splitlines(), captured_io.err


def test_decode_command_dump_log_equals_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = _run(capsys, "--format", "dump-log", str(STATE_DIR))
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in lines] == [
        {"key": key, "payload": payload} for _, key, payload in expected_lines()
    ]


def test_decode_command_json_and_avro(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, lines, err = _run(capsys, "--input", "segments", str(STATE_DIR))
    assert (code, err) == (0, "")
    rows = [json.loads(line) for line in lines]
    codec = ShareStateCodec()
    expected = [
        canonical(codec.decode(key, value, 0, offset, timestamp))
        for offset, timestamp, key, value in captured()
    ]
    assert rows == json.loads(json.dumps(expected))
    assert {row["type"] for row in rows} == {"share_snapshot", "share_update"}
    # Avro: the canonical dicts come back whole (the share branches of the unions)
    avro = AvroCodec()
    for row in expected:
        assert avro.decode(avro.encode(row)) == row
    target = tmp_path / "state.avro"
    code, _, err = _run(capsys, "--format", "avro", "-o", str(target), str(STATE_DIR))
    assert (code, err) == (0, "")
    assert list(avro.read_container(target)) == expected


def test_decode_command_group_filter_and_console_refusal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = json.loads((CAPTURE / "capture.json").read_text())["group"]
    code, lines, _ = _run(capsys, "--group", "^" + group + "$", str(STATE_DIR))
    assert code == 0 and len(lines) == len(captured())
    code, lines, _ = _run(capsys, "--group", "^nobody$", str(STATE_DIR))
    assert code == 0 and lines == []
    code, lines, err = _run(capsys, "--format", "console", str(STATE_DIR))
    assert code == 2 and lines == []
    assert err.startswith("offsetwatch: error: --format console") and err.count("\n") == 1


def test_bad_bytes_are_typed_errors_naming_partition_and_offset(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    codec = ShareStateCodec()
    _, _, key, value = next(r for r in captured() if r[3] is not None and len(r[3]) > 30)
    assert value is not None
    bad = {
        "truncated": value[:-5],
        "trailing": value + b"\x00",
        "version": b"\x00\x07" + value[2:],
    }
    for reason, data in bad.items():
        with pytest.raises(DecodeError) as caught:
            codec.decode(key, data, 3, 77)
        assert (caught.value.partition, caught.value.offset) == (3, 77)
        assert str(caught.value).startswith("partition 3 offset 77: value")
        assert caught.value.kind == reason
    with pytest.raises(DecodeError, match="partition 3 offset 78: key"):
        codec.decode(key[:-1], value, 3, 78)
    with pytest.raises(DecodeError, match="null key"):
        codec.decode(None, value, 3, 79)
    # an unknown key type is kept whole, as for __consumer_offsets (Kafka's tool skips it)
    unknown = codec.decode(b"\x00\x09" + key[2:], value, 3, 80)
    assert isinstance(unknown, UnknownRecord) and codec.encode(unknown) == (unknown.key, value)
    assert dump_log(unknown)["key"] == "Unknown record type 9 at offset 80, skipping."
    # the command: one located line on stderr, an error line in place, exit 1, no traceback
    lines = tmp_path / "bad.jsonl"
    lines.write_text(
        json.dumps({"key": key.hex(), "value": bad["version"].hex(), "partition": 0, "offset": 5})
        + "\n"
    )
    code, out, err = _run(
        capsys, "--topic", "__share_group_state", "--input", "hex-jsonl", str(lines)
    )
    assert code == 1 and "Traceback" not in err
    assert err.startswith("offsetwatch: partition 0 offset 5: value at byte 0: unsupported")
    assert json.loads(out[0])["error"].startswith("partition 0 offset 5")


def _kip_1226_snapshot(count: int) -> ShareStateRecord:
    batch = StateBatch(first_offset=10, last_offset=19, delivery_state=2, delivery_count=1)
    value = ShareSnapshotWithTimestampsValue(
        snapshot_epoch=70_000,
        state_epoch=1,
        leader_epoch=2,
        start_offset=10,
        delivery_complete_count=count,
        create_timestamp=1_700_000_000_000,
        write_timestamp=1_700_000_000_500,
        state_batches=(batch,),
        # a tag set to other than its default is on the wire
        tags=Tags((0,) if count != -1 else (), ()),
    )
    key = SharePartitionKey("g", "AAAAAAAAAAAAAAAAAAAAAQ", 4)
    return ShareStateRecord(0, key, 0, value, 1, 2, 3)


def test_newer_layouts_and_the_delivery_complete_tag() -> None:
    codec = ShareStateCodec()
    with_tag, without = _kip_1226_snapshot(10), _kip_1226_snapshot(-1)
    for record in (with_tag, without):
        key, value = codec.encode(record)
        assert codec.decode(key, value, 1, 2, 3) == record
    # the tag is on the wire only when set (Kafka's default -1 leaves it out)
    assert len(codec.encode(with_tag)[1] or b"") > len(codec.encode(without)[1] or b"")
    shown = dump_log(with_tag)["payload"]
    # 4.1+ tools label the value's version "version"; tagged fields print only when set
    assert shown["version"] == "0" and shown["data"]["deliveryCompleteCount"] == 10
    assert "deliveryCompleteCount" not in dump_log(without)["payload"]["data"]
    state = share_partition_state(with_tag)
    assert state is not None and state.delivery_complete_count == 10
    assert state.create_timestamp == 1_700_000_000_000
    assert share_partition_state(without).delivery_complete_count is None  # type: ignore[union-attr]
    avro = AvroCodec()
    assert avro.decode(avro.encode(canonical(with_tag))) == canonical(with_tag)


LAYOUTS = [(k, c) for k, t in sorted(SHARE_STATE_TYPES.items()) for c in t.value_classes]


@pytest.mark.parametrize("key_type,cls", LAYOUTS, ids=lambda x: getattr(x, "__name__", str(x)))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_roundtrip_every_layout(key_type: int, cls: type, data: st.DataObject) -> None:
    rtype = SHARE_STATE_TYPES[key_type]
    codec = ShareStateCodec()
    value = data.draw(S.values(rtype, 0, cls))
    key = data.draw(S.keys(rtype))
    record = ShareStateRecord(key_type, key, 0, value, 0, 1, 2)
    raw_key, raw_value = codec.encode(record)
    decoded = codec.decode(raw_key, raw_value, 0, 1, 2)
    # byte-exact whichever layout read it back (both layouts of version 0 may fit some bytes)
    assert codec.encode(decoded) == (raw_key, raw_value)
    if type(decoded.value) is cls:
        assert decoded == record
    tombstone = codec.decode(raw_key, None, 0, 1, 2)
    assert isinstance(tombstone, ShareStateRecord) and tombstone.value is None
    assert dump_log(tombstone)["payload"] == "<DELETE>"


@settings(max_examples=200, deadline=None)
@given(key=st.binary(max_size=40), value=st.one_of(st.none(), st.binary(max_size=80)))
def test_random_bytes_never_crash(key: bytes, value: bytes | None) -> None:
    codec = ShareStateCodec()
    try:
        record = codec.decode(key, value, 0, 9)
    except DecodeError as error:
        assert (error.partition, error.offset) == (0, 9)
        return
    assert codec.encode(record) == (key, value)


def test_the_4_0_layouts_are_what_kafka_4_0_writes() -> None:
    codec = ShareStateCodec()
    classes = {
        type(record.value)
        for offset, timestamp, key, value in captured()
        if isinstance(record := codec.decode(key, value, 0, offset, timestamp), ShareStateRecord)
    }
    assert classes == {ShareSnapshotValue, ShareUpdateValue}
    assert ShareUpdateWideEpochValue not in classes


def test_every_release_with_the_4_1_layouts_has_a_capture() -> None:
    """4.1 changed the share-state layouts at the same versions; 4.2 added tagged fields:
    each later release of the matrix brings its own bytes (scripts/capture_share_state.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "kafka"))
    import kafka_dist

    later = [v for v in kafka_dist.catalog().matrix if tuple(map(int, v.split(".")[:2])) >= (4, 1)]
    assert sorted(c.parent.name for c in RELEASE_CAPTURES) == sorted(later)
