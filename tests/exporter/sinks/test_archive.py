"""Archive files for Spark: layout, formats, rolling, hidden in-progress files, crash salvage."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from offsetwatch.decoder import Canonical
from offsetwatch.decoder.avro import AvroCodec
from offsetwatch.decoder.canonical import dumps
from offsetwatch.exporter.sinks.archive import INPROGRESS, ArchiveError, ArchiveWriter, partition_of
from tests.conformance_data import decode_run

Canon = dict[str, Any]
FINAL_NAME = re.compile(
    r"date=(\d{4}-\d{2}-\d{2})/hour=(\d{2})/offsetwatch-(\d{13})-(\d{6})\.(jsonl|jsonl\.gz|avro)$"
)
HOUR_MS = 3_600_000


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def canon(conformance_dir: Path) -> list[Canon]:
    canonical = Canonical()
    return [canonical.to_dict(record) for record in decode_run(conformance_dir)]


def spread(records: list[Canon], start_ms: int = 1_767_225_000_000) -> list[Canon]:
    """The records with timestamps moved 20 minutes apart: several date/hour partitions."""
    out = []
    for i, record in enumerate(records):
        copy = dict(record)
        copy["timestamp"] = start_ms + i * 20 * 60_000
        out.append(copy)
    return out


def published(directory: Path) -> list[Path]:
    """Final files, in name order (time order within a partition)."""
    return sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith("."))


def hidden(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob(".*") if p.is_file())


def read_file(path: Path) -> Iterator[Canon]:
    if path.name.endswith(".avro"):
        yield from AvroCodec().read_container(path)
    elif path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)
    else:
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)


def as_json(record: Canon) -> Any:
    """What a JSON reader sees (bytes as base64): the comparison form for every format."""
    return json.loads(dumps(record))


def read_all(directory: Path) -> list[Canon]:
    return [r for path in published(directory) for r in read_file(path)]


def by_position(records: list[Canon]) -> list[Any]:
    return sorted((as_json(r) for r in records), key=lambda r: (r["partition"], r["offset"]))


# --------------------------------------------------------------------------------- formats


@pytest.mark.parametrize(
    ("fmt", "use_gzip", "avro_codec"),
    [
        ("jsonl", False, "deflate"),
        ("jsonl", True, "deflate"),
        ("avro", False, "deflate"),
        ("avro", False, "snappy"),
        ("avro", False, "null"),
    ],
)
def test_every_record_lands_in_its_hour_partition(
    tmp_path: Path, canon: list[Canon], fmt: Any, use_gzip: bool, avro_codec: Any
) -> None:
    records = spread(canon[:90])  # 30 hours, over a date boundary
    with ArchiveWriter(tmp_path, fmt, gzip=use_gzip, avro_codec=avro_codec) as writer:
        for record in records:
            writer.write(record)
        assert writer.records_written == len(records)
    assert writer.files_completed == len(published(tmp_path))
    assert hidden(tmp_path) == []

    seen = []
    for path in published(tmp_path):
        match = FINAL_NAME.search(path.relative_to(tmp_path).as_posix())
        assert match, path
        date, hour, first_ts, _seq, extension = match.groups()
        assert extension == ("avro" if fmt == "avro" else "jsonl.gz" if use_gzip else "jsonl")
        rows = list(read_file(path))
        assert rows
        assert int(first_ts) == rows[0]["timestamp"]
        for row in rows:
            assert partition_of(row["timestamp"]) == (date, hour)
        seen.extend(rows)
    assert by_position(seen) == by_position(records)
    assert {p.parent.parent.name for p in published(tmp_path)} == {
        "date=2025-12-31",
        "date=2026-01-01",
        "date=2026-01-02",
    }


def test_avro_files_are_standard_container_files(tmp_path: Path, canon: list[Canon]) -> None:
    with ArchiveWriter(tmp_path, "avro") as writer:
        for record in canon:
            writer.write(record)
    (path,) = published(tmp_path)
    with path.open("rb") as data:
        reader = fastavro.reader(data)
        schema: Any = reader.writer_schema
        assert reader.codec == "deflate"
        assert schema["name"] == "offsetwatch.CanonicalRecord"
        assert sum(1 for _ in reader) == len(canon)
    # and they give back the canonical records exactly
    assert list(read_file(path)) == canon


def test_jsonl_lines_are_the_canonical_json(tmp_path: Path, canon: list[Canon]) -> None:
    with ArchiveWriter(tmp_path) as writer:
        for record in canon:
            writer.write(record)
    (path,) = published(tmp_path)
    assert path.read_text(encoding="utf-8").splitlines() == [dumps(r) for r in canon]


def test_names_sort_by_time_within_a_partition(tmp_path: Path, canon: list[Canon]) -> None:
    hour_start = 1_767_225_600_000  # 2026-01-01T00:00Z
    records = []
    for i, record in enumerate(canon[:400]):
        copy = dict(record)
        copy["timestamp"] = hour_start + i * 1000
        records.append(copy)
    with ArchiveWriter(tmp_path, roll_bytes=20_000) as writer:
        for record in records:
            writer.write(record)
    files = published(tmp_path)
    assert len(files) > 3
    assert {f.parent.relative_to(tmp_path).as_posix() for f in files} == {"date=2026-01-01/hour=00"}
    in_name_order = [r["timestamp"] for f in files for r in read_file(f)]
    assert in_name_order == sorted(in_name_order)


# --------------------------------------------------------------------------------- rolling


def test_roll_by_size(tmp_path: Path, canon: list[Canon]) -> None:
    roll_bytes = 50_000
    records = [dict(r, timestamp=1_767_225_600_000) for r in canon]
    with ArchiveWriter(tmp_path, roll_bytes=roll_bytes) as writer:
        for record in records:
            writer.write(record)
    files = published(tmp_path)
    assert len(files) > 5
    longest_line = max(len(dumps(r).encode()) + 1 for r in records)
    for path in files:
        assert path.stat().st_size < roll_bytes + longest_line
    assert by_position(read_all(tmp_path)) == by_position(records)


def test_roll_by_age_and_nothing_visible_before(tmp_path: Path, canon: list[Canon]) -> None:
    clock = FakeClock()
    rolled: list[tuple[Path, int]] = []
    writer = ArchiveWriter(
        tmp_path, roll_seconds=600, clock=clock, on_roll=lambda p, n: rolled.append((p, n))
    )
    record = dict(canon[0], timestamp=1_767_225_600_000)
    for _ in range(3):
        writer.write(record)
    writer.flush()
    # readers see nothing yet: the only file is hidden and marked in progress
    assert published(tmp_path) == []
    (temp,) = hidden(tmp_path)
    assert temp.name.startswith(".offsetwatch-") and temp.name.endswith(INPROGRESS)
    assert len(temp.read_bytes().splitlines()) == 3

    clock.now += 599
    assert writer.roll_expired() == []
    clock.now += 1
    (path,) = writer.roll_expired()
    assert rolled == [(path, 3)]
    assert published(tmp_path) == [path]
    assert hidden(tmp_path) == []

    # a write to an expired file rolls it first
    writer.write(record)
    clock.now += 700
    writer.write(record)
    assert len(published(tmp_path)) == 2
    writer.close()
    assert len(published(tmp_path)) == 3
    assert writer.records_written == 5
    assert writer.files_completed == 3


def test_open_files_are_bounded(tmp_path: Path, canon: list[Canon]) -> None:
    base = 1_767_225_600_000
    records = [dict(r, timestamp=base + (i % 3) * HOUR_MS) for i, r in enumerate(canon[:30])]
    with ArchiveWriter(tmp_path, max_open_files=2) as writer:
        for record in records:
            writer.write(record)
            assert writer.open_files <= 2
    hours = {p.parent.name for p in published(tmp_path)}
    assert hours == {"hour=00", "hour=01", "hour=02"}
    assert by_position(read_all(tmp_path)) == by_position(records)


def test_unknown_timestamp_is_filed_under_now(tmp_path: Path, canon: list[Canon]) -> None:
    clock = FakeClock(1_767_225_600.0 + 5 * 3600)
    with ArchiveWriter(tmp_path, clock=clock) as writer:
        writer.write(dict(canon[0], timestamp=-1))
    (path,) = published(tmp_path)
    assert path.parent.relative_to(tmp_path).as_posix() == "date=2026-01-01/hour=05"


def test_restart_never_overwrites_a_file(tmp_path: Path, canon: list[Canon]) -> None:
    record = dict(canon[0], timestamp=1_767_225_600_000)
    for _ in range(3):  # each "restart" writes a file with the same first timestamp
        with ArchiveWriter(tmp_path) as writer:
            writer.write(record)
    files = published(tmp_path)
    assert len(files) == 3
    assert len(read_all(tmp_path)) == 3


def test_misuse(tmp_path: Path, canon: list[Canon]) -> None:
    with pytest.raises(ArchiveError, match="jsonl or avro"):
        ArchiveWriter(tmp_path, "parquet")  # type: ignore[arg-type]
    with pytest.raises(ArchiveError, match="gzip applies to the jsonl format only"):
        ArchiveWriter(tmp_path, "avro", gzip=True)
    writer = ArchiveWriter(tmp_path)
    writer.close()
    writer.close()
    with pytest.raises(ArchiveError, match="closed"):
        writer.write(canon[0])


# --------------------------------------------------------------------------------- crashes


FORMATS = [("jsonl", False), ("jsonl", True), ("avro", False)]


def crashed_writer(tmp_path: Path, fmt: Any, use_gzip: bool, records: list[Canon]) -> Path:
    """Write the records, flush to disk and abandon the writer, as a killed process would."""
    crashed = ArchiveWriter(tmp_path, fmt, gzip=use_gzip)
    for record in records:
        crashed.write(record)
    crashed.flush(fsync=True)
    (temp,) = hidden(tmp_path)
    return temp


@pytest.mark.parametrize(("fmt", "use_gzip"), FORMATS)
def test_crash_leftovers_are_salvaged_at_start(
    tmp_path: Path, canon: list[Canon], fmt: Any, use_gzip: bool
) -> None:
    records = [dict(r, timestamp=1_767_225_600_000 + i) for i, r in enumerate(canon[:400])]
    crashed = ArchiveWriter(tmp_path, fmt, gzip=use_gzip)
    for record in records[:200]:
        crashed.write(record)
    crashed.flush(fsync=True)
    (temp,) = hidden(tmp_path)
    flushed = temp.stat().st_size
    for record in records[200:]:
        crashed.write(record)
    crashed.flush(fsync=True)
    # the process died while the second half was reaching the disk: only part of it made it
    with temp.open("r+b") as torn:
        torn.truncate(flushed + (temp.stat().st_size - flushed) // 2)

    writer = ArchiveWriter(tmp_path, fmt, gzip=use_gzip)
    (path,) = writer.recovered
    assert path == temp.with_name(temp.name[1 : -len(INPROGRESS)])
    assert hidden(tmp_path) == []
    kept = [as_json(r) for r in read_file(path)]
    assert 200 <= len(kept) < 400
    assert kept == [as_json(r) for r in records[: len(kept)]]
    writer.close()


@pytest.mark.parametrize(("fmt", "use_gzip"), FORMATS)
def test_garbage_after_the_flushed_records_is_dropped(
    tmp_path: Path, canon: list[Canon], fmt: Any, use_gzip: bool
) -> None:
    records = [dict(r, timestamp=1_767_225_600_000 + i) for i, r in enumerate(canon[:200])]
    temp = crashed_writer(tmp_path, fmt, use_gzip, records)
    with temp.open("ab") as tail:
        tail.write(b'{"type":"offset_commit","key_ty\n\x00\x00\x02\x9a\x17junk\n' * 3)
    writer = ArchiveWriter(tmp_path, fmt, gzip=use_gzip)
    assert len(writer.recovered) == 1
    assert hidden(tmp_path) == []
    assert by_position(read_all(tmp_path)) == by_position(records)


def test_a_leftover_without_a_complete_record_is_dropped(tmp_path: Path) -> None:
    directory = tmp_path / "date=2026-01-01" / "hour=00"
    directory.mkdir(parents=True)
    (directory / f".offsetwatch-1767225600000-000000.jsonl{INPROGRESS}").write_bytes(b'{"ty')
    writer = ArchiveWriter(tmp_path)
    assert writer.recovered == []
    assert hidden(tmp_path) == [] and published(tmp_path) == []
