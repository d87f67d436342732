"""The canonical record as a Spark `StructType`, generated from the Avro schema.

`decoder.avro.avro_schema()` is itself generated from the record layouts, so walking it gives
the Spark schema from the same single source: a record type added there (log-end samples,
a new Kafka record) appears here with no change.

Mapping, chosen so that the exporter's JSON-lines archive reads with Spark's own JSON reader
(`spark.read.schema(canonical_struct()).json(path)`) and every other source yields the SAME rows:

* Avro int -> IntegerType, long -> LongType, boolean -> BooleanType, string -> StringType,
  bytes -> BinaryType (base64 text in JSON, which Spark's JSON reader decodes), array ->
  ArrayType, record -> StructType.
* `key` and `value` are unions of one record per record type; the JSON archive has one plain
  object there whose fields depend on `type`. Both become ONE merged struct holding every field
  of every branch (union order, first appearance first); the fields a record's type does not
  have are null. Same-named fields of different branches merge when both are structs (fields
  merged recursively) or arrays (elements merged); any other clash becomes StringType holding,
  as Spark's JSON reader does for a string column, a string as itself and anything else as its
  compact JSON text. The only clash so far is `value.topics`: topic records in the
  partition-metadata values, topic names in `consumer_group_regular_expression`; it is
  `array<string>` holding the names as they are and each topic record as JSON text.
  `text_paths()` lists the clashing paths; `test_schema.py` pins the list.
* Every field is nullable and arrays may hold nulls: Spark's JSON reader makes any given schema
  nullable, and a merged struct has nulls by construction, so all sources agree.
* Text that is not valid UTF-8 (kept by the decoder as surrogate escapes) becomes U+FFFD, as
  in the JSON and Avro archives.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from offsetwatch.decoder import contract
from offsetwatch.decoder.avro import NAMESPACE, avro_schema
from offsetwatch.decoder.canonical import dumps, scrub_text

_PRIMITIVES: Final[Mapping[str, DataType]] = {
    "int": IntegerType(),
    "long": LongType(),
    "boolean": BooleanType(),
    "string": StringType(),
    "bytes": BinaryType(),
}

#: a field path from the top record, arrays transparent: ("value", "topics")
Path = tuple[str, ...]


class SchemaError(ValueError):
    """The Avro schema holds something the Spark mapping does not cover."""


@dataclass(slots=True)
class _Generator:
    """One walk of the Avro schema: named records are defined once, then referenced."""

    named: dict[str, DataType] = field(default_factory=dict)
    text_paths: set[Path] = field(default_factory=set)

    def spark_type(self, node: Any, path: Path) -> DataType:
        if isinstance(node, str):
            return self._reference(node)
        if isinstance(node, list):
            return self._union(node, path)
        kind = node.get("type")
        if kind == "array":
            return ArrayType(self.spark_type(node["items"], path), containsNull=True)
        if kind == "record":
            struct = StructType(
                [
                    StructField(f["name"], self.spark_type(f["type"], (*path, f["name"])), True)
                    for f in node["fields"]
                ]
            )
            name = node["name"]
            full = name if "." in name else f"{node.get('namespace', NAMESPACE)}.{name}"
            self.named[full] = struct
            self.named[name] = struct
            return struct
        raise SchemaError(f"{'.'.join(path)}: Avro type {kind!r} has no Spark mapping")

    def _reference(self, name: str) -> DataType:
        primitive = _PRIMITIVES.get(name)
        if primitive is not None:
            return primitive
        known = self.named.get(name)
        if known is None:
            raise SchemaError(f"Avro type {name!r} used before its definition")
        return known

    def _union(self, branches: list[Any], path: Path) -> DataType:
        types = [self.spark_type(b, path) for b in branches if b != "null"]
        merged = types[0]
        for other in types[1:]:
            merged = self.merge(merged, other, path)
        return merged

    def merge(self, left: DataType, right: DataType, path: Path) -> DataType:
        if left == right:
            return left
        if isinstance(left, StructType) and isinstance(right, StructType):
            return self._merge_structs(left, right, path)
        if isinstance(left, ArrayType) and isinstance(right, ArrayType):
            return ArrayType(self.merge(left.elementType, right.elementType, path), True)
        self.text_paths.add(path)
        return StringType()

    def _merge_structs(self, left: StructType, right: StructType, path: Path) -> StructType:
        fields = {f.name: f.dataType for f in left.fields}
        for f in right.fields:
            mine = fields.get(f.name)
            fields[f.name] = (
                f.dataType if mine is None else self.merge(mine, f.dataType, (*path, f.name))
            )
        return StructType([StructField(name, kind, True) for name, kind in fields.items()])


def _generate() -> tuple[StructType, frozenset[Path]]:
    """(the struct, its clashing paths) of one walk of the Avro schema; the canonical
    `transaction` field is left out: Spark rows carry it as `txn` (`records_struct`)."""
    generator = _Generator()
    top = generator.spark_type(avro_schema(), ())
    assert isinstance(top, StructType)
    top = StructType([f for f in top.fields if f.name != contract.TRANSACTION])
    return top, frozenset(generator.text_paths)


def canonical_struct() -> StructType:
    """The Spark schema of the canonical record (every source yields it), without its
    `transaction` field, which `records_struct` holds as `txn`."""
    return _generate()[0]


#: the Spark column of the canonical `transaction` field (the data source's and the lake's
#: name for it since offsetwatch 0.1)
TXN_COLUMN: Final = "txn"
#: `txn` of a record that is known not to be transactional (segments) or whose outcome no
#: writer knew: the lake holds this for every such commit
NOT_TRANSACTIONAL: Final = "none"


def records_struct() -> StructType:
    """What `read_records` and the `offsetwatch` data source yield: the canonical record plus
    `txn`, the outcome of a transactional record where the source knows it (segments:
    "none" for a plain record; "committed", "aborted" or "pending" from the markers; files
    written by `decode --input segments` carry it as `transaction`), null where it cannot
    (the exporter's archive and the republished topic: the exporter reads read_committed)."""
    return canonical_struct().add(TXN_COLUMN, StringType(), True)


def text_paths() -> frozenset[Path]:
    """Fields whose branches clash in type: they hold the value's compact JSON text."""
    return _generate()[1]


# ---------------------------------------------------------------------------------------------
# Canonical dicts -> rows and Arrow batches


def _arrow_type(kind: DataType) -> pa.DataType:
    if isinstance(kind, StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.dataType)) for f in kind.fields])
    if isinstance(kind, ArrayType):
        return pa.list_(_arrow_type(kind.elementType))
    if isinstance(kind, IntegerType):
        return pa.int32()
    if isinstance(kind, LongType):
        return pa.int64()
    if isinstance(kind, BooleanType):
        return pa.bool_()
    if isinstance(kind, StringType):
        return pa.string()
    if isinstance(kind, BinaryType):
        return pa.binary()
    raise SchemaError(f"no Arrow type for {kind}")


