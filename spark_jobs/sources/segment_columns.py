"""Offset commits of plain v2 batches decoded from segment bytes straight into Arrow columns.

The record-by-record path (`decoder.segments` framing each record into a `RawRecord`, then
`Codec.decode_many`, then columns read back off the objects) costs about 6 µs a record, most
of it creating and collecting a dozen Python objects per record. A real `__consumer_offsets`
is nearly all offset commits in uncompressed, non-transactional v2 batches, so those are
decoded here with numpy over many batches at once: step i frames the i-th record of every
batch of a run together, then keys and values are read as columns.

Nothing here decides what a record means: it only reads what is plain and checks all of it -
batch framing and CRC, record lengths, commit key layout (types 0/1), value versions 0-3,
valid UTF-8. A run where any check fails returns None and the caller decodes the same bytes
on the reference path (which reports the error or decodes the unusual record), so both paths
give the same rows (tests/spark_jobs/test_sources_segment_columns.py). The expected layouts
are checked once against `decoder.layout` (`_COMPATIBLE`); if they ever change this path
stays off.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import Any, Final

import crc32c
import numpy as np
import pyarrow as pa

from offsetwatch.decoder import contract
from offsetwatch.decoder.codec import Message
from offsetwatch.decoder.layout import Kind, field_layouts
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue
from offsetwatch.decoder.registry import RECORD_TYPES
from offsetwatch.spark_jobs.schema import TXN_COLUMN, CanonicalRows
from offsetwatch.spark_jobs.sources.columns import assemble, newer_version, to_array

#: base offset, length, leader epoch, magic, crc, attributes, last offset delta, base
#: timestamp, max timestamp, producer id, producer epoch, base sequence, record count
_V2: Final = struct.Struct(">qiibIhiqqqhii")
_HEADER_SIZE: Final = 61
_LOG_OVERHEAD: Final = 12
_CRC_START: Final = 21
#: attributes the plain path takes: no compression, CreateTime, not transactional, no control
_NOT_PLAIN: Final = 0x07 | 0x08 | 0x10 | 0x20
#: records per run (and per Arrow batch): large batches cost Spark least per record
RUN_RECORDS: Final = 1 << 16
#: a run frames one record of each of its batches per numpy step: a few batches of many
#: records would make more steps than records are worth, so such runs take the record path
_MIN_RECORDS_PER_STEP: Final = 8
_COMMIT_KEY_TYPES: Final = (0, 1)
_VALUE_VERSIONS: Final = range(4)

_KEY_FIELDS: Final = (("group", Kind.STRING), ("topic", Kind.STRING), ("partition", Kind.INT32))
_VALUE_FIELDS: Final = (
    ("offset", Kind.INT64, 0),
    ("leader_epoch", Kind.INT32, 3),
    ("metadata", Kind.STRING, 0),
    ("commit_timestamp", Kind.INT64, 0),
    ("expire_timestamp", Kind.INT64, 1),
    ("topic_id", Kind.UUID, 4),
)


def _compatible() -> bool:
    """The commit layouts are the ones `_columns` reads: key (group, topic, partition) for
    key types 0/1, values v0-v3 non-flexible, expire_timestamp only in v1, leader_epoch from
    v3, topic_id from v4."""
    key = [(f.name, f.wire.kind) for f in field_layouts(OffsetCommitKey)]
    value = [(f.name, f.wire.kind, f.wire.versions.low) for f in field_layouts(OffsetCommitValue)]
    expire = next(f for f in field_layouts(OffsetCommitValue) if f.name == "expire_timestamp")
    types = [RECORD_TYPES.get(t) for t in _COMMIT_KEY_TYPES]
    return (
        key == list(_KEY_FIELDS)
        and value == list(_VALUE_FIELDS)
        and expire.wire.versions.high == 1
        and all(
            t is not None
            and t.key_class is OffsetCommitKey
            and t.value_classes == (OffsetCommitValue,)
            and t.value_versions.high >= 3
            and (t.flexible_from is None or t.flexible_from > 3)
            for t in types
        )
    )


_COMPATIBLE: Final = _compatible()
_DEFAULTS: Final = {f.name: f.wire.default for f in field_layouts(OffsetCommitValue)}


@dataclass(frozen=True, slots=True)
class Run:
    """A byte range [start, end) of the data: plain batches (`batches`: records start, batch
    end, count, base offset, base timestamp of each) or, `batches` None, bytes for the
    record path (one batch that is not plain, or the rest of the data once framing breaks)."""

    start: int
    end: int
    batches: tuple[tuple[int, int, int, int, int], ...] | None


def runs(data: bytes) -> Iterator[Run]:
    """The data cut into runs, in order, covering it all."""
    size = len(data)
    pos = 0
    plain: list[tuple[int, int, int, int, int]] = []
    records = 0
    most = 0

    def flush(end: int) -> Iterator[Run]:
        if plain:
            start = plain[0][0] - _HEADER_SIZE
            vectorised = _COMPATIBLE and records >= _MIN_RECORDS_PER_STEP * most
            yield Run(start, end, tuple(plain) if vectorised else None)

    while pos + _HEADER_SIZE <= size:
        base_offset, length, _, magic, crc, attributes, _, base_ts, *_, count = _V2.unpack_from(
            data, pos
        )
        end = pos + _LOG_OVERHEAD + length
        if length < _HEADER_SIZE - _LOG_OVERHEAD or end > size or magic > 2:
            break  # framing the record path reports (or a tail): everything from here
        is_plain = (
            magic == 2
            and not attributes & _NOT_PLAIN
            and count >= 0
            and crc32c.crc32c(memoryview(data)[pos + _CRC_START : end]) == crc
        )
        if not is_plain or records + count > RUN_RECORDS:
            yield from flush(pos)
            plain, records, most = [], 0, 0
        if not is_plain:
            yield Run(pos, end, None)
        else:
            plain.append((pos + _HEADER_SIZE, end, count, base_offset, base_ts))
            records += count
            most = max(most, count)
        pos = end
    yield from flush(pos)
    if pos < size:
        yield Run(pos, size, None)


def decode_run(
    data: bytes, run: Run, partition: int, rows: CanonicalRows
) -> Iterator[pa.RecordBatch | Run]:
    """The run's records as Arrow batches of `rows`' schema, in order with record-path runs
    for its batches that are not all plain offset commits (group metadata, odd records)."""
    assert run.batches is not None
    a = np.frombuffer(data, np.uint8)
    framed, good = _frame(a, run.batches)
    if good.all():
        batch_of = np.repeat(np.arange(len(good)), framed.count)
        good[batch_of[~_check(a, framed)]] = False
        if good.all():
            columns = _columns(a, framed)
            if columns is None:  # some text is not UTF-8: rare enough to read it all slowly
                yield Run(run.start, run.end, None)
            else:
                yield _batch(rows, columns, partition, "none")
            return
    if not good.any():
        yield Run(run.start, run.end, None)
        return
    for ok, batches in groupby(zip(good.tolist(), run.batches, strict=True), itemgetter(0)):
        part = [b for _, b in batches]
        sub = Run(part[0][0] - _HEADER_SIZE, part[-1][1], tuple(part) if ok else None)
        yield from decode_run(data, sub, partition, rows) if ok else (sub,)


def decode_messages(
    messages: Sequence[Message], rows: CanonicalRows
) -> tuple[pa.RecordBatch | None, list[int]]:
    """Kafka messages (key, value, partition, offset, timestamp): the plain offset commits
    among them as one Arrow batch (None if none), and the indexes of the others, for the
    record path."""
    n = len(messages)
    if not _COMPATIBLE or not n:
        return None, list(range(n))
    keys, values, partitions, offsets, timestamps = zip(*messages, strict=True)
    key_len = np.fromiter((-1 if k is None else len(k) for k in keys), np.int64, n)
    value_len = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, n)
    key_bytes, value_bytes = np.maximum(key_len, 0), np.maximum(value_len, 0)
    key_pos = np.cumsum(key_bytes) - key_bytes
    value_pos = np.cumsum(value_bytes) - value_bytes + int(key_bytes.sum())
    data = b"".join(k for k in keys if k is not None) + b"".join(v for v in values if v)
    if not data:
        return None, list(range(n))
    a = np.frombuffer(data, np.uint8)
    framed = _Framed(
        None,
        None,
        np.array(offsets, np.int64),
        np.array(timestamps, np.int64),
        key_pos,
        key_len,
        value_pos,
        value_len,
    )
    good = (key_len >= 0) & _check(a, framed)
    rest = np.flatnonzero(~good).tolist()
    if rest:
        if len(rest) == n:
            return None, rest
        chosen = np.flatnonzero(good)
        framed = _Framed(None, None, *(getattr(framed, f)[chosen] for f in _PER_RECORD))
    columns = _columns(a, framed)
    if columns is None:  # some text is not UTF-8
        return None, list(range(n))
    partition = np.array(partitions, np.int64)
    return _batch(rows, columns, partition[good] if rest else partition, None), rest


@dataclass(slots=True)
class _Framed:
    #: per batch (file order): index of its first record, record count
    first: Any
    count: Any
    offset: Any
    timestamp: Any
    key_pos: Any
    key_len: Any
    value_pos: Any
    value_len: Any


_PER_RECORD: Final = ("offset", "timestamp", "key_pos", "key_len", "value_pos", "value_len")


def _varint(a: Any, p: Any, last: int) -> tuple[Any, Any, Any]:
    """Zigzag varints at positions p -> (values, positions after them, which were read:
    at most 4 bytes, longer ones take the record path)."""
    b = a[_clip(p, last)]
    value = (b & 0x7F).astype(np.int64)
    more = b >= 0x80
    if not more.any():
        return (value >> 1) ^ -(value & 1), p + 1, True
    size = np.ones(len(p), np.int64)
    for shift in (7, 14, 21):
        b = a[_clip(p + size, last)]
        value |= np.where(more, (b & 0x7F).astype(np.int64) << shift, 0)
        size += more
        more &= b >= 0x80
    return (value >> 1) ^ -(value & 1), p + size, ~more


def _frame(a: Any, batches: tuple[tuple[int, int, int, int, int], ...]) -> tuple[_Framed, Any]:
    """Record positions and offsets of every batch, and whether each batch passed the checks
    Kafka makes: each record's length prefix matches the bytes it uses, the batch ends right
    after its last record (its records are meaningless when not)."""
    start, end, count, base_offset, base_ts = (
        np.array(c, np.int64) for c in zip(*batches, strict=True)
    )
    first = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
    total = int(count.sum())
    out = _Framed(first, count, *(np.zeros(total, np.int64) for _ in range(6)))
    order = np.argsort(-count, kind="stable")  # the batches still going are a prefix
    steps = count[order]
    pos = start[order]
    good = np.ones(len(order), np.bool_)
    first, base_offset, base_ts = first[order], base_offset[order], base_ts[order]
    last = len(a) - 1
    for i in range(int(steps[0]) if len(steps) else 0):
        k = int(np.searchsorted(-steps, -i, side="left"))  # batches with more than i records
        p = pos[:k]
        length, p, ok1 = _varint(a, p, last)
        record_end = p + length
        p = p + 1  # attributes
        ts_delta, p, ok2 = _varint(a, p, last)
        offset_delta, p, ok3 = _varint(a, p, last)
        key_len, p, ok4 = _varint(a, p, last)
        key_pos = p
        p = p + np.maximum(key_len, 0)
        value_len, p, ok5 = _varint(a, p, last)
        value_pos = p
        p = p + np.maximum(value_len, 0)
        no_headers = a[_clip(p, last)] == 0
        p = p + 1
        good[:k] &= ok1 & ok2 & ok3 & ok4 & ok5 & no_headers & (p == record_end)
        good[:k] &= (key_len >= 0) & (value_len >= -1)
        at = first[:k] + i
        out.offset[at] = base_offset[:k] + offset_delta
        out.timestamp[at] = base_ts[:k] + ts_delta
        out.key_pos[at] = key_pos
        out.key_len[at] = key_len
        out.value_pos[at] = value_pos
        out.value_len[at] = value_len
        pos[:k] = p
    good &= pos == end[order]
    in_file_order = np.empty_like(good)
    in_file_order[order] = good
    return out, in_file_order


def _int(a: Any, p: Any, size: int) -> Any:
    """Big-endian signed integers of `size` bytes at positions p (all inside `a`)."""
    value = a[p].astype(np.uint64)
    for i in range(1, size):
        value = (value << np.uint64(8)) | a[p + i]
    if size == 8:
        return value.view(np.int64)
    signed = value.astype(np.int64)
    return signed - ((signed >> (8 * size - 1)) << (8 * size))


def _clip(p: Any, last: int) -> Any:
    return np.minimum(np.maximum(p, 0), last)


def _strings(a: Any, p: Any, lengths: Any) -> pa.Array | None:
    """UTF-8 strings at positions p (None when some are not valid UTF-8: the record path
    keeps such bytes as surrogate escapes, which the dict path then scrubs)."""
    n = len(p)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    gather = np.arange(total, dtype=np.int64) + np.repeat(p - offsets[:-1], lengths)
    data = a[gather].tobytes()
    kind = pa.string() if total < 1 << 31 else pa.large_string()
    width = np.int32 if kind == pa.string() else np.int64
    array = pa.Array.from_buffers(
        kind, n, [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)]
    )
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return array.cast(pa.string())


def _layout(a: Any, f: _Framed) -> tuple[Any, ...]:
    """Where the fields of every key and value are, from their length fields (read clipped
    to the data: `_check` tells which records hold what these positions say)."""
    last = len(a) - 1
    kp = f.key_pos
    key_type = _int(a, _clip(kp, last - 1), 2)
    group_len = _int(a, _clip(kp + 2, last - 1), 2)
    topic_at = kp + 4 + group_len
    topic_len = _int(a, _clip(topic_at, last - 1), 2)
    tombstone = f.value_len < 0
    vp = np.where(tombstone, 0, f.value_pos)
    version = _int(a, _clip(vp, last - 1), 2)
    meta_at = vp + 10 + 4 * (version == 3)
    meta_len = np.where(tombstone, 0, _int(a, _clip(meta_at, last - 1), 2))
    return key_type, group_len, topic_at, topic_len, tombstone, vp, version, meta_at, meta_len


def _check(a: Any, f: _Framed) -> Any:
    """Which records are offset commits (key types 0/1) with a v0-v3 value or none, every
    length adding up to the key's and the value's size."""
    key_type, group_len, topic_at, topic_len, tombstone, vp, version, meta_at, meta_len = _layout(
        a, f
    )
    key_end = topic_at + 2 + topic_len + 4
    value_end = meta_at + 2 + meta_len + 8 + 8 * (version == 1)
    value_ok = (version >= 0) & (version <= 3) & (meta_len >= 0) & (value_end == vp + f.value_len)
    return (
        ((key_type == 0) | (key_type == 1))
        & (group_len >= 0)
        & (topic_len >= 0)
        & (key_end == f.key_pos + f.key_len)
        & (tombstone | value_ok)
    )


def _columns(a: Any, f: _Framed) -> dict[str, Any] | None:
    """Keys and values read as columns (all records checked), or None when some text is
    not UTF-8."""
    key_type, group_len, topic_at, topic_len, tombstone, vp, version, meta_at, meta_len = _layout(
        a, f
    )
    kp = f.key_pos
    key_partition = _int(a, topic_at + 2 + topic_len, 4)
    live = ~tombstone
    v3 = version == 3
    commit_at = meta_at + 2 + meta_len
    where = np.flatnonzero(live)
    group = _strings(a, kp + 4, group_len)
    topic = _strings(a, topic_at + 2, topic_len)
    metadata = _strings(a, np.where(live, meta_at + 2, 0), meta_len)
    if group is None or topic is None or metadata is None:
        return None
    offset = np.zeros(len(vp), np.int64)
    offset[where] = _int(a, vp[where] + 2, 8)
    commit_ts = np.zeros(len(vp), np.int64)
    commit_ts[where] = _int(a, commit_at[where], 8)
    epoch = np.full(len(vp), _DEFAULTS["leader_epoch"], np.int64)
    with_epoch = np.flatnonzero(live & v3)
    epoch[with_epoch] = _int(a, vp[with_epoch] + 10, 4)
    expire = np.full(len(vp), _DEFAULTS["expire_timestamp"], np.int64)
    with_expire = np.flatnonzero(live & (version == 1))
    expire[with_expire] = _int(a, commit_at[with_expire] + 8, 8)
    return {
        "key_type": key_type,
        "value_version": pa.array(version, pa.int32(), mask=tombstone),
        "tombstone": tombstone,
        "offset": f.offset,
        "timestamp": f.timestamp,
        "group": group,
        "key": {"group": group, "topic": topic, "partition": key_partition},
        "value": {
            "offset": offset,
            "leader_epoch": epoch,
            "metadata": metadata,
            "commit_timestamp": commit_ts,
            "expire_timestamp": expire,
            "topic_id": pa.repeat(pa.scalar(_DEFAULTS["topic_id"], pa.string()), len(vp)),
        },
    }


def _struct(kind: pa.StructType, children: dict[str, Any], n: int, mask: Any) -> pa.StructArray:
    fields = [kind.field(i) for i in range(kind.num_fields)]
    arrays = [to_array(children.get(f.name), f.type, n) for f in fields]
    return pa.StructArray.from_arrays(
        arrays, fields=fields, mask=None if mask is None else pa.array(mask, pa.bool_())
    )


def _batch(
    rows: CanonicalRows, columns: dict[str, Any], partition: Any, txn: str | None
) -> pa.RecordBatch:
    """The batch of `rows`' schema; `txn`: "none" in segments (known not transactional),
    null from Kafka (not known)."""
    schema = rows.arrow
    n = len(columns["offset"])
    tombstone = columns["tombstone"]
    key_type = columns["key_type"]
    names = {t: RECORD_TYPES[t].name for t in _COMMIT_KEY_TYPES}
    # tombstones have no version: their `newer` is masked out with the version itself
    version = columns["value_version"].fill_null(0).to_numpy(zero_copy_only=False)
    newer = np.where(key_type == 0, newer_version(0, version), newer_version(1, version))
    value_type = schema.field(contract.VALUE).type
    plain = {
        **columns,
        contract.TYPE: pa.array(np.where(key_type == 0, names[0], names[1]), pa.string()),
        contract.NEWER_VERSION: newer & ~tombstone,
        contract.PARTITION: np.broadcast_to(np.asarray(partition, np.int64), (n,)),
        contract.KEY: _struct(schema.field(contract.KEY).type, columns["key"], n, None),
        contract.VALUE: _struct(
            value_type, columns["value"], n, tombstone if tombstone.any() else None
        ),
        TXN_COLUMN: pa.repeat(pa.scalar(txn, pa.string()), n),
    }
    return assemble(schema, plain, n)
