"""Decoded records straight into Arrow columns, for the sources that decode bytes themselves.

Going through canonical dicts costs about 30 µs a record (`Canonical.to_dict`, then Arrow
reading the dicts back); offset commits - nearly all of a real `__consumer_offsets` - have
flat keys and values, so their columns are read off the decoded records directly, field by
field, from the same layouts. Records of other types (nested values: group metadata,
assignments) and any text Arrow refuses (invalid UTF-8 kept as surrogate escapes) take the
dict path, which gives the same rows (tests/spark_jobs/test_sources_columns.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Final

import pyarrow as pa

from offsetwatch.decoder import contract
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
    high = rtype.value_versions.high
    keys = list(map(attrgetter("key"), records))
    group_field = "group" if hasattr(first.key, "group") else "group_id"
    columns: dict[str, pa.Array] = {
        "type": pa.array([rtype.name] * n, pa.string()),
        "key_type": pa.array(list(map(attrgetter("key_type"), records)), pa.int32()),
        "value_version": pa.array(versions, pa.int32()),
        "tombstone": pa.array([tombstones] * n, pa.bool_()),
        "newer_version": pa.array([v is not None and v > high for v in versions], pa.bool_()),
        "partition": pa.array(list(map(attrgetter("partition"), records)), pa.int32()),
        "offset": pa.array(list(map(attrgetter("offset"), records)), pa.int64()),
        "timestamp": pa.array(list(map(attrgetter("timestamp"), records)), pa.int64()),
        "group": pa.array(list(map(attrgetter(group_field), keys)), pa.string()),
        "key": _struct_column(schema.field("key").type, keys, type(first.key)),
        "value": (
            pa.nulls(n, schema.field("value").type)
            if tombstones
            else _struct_column(schema.field("value").type, [r.value for r in records], value_cls)
        ),
        TXN_COLUMN: pa.array(txn, pa.string()),
        contract.SCHEMA: pa.array([contract.SCHEMA_VERSION] * n, pa.int32()),
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


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
        except UnicodeEncodeError:  # text kept from invalid UTF-8: the dict path scrubs it
            rest.extend(indexes)
    return batches, sorted(rest)
