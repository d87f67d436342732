"""Decoded records straight into Arrow columns, for the sources that decode bytes themselves.

The one place that builds Arrow record batches of the canonical record from columns
(`assemble`, with `newer_version` computed the decoder's way) and the one decode flow of the
segments and kafka sources (`decode_records`: decode a batch of messages, retry one by one
when a record is bad, flat records to columns, the rest through canonical dicts). The segment
bytes' numpy path (`segment_columns`) assembles its batches here too.

Going through canonical dicts costs about 30 µs a record (`Canonical.to_dict`, then Arrow
reading the dicts back); offset commits - nearly all of a real `__consumer_offsets` - have
flat keys and values, so their columns are read off the decoded records directly, field by
field, from the same layouts. Records of other types (nested values: group metadata,
assignments) and any text Arrow refuses (invalid UTF-8 kept as surrogate escapes) take the
dict path, which gives the same rows (tests/spark_jobs/test_sources_columns.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final

import numpy as np
import pyarrow as pa

from offsetwatch.decoder import contract
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.codec import Codec, Message
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.layout import Kind, field_layouts, has_tags_field
from offsetwatch.decoder.records import AnyRecord, Record
from offsetwatch.decoder.registry import RECORD_TYPES
from offsetwatch.spark_jobs.schema import TXN_COLUMN, CanonicalRows

_FLAT_KINDS: Final = frozenset(
    {
        Kind.INT8,
        Kind.INT16,
        Kind.INT32,
        Kind.INT64,
        Kind.UINT16,
        Kind.BOOL,
        Kind.STRING,
        Kind.UUID,
        Kind.BYTES,
    }
)


def _is_flat(cls: type, rows: CanonicalRows) -> bool:
    return all(
        f.wire.kind in _FLAT_KINDS and f.name not in rows.text_plan.get("value", {})  # type: ignore[operator]
        for f in field_layouts(cls)
    )


def _struct_column(struct_type: pa.StructType, objects: Sequence[Any], cls: type) -> pa.StructArray:
    """A struct column of `struct_type` (the merged key or value struct) holding `objects`,
    all of class `cls`: its fields filled, every other field null."""
    n = len(objects)
    names = {f.name for f in field_layouts(cls)}
    children = []
    for index in range(struct_type.num_fields):
        field = struct_type.field(index)
        if field.name in names:
            children.append(pa.array(list(map(attrgetter(field.name), objects)), field.type))
        elif field.name == "unknown_tags" and has_tags_field(cls):
            unknown = list(map(attrgetter("tags.unknown"), objects))
            children.append(
                pa.array([_tags(u) for u in unknown], field.type)
                if any(unknown)
                else pa.nulls(n, field.type)
            )
        else:
            children.append(pa.nulls(n, field.type))
    return pa.StructArray.from_arrays(children, fields=list(struct_type))


def _tags(unknown: tuple[tuple[int, bytes], ...]) -> list[dict[str, Any]] | None:
    return [{"tag": tag, "data": data} for tag, data in unknown] if unknown else None


def newer_version(key_type: int, versions: Any) -> Any:
    """`Record.newer_than_known` of records of one key type, as a column: a list of value
    versions (None for tombstones) gives a list, a numpy array (no tombstones) an array."""
    high = RECORD_TYPES[key_type].value_versions.high
    if isinstance(versions, np.ndarray):
        return versions > high
    return [v is not None and v > high for v in versions]


def assemble(schema: pa.Schema, columns: Mapping[str, Any], n: int) -> pa.RecordBatch:
    """One batch of `schema` (a CanonicalRows' Arrow schema) from its columns by name: Arrow
    arrays (cast when their type differs), numpy arrays or lists; a column not given is null.
    Every record the sources decode themselves has this offsetwatch's schema version."""
    given = {contract.SCHEMA: np.full(n, contract.SCHEMA_VERSION, np.int32), **columns}
    arrays = [to_array(given.get(field.name), field.type, n) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def to_array(value: Any, kind: pa.DataType, n: int) -> pa.Array:
    """A column of `kind` from an Arrow array (cast when needed), numpy array or list; None
    gives n nulls."""
    if value is None:
        return pa.nulls(n, kind)
    if isinstance(value, pa.Array):
        return value if value.type == kind else value.cast(kind)
    return pa.array(value, kind)


def _flat_batch(
    rows: CanonicalRows, records: Sequence[Record], txn: Sequence[str | None]
) -> pa.RecordBatch:
    """One batch of records sharing a record type, key class and value class (or all
    tombstones), all flat."""
    schema = rows.arrow
    n = len(records)
    first = records[0]
    value_cls = type(first.value)
    tombstones = first.value is None
    rtype = RECORD_TYPES[first.key_type]
    versions = list(map(attrgetter("value_version"), records))
    keys = list(map(attrgetter("key"), records))
    group_field = "group" if hasattr(first.key, "group") else "group_id"
    columns: dict[str, Any] = {
        contract.TYPE: [rtype.name] * n,
        contract.KEY_TYPE: list(map(attrgetter("key_type"), records)),
        contract.VALUE_VERSION: versions,
        contract.TOMBSTONE: [tombstones] * n,
        contract.NEWER_VERSION: newer_version(first.key_type, versions),
        contract.PARTITION: list(map(attrgetter("partition"), records)),
        contract.OFFSET: list(map(attrgetter("offset"), records)),
        contract.TIMESTAMP: list(map(attrgetter("timestamp"), records)),
        contract.GROUP: list(map(attrgetter(group_field), keys)),
        contract.KEY: _struct_column(schema.field(contract.KEY).type, keys, type(first.key)),
        contract.VALUE: (
            None
            if tombstones
            else _struct_column(
                schema.field(contract.VALUE).type, [r.value for r in records], value_cls
            )
        ),
        TXN_COLUMN: list(txn),
    }
    return assemble(schema, columns, n)


def flat_batches(
    rows: CanonicalRows, records: Sequence[AnyRecord | None], txn: Sequence[str | None]
) -> tuple[list[pa.RecordBatch], list[int]]:
    """Arrow batches of the flat records, by column, and the indexes of the records left for
    the dict path (`Canonical.to_dict`, then `CanonicalRows.to_batch`). None entries (records
    that did not decode) are skipped."""
    groups: dict[tuple[int, type, type], list[int]] = {}
    rest: list[int] = []
    if set(map(type, records)) == {Record}:  # the usual case: one pass in C per column
        shapes = list(
            zip(
                map(attrgetter("key_type"), records),
                map(type, map(attrgetter("key"), records)),
                map(type, map(attrgetter("value"), records)),
                strict=True,
            )
        )
        if len(set(shapes)) == 1:
            groups[shapes[0]] = list(range(len(records)))
        else:
            for index, shape in enumerate(shapes):
                groups.setdefault(shape, []).append(index)
    else:
        for index, record in enumerate(records):
            if record is None:
                continue
            if type(record) is not Record:
                rest.append(index)
                continue
            assert isinstance(record, Record)
            shape = (record.key_type, type(record.key), type(record.value))
            groups.setdefault(shape, []).append(index)
    for shape, indexes in list(groups.items()):
        _, key_cls, value_cls = shape
        flat_value = value_cls is type(None) or _is_flat(value_cls, rows)
        if not (_is_flat(key_cls, rows) and flat_value):
            rest.extend(indexes)
            del groups[shape]
    batches = []
    for indexes in groups.values():
        chosen: list[Any] = (
            list(records) if len(indexes) == len(records) else [records[i] for i in indexes]
        )
        try:
            statuses = list(txn) if len(indexes) == len(records) else [txn[i] for i in indexes]
            batches.append(_flat_batch(rows, chosen, statuses))
        except (UnicodeEncodeError, pa.ArrowInvalid, pa.ArrowTypeError):
            rest.extend(indexes)  # e.g. text kept from invalid UTF-8: the dict path scrubs it
    return batches, sorted(rest)


#: (index of the message, the message, why it did not decode)
OnBadRecord = Callable[[int, Message, DecodeError], None]


@dataclass(frozen=True, slots=True)
class Decoded:
    """What `decode_records` made of a list of messages."""

    #: the flat records, as Arrow batches of `rows.arrow`
    batches: list[pa.RecordBatch]
    #: every other good record: (index of its message, canonical dict with `txn` set)
    rest: list[tuple[int, dict[str, Any]]]


def decode_records(
    codec: Codec,
    canonical: Canonical,
    rows: CanonicalRows,
    messages: Sequence[Message],
    txn: Sequence[str | None],
    on_bad: OnBadRecord,
) -> Decoded:
    """The one decode flow of the sources that read `__consumer_offsets` bytes: the whole
    list at once (`decode_many`); when some record is bad, each one alone, the bad ones to
    `on_bad`; flat records to columns, the rest through canonical dicts."""
    try:
        decoded: list[AnyRecord | None] = list(codec.decode_many(messages))
    except DecodeError:
        decoded = []
        for index, message in enumerate(messages):
            try:
                decoded.append(codec.decode(*message))
            except DecodeError as error:
                decoded.append(None)
                on_bad(index, message, error)
    batches, rest = flat_batches(rows, decoded, txn)
    dicts = []
    for index in rest:
        record = decoded[index]
        assert record is not None
        row = canonical.to_dict(record)
        row[TXN_COLUMN] = txn[index]
        dicts.append((index, row))
    return Decoded(batches, dicts)
