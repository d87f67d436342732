"""Offset commits straight into Arrow columns: the kafka source's fast path.

Almost every record of `__consumer_offsets` is an offset commit (or its tombstone). Going
through a canonical dict per record (`Canonical.to_dict`, ~12 us) and `from_pylist` into the
wide merged struct (~16 us) cost 15x the decoding itself (~1.7 us). Here commits become Arrow
columns directly: one list per populated field, `pa.nulls` for every field of the merged
`key` / `value` structs that a commit does not have. The field names come from the record
layouts, as `Canonical.to_dict` takes them, and tests/spark_jobs/test_source_kafka_columns.py
checks the batches equal the dict path's on real records. Anything unusual (unknown tags,
text from invalid UTF-8) goes back to the dict path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from offsetwatch.decoder import contract
from offsetwatch.decoder.layout import NO_TAGS, field_layouts
from offsetwatch.decoder.records import AnyRecord, OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.decoder.registry import RECORD_TYPES
from offsetwatch.spark_jobs.schema import CanonicalRows

_COMMIT_KEY_TYPES = frozenset(t for t, r in RECORD_TYPES.items() if r.name == "offset_commit")
_KEY_FIELDS = tuple(f.name for f in field_layouts(OffsetCommitKey))
_VALUE_FIELDS = tuple(f.name for f in field_layouts(OffsetCommitValue))


def is_plain_commit(record: AnyRecord) -> bool:
    """An offset commit (or tombstone) the columnar path renders exactly like the dict path."""
    if not isinstance(record, Record) or record.key_type not in _COMMIT_KEY_TYPES:
        return False
    value = record.value
    return value is None or value.tags is NO_TAGS or not value.tags.unknown


@dataclass(frozen=True, slots=True)
class CommitColumns:
    """Builds Arrow batches of `rows.arrow` from plain commit records (`is_plain_commit`)."""

    rows: CanonicalRows
    _type_name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_type_name", RECORD_TYPES[min(_COMMIT_KEY_TYPES)].name)

    def batch(self, records: Sequence[Record]) -> pa.RecordBatch | None:
        """The batch, or None when some text is not valid UTF-8 (the dict path scrubs it)."""
        try:
            return self._batch(records)
        except (UnicodeEncodeError, pa.ArrowInvalid, pa.ArrowTypeError):
            return None

    def _batch(self, records: Sequence[Record]) -> pa.RecordBatch:
        n = len(records)
        keys = [r.key for r in records]
        values = [r.value for r in records]
        tombstones = [v is None for v in values]
        versions = [r.value_version for r in records]
        top: dict[str, Any] = {
            "type": [self._type_name] * n,
            "key_type": [r.key_type for r in records],
            "value_version": versions,
            "tombstone": tombstones,
            "newer_version": [r.newer_than_known for r in records],
            "partition": [r.partition for r in records],
            "offset": [r.offset for r in records],
            "timestamp": [r.timestamp for r in records],
            "group": [k.group for k in keys],  # type: ignore[union-attr]
            contract.SCHEMA: [contract.SCHEMA_VERSION] * n,
        }
        schema = self.rows.arrow
        columns: list[pa.Array] = []
        for f in schema:
            if f.name == "key":
                children = {name: [getattr(k, name) for k in keys] for name in _KEY_FIELDS}
                columns.append(_struct(f.type, children, n, None))
            elif f.name == "value":
                children = {
                    name: [None if v is None else getattr(v, name) for v in values]
                    for name in _VALUE_FIELDS
                }
                mask = pa.array(tombstones, pa.bool_()) if any(tombstones) else None
                columns.append(_struct(f.type, children, n, mask))
            elif f.name in top:
                columns.append(pa.array(top[f.name], f.type))
            else:
                columns.append(pa.nulls(n, f.type))
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def _struct(
    kind: pa.StructType, children: dict[str, list[Any]], n: int, mask: pa.Array | None
) -> pa.StructArray:
    arrays = [
        pa.array(children[f.name], f.type) if f.name in children else pa.nulls(n, f.type)
        for f in kind
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(kind), mask=mask)
