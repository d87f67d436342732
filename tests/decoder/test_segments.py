"""Log-segment reader: Kafka 4.0.0 segment files, round trips, corruption, transactions."""

from __future__ import annotations

import contextlib
import gzip
import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetwatch.decoder.compression import XERIAL_MAGIC, compress, decompress, xxh32
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.segments import (
    Batch,
    Codec,
    ControlSpec,
    RawRecord,
    RecordSpec,
    SegmentReader,
    TransactionResolver,
    TruncatedTail,
    iter_batches,
    partition_of_dir,
    read_partition_dir,
    read_segment,
    resolve,
    write_batch,
)

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]
INT32_MAX = 0x7FFFFFFF


def collect(gen: Iterator[Batch]) -> tuple[list[Batch], Any]:
    """Drain a batch generator; return the batches and the generator's return value."""
    batches: list[Batch] = []
    while True:
        try:
            batches.append(next(gen))
        except StopIteration as stop:
            return batches, stop.value


# --- conformance: segments written by a real Kafka 4.0.0 broker -------------------------------


def _runs(conformance_dir: Path) -> list[Path]:
    runs = sorted(p for p in (conformance_dir / "runs").iterdir() if (p / "segments").is_dir())
    assert runs, "no sub-runs with segments/"
    return runs


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _partition_batches(run: Path) -> list[tuple[int, Batch]]:
    out: list[tuple[int, Batch]] = []
    dirs = [d for d in (run / "segments").iterdir() if partition_of_dir(d) is not None]
    for d in sorted(dirs, key=lambda d: partition_of_dir(d) or 0):
        partition = partition_of_dir(d)
        assert partition is not None
        batches, tails = collect(read_partition_dir(d))
        assert tails == (), f"{d}: unexpected truncated tail {tails}"
        out.extend((partition, b) for b in batches)
    return out


def test_conformance_batches_match_dump_log(conformance_dir: Path) -> None:
    for run in _runs(conformance_dir):
        expected = _jsonl(run / "batches.jsonl")
        got = _partition_batches(run)
        assert len(got) == len(expected), run.name
        for (partition, batch), exp in zip(got, expected, strict=True):
            h = batch.header
            where = f"{run.name} p{partition} @{exp['position']}"
            mine = {
                "partition": partition,
                "baseOffset": h.base_offset,
                "lastOffset": h.last_offset,
                "count": h.count,
                "baseSequence": h.base_sequence,
                "lastSequence": h.last_sequence,
                "producerId": h.producer_id,
                "producerEpoch": h.producer_epoch,
                "partitionLeaderEpoch": h.partition_leader_epoch,
                "isTransactional": h.is_transactional,
                "isControl": h.is_control,
                "deleteHorizonMs": (
                    "OptionalLong.empty"
                    if h.delete_horizon_ms is None
                    else f"OptionalLong[{h.delete_horizon_ms}]"
                ),
                "position": h.position,
                "CreateTime": h.max_timestamp,
                "size": h.size,
                "magic": h.magic,
                "compresscodec": h.codec.kafka_name,
                "crc": h.crc,
                "isvalid": h.crc_valid,
            }
            assert mine == {k: exp[k] for k in mine}, where
            assert h.timestamp_type == 0, where  # dump-log printed "CreateTime"
            offsets = [r.offset for r in batch.records] + [c.offset for c in batch.controls]
            assert offsets == exp["records"], where
            if h.is_control:
                assert batch.records == ()
                controls = [
                    {
                        "offset": c.offset,
                        "endTxnMarker": c.marker,
                        "coordinatorEpoch": c.coordinator_epoch,
                    }
                    for c in batch.controls
                ]
                assert controls == exp["control_records"], where
                assert all(c.producer_id == h.producer_id for c in batch.controls)
            else:
                assert batch.controls == ()
                assert "control_records" not in exp


def test_conformance_records_match_records_jsonl(conformance_dir: Path) -> None:
    for run in _runs(conformance_dir):
        expected = {(r["partition"], r["offset"]): r for r in _jsonl(run / "records.jsonl")}
        seen = set()
        for partition, batch in _partition_batches(run):
            for record in batch.records:
                exp = expected[(partition, record.offset)]
                assert record.timestamp == exp["timestamp"]
                assert record.key is not None and record.key.hex() == exp["key"]
                assert (None if record.value is None else record.value.hex()) == exp["value"]
                assert record.headers == ()
                assert record.producer_id == batch.header.producer_id
                assert record.is_transactional == batch.header.is_transactional
                seen.add((partition, record.offset))
        assert seen == set(expected), run.name  # every record of the topic is in the segments