def arrow_schema(struct: StructType) -> pa.Schema:
    """The Arrow schema Spark maps to `struct` (for data sources that yield RecordBatches)."""
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in struct.fields])


def _text(kind: DataType, value: Any) -> Any:
    """A clashing field's value as its StringType column holds it (see the module doc)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(kind, ArrayType):
        return [_text(kind.elementType, item) for item in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    return dumps(value)


#: the fields to rewrite as text: name -> the clashing field's type, or a deeper plan
_Plan = dict[str, "_Plan | DataType"]


def _plan(struct: StructType, paths: Iterable[Path]) -> _Plan:
    plan: _Plan = {}
    for path in sorted(paths, key=len):
        node, kind = plan, _element(struct)
        for name in path[:-1]:
            assert isinstance(kind, StructType)
            kind = _element(kind[name].dataType)
            child = node.setdefault(name, {})
            if not isinstance(child, dict):  # an ancestor already becomes text
                break
            node = child
        else:
            assert isinstance(kind, StructType)
            node[path[-1]] = kind[path[-1]].dataType
    return plan


def _element(kind: DataType) -> DataType:
    while isinstance(kind, ArrayType):
        kind = kind.elementType
    return kind


def _apply(plan: _Plan, value: Any, leaf: Callable[[DataType, Any], Any] = _text) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [_apply(plan, item, leaf) for item in value]
    out = dict(value)
    for name, child in plan.items():
        if name in out:
            sub = out[name]
            out[name] = _apply(child, sub, leaf) if isinstance(child, dict) else leaf(child, sub)
    return out


def _binary_plan(struct: StructType, skip: frozenset[Path], path: Path = ()) -> _Plan:
    """Where the bytes fields are (as base64 text in JSON), clashing text fields left out."""
    plan: _Plan = {}
    for f in struct.fields:
        here = (*path, f.name)
        kind = _element(f.dataType)
        if here in skip:
            continue
        if isinstance(kind, BinaryType):
            plan[f.name] = f.dataType
        elif isinstance(kind, StructType):
            child = _binary_plan(kind, skip, here)
            if child:
                plan[f.name] = child
    return plan


def _unbase64(kind: DataType, value: Any) -> Any:
    if isinstance(value, list):
        return [_unbase64(kind, item) for item in value]
    return base64.b64decode(value, validate=True) if isinstance(value, str) else value


def _row(kind: DataType, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(kind, StructType):
        return tuple(_row(f.dataType, value.get(f.name)) for f in kind.fields)
    if isinstance(kind, ArrayType):
        return [_row(kind.elementType, item) for item in value]
    if isinstance(kind, BinaryType):
        return bytes(value)
    return value


@dataclass(frozen=True, slots=True)
class CanonicalRows:
    """Turns canonical dicts (`Canonical.to_dict`, `AvroCodec` output) into Spark data.

    Build one per reader (it walks the Avro schema once); it holds no mutable state, so it
    pickles to executors.
    """

    struct: StructType = field(default_factory=records_struct)
    text_plan: _Plan = field(init=False)
    binary_plan: _Plan = field(init=False)
    arrow: pa.Schema = field(init=False)

    def __post_init__(self) -> None:
        clashes = text_paths()
        object.__setattr__(self, "text_plan", _plan(self.struct, clashes))
        object.__setattr__(self, "binary_plan", _binary_plan(self.struct, clashes))
        object.__setattr__(self, "arrow", arrow_schema(self.struct))

    def prepare(self, canonical: dict[str, Any]) -> dict[str, Any]:
        """The dict as the struct holds it: clashing fields as text, the canonical
        `transaction` as `txn` unless the source set `txn` itself (copied, not changed in
        place)."""
        prepared = _apply(self.text_plan, canonical) if self.text_plan else dict(canonical)
        if prepared.get(TXN_COLUMN) is None:
            prepared[TXN_COLUMN] = canonical.get(contract.TRANSACTION)
        return prepared

    def from_json(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The canonical dict of a parsed JSON line (`json.loads` of `canonical.dumps`):
        bytes fields back from base64. Raises ValueError for text that is not base64."""
        decoded: dict[str, Any] = _apply(self.binary_plan, obj, _unbase64)
        return decoded

    def to_row(self, canonical: dict[str, Any]) -> tuple[Any, ...]:
        """One canonical dict as a tuple in `struct` order (for `createDataFrame`)."""
        row = _row(self.struct, scrub_text(self.prepare(canonical)))
        assert isinstance(row, tuple)
        return row

    def to_batch(self, canonicals: Iterable[dict[str, Any]]) -> pa.RecordBatch:
        """Canonical dicts as one Arrow batch of `arrow` (what Python data sources yield)."""
        prepared = [self.prepare(c) for c in canonicals]
        try:
            return pa.RecordBatch.from_pylist(prepared, schema=self.arrow)
        except UnicodeEncodeError:  # invalid UTF-8 kept by the decoder: rare, so retried
            return pa.RecordBatch.from_pylist([scrub_text(p) for p in prepared], schema=self.arrow)
