"""The archive's `lake` output (compact's single scan) against the general path.

The fast path (Arrow's JSON reader on blocks of lines) must give exactly the rows that
`lake_input(read_records(...))` gives and exactly the quarantine rows the `quarantine` output
gives, whatever the lines hold: group records, tombstones, bad lines, blank lines, two objects
on one line, gzip.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.decoder.canonical import Canonical, dumps
from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.spark_jobs.reader import lake_input, read_lake_input, read_quarantine, read_records
from offsetwatch.spark_jobs.sources import lake_input as lake_input_module
from offsetwatch.spark_jobs.sources.lake_input import BAD_COLUMN, LakeCollector, read_jsonl_lake
from tests.conformance_data import decode_run

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


def _canonicals(conformance_dir: Path, run: str) -> list[dict[str, Any]]:
    canonical = Canonical()
    return [canonical.to_dict(r) for r in decode_run(conformance_dir, run)]


def _normal(row: dict[str, Any], key_fields: list[str], value_fields: list[str]) -> Any:
    """A row comparable across paths: JSON texts parsed, a null key/value struct as a struct
    of nulls (the general path builds the narrow struct even when the record has none)."""
    out = dict(row)
    for name, fields in (("key", key_fields), ("value", value_fields)):
        out[name] = out[name] or dict.fromkeys(fields)
    for name in ("key_json", "value_json"):
        out[name] = None if out[name] is None else json.loads(out[name])
    return json.dumps(out, sort_keys=True)


def _records(frame: DataFrame) -> list[Any]:
    good = frame.where(frame[BAD_COLUMN].isNull()).drop(BAD_COLUMN)
    key_fields = good.schema["key"].dataType.fieldNames()  # type: ignore[attr-defined]
    value_fields = good.schema["value"].dataType.fieldNames()  # type: ignore[attr-defined]
    return sorted(
        _normal(r.asDict(recursive=True), key_fields, value_fields) for r in good.collect()
    )


def _bad(frame: DataFrame) -> list[tuple[str, int, str]]:
    rows = frame.where(frame[BAD_COLUMN].isNotNull()).select(f"{BAD_COLUMN}.*").collect()
    return sorted((Path(r.file).name, r.position, r.reason) for r in rows)


@pytest.mark.parametrize(("run", "fmt"), [("main", "jsonl"), ("main", "avro"), ("expiry", "jsonl")])
def test_same_rows_as_the_general_path(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path, run: str, fmt: str
) -> None:
    """Conformance runs hold every group record type, tombstones and transactional commits."""
    with ArchiveWriter(tmp_path, fmt, gzip=fmt == "jsonl") as writer:  # type: ignore[arg-type]
        for record in _canonicals(conformance_dir, run):
            writer.write(record)
    fast = read_lake_input(spark, "archive", str(tmp_path))
    general = lake_input(read_records(spark, "archive", str(tmp_path)))
    assert _records(fast) == _records(general)
    assert len(_records(fast)) > 100
    assert _bad(fast) == []


def test_bad_lines_are_quarantined_like_the_quarantine_output(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path
) -> None:
    records = [r for r in _canonicals(conformance_dir, "main") if r["type"] == "offset_commit"]
    lines = [dumps(r) for r in records[:50]]
    lines[3] = "not json"
    lines[7] = '{"type": "offset_commit", "offset": 9}'  # no partition
    lines[11] = ""
    lines[12] = "   "
    lines[20] = lines[21][:-1] + "," + '"value": {"offset": "seven"}}'  # wrong type
    lines[30] = "[1, 2]"
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines) + "\n")

    fast = read_lake_input(spark, "archive", str(path))
    expected_bad = sorted(
        (Path(r.file).name, r.position, r.reason)
        for r in read_quarantine(spark, "archive", str(path)).collect()
    )
    assert _bad(fast) == expected_bad
    assert {position for _, position, _ in expected_bad} == {4, 8, 21, 31}
    good = fast.where(fast[BAD_COLUMN].isNull()).select("partition", "offset").collect()
    kept = {
        (r["partition"], r["offset"])
        for i, r in enumerate(records[:50])
        if i + 1 not in {4, 8, 12, 13, 21, 31}
    }
    assert {(r.partition, r.offset) for r in good} == kept


def _read_in_process(path: Path) -> tuple[list[tuple[int, int]], list[tuple[int | None, str]]]:
    collector = LakeCollector("archive")
    good: list[tuple[int, int]] = []
    bad: list[tuple[int | None, str]] = []
    for batch in read_jsonl_lake(str(path), collector):
        for row in batch.to_pylist():
            if row[BAD_COLUMN] is None:
                good.append((row["partition"], row["offset"]))
            else:
                bad.append((row[BAD_COLUMN]["position"], row[BAD_COLUMN]["reason"]))
    return sorted(good), sorted(bad, key=str)


def test_blocks_fall_back_alone_and_keep_line_numbers(
    conformance_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small blocks: the block with the bad line is parsed line by line, the others fast,
    and line numbers run on across blocks. In process: no Spark worker sees the patch."""
    monkeypatch.setattr(lake_input_module, "BLOCK_BYTES", 2048)
    records = _canonicals(conformance_dir, "main")
    lines = [dumps(r) for r in records]
    lines[len(lines) // 2] = "{broken"
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines))  # no newline at the end

    good, bad = _read_in_process(path)
    assert bad == [(len(lines) // 2 + 1, "bad_json")]
    kinds = lake_input_module.LAKE_RECORD_TYPES
    expected = sorted(
        (r["partition"], r["offset"])
        for i, r in enumerate(records)
        if r["type"] in kinds and i != len(lines) // 2
    )
    assert good == expected


def test_a_torn_gzip_keeps_what_came_before(conformance_dir: Path, tmp_path: Path) -> None:
    records = [r for r in _canonicals(conformance_dir, "main") if r["type"] == "offset_commit"]
    data = gzip.compress(("\n".join(dumps(r) for r in records) + "\n").encode())
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(data[: len(data) - 20])
    good, bad = _read_in_process(path)
    assert [reason for _, reason in bad] == ["bad_file"]
    assert len(good) < len(records)