def test_conformance_codecs_cover_all_five(conformance_dir: Path) -> None:
    codecs = {b.header.codec for run in _runs(conformance_dir) for _, b in _partition_batches(run)}
    assert codecs == set(Codec)


def test_conformance_snappy_is_xerial_framed(conformance_dir: Path) -> None:
    run = conformance_dir / "runs" / "codec-snappy"
    if not run.is_dir():
        pytest.skip("no codec-snappy sub-run")
    found = 0
    for d in (run / "segments").iterdir():
        for f in d.glob("*.log"):
            data = f.read_bytes()
            for batch in iter_batches(data):
                if batch.header.codec == Codec.SNAPPY:
                    start = batch.header.position + 61
                    assert data[start : start + 8] == XERIAL_MAGIC
                    found += 1
    assert found > 0


def _offset_commit(key: bytes, value: bytes | None) -> tuple[str, str, int, int | None] | None:
    """Minimal OffsetCommit decoding (key version 0/1): group, topic, partition, offset."""
    (kver,) = struct.unpack_from(">h", key)
    if kver not in (0, 1):
        return None
    p = 2
    (n,) = struct.unpack_from(">h", key, p)
    group = key[p + 2 : p + 2 + n].decode()
    p += 2 + n
    (n,) = struct.unpack_from(">h", key, p)
    topic = key[p + 2 : p + 2 + n].decode()
    p += 2 + n
    (partition,) = struct.unpack_from(">i", key, p)
    offset = None if value is None else struct.unpack_from(">q", value, 2)[0]
    return group, topic, partition, offset


def test_conformance_transactions_resolve_like_the_markers(conformance_dir: Path) -> None:
    for run in _runs(conformance_dir):
        batches_by_partition: dict[int, list[Batch]] = {}
        for partition, batch in _partition_batches(run):
            batches_by_partition.setdefault(partition, []).append(batch)
        # expected status from batches.jsonl: the next marker of the same producer decides
        markers: dict[int, list[tuple[int, int, str]]] = {}
        txn_offsets: dict[tuple[int, int], int] = {}
        for b in _jsonl(run / "batches.jsonl"):
            for c in b.get("control_records", []):
                markers.setdefault(b["partition"], []).append(
                    (c["offset"], b["producerId"], c["endTxnMarker"])
                )
            if b["isTransactional"] and not b["isControl"]:
                for off in b["records"]:
                    txn_offsets[(b["partition"], off)] = b["producerId"]
        statuses: dict[tuple[int, int], str] = {}
        for partition, batches in batches_by_partition.items():
            emitted_at: list[int] = []
            for record, status in resolve(batches):
                key = (partition, record.offset)
                assert key not in statuses
                statuses[key] = status
                pid = txn_offsets.get(key)
                if pid is None:
                    assert status == "committed" and not record.is_transactional
                    emitted_at.append(record.offset)
                    continue
                assert record.is_transactional and record.producer_id == pid
                decision = next(
                    (
                        (m_off, m)
                        for m_off, m_pid, m in sorted(markers.get(partition, []))
                        if m_pid == pid and m_off > record.offset
                    ),
                    None,
                )
                if decision is None:
                    assert status == "pending", key
                else:
                    assert status == {"COMMIT": "committed", "ABORT": "aborted"}[decision[1]], key
                    emitted_at.append(decision[0])
            # order rule: released at the marker's position, so emission points never go back
            assert emitted_at == sorted(emitted_at), partition
        assert len(statuses) == len(_jsonl(run / "records.jsonl"))
        if run.name == "main":
            _check_main_manifest(run, batches_by_partition)


def _check_main_manifest(run: Path, batches_by_partition: dict[int, list[Batch]]) -> None:
    manifest = json.loads((run / "manifest.json").read_text())["groups"]
    by_group: dict[str, dict[str, set[tuple[int, int]]]] = {}
    for batches in batches_by_partition.values():
        for record, status in resolve(batches):
            assert record.key is not None
            oc = _offset_commit(record.key, record.value)
            if oc is None or not record.is_transactional:
                continue
            group, _topic, part, offset = oc
            if offset is None:
                continue
            by_group.setdefault(group, {}).setdefault(status, set()).add((part, offset))
    for group, entry in manifest.items():
        for kind, positions in entry.get("txn_positions", []):
            want = {"commit": "committed", "offsets-only": "committed", "abort": "aborted"}.get(
                kind, "pending"
            )
            got = by_group.get(group, {}).get(want, set())
            for part, offset in positions:
                assert (part, offset) in got, (group, kind, part, offset)
    assert by_group["txn-abort-d8bf"]["aborted"] == {(0, 129), (1, 93), (2, 111)}
    assert by_group["txn-open-1dfb"]["pending"] == {(0, 137), (1, 100), (2, 119)}
    assert "pending" not in by_group["txn-abort-d8bf"]


