"""The archive as compact reads it: only the lake's columns, bad input in the same scan.

    spark.read.format("offsetwatch").option("source", "archive").option("output", "lake")

yields rows of `lake_input_struct()`: `lake_flatten.pruned_struct` of the canonical record
(what compact keeps of a record) plus `bad`, a QUARANTINE_SCHEMA struct set on the rows of bad
input and null on every other. One scan gives compact both its records and its quarantine;
the `records` and `quarantine` outputs stay for everyone else.

JSON lines take a fast path: blocks of lines are parsed by Arrow's JSON reader (C++) with
the narrow schema, several times faster than a general JSON parser building every field of the
canonical record. Any block Arrow refuses (a bad line, a wrong type, a line without its
required fields) is parsed again line by line in Python, exactly as the `quarantine` output
does, so the good lines of that block are kept and each bad line is quarantined with its line
number. Group records (a few per group, but deep values) always go the Python way: their key
and value are kept as JSON text, the same text Spark's `to_json` gives in `prune`.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pyspark.sql.types import StructField, StructType

from offsetwatch.decoder import contract
from offsetwatch.decoder.canonical import dumps
from offsetwatch.spark_jobs.lake_flatten import (
    LAKE_RECORD_TYPES,
    LOG_END_TYPE,
    TEXT_RECORD_TYPES,
    pruned_struct,
)
from offsetwatch.spark_jobs.lake_schema import QUARANTINE_SCHEMA
from offsetwatch.spark_jobs.schema import TXN_COLUMN, CanonicalRows, arrow_schema, records_struct
from offsetwatch.spark_jobs.sources import (
    BATCH_RECORDS,
    batch_or_quarantine,
    parse_line,
    quarantine_row,
)

#: option("output") of the archive source for compact
OUTPUT_LAKE: Final = "lake"
#: the column of a bad input's quarantine row
BAD_COLUMN: Final = "bad"
#: bytes per Arrow parse (whole lines): large enough to amortise a call, small enough that a
#: block with a bad line costs little to parse again in Python
BLOCK_BYTES: Final = 16 << 20
#: the types Arrow's columns carry straight into the lake (flat keys and values). Tuples, made
#: Arrow arrays where a block is parsed: pyarrow imports pandas at its first `pa.array`, and
#: this module is imported by every Python process Spark starts to plan a data source read
#: (one per planning call): 0.27 CPU s each for nothing
_FAST_TYPES: Final = (contract.OFFSET_COMMIT_TYPE, LOG_END_TYPE)
#: group and share-state records: their key and value are kept as JSON text (Python path)
_GROUP_TYPES: Final = tuple(sorted(TEXT_RECORD_TYPES))
#: the envelope fields the lake keeps as they are
_ENVELOPE_KEPT: Final = (
    contract.TYPE,
    contract.TOMBSTONE,
    contract.GROUP,
    contract.PARTITION,
    contract.OFFSET,
    contract.TIMESTAMP,
)
#: the columns of the lake input a JSON line gives as they are (the rest: txn, from the
#: line's `transaction`; the group records' JSON texts; bad)
_PARSED: Final = (*_ENVELOPE_KEPT, contract.KEY, contract.VALUE)
#: fields the fast path reads only to check the contract (`_contract_holds`) and for `txn`
_CHECKED: Final = (
    pa.field(contract.TRANSACTION, pa.string()),
    pa.field(contract.SCHEMA, pa.int64()),
)


def lake_input_struct() -> StructType:
    """Every field nullable, as the Arrow batches a Python data source yields must be."""
    bad = StructType([StructField(f.name, f.dataType, True) for f in QUARANTINE_SCHEMA.fields])
    return StructType([*pruned_struct(records_struct()).fields, StructField(BAD_COLUMN, bad, True)])


def _field_names(name: str) -> tuple[str, ...]:
    kind = lake_input_struct()[name].dataType
    assert isinstance(kind, StructType)
    return tuple(kind.fieldNames())


#: the fields of the narrow key and value structs (read once: pyarrow's field lookups cost
#: more than the copying)
_KEY_NAMES: Final = _field_names("key")
_VALUE_NAMES: Final = _field_names("value")


def _json_text(value: Any) -> str | None:
    """`value` as Spark's `to_json` writes a struct: null fields left out, bytes as base64."""
    return None if value is None else dumps(_without_nulls(value))


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@dataclass(slots=True)
class LakeCollector:
    """Gathers one partition's pruned rows and bad input as Arrow batches of the lake input.
    Same protocol as `sources.Collector` (add, bad_input, full, drain), so the Avro and
    JSON-lines readers of the archive source feed either."""

    source: str
    rows: CanonicalRows = field(default_factory=CanonicalRows)
    arrow: pa.Schema = field(default_factory=lambda: arrow_schema(lake_input_struct()))
    pending: list[dict[str, Any]] = field(default_factory=list)
    where: list[tuple[str, int]] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)

    def add(self, canonical: dict[str, Any], file: str, position: int) -> None:
        kind = canonical.get(contract.TYPE)
        if kind not in LAKE_RECORD_TYPES:
            return
        broken = contract.problem(canonical)
        if broken is not None:
            self.bad_input(file, position, broken.reason, broken.at(file, position))
            return
        try:
            row = self._pruned(canonical, kind in TEXT_RECORD_TYPES)
        except (AttributeError, TypeError, ValueError) as error:
            self.bad_input(file, position, "bad_record", f"{type(error).__name__}: {error}")
            return
        self.pending.append(row)
        self.where.append((file, position))

    def _pruned(self, canonical: dict[str, Any], is_group: bool) -> dict[str, Any]:
        row = {name: canonical.get(name) for name in _ENVELOPE_KEPT}
        row[TXN_COLUMN] = canonical.get(TXN_COLUMN) or canonical.get(contract.TRANSACTION)
        key, value = canonical.get(contract.KEY) or {}, canonical.get(contract.VALUE) or {}
        row[contract.KEY] = {name: key.get(name) for name in _KEY_NAMES}
        row[contract.VALUE] = {name: value.get(name) for name in _VALUE_NAMES}
        if is_group:
            prepared = self.rows.prepare(canonical)
            row["key_json"] = _json_text(prepared.get("key"))
            if canonical.get(contract.TOMBSTONE) is False:
                row["value_json"] = _json_text(prepared.get("value"))
        return row

    def bad_input(
        self,
        file: str | None,
        position: int | None,
        reason: str,
        error: str | None,
        raw: bytes | str | None = None,
    ) -> None:
        names = QUARANTINE_SCHEMA.fieldNames()
        row = quarantine_row(self.source, file, position, reason, error, raw)
        self.bad.append({BAD_COLUMN: dict(zip(names, row, strict=True))})

    @property
    def full(self) -> bool:
        return len(self.pending) >= BATCH_RECORDS or len(self.bad) >= BATCH_RECORDS

    def drain(self) -> Iterator[pa.RecordBatch]:
        pending, where = self.pending, self.where
        self.pending, self.where = [], []
        if pending:
            batch = self._batch(pending, where)
            if batch is not None:
                yield batch
        if self.bad:
            bad, self.bad = self.bad, []
            yield pa.RecordBatch.from_pylist(bad, schema=self.arrow)

    def _batch(
        self, pending: list[dict[str, Any]], where: list[tuple[str, int]]
    ) -> pa.RecordBatch | None:
        def convert(rows: list[dict[str, Any]]) -> pa.RecordBatch:
            return pa.RecordBatch.from_pylist(rows, schema=self.arrow)

        return batch_or_quarantine(pending, where, convert, self.bad_input)


