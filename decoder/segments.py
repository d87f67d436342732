"""Kafka log-segment reader (and writer): record batches v0/v1/v2, all codecs, control batches.

Pure: bytes in, typed objects out. `read_segment` / `read_partition_dir` are thin file wrappers.

Layout (spec §1.3): a segment is a sequence of entries `[baseOffset int64][length int32][...]`
where the magic byte sits at byte 16 of every entry. Magic 2 entries are record batches; magic 0
and 1 entries are legacy messages, each one yielded as its own `Batch` (a compressed legacy
*wrapper* message becomes one batch holding its inner messages).

Error policy:

* Bad bytes in the middle of a segment (unknown magic, impossible lengths, malformed records,
  undecompressable payloads, a CRC mismatch while `verify_crc=True`) raise
  `DecodeError(part="batch", byte_position=<file position>)`. The position is the batch start,
  or the exact byte for malformed records of an uncompressed batch. With `on_error`, a batch
  whose length is sound but whose content is bad is reported there and reading continues
  with the next batch; only a broken length ends the file.
* Decompressed size is bounded per batch (`max_batch_bytes`, `compression.batch_limit`): a
  decompression bomb raises `DecompressedSizeError` after at most that much memory.
* A batch that runs past the end of the data (a partial write at the end of the active segment,
  which Kafka can leave behind and truncates on recovery) is **not** an error: iteration stops
  and the generator returns a `TruncatedTail` (`SegmentReader.truncated_tail` keeps it for
  callers that use a plain for loop). A tail of zero bytes (pre-allocated segment) is reported
  the same way. As in Kafka's recovery, any length pointing past the end counts as such a
  tail (the header's magic byte must still be valid); `needed` vs `available` tells how far.
* `verify_crc=False`: the CRC is still computed; a mismatching batch is yielded with
  `crc_valid=False` instead of raising (structural errors still raise).

Performance: uncompressed v2 batches go through `_decode_records_fast`, an inlined loop with
1- and 2-byte varint fast paths that builds `RawRecord` objects without running the frozen
dataclass `__init__` (see `_RecordSlots`). Everything unusual (headers, LogAppendTime, sequence
wrap-around, long varints) falls back to plain helper functions.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Final, Literal

import crc32c

from offsetwatch.decoder.codec import accelerated
from offsetwatch.decoder.compression import (
    DEFAULT_MAX_BATCH_BYTES,
    Codec,
    batch_limit,
    compress,
    decompress,
)
from offsetwatch.decoder.errors import DecodeError

__all__ = [
    "ABORTED",
    "COMMITTED",
    "PENDING",
    "Batch",
    "BatchHeader",
    "Codec",
    "ControlRecord",
    "ControlSpec",
    "RawRecord",
    "RecordSpec",
    "SegmentReader",
    "TransactionResolver",
    "TruncatedTail",
    "TxnStatus",
    "iter_batches",
    "partition_of_dir",
    "read_partition_dir",
    "read_segment",
    "resolve",
    "write_batch",
]

LOG_OVERHEAD: Final = 12  # baseOffset int64 + length int32
_HEADER_UP_TO_MAGIC: Final = 17
V2_HEADER_SIZE: Final = 61
_V2_MIN_LENGTH: Final = V2_HEADER_SIZE - LOG_OVERHEAD  # 49
_V2_CRC_END: Final = 21  # the CRC covers everything after byte 21 (attributes onwards)
_LEGACY_MIN_SIZE: Final = {0: 14, 1: 22}  # crc+magic+attrs(+timestamp)+keyLen+valueLen
_MIN_RECORD_SIZE: Final = 7  # length, attributes, tsDelta, offsetDelta, keyLen, valueLen, headers
_INT32_MAX: Final = 0x7FFFFFFF
NO_TIMESTAMP: Final = -1

_V2 = struct.Struct(">qiiBIHiqqqhii")
_PREFIX = struct.Struct(">qi")
_LEGACY = struct.Struct(">qiIbB")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

_Buffer = bytes | bytearray | memoryview | mmap.mmap
#: receives the error of a soundly framed batch whose content is bad; reading goes on
OnError = Callable[[DecodeError], None]

TxnStatus = Literal["committed", "aborted", "pending"]
COMMITTED: Final = "committed"
ABORTED: Final = "aborted"
PENDING: Final = "pending"

_CODECS: Final = tuple(Codec)
_CONTROL_TYPES: Final = {0: "ABORT", 1: "COMMIT"}
_CONTROL_CODES: Final = {"ABORT": 0, "COMMIT": 1}


# --- data model -------------------------------------------------------------------------------


class _BatchHeaderSlots:
    """Storage of `BatchHeader` (same construction trick as `_RecordSlots`, see there)."""

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "codec",
        "count",
        "crc",
        "crc_valid",
        "delete_horizon_ms",
        "is_control",
        "is_transactional",
        "last_offset",
        "last_sequence",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "size",
        "timestamp_type",
    )
    base_offset: int
    last_offset: int
    count: int
    partition_leader_epoch: int
    magic: int
    crc: int
    crc_valid: bool
    attributes: int
    codec: Codec
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    delete_horizon_ms: int | None
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_timestamp: int
    max_timestamp: int
    position: int
    size: int


@dataclass(slots=True, frozen=True)
class BatchHeader(_BatchHeaderSlots):
    """A batch header as kafka-dump-log prints it (plus attributes, codec, position, size).

    Legacy (magic 0/1) entries get Kafka's defaults for the v2-only fields: partition leader
    epoch, producer id/epoch, base/last sequence and base timestamp -1, not transactional, not
    control, no delete horizon. For magic 0 there is no timestamp: `timestamp_type` is -1
    (Kafka's NoTimestampType) and `max_timestamp` -1. `count` is the number of records held.
    """

    base_offset: int
    last_offset: int
    count: int
    partition_leader_epoch: int
    magic: int
    crc: int
    crc_valid: bool
    attributes: int
    codec: Codec
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    delete_horizon_ms: int | None
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_timestamp: int
    max_timestamp: int
    position: int
    size: int


class _RecordSlots:
    """Storage of `RawRecord`: the slots live here so the hot loop can fill them directly.

    The hot loop creates a `_RecordSlots`, stores the eight attributes (plain slot stores, no
    frozen `__setattr__`) and then switches `__class__` to `RawRecord`, which adds no slots of
    its own - the object is from then on an ordinary frozen `RawRecord`. This is ~3x cheaper
    than the dataclass-generated frozen `__init__` (eight `object.__setattr__` calls).
    """

    __slots__ = (
        "headers",
        "is_transactional",
        "key",
        "offset",
        "producer_id",
        "sequence",
        "timestamp",
        "value",
    )
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    sequence: int
    producer_id: int
    is_transactional: bool


@dataclass(slots=True, frozen=True)
class RawRecord(_RecordSlots):
    """One data record: key/value bytes exactly as stored (value None = tombstone).

    `sequence` is -1 for legacy messages and for batches without a producer sequence;
    `producer_id` and `is_transactional` are copied from the batch for convenience.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    sequence: int
    producer_id: int
    is_transactional: bool


def _reuses_slots(cls: type, base: type) -> bool:
    """True when the dataclass `cls` added no slots of its own to `base` (Python >= 3.10
    filters inherited slots), so a `base` instance may switch its `__class__` to `cls`."""
    return vars(cls).get("__slots__") == () and cls.__mro__[1] is base


# Guards of the fast construction paths (they fall back to the plain constructors).
_FAST_RECORDS: Final = _reuses_slots(RawRecord, _RecordSlots)
_FAST_HEADERS: Final = _reuses_slots(BatchHeader, _BatchHeaderSlots)
_HEADER_FIELDS: Final = tuple(f.name for f in fields(BatchHeader))


@dataclass(slots=True, frozen=True)
class ControlRecord:
    """A transaction marker (control record). `marker` is "COMMIT", "ABORT" or "UNKNOWN(n)";
    `coordinator_epoch` is -1 for control types other than COMMIT/ABORT."""

    offset: int
    timestamp: int
    marker: str
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int


@dataclass(slots=True, frozen=True)
class Batch:
    header: BatchHeader
    records: tuple[RawRecord, ...]
    controls: tuple[ControlRecord, ...]


@dataclass(slots=True, frozen=True)
class TruncatedTail:
    """Bytes at the end of the data that do not form a complete batch (iteration stopped).

    `needed` is the full entry size the header announces (None when even the 17 header bytes
    up to the magic are incomplete, or for zero padding).
    """

    position: int
    available: int
    needed: int | None
    reason: str
    path: str | None = None


@dataclass(slots=True, frozen=True)
class RecordSpec:
    """A record to write with `write_batch`: its offset is `base_offset + offset_delta`."""

    offset_delta: int
    timestamp: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(slots=True, frozen=True)
class ControlSpec:
    """A transaction marker to write with `write_batch(control=...)`.

    `marker` is "COMMIT", "ABORT" or a raw control type number.
    """

    marker: str | int = "COMMIT"
    coordinator_epoch: int = 0
    timestamp: int = 0


# --- errors -----------------------------------------------------------------------------------


class _Malformed(Exception):
    """Internal: malformed bytes inside a records section (`at` relative to its buffer)."""

    def __init__(self, reason: str, at: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.at = at


def _error(reason: str, position: int, offset: int | None = None) -> DecodeError:
    return DecodeError(reason, part="batch", byte_position=position, offset=offset)


# --- varints ----------------------------------------------------------------------------------

# One varint byte -> its zig-zag value, or None when the continuation bit is set.
_ZIGZAG: Final[tuple[int | None, ...]] = tuple(
    (b >> 1) ^ -(b & 1) if b < 0x80 else None for b in range(256)
)
# Two-byte varints [b, b2] (b >= 0x80 > b2): index (b2 << 7) + b -> zig-zag value.
_ZIGZAG2: Final[tuple[int, ...]] = tuple(
    ((i - 0x80) >> 1) ^ -((i - 0x80) & 1) if i >= 0x80 else 0 for i in range(0x80 + (1 << 14))
)


def _read_varint(buf: bytes, p: int, max_bytes: int = 5) -> tuple[int, int]:
    """Zig-zag varint at `p` -> (value, next position). 5 bytes max (varlong: 10)."""
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        b = buf[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), p
        shift += 7
    raise _Malformed(f"varint longer than {max_bytes} bytes", p)


def _read_headers(buf: bytes, p: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    n, p = _read_varint(buf, p)
    if n < 0 or n > len(buf) - p:
        raise _Malformed(f"invalid header count {n}", p)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(n):
        klen, p = _read_varint(buf, p)
        if klen < 0 or p + klen > len(buf):
            raise _Malformed(f"invalid header key length {klen}", p)
        try:
            hkey = buf[p : p + klen].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Malformed("header key is not UTF-8", p) from exc
        p += klen
        vlen, p = _read_varint(buf, p)
        hvalue: bytes | None
        if vlen >= 0:
            hvalue = buf[p : p + vlen]
            p += vlen
        elif vlen == -1:
            hvalue = None
        else:
            raise _Malformed(f"invalid header value length {vlen}", p)
        headers.append((hkey, hvalue))
    return tuple(headers), p


# --- v2 records -------------------------------------------------------------------------------

_EMPTY_HEADERS: tuple[tuple[str, bytes | None], ...] = ()


def _load_c_records() -> Callable[..., list[RawRecord] | None] | None:
    """decoder/_speedups.c's `decode_records` (this module's fast loop in C), configured with
    the record classes; None without the accelerator."""
    configure = accelerated("configure_raw_records")
    if configure is None or not _FAST_RECORDS:
        return None
    try:
        configure(_RecordSlots, RawRecord, _EMPTY_HEADERS)
    except TypeError:  # pragma: no cover - the classes changed shape
        return None
    decode: Callable[..., list[RawRecord] | None] | None = accelerated("decode_records")
    return decode


_C_RECORDS: Final = _load_c_records()


def _decode_records_fast(
    buf: bytes,
    p: int,
    count: int,
    base_offset: int,
    base_ts: int,
    base_seq: int,
    producer_id: int,
    transactional: bool,
) -> list[RawRecord]:
    """Decode `count` v2 records of `buf[p:]` (CreateTime, no sequence wrap-around).

    Hand-inlined: a varint byte is looked up in `_ZIGZAG` (None when a continuation bit is
    set), 2-byte varints go through `_ZIGZAG2`, anything longer calls `_read_varint`. Kafka's
    checks are kept: each record's length prefix must match the bytes it uses, and the batch
    must end right after its last record.
    """
    zz = _ZIGZAG
    zz2 = _ZIGZAG2
    cls = RawRecord
    slots = _RecordSlots
    empty = _EMPTY_HEADERS
    seq_step = 0 if base_seq == -1 else 1  # NO_SEQUENCE (-1) stays -1 for every record
    out: list[_RecordSlots] = []
    append = out.append
    for _ in range(count):
        # length (varint)
        b = buf[p]
        n = zz[b]
        if n is not None:
            p += 1
            rend = p + n
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                p += 2
                rend = p + zz2[(b2 << 7) + b]
            else:
                n, p = _read_varint(buf, p)
                rend = p + n
        # attributes (int8, unused), then timestampDelta (varlong)
        p += 1
        b = buf[p]
        tsd = zz[b]
        if tsd is not None:
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                tsd = zz2[(b2 << 7) + b]
                p += 2
            else:
                tsd, p = _read_varint(buf, p, 10)
        # offsetDelta (varint)
        b = buf[p]
        od = zz[b]
        if od is not None:
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                od = zz2[(b2 << 7) + b]
                p += 2
            else:
                od, p = _read_varint(buf, p)
        # key
        b = buf[p]
        n = zz[b]
        if n is not None:
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                n = zz2[(b2 << 7) + b]
                p += 2
            else:
                n, p = _read_varint(buf, p)
        if n >= 0:
            q = p + n
            key = buf[p:q]
            p = q
        elif n == -1:
            key = None
        else:
            raise _Malformed(f"invalid key length {n}", p)
        # value
        b = buf[p]
        n = zz[b]
        if n is not None:
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                n = zz2[(b2 << 7) + b]
                p += 2
            else:
                n, p = _read_varint(buf, p)
        if n >= 0:
            q = p + n
            value = buf[p:q]
            p = q
        elif n == -1:
            value = None
        else:
            raise _Malformed(f"invalid value length {n}", p)
        # headers
        if buf[p] == 0:
            p += 1
            headers = empty
        else:
            headers, p = _read_headers(buf, p)
        if p != rend:
            raise _Malformed(f"record length mismatch: record ends at {p}, expected {rend}", p)
        o = slots()
        o.offset = base_offset + od
        o.timestamp = base_ts + tsd
        o.key = key
        o.value = value
        o.headers = headers
        o.sequence = base_seq + od * seq_step
        o.producer_id = producer_id
        o.is_transactional = transactional
        o.__class__ = cls
        append(o)
    if p != len(buf):
        raise _Malformed(f"{len(buf) - p} bytes left after the last record", p)
    return out  # type: ignore[return-value]  # every element became a RawRecord


_GenericRecord = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def _decode_records_generic(buf: bytes, p: int, count: int) -> list[_GenericRecord]:
    """Decode `count` v2 records -> (offsetDelta, timestampDelta, key, value, headers)."""
    out: list[_GenericRecord] = []
    for _ in range(count):
        length, p = _read_varint(buf, p)
        rend = p + length
        p += 1  # attributes
        tsd, p = _read_varint(buf, p, 10)
        od, p = _read_varint(buf, p)
        n, p = _read_varint(buf, p)
        key: bytes | None = None
        if n >= 0:
            key = buf[p : p + n]
            p += n
        elif n != -1:
            raise _Malformed(f"invalid key length {n}", p)
        n, p = _read_varint(buf, p)
        value: bytes | None = None
        if n >= 0:
            value = buf[p : p + n]
            p += n
        elif n != -1:
            raise _Malformed(f"invalid value length {n}", p)
        headers, p = _read_headers(buf, p)
        if p != rend:
            raise _Malformed(f"record length mismatch: record ends at {p}, expected {rend}", p)
        out.append((od, tsd, key, value, headers))
    if p != len(buf):
        raise _Malformed(f"{len(buf) - p} bytes left after the last record", p)
    return out


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence (wraps at Integer.MAX_VALUE)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _decode_control(
    offset: int, ts: int, key: bytes | None, value: bytes | None, pid: int, epoch: int
) -> ControlRecord:
    if key is None or len(key) < 4:
        raise _Malformed(f"control record at offset {offset} has an invalid key", 0)
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise _Malformed(f"control record at offset {offset}: key version {version}", 0)
    marker = _CONTROL_TYPES.get(ctype)
    if marker is None:
        return ControlRecord(offset, ts, f"UNKNOWN({ctype})", -1, pid, epoch)
    if value is None or len(value) < 6:
        raise _Malformed(f"end transaction marker at offset {offset} has an invalid value", 0)
    vversion, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    if vversion < 0:
        raise _Malformed(f"end transaction marker at offset {offset}: version {vversion}", 0)
    return ControlRecord(offset, ts, marker, coordinator_epoch, pid, epoch)


def _decode_v2(body: bytes, position: int, verify_crc: bool, max_batch_bytes: int) -> Batch:
    if len(body) < V2_HEADER_SIZE:
        raise _error(
            f"batch length {len(body) - LOG_OVERHEAD} below the v2 minimum {_V2_MIN_LENGTH}",
            position,
        )
    (
        base_offset,
        _length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_seq,
        count,
    ) = _V2.unpack_from(body)
    computed = crc32c.crc32c(memoryview(body)[_V2_CRC_END:])
    crc_valid = computed == crc
    if not crc_valid and verify_crc:
        raise _error(f"crc mismatch: stored {crc}, computed {computed}", position, base_offset)
    codec_id = attributes & 0x07
    if codec_id > 4:
        raise _error(f"unknown compression codec {codec_id}", position, base_offset)
    if count < 0:
        raise _error(f"negative record count {count}", position, base_offset)
    ts_type = (attributes >> 3) & 1
    transactional = bool(attributes & 0x10)
    control = bool(attributes & 0x20)
    h = _BatchHeaderSlots()
    h.base_offset = base_offset
    h.last_offset = base_offset + last_delta
    h.count = count
    h.partition_leader_epoch = leader_epoch
    h.magic = magic
    h.crc = crc
    h.crc_valid = crc_valid
    h.attributes = attributes
    h.codec = _CODECS[codec_id]
    h.timestamp_type = ts_type
    h.is_transactional = transactional
    h.is_control = control
    h.delete_horizon_ms = base_ts if attributes & 0x40 else None
    h.producer_id = producer_id
    h.producer_epoch = producer_epoch
    h.base_sequence = base_seq
    h.last_sequence = -1 if base_seq == -1 else _increment_sequence(base_seq, last_delta)
    h.base_timestamp = base_ts
    h.max_timestamp = max_ts
    h.position = position
    h.size = len(body)
    if _FAST_HEADERS:
        h.__class__ = BatchHeader
        header: BatchHeader = h  # type: ignore[assignment]  # it is one now
    else:
        header = BatchHeader(*(getattr(h, name) for name in _HEADER_FIELDS))
    if codec_id:
        buf = decompress(
            codec_id,
            memoryview(body)[V2_HEADER_SIZE:],
            magic=2,
            position=position,
            limit=batch_limit(count, max_batch_bytes),
        )
        start = 0
        error_base = position  # positions inside decompressed data are not file positions
    else:
        buf = body
        start = V2_HEADER_SIZE
        error_base = -1
    if count > (len(buf) - start) // _MIN_RECORD_SIZE:
        raise _error(
            f"record count {count} does not fit in {len(buf) - start} bytes of records",
            position,
            base_offset,
        )
    try:
        if control:
            controls = tuple(
                _decode_control(
                    base_offset + od,
                    max_ts if ts_type else base_ts + tsd,
                    key,
                    value,
                    producer_id,
                    producer_epoch,
                )
                for od, tsd, key, value, _h in _decode_records_generic(buf, start, count)
            )
            return Batch(header, (), controls)
        if _FAST_RECORDS and ts_type == 0 and base_seq <= _INT32_MAX - max(last_delta, count):
            # the C loop takes records without headers (else None): the rest is the Python loop's
            args = (buf, start, count, base_offset, base_ts, base_seq, producer_id, transactional)
            records = None if _C_RECORDS is None else _C_RECORDS(*args)
            if records is None:
                records = _decode_records_fast(*args)
        else:
            records = [
                RawRecord(
                    base_offset + od,
                    max_ts if ts_type else base_ts + tsd,
                    key,
                    value,
                    headers,
                    -1 if base_seq == -1 else _increment_sequence(base_seq, od),
                    producer_id,
                    transactional,
                )
                for od, tsd, key, value, headers in _decode_records_generic(buf, start, count)
            ]
    except _Malformed as exc:
        at = position + exc.at if error_base < 0 else error_base
        raise _error(f"malformed record: {exc.reason}", at, base_offset) from None
    except IndexError:
        raise _error("truncated record inside the batch", position, base_offset) from None
    return Batch(header, tuple(records), ())


# --- legacy messages (magic 0 and 1) ----------------------------------------------------------


def _legacy_bytes(buf: bytes, p: int, end: int) -> tuple[bytes | None, int]:
    if p + 4 > end:
        raise _Malformed("truncated length field", p)
    (n,) = _INT32.unpack_from(buf, p)
    p += 4
    if n == -1:
        return None, p
    if n < 0 or p + n > end:
        raise _Malformed(f"invalid length {n}", p)
    return buf[p : p + n], p + n


def _parse_legacy_message(
    buf: bytes, start: int, end: int
) -> tuple[int, int, bool, int, int, int, bytes | None, bytes | None]:
    """Parse one legacy entry buf[start:end] -> (offset, crc, crc_ok, magic, attributes,
    timestamp, key, value)."""
    offset, size, crc, magic, attributes = _LEGACY.unpack_from(buf, start)
    if magic not in (0, 1):
        raise _Malformed(f"unsupported magic {magic} in a legacy message", start + 16)
    if size < _LEGACY_MIN_SIZE[magic] or start + LOG_OVERHEAD + size != end:
        raise _Malformed(f"invalid message size {size}", start + 8)
    crc_ok = zlib.crc32(memoryview(buf)[start + 16 : end]) == crc
    p = start + 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(buf, p)
        p += 8
    key, p = _legacy_bytes(buf, p, end)
    value, p = _legacy_bytes(buf, p, end)
    if p != end:
        raise _Malformed(f"{end - p} bytes left after the message value", p)
    return offset, crc, crc_ok, magic, attributes, timestamp, key, value


def _decode_legacy(body: bytes, position: int, verify_crc: bool, max_batch_bytes: int) -> Batch:
    try:
        offset, crc, crc_ok, magic, attributes, timestamp, key, value = _parse_legacy_message(
            body, 0, len(body)
        )
    except _Malformed as exc:
        raise _error(f"malformed message: {exc.reason}", position + exc.at) from None
    if not crc_ok and verify_crc:
        computed = zlib.crc32(memoryview(body)[16:])
        raise _error(f"crc mismatch: stored {crc}, computed {computed}", position, offset)
    codec_id = attributes & 0x07
    ts_type = (attributes >> 3) & 1 if magic == 1 else -1
    if codec_id > 3:
        raise _error(f"codec {codec_id} is not valid for magic {magic}", position, offset)
    records: list[RawRecord]
    if codec_id == 0:
        records = [RawRecord(offset, timestamp, key, value, (), -1, -1, False)]
    else:
        if value is None:
            raise _error("compressed wrapper message without a value", position, offset)
        inner = decompress(codec_id, value, magic=magic, position=position, limit=max_batch_bytes)
        entries = []
        try:
            p = 0
            while p < len(inner):
                if p + LOG_OVERHEAD > len(inner):
                    raise _Malformed("truncated inner message header", p)
                (size,) = _INT32.unpack_from(inner, p + 8)
                end = p + LOG_OVERHEAD + size
                if size < _LEGACY_MIN_SIZE[0] or end > len(inner):
                    raise _Malformed(f"invalid inner message size {size}", p)
                entry = _parse_legacy_message(inner, p, end)
                if entry[4] & 0x07:
                    raise _Malformed("nested compression in an inner message", p)
                entries.append(entry)
                p = end
        except _Malformed as exc:
            raise _error(
                f"malformed inner message (decompressed byte {exc.at}): {exc.reason}",
                position,
                offset,
            ) from None
        if not entries:
            raise _error("compressed wrapper message with no inner messages", position, offset)
        inner_ok = all(e[2] for e in entries)
        if not inner_ok and verify_crc:
            raise _error("crc mismatch in an inner message", position, offset)
        crc_ok = crc_ok and inner_ok
        # v1 wrappers carry relative inner offsets, the wrapper holding the last one (spec §1.3)
        shift = offset - entries[-1][0] if magic == 1 else 0
        log_append = ts_type == 1
        records = [
            RawRecord(
                e[0] + shift,
                timestamp if log_append else e[5],
                e[6],
                e[7],
                (),
                -1,
                -1,
                False,
            )
            for e in entries
        ]
    header = BatchHeader(
        base_offset=records[0].offset,
        last_offset=offset,
        count=len(records),
        partition_leader_epoch=-1,
        magic=magic,
        crc=crc,
        crc_valid=crc_ok,
        attributes=attributes,
        codec=_CODECS[codec_id],
        timestamp_type=ts_type,
        is_transactional=False,
        is_control=False,
        delete_horizon_ms=None,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        last_sequence=-1,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=timestamp,
        position=position,
        size=len(body),
    )
    return Batch(header, tuple(records), ())


# --- iteration --------------------------------------------------------------------------------


def _iter_buffer(
    data: _Buffer,
    verify_crc: bool,
    base_position: int,
    on_error: OnError | None = None,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
) -> Generator[Batch, None, TruncatedTail | None]:
    if isinstance(data, memoryview) and (data.format != "B" or data.ndim != 1):
        data = data.cast("B")
    size = len(data)
    pos = 0
    unpack_prefix = _PREFIX.unpack_from
    while pos < size:
        remaining = size - pos
        position = base_position + pos
        if remaining < _HEADER_UP_TO_MAGIC:
            return _tail(data, pos, remaining, None, position)
        _base_offset, length = unpack_prefix(data, pos)
        if length < _LEGACY_MIN_SIZE[0]:
            if _all_zero(data, pos, size):
                return TruncatedTail(position, remaining, None, "zero padding")
            raise _error(f"batch length {length} below the minimum {_LEGACY_MIN_SIZE[0]}", position)
        magic = data[pos + 16]
        if magic > 2:  # checked before the tail test: a partial write has a sound header
            raise _error(f"unsupported magic {magic}", position + 16)
        end = pos + LOG_OVERHEAD + length
        if end > size:
            # Like Kafka's log recovery (FileLogInputStream), a length running past the end
            # of the data is a partial write; `needed` vs `available` shows how far off it
            # is. Unless a sound batch starts inside what the length claims: then the bytes
            # after it were written whole and the length itself is corrupt (a torn write
            # leaves only a prefix of one batch, never complete batches behind it).
            following = _next_sound_batch(data, pos + 1, size)
            if following is None:
                return _tail(data, pos, remaining, LOG_OVERHEAD + length, position)
            error = _error(
                f"corrupt batch length {length}: it runs {end - size} bytes past the end of "
                f"the data, yet a complete batch starts at byte {base_position + following}",
                position,
            )
            if on_error is None:
                raise error
            on_error(error)
            pos = following
            continue
        body = data[pos:end]
        if type(body) is not bytes:
            body = bytes(body)
        try:
            if magic == 2:
                batch = _decode_v2(body, position, verify_crc, max_batch_bytes)
            else:
                batch = _decode_legacy(body, position, verify_crc, max_batch_bytes)
        except DecodeError as error:
            # The length framed this batch soundly, so the next one starts at `end`: a bad
            # batch costs only itself when the caller can take the error.
            if on_error is None:
                raise
            on_error(error)
            pos = end
            continue
        yield batch
        pos = end
    return None


def _next_sound_batch(data: _Buffer, start: int, size: int) -> int | None:
    """The first position at or after `start` where a complete v2 batch with a valid CRC
    starts, or None. Only error paths call this (a length past the end of the data)."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    # candidates: a magic byte 2 sixteen bytes after the start
    magics = bytes(view[start + 16 : size])
    found = magics.find(2)
    while found >= 0:
        at = start + found
        if at + V2_HEADER_SIZE > size:
            return None
        _base, length = _PREFIX.unpack_from(data, at)
        end = at + LOG_OVERHEAD + length
        if length >= _V2_MIN_LENGTH and end <= size:
            (stored,) = _UINT32.unpack_from(data, at + 17)
            if crc32c.crc32c(view[at + _V2_CRC_END : end]) == stored:
                return at
        found = magics.find(2, found + 1)
    return None


def _all_zero(data: _Buffer, start: int, end: int) -> bool:
    for at in range(start, end, 1 << 16):
        chunk = bytes(data[at : min(end, at + (1 << 16))])
        if chunk.count(0) != len(chunk):
            return False
    return True


def _tail(
    data: _Buffer, pos: int, remaining: int, needed: int | None, position: int
) -> TruncatedTail:
    if _all_zero(data, pos, pos + remaining):
        return TruncatedTail(position, remaining, None, "zero padding")
    what = "header" if needed is None else "batch"
    return TruncatedTail(position, remaining, needed, f"incomplete {what} (partial write)")


def iter_batches(
    data: bytes | memoryview,
    *,
    verify_crc: bool = True,
    base_position: int = 0,
    on_error: OnError | None = None,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
) -> Generator[Batch, None, TruncatedTail | None]:
    """Decode every batch of a segment's bytes, in file order.

    `base_position` is added to every position (header `position`, error `byte_position`).
    `verify_crc=True` raises `DecodeError` on a CRC mismatch; with `verify_crc=False` the batch
    is yielded anyway, with `header.crc_valid == False` (legacy wrappers: also when an inner
    message's CRC is wrong).
    The generator's return value (`StopIteration.value`, or `x = yield from ...`) is the
    `TruncatedTail` when the data ends inside a batch, else None; `SegmentReader` keeps it
    as an attribute for plain for loops.

    `on_error`: called with the `DecodeError` of a batch whose length is sound but whose
    content is bad (CRC, codec, decompression bomb, malformed records); iteration goes on with
    the next batch. Without it the error is raised and iteration ends. A broken length always
    raises: nothing after it can be framed. `max_batch_bytes` bounds one batch's decompressed
    size (see `offsetwatch.decoder.compression.batch_limit`).
    """
    return _iter_buffer(data, verify_crc, base_position, on_error, max_batch_bytes)


class SegmentReader:
    """Iterable over the batches of bytes or of a segment file; remembers the truncated tail.

    >>> reader = SegmentReader(data)
    >>> for batch in reader: ...
    >>> reader.truncated_tail  # None, or where the partial trailing batch starts
    """

    def __init__(
        self,
        data: bytes | memoryview | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        verify_crc: bool = True,
        base_position: int = 0,
        on_error: OnError | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> None:
        if (data is None) == (path is None):
            raise ValueError("give exactly one of data and path")
        self._data = data
        self._path = path
        self.verify_crc = verify_crc
        self.base_position = base_position
        self.on_error = on_error
        self.max_batch_bytes = max_batch_bytes
        self.truncated_tail: TruncatedTail | None = None

    def __iter__(self) -> Iterator[Batch]:
        self.truncated_tail = None
        if self._data is not None:
            gen = _iter_buffer(
                self._data,
                self.verify_crc,
                self.base_position,
                self.on_error,
                self.max_batch_bytes,
            )
        else:
            assert self._path is not None
            gen = read_segment(
                self._path,
                verify_crc=self.verify_crc,
                on_error=self.on_error,
                max_batch_bytes=self.max_batch_bytes,
            )
        self.truncated_tail = yield from gen


def read_segment(
    path: str | os.PathLike[str],
    *,
    verify_crc: bool = True,
    on_error: OnError | None = None,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
) -> Generator[Batch, None, TruncatedTail | None]:
    """Batches of one `.log` file (memory-mapped); returns the truncated tail like
    `iter_batches` (with `path` set)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            tail = yield from _iter_buffer(mm, verify_crc, 0, on_error, max_batch_bytes)
    return None if tail is None else replace(tail, path=os.fspath(path))


def _segment_files(path: Path) -> list[Path]:
    files = [p for p in path.glob("*.log") if p.stem.isdigit() and p.is_file()]
    return sorted(files, key=lambda p: int(p.stem))


def read_partition_dir(
    path: str | os.PathLike[str],
    *,
    verify_crc: bool = True,
    on_error: OnError | None = None,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
) -> Generator[Batch, None, tuple[TruncatedTail, ...]]:
    """Batches of every `<baseOffset>.log` file of a partition directory, in base-offset order.

    Positions are per file (as kafka-dump-log prints them). Returns the truncated tails found
    (normally at most one, in the last, active segment).
    """
    tails: list[TruncatedTail] = []
    for file in _segment_files(Path(path)):
        tail = yield from read_segment(
            file, verify_crc=verify_crc, on_error=on_error, max_batch_bytes=max_batch_bytes
        )
        if tail is not None:
            tails.append(tail)
    return tuple(tails)


_PARTITION_DIR = re.compile(r"(.+)-(\d+)")


def partition_of_dir(path: str | os.PathLike[str]) -> int | None:
    """`.../__consumer_offsets-17` -> 17; None for names that are not `<topic>-<partition>`
    (including Kafka's `*-delete` / `*-future` / `*-stray` directories)."""
    match = _PARTITION_DIR.fullmatch(Path(path).name)
    return int(match.group(2)) if match else None


# --- transactions -----------------------------------------------------------------------------


class TransactionResolver:
    """Resolve transactional records of ONE `__consumer_offsets` partition, fed in log order.

    * Records of non-transactional batches are released at once as "committed".
    * Records of transactional batches are held per producer id until a control record of the
      same producer id arrives: COMMIT releases them as "committed", ABORT as "aborted" (still
      released, so callers can count them). Other control types end nothing.
    * Order rule: held records are released **at the marker's position** in the log, in their
      own offset order - that is when Kafka's group coordinator materialises (or discards) them
      (`replayEndTransactionMarker`). So the output is not sorted by offset when transactions
      interleave with other writes.
    * `pending()` lists what is still open at the end (status "pending"): a transaction without
      a marker yet must not count as committed.
    """

    def __init__(self) -> None:
        self._open: dict[int, list[RawRecord]] = {}

    def feed(self, batch: Batch) -> list[tuple[RawRecord, TxnStatus]]:
        """Process one batch; return the records it releases, with their status."""
        header = batch.header
        if header.is_control:
            released: list[tuple[RawRecord, TxnStatus]] = []
            for control in batch.controls:
                if control.marker == "COMMIT":
                    status: TxnStatus = "committed"
                elif control.marker == "ABORT":
                    status = "aborted"
                else:
                    continue
                held = self._open.pop(control.producer_id, None)
                if held:
                    released.extend((record, status) for record in held)
            return released
        if header.is_transactional:
            if batch.records:
                self._open.setdefault(header.producer_id, []).extend(batch.records)
            return []
        return [(record, "committed") for record in batch.records]

    def pending(self) -> list[tuple[RawRecord, TxnStatus]]:
        """Records of transactions still open (no marker seen), in offset order."""
        held = [record for records in self._open.values() for record in records]
        held.sort(key=lambda record: record.offset)
        return [(record, "pending") for record in held]

    @property
    def open_producers(self) -> frozenset[int]:
        """Producer ids with an open transaction."""
        return frozenset(pid for pid, records in self._open.items() if records)


def resolve(batches: Iterable[Batch]) -> Iterator[tuple[RawRecord, TxnStatus]]:
    """Every data record of one partition with its transaction status: released records as
    `TransactionResolver.feed` emits them, then the still-open ones as "pending"."""
    resolver = TransactionResolver()
    for batch in batches:
        yield from resolver.feed(batch)
    yield from resolver.pending()


# --- writer -----------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    raw &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _encode_v2_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
) -> bytes:
    parts = [b"\x00", _varint(timestamp_delta), _varint(offset_delta)]
    for blob in (key, value):
        if blob is None:
            parts.append(_varint(-1))
        else:
            parts.append(_varint(len(blob)))
            parts.append(blob)
    parts.append(_varint(len(headers)))
    for hkey, hvalue in headers:
        encoded = hkey.encode("utf-8")
        parts.append(_varint(len(encoded)))
        parts.append(encoded)
        if hvalue is None:
            parts.append(_varint(-1))
        else:
            parts.append(_varint(len(hvalue)))
            parts.append(hvalue)
    body = b"".join(parts)
    return _varint(len(body)) + body


def _legacy_message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    parts = [struct.pack(">bB", magic, attributes)]
    if magic == 1:
        parts.append(_INT64.pack(timestamp))
    for blob in (key, value):
        if blob is None:
            parts.append(_INT32.pack(-1))
        else:
            parts.append(_INT32.pack(len(blob)))
            parts.append(blob)
    content = b"".join(parts)
    return struct.pack(">qiI", offset, 4 + len(content), zlib.crc32(content)) + content


def write_batch(
    records: Iterable[RecordSpec],
    *,
    base_offset: int,
    magic: int = 2,
    codec: Codec | int = Codec.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = 0,
    timestamp_type: int = 0,
    control: ControlSpec | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode records the way a Kafka broker stores them (the inverse of `iter_batches`).

    magic 2: one record batch. `control=ControlSpec(...)` writes a control batch holding one
    transaction marker at `base_offset` (records must be empty; the batch is transactional, as
    Kafka's markers are). `max_timestamp` defaults to the largest record timestamp (for
    LogAppendTime: the append time), `last_offset_delta` to the largest offset delta.

    magic 0/1: without a codec, one legacy message per record (each read back as its own
    batch); with a codec, one wrapper message whose value is the compressed inner message set
    (inner offsets absolute for v0, relative for v1; the wrapper carries the last offset).
    Legacy messages have no headers, producer ids or transactions.
    """
    specs = list(records)
    codec_id = int(codec)
    if magic == 2:
        return _write_v2(
            specs,
            base_offset=base_offset,
            codec_id=codec_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
            partition_leader_epoch=partition_leader_epoch,
            timestamp_type=timestamp_type,
            control=control,
            max_timestamp=max_timestamp,
            delete_horizon_ms=delete_horizon_ms,
            last_offset_delta=last_offset_delta,
        )
    if magic not in (0, 1):
        raise ValueError(f"unsupported magic {magic}")
    if control is not None or is_transactional or producer_id != -1 or base_sequence != -1:
        raise ValueError("legacy messages have no control records, transactions or producers")
    if any(spec.headers for spec in specs):
        raise ValueError("legacy messages have no headers")
    if not specs:
        raise ValueError("legacy messages need at least one record")
    ts_attr = (timestamp_type & 1) << 3 if magic == 1 else 0
    if codec_id == 0:
        return b"".join(
            _legacy_message(
                base_offset + s.offset_delta, magic, ts_attr, s.timestamp, s.key, s.value
            )
            for s in specs
        )
    inner = b"".join(
        _legacy_message(
            s.offset_delta if magic == 1 else base_offset + s.offset_delta,
            magic,
            ts_attr if magic == 1 else 0,
            s.timestamp,
            s.key,
            s.value,
        )
        for s in specs
    )
    wrapper_ts = max_timestamp if max_timestamp is not None else max(s.timestamp for s in specs)
    return _legacy_message(
        base_offset + specs[-1].offset_delta,
        magic,
        codec_id | ts_attr,
        wrapper_ts,
        None,
        compress(codec_id, inner, magic=magic),
    )


def _write_v2(
    specs: list[RecordSpec],
    *,
    base_offset: int,
    codec_id: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
    partition_leader_epoch: int,
    timestamp_type: int,
    control: ControlSpec | None,
    max_timestamp: int | None,
    delete_horizon_ms: int | None,
    last_offset_delta: int | None,
) -> bytes:
    attributes = codec_id | ((timestamp_type & 1) << 3)
    if control is not None:
        if specs:
            raise ValueError("a control batch holds only its marker")
        marker = control.marker
        ctype = _CONTROL_CODES[marker] if isinstance(marker, str) else marker
        specs = [
            RecordSpec(
                0,
                control.timestamp,
                _CONTROL_KEY.pack(0, ctype),
                _CONTROL_VALUE.pack(0, control.coordinator_epoch),
            )
        ]
        attributes |= 0x30
    elif is_transactional:
        attributes |= 0x10
    if specs:
        first_ts = specs[0].timestamp
        max_ts = max(s.timestamp for s in specs)
        last_delta = max(s.offset_delta for s in specs)
    else:
        first_ts = max_ts = NO_TIMESTAMP
        last_delta = 0
    base_ts = first_ts
    if delete_horizon_ms is not None:
        attributes |= 0x40
        base_ts = delete_horizon_ms
    if max_timestamp is not None:
        max_ts = max_timestamp
    if last_offset_delta is not None:
        last_delta = last_offset_delta
    payload = b"".join(
        _encode_v2_record(s.offset_delta, s.timestamp - base_ts, s.key, s.value, s.headers)
        for s in specs
    )
    if codec_id:
        payload = compress(codec_id, payload, magic=2)
    after_crc = (
        struct.pack(
            ">HiqqqhiI",
            attributes,
            last_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(specs),
        )
        + payload
    )
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    prefix = struct.pack(
        ">qiibI", base_offset, length, partition_leader_epoch, 2, crc32c.crc32c(after_crc)
    )
    return prefix + after_crc