# --- round trips --------------------------------------------------------------------------------

_blobs = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(
    st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
).map(tuple)


@st.composite
def _specs(draw: st.DrawFn, *, headers: bool, max_size: int = 30) -> list[RecordSpec]:
    n = draw(st.integers(min_value=1, max_value=max_size))
    gaps = draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n))
    base_ts = draw(st.integers(0, 2**45))
    deltas = draw(st.lists(st.integers(-(2**33), 2**33), min_size=n, max_size=n))
    out = []
    od = 0
    for i in range(n):
        out.append(
            RecordSpec(
                od,
                max(0, base_ts + deltas[i]),
                draw(_blobs),
                draw(_blobs),
                draw(_headers) if headers else (),
            )
        )
        od += 1 + gaps[i]
    return out


def _expected_sequence(base_sequence: int, delta: int) -> int:
    if base_sequence == -1:
        return -1
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


@PROPERTY
@given(
    specs=_specs(headers=True),
    codec=st.sampled_from(list(Codec)),
    base_offset=st.integers(0, 2**50),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1)),
    base_sequence=st.one_of(st.just(-1), st.integers(0, INT32_MAX)),
    transactional=st.booleans(),
    leader_epoch=st.integers(-1, INT32_MAX),
    timestamp_type=st.sampled_from([0, 1]),
)
def test_v2_roundtrip(
    specs: list[RecordSpec],
    codec: Codec,
    base_offset: int,
    producer: tuple[int, int],
    base_sequence: int,
    transactional: bool,
    leader_epoch: int,
    timestamp_type: int,
) -> None:
    data = write_batch(
        specs,
        base_offset=base_offset,
        codec=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=base_sequence,
        is_transactional=transactional,
        partition_leader_epoch=leader_epoch,
        timestamp_type=timestamp_type,
    )
    (batch,) = list(iter_batches(data, base_position=1000))
    h = batch.header
    last_delta = specs[-1].offset_delta
    max_ts = max(s.timestamp for s in specs)
    assert (h.base_offset, h.last_offset, h.count) == (
        base_offset,
        base_offset + last_delta,
        len(specs),
    )
    assert (h.magic, h.codec, h.timestamp_type, h.partition_leader_epoch) == (
        2,
        codec,
        timestamp_type,
        leader_epoch,
    )
    assert (h.producer_id, h.producer_epoch, h.is_transactional, h.is_control) == (
        producer[0],
        producer[1],
        transactional,
        False,
    )
    assert h.base_sequence == base_sequence
    assert h.last_sequence == _expected_sequence(base_sequence, last_delta)
    assert (h.base_timestamp, h.max_timestamp) == (specs[0].timestamp, max_ts)
    assert h.crc_valid and h.crc == struct.unpack_from(">I", data, 17)[0]
    assert (h.position, h.size, h.delete_horizon_ms) == (1000, len(data), None)
    assert batch.controls == ()
    want = [
        RawRecord(
            base_offset + s.offset_delta,
            max_ts if timestamp_type == 1 else s.timestamp,
            s.key,
            s.value,
            s.headers,
            _expected_sequence(base_sequence, s.offset_delta),
            producer[0],
            transactional,
        )
        for s in specs
    ]
    assert list(batch.records) == want
    assert all(type(r) is RawRecord for r in batch.records)


