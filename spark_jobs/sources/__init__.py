"""What the inputs of the `offsetwatch` data source share: options, errors, quarantine rows.

Bad input never stops a read: the source skips it. The same source read with
`option("output", "quarantine")` yields, instead of records, one row of
`lake_schema.QUARANTINE_SCHEMA` per bad line / Avro block / segment batch / record (source,
file, position, reason, error, raw). Quarantine is thus a second, lazy scan that only jobs
wanting it pay for, with no side effects in executors (a retried task writes nothing twice);
counting per reason is a `groupBy("reason")` and the lake keeps the rows as its quarantine
table. `position` is a byte offset in the file (an Avro block, a segment batch) or a line
number (JSON lines).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from offsetwatch.decoder import contract
from offsetwatch.spark_jobs.schema import CanonicalRows, records_struct

#: option("output"): the records (default) or the quarantine rows of the same input
OUTPUT_RECORDS: Final = "records"
OUTPUT_QUARANTINE: Final = "quarantine"
#: option("paths"): a JSON list of paths (option("path") / load(path) for one)
PATHS_OPTION: Final = "paths"

#: records per Arrow batch a Python source yields
BATCH_RECORDS: Final = 8192
#: characters of a bad input kept in its quarantine row
_RAW_LIMIT: Final = 4096


class InputError(ValueError):
    """Input that cannot be read at all: missing, empty, or a bad option. The CLI turns it
    into a one-line message and exit code 2."""


def output_of(options: Mapping[str, str]) -> str:
    output = options.get("output", OUTPUT_RECORDS)
    if output not in (OUTPUT_RECORDS, OUTPUT_QUARANTINE):
        raise InputError(
            f"option output={output!r}: use {OUTPUT_RECORDS!r} (default) or {OUTPUT_QUARANTINE!r}"
        )
    return output


def paths_of(options: Mapping[str, str], source: str) -> list[str]:
    """The input paths of a file source: option("paths") (JSON list) or option("path")."""
    raw = options.get(PATHS_OPTION)
    if raw:
        try:
            paths = json.loads(raw)
        except ValueError:
            paths = None
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise InputError(f"option paths={raw!r}: expected a JSON list of path strings")
        if paths:
            return paths
    single = options.get("path")
    if single:
        return [single]
    raise InputError(f"source {source}: no input path; give load(PATH) or option('path', PATH)")


def is_hidden(name: str) -> bool:
    """Names Spark, Hive and Hadoop skip: files in progress (`.x.inprogress`), `_SUCCESS`."""
    return name.startswith((".", "_"))


def walk_files(root: Path) -> list[Path]:
    """Every visible file under `root` (itself when a file), sorted, hidden names skipped at
    any depth (hidden directories too)."""
    if root.is_file():
        return [root]
    found: list[Path] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not is_hidden(d))
        found.extend(Path(directory) / name for name in sorted(filenames) if not is_hidden(name))
    return found


def require_exists(paths: Iterable[str], source: str) -> list[Path]:
    out = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError(f"{source} input {raw} does not exist")
        out.append(path)
    return out


@dataclass(frozen=True, slots=True)
class FileSplit(InputPartition):
    """One Spark partition of a file source: byte range [start, end) of a file (end -1: to
    the end), or several files read in order (`files`, segments of one partition that hold
    transactions)."""

    files: tuple[str, ...]
    start: int = 0
    end: int = -1
    #: the `__consumer_offsets` partition (segments); -1 when unknown
    partition: int = -1
    #: segments: some batch is transactional, so records go through transaction resolution
    transactional: bool = False


def quarantine_row(
    source: str,
    file: str | None,
    position: int | None,
    reason: str,
    error: str | None,
    raw: bytes | str | None = None,
) -> tuple[Any, ...]:
    """A row of QUARANTINE_SCHEMA; raw bytes are kept as text (bad UTF-8 replaced), cut to
    a readable size."""
    if isinstance(raw, bytes):
        raw = raw[:_RAW_LIMIT].decode("utf-8", "replace")
    elif raw is not None:
        raw = raw[:_RAW_LIMIT]
    return (source, file, position, reason, error, raw)


class RecordSink(Protocol):
    """What the file readers feed: `Collector` (records or quarantine rows) and
    `lake_input.LakeCollector` (compact's input)."""

    @property
    def rows(self) -> CanonicalRows: ...

    def add(self, canonical: dict[str, Any], file: str, position: int) -> None: ...

    def bad_input(
        self,
        file: str | None,
        position: int | None,
        reason: str,
        error: str | None,
        raw: bytes | str | None = None,
    ) -> None: ...

    @property
    def full(self) -> bool: ...

    def drain(self) -> Iterator[Any]: ...


def parse_line(line: bytes, file: str, number: int, collector: RecordSink) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError as error:
        collector.bad_input(file, number, "bad_json", str(error), line)
        return None
    if not isinstance(obj, dict):
        collector.bad_input(file, number, "bad_json", "not a JSON object", line)
        return None
    missing = [name for name in contract.REQUIRED if obj.get(name) is None]
    if missing:
        collector.bad_input(file, number, "missing_fields", f"no {', '.join(missing)}", line)
        return None
    try:
        return collector.rows.from_json(obj)
    except (ValueError, TypeError) as error:
        collector.bad_input(file, number, "bad_record", f"bytes field: {error}", line)
        return None


#: what Arrow (and the dict preparation before it) raises for a record it cannot hold
_CONVERSION_ERRORS: Final = (
    pa.ArrowException,
    TypeError,
    ValueError,
    OverflowError,
    KeyError,
    AttributeError,
)


@dataclass(slots=True)
class Collector:
    """Gathers one partition's canonical dicts and bad input, and yields what the read's
    output wants: Arrow batches of records, or quarantine rows. A record Arrow refuses (a
    hand-edited line with a wrong type) is quarantined as `bad_record`, in both outputs
    alike, so both agree on what was good."""

    rows: CanonicalRows
    source: str
    quarantine: bool
    pending: list[dict[str, Any]] = field(default_factory=list)
    #: (file, position) of each pending record, to locate the ones Arrow refuses
    where: list[tuple[str, int]] = field(default_factory=list)
    bad: list[tuple[Any, ...]] = field(default_factory=list)

    @classmethod
    def of(cls, schema: StructType, source: str, quarantine: bool) -> Collector:
        """The collector of a reader given `schema` (the quarantine schema when quarantining:
        records are still converted, to find the ones Arrow refuses)."""
        return cls(CanonicalRows(records_struct() if quarantine else schema), source, quarantine)

    def add(self, canonical: dict[str, Any], file: str, position: int) -> None:
        broken = contract.problem(canonical)
        if broken is not None:
            self.bad_input(file, position, broken.reason, broken.at(file, position))
            return
        self.pending.append(canonical)
        self.where.append((file, position))

    def bad_input(
        self,
        file: str | None,
        position: int | None,
        reason: str,
        error: str | None,
        raw: bytes | str | None = None,
    ) -> None:
        if self.quarantine:
            self.bad.append(quarantine_row(self.source, file, position, reason, error, raw))

    @property
    def full(self) -> bool:
        return len(self.pending) >= BATCH_RECORDS or len(self.bad) >= BATCH_RECORDS

    def drain(self) -> Iterator[Any]:
        pending, where = self.pending, self.where
        self.pending, self.where = [], []
        if pending:
            batch = self._batch(pending, where)
            if batch is not None and not self.quarantine:
                yield batch
        if self.bad:
            yield from self.bad
            self.bad = []

    def _batch(self, pending: list[dict[str, Any]], where: list[tuple[str, int]]) -> Any:
        return batch_or_quarantine(pending, where, self.rows.to_batch, self.bad_input)


def batch_or_quarantine(
    pending: list[dict[str, Any]],
    where: list[tuple[str, int]],
    convert: Callable[[list[dict[str, Any]]], pa.RecordBatch],
    bad_input: Callable[[str, int, str, str], None],
) -> pa.RecordBatch | None:
    """`convert(pending)`; when Arrow refuses some record (a hand-edited line with a wrong
    type), each record alone, the refused ones quarantined as `bad_record` at `where`."""
    try:
        return convert(pending)
    except _CONVERSION_ERRORS:
        pass
    good = []
    for row, (file, position) in zip(pending, where, strict=True):
        try:
            convert([row])
        except _CONVERSION_ERRORS as error:
            bad_input(file, position, "bad_record", f"{type(error).__name__}: {error}")
            continue
        good.append(row)
    return convert(good) if good else None