# ---------------------------------------------------------------------------------------------
# JSON lines


def _open(path: str) -> IO[bytes] | gzip.GzipFile:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _blocks(stream: IO[bytes] | gzip.GzipFile) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, block): the stream in blocks of whole lines."""
    first, rest = 1, b""
    while data := stream.read(BLOCK_BYTES):
        data = rest + data
        cut = data.rfind(b"\n") + 1
        block, rest = data[:cut], data[cut:]
        if block:
            yield first, block
            first += block.count(b"\n")
    if rest:
        yield first, rest


def read_jsonl_lake(file: str, collector: LakeCollector) -> Iterator[pa.RecordBatch]:
    parse_schema = pa.schema([*(collector.arrow.field(name) for name in _PARSED), *_CHECKED])
    try:
        with _open(file) as stream:
            for first, block in _blocks(stream):
                fast = _parse_block(block, parse_schema)
                if fast is None:  # some line Arrow refuses: every line the careful way
                    lines = block.split(b"\n")
                    slow: Iterable[int] = range(len(lines))
                else:
                    table, slow, lines = fast
                    if table.num_rows:
                        yield from _lake_batches(table, collector.arrow)
                yield from _careful(file, first, lines, slow, collector)
    except (OSError, EOFError) as error:  # a torn gzip stream: keep what came before
        collector.bad_input(file, None, "bad_file", f"{type(error).__name__}: {error}")
    yield from collector.drain()


def _careful(
    file: str, first: int, lines: list[bytes], indexes: Iterable[int], collector: LakeCollector
) -> Iterator[pa.RecordBatch]:
    """Lines parsed one by one in Python, as the `records` and `quarantine` outputs do."""
    for index in indexes:
        line = lines[index]
        if not line or line.isspace():
            continue
        canonical = parse_line(line, file, first + index, collector)
        if canonical is not None:
            collector.add(canonical, file, first + index)
        if collector.full:
            yield from collector.drain()


def _parse_block(block: bytes, schema: pa.Schema) -> tuple[pa.Table, list[int], list[bytes]] | None:
    """(the block's offset commits and log-end samples as parsed columns, indexes of the
    lines of its group records, the block's lines when it has any), or None when Arrow
    refuses a line, a line lacks a required field, or rows and lines do not pair up (a blank
    line, two objects on a line)."""
    try:
        table = pj.read_json(
            io.BytesIO(block),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(block) + 1),
            parse_options=pj.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
    except (pa.ArrowException, ValueError):
        return None
    # Arrow skips blank lines and reads two objects on one line: rows must pair with lines
    if table.num_rows != block.count(b"\n") + (not block.endswith(b"\n")):
        return None
    for name in contract.REQUIRED:
        if table.column(name).null_count:
            return None
    if not _contract_holds(table):  # the careful path quarantines the lines that break it
        return None
    kinds = table.column("type")
    group_rows = pc.indices_nonzero(pc.is_in(kinds, value_set=pa.array(_GROUP_TYPES))).to_pylist()
    lines = block.split(b"\n") if group_rows else []
    if group_rows and not _paired(lines, table, group_rows):
        return None
    return table.filter(pc.is_in(kinds, value_set=pa.array(_FAST_TYPES))), group_rows, lines


def _contract_holds(table: pa.Table) -> bool:
    """Whether no row breaks `contract.problem`: a newer or bad schema version, an outcome
    that is none of the known ones."""
    version = table.column(contract.SCHEMA)
    if version.null_count < len(version):
        low, high = pc.min_max(version).values()
        if low.as_py() < contract.FIRST_SCHEMA_VERSION or high.as_py() > contract.SCHEMA_VERSION:
            return False
    outcome = table.column(contract.TRANSACTION)
    known = pc.is_in(outcome, value_set=pa.array(contract.OUTCOMES))
    return bool(pc.all(pc.or_(pc.is_null(outcome), known)).as_py())


def _paired(lines: list[bytes], table: pa.Table, rows: list[int]) -> bool:
    """Whether row i of `table` came from line i for each of `rows` (a blank line and a
    line of two objects in one block would shift the pairing without changing the count)."""
    positions = table.select(["partition", "offset"]).take(rows).to_pylist()
    for index, position in zip(rows, positions, strict=True):
        try:
            line = json.loads(lines[index])
        except ValueError:
            return False
        if not isinstance(line, dict) or (line.get("partition"), line.get("offset")) != (
            position["partition"],
            position["offset"],
        ):
            return False
    return True


def _lake_batches(table: pa.Table, arrow: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Parsed columns as lake-input batches: the columns a JSON line has no source for
    (the group records' JSON texts, bad) are null; `txn` is the line's `transaction`."""
    n = table.num_rows
    columns = [
        table.column(f.name)
        if f.name in _PARSED
        else table.column(contract.TRANSACTION)
        if f.name == TXN_COLUMN
        else pa.nulls(n, f.type)
        for f in arrow
    ]
    yield from pa.Table.from_arrays(columns, schema=arrow).to_batches()