@PROPERTY
@given(
    specs=_specs(headers=False, max_size=10),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    base_offset=st.integers(0, 2**50),
    timestamp_type=st.sampled_from([0, 1]),
)
def test_legacy_roundtrip(
    specs: list[RecordSpec], magic: int, codec: Codec, base_offset: int, timestamp_type: int
) -> None:
    data = write_batch(
        specs, base_offset=base_offset, magic=magic, codec=codec, timestamp_type=timestamp_type
    )
    batches = list(iter_batches(data))
    ts_type = timestamp_type if magic == 1 else -1
    wrapper_ts = max(s.timestamp for s in specs) if magic == 1 else -1
    if codec == Codec.NONE:
        assert len(batches) == len(specs)  # one legacy message per record
    else:
        assert len(batches) == 1
        h = batches[0].header
        assert (h.base_offset, h.last_offset, h.count, h.max_timestamp) == (
            base_offset,
            base_offset + specs[-1].offset_delta,
            len(specs),
            wrapper_ts,
        )
    position = 0
    for b in batches:
        h = b.header
        assert (h.magic, h.codec, h.timestamp_type, h.crc_valid) == (magic, codec, ts_type, True)
        assert (h.partition_leader_epoch, h.producer_id, h.producer_epoch) == (-1, -1, -1)
        assert (h.base_sequence, h.last_sequence, h.base_timestamp) == (-1, -1, -1)
        assert (h.is_transactional, h.is_control, h.delete_horizon_ms) == (False, False, None)
        assert h.position == position
        position += h.size
    assert position == len(data)
    got = [r for b in batches for r in b.records]

    def timestamp(s: RecordSpec) -> int:
        if magic == 0:
            return -1
        if codec != Codec.NONE and timestamp_type == 1:
            return wrapper_ts  # LogAppendTime wrapper overrides the inner timestamps
        return s.timestamp

    assert got == [
        RawRecord(base_offset + s.offset_delta, timestamp(s), s.key, s.value, (), -1, -1, False)
        for s in specs
    ]


def test_v1_wrapper_relative_offsets_built_by_hand() -> None:
    """Independent of write_batch: a gzip v1 wrapper, inner offsets 0..2, wrapper offset 102."""

    def message(offset: int, attributes: int, ts: int, key: bytes | None, value: bytes) -> bytes:
        content = struct.pack(">bBq", 1, attributes, ts)
        content += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
        content += struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", offset, 4 + len(content), zlib.crc32(content)) + content

    inner = b"".join(message(i, 0, 1000 + i, b"k%d" % i, b"v%d" % i) for i in range(3))
    wrapper = message(102, 0x01 | 0x08, 5000, None, gzip.compress(inner))  # gzip, LogAppendTime
    (batch,) = list(iter_batches(wrapper))
    assert [r.offset for r in batch.records] == [100, 101, 102]
    assert [r.timestamp for r in batch.records] == [5000] * 3
    assert [r.key for r in batch.records] == [b"k0", b"k1", b"k2"]
    assert (batch.header.base_offset, batch.header.last_offset) == (100, 102)
    # the same wrapper with CreateTime keeps the inner timestamps
    create = message(102, 0x01, 5000, None, gzip.compress(inner))
    (batch,) = list(iter_batches(create))
    assert [r.timestamp for r in batch.records] == [1000, 1001, 1002]
    # v0 wrappers carry absolute inner offsets
    v0 = write_batch(
        [RecordSpec(0, 0, b"a", b"1"), RecordSpec(3, 0, b"b", b"2")],
        base_offset=500,
        magic=0,
        codec=Codec.GZIP,
    )
    (batch,) = list(iter_batches(v0))
    assert [r.offset for r in batch.records] == [500, 503]


def test_control_batches_roundtrip() -> None:
    commit = write_batch(
        [],
        base_offset=7,
        producer_id=42,
        producer_epoch=3,
        control=ControlSpec("COMMIT", coordinator_epoch=5, timestamp=99),
    )
    abort = write_batch(
        [], base_offset=8, producer_id=42, producer_epoch=3, control=ControlSpec("ABORT")
    )
    other = write_batch([], base_offset=9, producer_id=1, control=ControlSpec(3))
    batches = list(iter_batches(commit + abort + other))
    assert [b.header.is_control and b.header.is_transactional for b in batches] == [True] * 3
    assert [b.records for b in batches] == [(), (), ()]
    c = batches[0].controls[0]
    assert (c.offset, c.timestamp, c.marker, c.coordinator_epoch) == (7, 99, "COMMIT", 5)
    assert (c.producer_id, c.producer_epoch) == (42, 3)
    assert batches[1].controls[0].marker == "ABORT"
    assert batches[2].controls[0].marker == "UNKNOWN(3)"
    assert batches[2].controls[0].coordinator_epoch == -1


