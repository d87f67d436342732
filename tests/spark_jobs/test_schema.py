"""The Spark schema is the Avro schema's twin, and the JSON archive reads into the same rows."""

from __future__ import annotations

import copy
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from offsetwatch.decoder import contract
from offsetwatch.decoder.avro import avro_schema
from offsetwatch.decoder.canonical import Canonical, dumps
from offsetwatch.decoder.records import Record
from offsetwatch.spark_jobs import schema as schema_module
from offsetwatch.spark_jobs.schema import (
    TXN_COLUMN,
    CanonicalRows,
    canonical_struct,
    records_struct,
    text_paths,
)
from tests.decoder.strategies import all_type_versions, records

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

_SPARK_OF_AVRO = {
    "int": IntegerType(),
    "long": LongType(),
    "boolean": BooleanType(),
    "string": StringType(),
    "bytes": BinaryType(),
}


def _avro_leaves(schema: dict[str, Any]) -> dict[tuple[str, ...], set[str]]:
    """Every field path of the Avro schema (union branches and arrays transparent) -> the
    kinds seen there: a primitive name, "record" or "array<...>"."""
    named: dict[str, dict[str, Any]] = {}
    found: dict[tuple[str, ...], set[str]] = defaultdict(set)

    def kind(node: Any, path: tuple[str, ...]) -> list[str]:
        if isinstance(node, list):
            return [k for branch in node if branch != "null" for k in kind(branch, path)]
        if isinstance(node, str):
            if node in _SPARK_OF_AVRO:
                return [node]
            return kind(named[node.removeprefix("offsetwatch.")], path)
        if node["type"] == "array":
            return [f"array<{k}>" for k in kind(node["items"], path)]
        named.setdefault(node["name"], node)
        for f in node["fields"]:
            found[(*path, f["name"])].update(kind(f["type"], (*path, f["name"])))
        return ["record"]

    kind(schema, ())
    return found


def _spark_kind(kind: DataType) -> str:
    if isinstance(kind, StructType):
        return "record"
    if isinstance(kind, ArrayType):
        return f"array<{_spark_kind(kind.elementType)}>"
    return next(name for name, spark in _SPARK_OF_AVRO.items() if spark == kind)


def _struct_paths(kind: DataType, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], DataType]:
    while isinstance(kind, ArrayType):
        kind = kind.elementType
    out: dict[tuple[str, ...], DataType] = {}
    if isinstance(kind, StructType):
        for f in kind.fields:
            out[(*path, f.name)] = f.dataType
            out.update(_struct_paths(f.dataType, (*path, f.name)))
    return out


def test_every_avro_field_is_in_the_struct_with_its_type() -> None:
    clashes = text_paths()
    avro = {
        path: kinds
        for path, kinds in _avro_leaves(avro_schema()).items()
        # below a field held as JSON text
        if not any(path[: len(c)] == c and len(path) > len(c) for c in clashes)
    }
    spark = _struct_paths(canonical_struct())
    # the canonical `transaction` is the `txn` column of records_struct, by its 0.1 name
    assert avro.pop((contract.TRANSACTION,)) == {"string"}
    assert _struct_paths(records_struct())[(TXN_COLUMN,)] == StringType()
    assert set(avro) == set(spark)
    for path, kinds in avro.items():
        if path in clashes:
            assert len(kinds) > 1, path
            assert _spark_kind(spark[path]) in {"string", "array<string>"}, path
        else:
            assert kinds == {_spark_kind(spark[path])}, path


def test_same_named_fields_clash_only_where_documented() -> None:
    """Same-named fields of different key/value branches agree in type except `value.topics`
    (topic records vs topic names): a new clash must be looked at, not silently made text."""
    assert text_paths() == {("value", "topics")}


def test_all_fields_are_nullable() -> None:
    def check(kind: DataType) -> None:
        if isinstance(kind, StructType):
            for f in kind.fields:
                assert f.nullable, f.name
                check(f.dataType)
        elif isinstance(kind, ArrayType):
            assert kind.containsNull
            check(kind.elementType)

    check(canonical_struct())


def test_a_new_record_type_needs_no_change(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = avro_schema()
    extended = copy.deepcopy(schema)
    fields = {f["name"]: f for f in extended["fields"]}
    fields["key"]["type"].append(
        {
            "type": "record",
            "name": "FutureKey",
            "fields": [{"name": "topic", "type": "string"}, {"name": "shard", "type": "int"}],
        }
    )
    fields["value"]["type"].append(
        {
            "type": "record",
            "name": "FutureValue",
            "fields": [
                {"name": "future_offset", "type": "long"},
                {"name": "future_flag", "type": "boolean"},
            ],
        }
    )
    monkeypatch.setattr(schema_module, "avro_schema", lambda: extended)
    struct = canonical_struct()
    key, value = struct["key"].dataType, struct["value"].dataType
    assert isinstance(key, StructType) and isinstance(value, StructType)
    assert key["shard"].dataType == IntegerType()
    assert value["future_offset"].dataType == LongType()
    assert value["future_flag"].dataType == BooleanType()


def test_log_end_samples_are_in_the_struct() -> None:
    """H5's log-end record type arrived through the Avro schema with no change here."""
    value = canonical_struct()["value"].dataType
    assert isinstance(value, StructType)
    assert value["log_end_offset"].dataType == LongType()
    assert value["sampled_at_ms"].dataType == LongType()


def _canonicals(recs: tuple[Record, ...]) -> list[dict[str, Any]]:
    canonical = Canonical()
    out = []
    for index, rec in enumerate(recs):
        record = canonical.to_dict(rec)
        record["partition"], record["offset"] = 0, index
        out.append(record)
    return out


_ONE_OF_EACH = st.tuples(*(records(k, v, tombstones=False) for k, v in all_type_versions()))


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(recs=_ONE_OF_EACH)
def test_json_archive_and_python_rows_are_the_same(
    spark: SparkSession, tmp_path: Path, recs: tuple[Record, ...]
) -> None:
    """Spark's JSON reader on the archive's JSON text == the rows Python sources build."""
    canonicals = _canonicals(recs)
    path = tmp_path / f"records-{id(recs)}.jsonl"
    path.write_text("".join(dumps(c) + "\n" for c in canonicals), encoding="utf-8")
    struct = canonical_struct()
    rows = CanonicalRows(struct)
    from_json = spark.read.schema(struct).json(str(path)).orderBy("offset").collect()
    from_arrow = spark.createDataFrame(
        pa.Table.from_batches([rows.to_batch(canonicals)]), struct
    ).collect()
    from_tuples = spark.createDataFrame([rows.to_row(c) for c in canonicals], struct).collect()
    assert from_json == from_arrow == from_tuples
    assert len(from_json) == len(canonicals)
