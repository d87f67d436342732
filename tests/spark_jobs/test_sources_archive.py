"""The `archive` source: layout, hidden files, gzip, and bad lines / Avro blocks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.decoder.avro_wire import read_long
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.log_end import log_end_record
from offsetwatch.exporter.sinks import archive as exporter_archive
from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.spark_jobs.reader import InputError, read_quarantine, read_records
from offsetwatch.spark_jobs.sources.archive import _header_end
from tests.conformance_data import decode_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def _canonicals(conformance_dir: Path, count: int = 400) -> list[dict[str, Any]]:
    canonical = Canonical()
    return [canonical.to_dict(r) for r in decode_run(conformance_dir, "main")[:count]]


def _write(target: Path, records: list[dict[str, Any]], fmt: str, **kwargs: Any) -> list[Path]:
    with ArchiveWriter(target, fmt, **kwargs) as writer:  # type: ignore[arg-type]
        for record in records:
            writer.write(record)
    return sorted(p for p in target.rglob("offsetwatch-*") if p.is_file())


def _blocks(path: Path) -> list[int]:
    """Start positions of the Avro blocks of a container file."""
    data = path.read_bytes()
    position, starts = _header_end(data), []
    while position < len(data):
        starts.append(position)
        _count, body = read_long(data, position)
        size, body = read_long(data, body)
        position = body + size + 16
    return starts


def _offsets(spark: SparkSession, path: Path) -> list[tuple[int, int]]:
    rows = read_records(spark, "archive", str(path)).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


def test_hive_layout_hidden_files_and_gzip(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path
) -> None:
    records = _canonicals(conformance_dir)
    files = _write(tmp_path, records, "jsonl", gzip=True)
    assert all("date=" in str(f) and "hour=" in str(f) for f in files)
    hour = files[0].parent
    (hour / ".offsetwatch-0000000000000-000099.jsonl.inprogress").write_text("torn {\n")
    (hour / "_SUCCESS").write_text("")
    expected = sorted((r["partition"], r["offset"]) for r in records)
    assert _offsets(spark, tmp_path) == expected
    assert read_quarantine(spark, "archive", str(tmp_path)).count() == 0


def test_bad_json_lines_are_quarantined_with_line_numbers(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path
) -> None:
    records = _canonicals(conformance_dir, 20)
    (file,) = _write(tmp_path, records, "jsonl")
    lines = file.read_text().splitlines()
    lines.insert(3, '{"type": "offset_commit", "partition": 0, "offset": "not a number"')
    lines.insert(5, "not json at all")
    lines.insert(7, '{"key_type": 1}')
    file.write_text("\n".join(lines) + "\n")

    assert len(_offsets(spark, tmp_path)) == len(records)
    bad = sorted(
        (r.reason, r.position) for r in read_quarantine(spark, "archive", str(tmp_path)).collect()
    )
    assert bad == [("bad_json", 4), ("bad_json", 6), ("missing_fields", 8)]


def test_corrupt_avro_blocks_are_skipped(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exporter_archive, "AVRO_BLOCK_BYTES", 2048)  # many small blocks
    records = _canonicals(conformance_dir)
    (file,) = _write(tmp_path, records, "avro")
    blocks = _blocks(file)
    assert len(blocks) > 6
    data = bytearray(file.read_bytes())
    data[blocks[1] + 10] ^= 0xFF  # inside the deflated data: the block does not decode
    data[blocks[4] - 3] ^= 0xFF  # the sync marker before block 4: framing lost, found again
    file.write_bytes(bytes(data[: blocks[-1] + 5]))  # torn inside the last block

    rows = _offsets(spark, tmp_path)
    assert 0 < len(rows) < len(records)
    bad = sorted(
        (r.reason, r.position) for r in read_quarantine(spark, "archive", str(tmp_path)).collect()
    )
    assert bad == [
        ("bad_avro_block", blocks[1]),
        ("bad_avro_block", blocks[3]),
        ("truncated", blocks[-1]),
    ]


def test_avro_and_jsonl_together(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path
) -> None:
    records = _canonicals(conformance_dir)
    _write(tmp_path / "a", records[:200], "jsonl")
    _write(tmp_path / "b", records[200:], "avro")
    assert _offsets(spark, tmp_path) == sorted((r["partition"], r["offset"]) for r in records)


def test_missing_or_empty_input_is_an_input_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_records(spark, "archive", str(tmp_path / "nope"))
    (tmp_path / "date=2026-01-01").mkdir()
    (tmp_path / "date=2026-01-01" / ".x.jsonl.inprogress").write_text("{}\n")
    with pytest.raises(InputError, match="no archive files"):
        read_records(spark, "archive", str(tmp_path))
    with pytest.raises(InputError, match="unknown source"):
        read_records(spark, "parquet", str(tmp_path))


def test_log_end_samples_read_the_same_from_jsonl_and_avro(
    spark: SparkSession, tmp_path: Path
) -> None:
    samples = [
        log_end_record(f"orders-{n % 3}", n % 4, 1000 + n, 1_795_291_757_000 + n, n)
        for n in range(50)
    ]
    _write(tmp_path / "jsonl", samples, "jsonl")
    _write(tmp_path / "avro", samples, "avro")
    columns = ["type", "offset", "key.topic", "key.partition", "value.log_end_offset"]
    frames = [
        sorted(read_records(spark, "archive", str(tmp_path / fmt)).select(*columns).collect())
        for fmt in ("jsonl", "avro")
    ]
    assert frames[0] == frames[1]
    assert [tuple(r) for r in frames[0]][:1] == [("log_end", 0, "orders-0", 0, 1000)]