def test_fast_path_and_generic_path_agree_on_unusual_records() -> None:
    specs = [
        RecordSpec(0, 10**12, b"k" * 70, None),  # 2-byte key length varint
        RecordSpec(70, 10**12 + 2**40, None, b"v" * 20000),  # long varints, big value
        RecordSpec(20000, 10**12 - 5, b"", b"", (("h", b"x"), ("n", None))),
    ]
    for codec in Codec:
        (fast,) = iter_batches(write_batch(specs, base_offset=1, codec=codec))
        wrapping = write_batch(specs, base_offset=1, codec=codec, base_sequence=INT32_MAX - 5)
        (slow,) = iter_batches(wrapping)
        for a, b, s in zip(fast.records, slow.records, specs, strict=True):
            assert (a.offset, a.timestamp, a.key, a.value, a.headers) == (
                1 + s.offset_delta,
                s.timestamp,
                s.key,
                s.value,
                s.headers,
            )
            assert (b.offset, b.timestamp, b.key, b.value, b.headers) == (
                a.offset,
                a.timestamp,
                a.key,
                a.value,
                a.headers,
            )
        assert [r.sequence for r in slow.records] == [INT32_MAX - 5, 64, 19994]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4])
def test_varint_width_boundaries(codec: Codec) -> None:
    """1-, 2- and 3-byte zig-zag varints in every field the fast path inlines."""
    widths = [0, 1, 63, 64, 65, 8191, 8192, 70000]
    base_ts = 10**12
    specs = []
    od = 0
    for i, n in enumerate(widths):
        for sign in (1, -1):
            specs.append(RecordSpec(od, base_ts + sign * n, b"k" * n, bytes([i]) * widths[-1 - i]))
            od += n + 1
    (batch,) = iter_batches(write_batch(specs, base_offset=5, codec=codec, base_sequence=0))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.records] == [
        (5 + s.offset_delta, s.timestamp, s.key, s.value) for s in specs
    ]
    assert [r.sequence for r in batch.records] == [s.offset_delta for s in specs]


def test_delete_horizon_and_empty_batch() -> None:
    data = write_batch(
        [RecordSpec(0, 1000, b"k", None)], base_offset=3, delete_horizon_ms=5000
    ) + write_batch([], base_offset=4, last_offset_delta=2)
    first, empty = list(iter_batches(data))
    assert first.header.delete_horizon_ms == 5000
    assert first.records[0].timestamp == 1000  # record timestamps stay relative to the base
    assert (empty.header.count, empty.header.last_offset, empty.records) == (0, 6, ())


def test_raw_records_are_frozen_and_compare_by_value() -> None:
    (batch,) = list(iter_batches(write_batch([RecordSpec(0, 5, b"k", b"v")], base_offset=9)))
    record = batch.records[0]
    with pytest.raises(AttributeError):
        record.offset = 3  # type: ignore[misc]
    assert record == RawRecord(9, 5, b"k", b"v", (), -1, -1, False)
    assert hash(record) == hash(RawRecord(9, 5, b"k", b"v", (), -1, -1, False))
    assert repr(record).startswith("RawRecord(offset=9")


def test_input_buffer_types() -> None:
    data = write_batch([RecordSpec(0, 5, b"k", b"v")], base_offset=9) * 2
    for buf in (data, memoryview(data), bytearray(data)):
        batches = list(iter_batches(buf))  # type: ignore[arg-type]
        assert [b.records[0].key for b in batches] == [b"k", b"k"]
        assert all(type(b.records[0].key) is bytes for b in batches)


# --- codecs ---------------------------------------------------------------------------------


def test_snappy_raw_xerial_and_framed_are_all_read() -> None:
    payload = b"abc" * 50000  # several xerial chunks
    xerial = compress(Codec.SNAPPY, payload)
    assert xerial.startswith(XERIAL_MAGIC)
    assert decompress(Codec.SNAPPY, xerial) == payload
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(payload))) == payload
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress(payload))) == payload
    # a v2 batch whose records section is a raw snappy block (librdkafka style)
    plain = write_batch([RecordSpec(0, 1, b"k", b"v"), RecordSpec(1, 2, None, b"w")], base_offset=0)
    records = plain[61:]
    after_crc = bytearray(plain[21:61] + bytes(cramjam.snappy.compress_raw(records)))
    after_crc[1] |= Codec.SNAPPY  # attributes low byte
    rebuilt = struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(bytes(after_crc)))
    (batch,) = list(iter_batches(rebuilt + bytes(after_crc)))
    assert [(r.key, r.value) for r in batch.records] == [(b"k", b"v"), (None, b"w")]


