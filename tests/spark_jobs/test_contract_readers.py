"""Every Spark reader keeps the record contract (decoder/contract.py): the transaction outcome
reaches `txn` whatever the file's format, version-1 files still read, and a record of a newer
schema version or of an unknown outcome is quarantined with its reason and position, never
read as a row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
import pytest

from offsetwatch.decoder import contract
from offsetwatch.decoder.avro import AvroCodec, avro_schema
from offsetwatch.decoder.canonical import dumps
from offsetwatch.spark_jobs.reader import read_lake_input, read_quarantine, read_records
from offsetwatch.spark_jobs.schema import CanonicalRows
from offsetwatch.spark_jobs.sources.kafka_decode import MessageDecoder
from offsetwatch.spark_jobs.sources.lake_input import BAD_COLUMN
from tests.spark_jobs.lake_records import commit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


def _v2(record: dict[str, Any], outcome: str | None = None, version: Any = 2) -> dict[str, Any]:
    return {**record, contract.TRANSACTION: outcome, contract.SCHEMA: version}


#: offset commits of group g, partition 0, at positions 1..: version 1 (no outcome field),
#: version 2 plain, aborted, pending and committed
GOOD = [
    commit("g", "orders", 0, 10, 1_000, 1),
    _v2(commit("g", "orders", 0, 20, 2_000, 2)),
    _v2(commit("g", "orders", 0, 30, 3_000, 3), contract.ABORTED),
    _v2(commit("g", "orders", 0, 40, 4_000, 4), contract.PENDING),
    _v2(commit("g", "orders", 0, 50, 5_000, 5), contract.COMMITTED),
]
EXPECTED_TXN = {1: None, 2: None, 3: "aborted", 4: "pending", 5: "committed"}
BROKEN = [
    _v2(commit("g", "orders", 0, 60, 6_000, 6), version=3),
    _v2(commit("g", "orders", 0, 70, 7_000, 7), "maybe"),
]


def _txn_by_offset(frame: DataFrame) -> dict[int, str | None]:
    rows = frame.where(frame["type"] == "offset_commit").select("offset", "txn").collect()
    return {r["offset"]: r["txn"] for r in rows}


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(dumps(r) + "\n" for r in records))
    return path


def test_json_lines_outcomes_reach_txn_and_broken_records_are_quarantined(
    spark: SparkSession, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    _jsonl(archive / "good.jsonl", GOOD)
    bad_file = _jsonl(archive / "mixed.jsonl", [GOOD[0] | {"offset": 100}, *BROKEN])
    records = read_records(spark, "archive", str(archive))
    assert _txn_by_offset(records) == {**EXPECTED_TXN, 100: None}
    quarantine = read_quarantine(spark, "archive", str(archive)).collect()
    found = sorted((Path(r.file).name, r.position, r.reason) for r in quarantine)
    assert found == [
        ("mixed.jsonl", 2, contract.REASON_NEWER_SCHEMA),
        ("mixed.jsonl", 3, contract.REASON_BAD_TRANSACTION),
    ]
    newer = next(r for r in quarantine if r.reason == contract.REASON_NEWER_SCHEMA)
    assert newer.error.startswith(f"{bad_file}:2: ")
    assert "schema_version 3" in newer.error and "upgrade offsetwatch" in newer.error


def test_compacts_input_fast_path_maps_the_outcome_and_quarantines_the_same(
    spark: SparkSession, tmp_path: Path
) -> None:
    """compact reads the archive through its own narrow fast path (Arrow): same answer."""
    archive = tmp_path / "archive"
    archive.mkdir()
    _jsonl(archive / "good.jsonl", GOOD)
    _jsonl(archive / "mixed.jsonl", [GOOD[0] | {"offset": 100}, *BROKEN])
    lake_input = read_lake_input(spark, "archive", str(archive))
    good = lake_input.where(lake_input[BAD_COLUMN].isNull())
    assert _txn_by_offset(good) == {**EXPECTED_TXN, 100: None}
    bad = lake_input.where(lake_input[BAD_COLUMN].isNotNull()).select(f"{BAD_COLUMN}.*")
    found = sorted((Path(r.file).name, r.position, r.reason) for r in bad.collect())
    assert found == [
        ("mixed.jsonl", 2, contract.REASON_NEWER_SCHEMA),
        ("mixed.jsonl", 3, contract.REASON_BAD_TRANSACTION),
    ]


def test_avro_files_keep_the_outcome(spark: SparkSession, tmp_path: Path) -> None:
    codec = AvroCodec()
    archive = tmp_path / "archive"
    archive.mkdir()
    codec.write_container(archive / "a.avro", [_v2(r, r.get(contract.TRANSACTION)) for r in GOOD])
    codec.write_container(archive / "newer.avro", [BROKEN[0]])
    assert _txn_by_offset(read_records(spark, "archive", str(archive))) == EXPECTED_TXN
    lake_input = read_lake_input(spark, "archive", str(archive))
    assert _txn_by_offset(lake_input.where(lake_input[BAD_COLUMN].isNull())) == EXPECTED_TXN
    reasons = [r.reason for r in read_quarantine(spark, "archive", str(archive)).collect()]
    assert reasons == [contract.REASON_NEWER_SCHEMA]


def test_the_republished_topic_refuses_what_the_contract_refuses() -> None:
    decoder = MessageDecoder("json", CanonicalRows())
    messages = [
        (None, dumps(record).encode(), 0, offset, 0)
        for offset, record in enumerate([GOOD[2], *BROKEN])
    ]
    decoded = decoder.decode(messages)  # type: ignore[arg-type]
    assert [record[contract.TRANSACTION] for _, record in decoded.records] == ["aborted"]
    assert [(r.offset, r.reason) for r in decoded.rejected] == [
        (1, contract.REASON_NEWER_SCHEMA),
        (2, contract.REASON_BAD_TRANSACTION),
    ]
    assert decoded.rejected[0].error.startswith("partition 0 offset 1: ")
    assert json.loads(messages[0][1])[contract.TRANSACTION] == "aborted"


def test_files_of_schema_version_one_still_read(spark: SparkSession, tmp_path: Path) -> None:
    """What offsetwatch 0.1 wrote: the exporter's Avro archive (the version-1 schema) and
    `decode`'s JSON lines, which had `transaction` only on transactional records."""
    codec = AvroCodec()
    old_schema = fastavro.parse_schema(avro_schema(contract.FIRST_SCHEMA_VERSION))
    archive = tmp_path / "archive"
    archive.mkdir()
    with (archive / "old.avro").open("wb") as out:
        fastavro.writer(out, old_schema, [codec.to_avro_dict(GOOD[0])])
    old_decode = [
        commit("g", "orders", 1, 11, 1_000, 11),
        {**commit("g", "orders", 1, 12, 2_000, 12), contract.TRANSACTION: contract.ABORTED},
    ]
    _jsonl(archive / "old-decode.jsonl", old_decode)
    expected = {1: None, 11: None, 12: "aborted"}
    assert _txn_by_offset(read_records(spark, "archive", str(archive))) == expected
    lake_input = read_lake_input(spark, "archive", str(archive))
    assert lake_input.where(lake_input[BAD_COLUMN].isNotNull()).count() == 0
    assert _txn_by_offset(lake_input) == expected