def test_lz4_frames_like_kafka() -> None:
    payload = bytes(range(256)) * 600  # > 64 KiB: several blocks
    v1 = compress(Codec.LZ4, payload, magic=1)
    v0 = compress(Codec.LZ4, payload, magic=0)
    assert v1[4:6] == b"\x60\x40"  # independent 64 KiB blocks, no checksums (Kafka's FLG/BD)
    assert v1[6] == (xxh32(v1[4:6]) >> 8) & 0xFF
    assert v0[6] == (xxh32(v0[0:6]) >> 8) & 0xFF  # magic 0: checksum over the frame magic too
    assert decompress(Codec.LZ4, v1, magic=1) == payload
    assert decompress(Codec.LZ4, v0, magic=0) == payload
    assert bytes(cramjam.lz4.decompress(v1)) == payload  # standard frame
    if v0[6] != v1[6]:
        with pytest.raises(DecodeError, match="lz4"):
            decompress(Codec.LZ4, v0, magic=1)  # magic >= 1 checks the header checksum


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_corrupt_compressed_payload_is_a_decode_error() -> None:
    for codec in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD):
        good = write_batch([RecordSpec(0, 1, b"k", b"v" * 100)], base_offset=0, codec=codec)
        bad = bytearray(good)
        for i in range(61, len(bad)):
            bad[i] ^= 0x55
        with pytest.raises(DecodeError) as info:
            list(iter_batches(bytes(bad), verify_crc=False, base_position=40))
        assert info.value.byte_position == 40 and info.value.part == "batch"


def test_legacy_rejects_zstd_and_headers() -> None:
    with pytest.raises(ValueError):
        write_batch([RecordSpec(0, 1, b"k", b"v")], base_offset=0, magic=1, codec=Codec.ZSTD)
    with pytest.raises(ValueError):
        write_batch([RecordSpec(0, 1, b"k", b"v", (("h", b""),))], base_offset=0, magic=1)


# --- corruption, CRC and truncated tails ---------------------------------------------------------


def _segment() -> tuple[bytes, list[int]]:
    parts = [
        write_batch([RecordSpec(0, 100 + n, b"k%d" % n, b"v")], base_offset=n) for n in range(3)
    ]
    parts.insert(1, write_batch([RecordSpec(0, 5, b"old", b"x")], base_offset=10, magic=1))
    positions = []
    pos = 0
    for part in parts:
        positions.append(pos)
        pos += len(part)
    return b"".join(parts), positions


@pytest.mark.parametrize("which", [0, 1, 3])
def test_crc_mismatch_raises_or_flags(which: int) -> None:
    data, positions = _segment()
    bad = bytearray(data)
    # a timestamp byte: covered by the CRC, framing still readable (batch 1 is a v1 message)
    bad[positions[which] + (20 if which == 1 else 40)] ^= 0x01
    with pytest.raises(DecodeError) as info:
        list(iter_batches(bytes(bad), base_position=4096))
    assert info.value.byte_position == 4096 + positions[which]
    assert info.value.kind == "crc" and info.value.part == "batch"
    batches = list(iter_batches(bytes(bad), verify_crc=False))
    assert [b.header.crc_valid for b in batches] == [i != which for i in range(len(positions))]


def test_inner_crc_mismatch_of_a_legacy_wrapper() -> None:
    inner_first = write_batch([RecordSpec(0, 1, b"k", b"v")], base_offset=0, magic=1)
    broken_inner = bytearray(inner_first + inner_first)
    broken_inner[-1] ^= 0xFF
    content = struct.pack(">bBq", 1, Codec.GZIP, 1) + struct.pack(">i", -1)
    value = gzip.compress(bytes(broken_inner))
    content += struct.pack(">i", len(value)) + value
    wrapper = struct.pack(">qiI", 1, 4 + len(content), zlib.crc32(content)) + content
    with pytest.raises(DecodeError, match="crc"):
        list(iter_batches(wrapper))
    (batch,) = list(iter_batches(wrapper, verify_crc=False))
    assert not batch.header.crc_valid and len(batch.records) == 2


def test_structural_corruption_in_the_middle_raises_with_position() -> None:
    data, positions = _segment()
    bad_magic = bytearray(data)
    bad_magic[positions[2] + 16] = 7
    with pytest.raises(DecodeError, match="magic") as info:
        list(iter_batches(bytes(bad_magic)))
    assert info.value.byte_position == positions[2] + 16
    bad_length = bytearray(data)
    bad_length[positions[2] + 8 : positions[2] + 12] = struct.pack(">i", 3)
    with pytest.raises(DecodeError, match="length") as info:
        list(iter_batches(bytes(bad_length)))
    assert info.value.byte_position == positions[2]
    # a length running past the end of the data reads as a partial write (Kafka's recovery
    # does the same) when nothing sound follows: the last batch, cut short
    torn = bytearray(data)
    torn[positions[3] + 8 : positions[3] + 12] = struct.pack(">i", 10**6)
    batches, tail = collect(iter_batches(bytes(torn)))
    assert len(batches) == 3 and tail is not None
    assert (tail.position, tail.needed, tail.available) == (
        positions[3],
        12 + 10**6,
        len(data) - positions[3],
    )
    # ...but a complete batch after it proves the length corrupt: an error at its position,
    # and with on_error reading resumes at the sound batch
    too_long = bytearray(data)
    too_long[positions[2] + 8 : positions[2] + 12] = struct.pack(">i", 10**6)
    with pytest.raises(DecodeError, match="corrupt batch length") as info:
        collect(iter_batches(bytes(too_long)))
    assert info.value.byte_position == positions[2]
    assert f"starts at byte {positions[3]}" in str(info.value)
    errors: list[DecodeError] = []
    batches, tail = collect(iter_batches(bytes(too_long), on_error=errors.append))
    assert [b.header.position for b in batches] == [positions[0], positions[1], positions[3]]
    assert tail is None and [e.byte_position for e in errors] == [positions[2]]
    too_long[positions[2] + 16] = 0xFE
    with pytest.raises(DecodeError, match="magic"):
        collect(iter_batches(bytes(too_long)))
    short_v2 = bytearray(data)
    short_v2[positions[2] + 8 : positions[2] + 12] = struct.pack(">i", 30)
    with pytest.raises(DecodeError) as info:
        list(iter_batches(bytes(short_v2), verify_crc=False))
    assert info.value.byte_position == positions[2]


def test_record_length_mismatch_is_located_exactly() -> None:
    data = write_batch([RecordSpec(0, 1, b"key", b"value")], base_offset=0)
    bad = bytearray(data)
    bad[61] += 2  # record length varint (zig-zag: +1)
    with pytest.raises(DecodeError, match="record") as info:
        list(iter_batches(bytes(bad), verify_crc=False, base_position=100))
    assert info.value.byte_position is not None and info.value.byte_position > 100 + 61


def test_truncated_tail_stops_cleanly(tmp_path: Path) -> None:
    data, positions = _segment()
    last = positions[-1]
    for cut in (last + 1, last + 16, last + 17, last + 30, len(data) - 1):
        batches, tail = collect(iter_batches(data[:cut], base_position=10))
        assert len(batches) == len(positions) - 1
        assert isinstance(tail, TruncatedTail)
        assert (tail.position, tail.available) == (10 + last, cut - last)
        if cut - last >= 17:
            assert tail.needed == len(data) - last
        reader = SegmentReader(data[:cut])
        assert len(list(reader)) == len(positions) - 1
        assert reader.truncated_tail is not None and reader.truncated_tail.position == last
    _, tail = collect(iter_batches(data))
    assert tail is None
    # the same through a file, and zero padding (pre-allocated segments)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data[: last + 20])
    batches, tail = collect(read_segment(path))
    assert len(batches) == len(positions) - 1
    assert tail is not None and tail.path == str(path) and tail.position == last
    path.write_bytes(data + bytes(100))
    batches, tail = collect(read_segment(path))
    assert len(batches) == len(positions)
    assert tail is not None and tail.reason == "zero padding" and tail.position == len(data)
    reader = SegmentReader(path=path)
    assert len(list(reader)) == len(positions) and reader.truncated_tail is not None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.booleans())
def test_random_garbage_only_raises_decode_error(garbage: bytes, verify: bool) -> None:
    with contextlib.suppress(DecodeError):
        collect(iter_batches(garbage, verify_crc=verify))


def _valid_mixed_segment() -> bytes:
    parts = [
        write_batch(
            [RecordSpec(0, 5, b"key", b"value"), RecordSpec(1, 6, None, b"x", (("h", b"1"),))],
            base_offset=0,
            codec=codec,
        )
        for codec in Codec
    ]
    parts.append(write_batch([], base_offset=20, producer_id=3, control=ControlSpec("ABORT")))
    parts.extend(
        write_batch(
            [RecordSpec(0, 1, b"a", b"b"), RecordSpec(1, 2, b"c", None)],
            base_offset=30,
            magic=m,
            codec=c,
        )
        for m in (0, 1)
        for c in LEGACY_CODECS
    )
    return b"".join(parts)


_VALID = _valid_mixed_segment()


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=6
    ),
    st.integers(0, len(_VALID)),
)
def test_mutated_segments_only_raise_decode_error(
    mutations: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(_VALID)
    for at, value in mutations:
        data[at] = value
    for verify in (True, False):
        try:
            collect(iter_batches(bytes(data[:cut]), verify_crc=verify))
        except DecodeError as exc:
            assert exc.part == "batch" and exc.byte_position is not None


def test_mixed_segment_reads_completely() -> None:
    batches, tail = collect(iter_batches(_VALID))
    assert tail is None
    assert sum(len(b.records) for b in batches) == 2 * len(Codec) + 2 * 2 * len(LEGACY_CODECS)


# --- transactions ---------------------------------------------------------------------------


def _txn_batch(offset: int, pid: int, n: int = 1) -> bytes:
    specs = [RecordSpec(i, offset + i, b"t%d" % (offset + i), b"v") for i in range(n)]
    return write_batch(
        specs,
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def _plain(offset: int) -> bytes:
    return write_batch([RecordSpec(0, offset, b"p%d" % offset, b"v")], base_offset=offset)


def _marker(offset: int, pid: int, marker: str) -> bytes:
    return write_batch(
        [], base_offset=offset, producer_id=pid, producer_epoch=0, control=ControlSpec(marker)
    )


def test_transaction_resolver_releases_at_the_marker() -> None:
    log = b"".join(
        [
            _plain(0),
            _txn_batch(1, pid=7, n=2),  # 1, 2
            _txn_batch(3, pid=8),  # 3
            _plain(4),
            _marker(5, 7, "COMMIT"),
            _txn_batch(6, pid=7),  # 6 (new transaction of producer 7)
            _marker(7, 8, "ABORT"),
            _marker(8, 9, "COMMIT"),  # a producer with nothing open: no effect
            _plain(9),
        ]
    )
    resolver = TransactionResolver()
    out: list[tuple[int, str]] = []
    for batch in iter_batches(log):
        out.extend((r.offset, s) for r, s in resolver.feed(batch))
    assert out == [
        (0, "committed"),
        (4, "committed"),
        (1, "committed"),
        (2, "committed"),
        (3, "aborted"),
        (9, "committed"),
    ]
    assert [(r.offset, s) for r, s in resolver.pending()] == [(6, "pending")]
    assert resolver.open_producers == frozenset({7})
    assert [(r.offset, s) for r, s in resolve(iter_batches(log))] == [*out, (6, "pending")]


# --- files and directories ----------------------------------------------------------------------


def test_partition_of_dir() -> None:
    assert partition_of_dir("/data/__consumer_offsets-17") == 17
    assert partition_of_dir(Path("x/__consumer_offsets-0/")) == 0
    assert partition_of_dir("my-topic-3") == 3
    assert partition_of_dir("__consumer_offsets") is None
    assert partition_of_dir("__consumer_offsets-3.abcdef-delete") is None
    assert partition_of_dir("__consumer_offsets-x") is None


def test_read_partition_dir_orders_segments_by_base_offset(tmp_path: Path) -> None:
    d = tmp_path / "__consumer_offsets-4"
    d.mkdir()
    (d / "00000000000000000100.log").write_bytes(_plain(100) + _plain(101))
    (d / "00000000000000000000.log").write_bytes(_plain(0))
    (d / "00000000000000000020.log").write_bytes(b"")
    (d / "00000000000000000050.log").write_bytes(_plain(50) + _plain(51)[:20])
    (d / "00000000000000000000.index").write_bytes(b"\x00" * 8)
    (d / "leader-epoch-checkpoint").write_bytes(b"0\n")
    batches, tails = collect(read_partition_dir(d))
    assert [b.header.base_offset for b in batches] == [0, 50, 100, 101]
    assert [b.header.position for b in batches] == [0, 0, 0, len(_plain(100))]
    assert len(tails) == 1 and tails[0].path is not None and tails[0].path.endswith("50.log")
    assert partition_of_dir(d) == 4
