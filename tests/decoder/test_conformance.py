"""Every record a real Kafka 4.0.0 broker wrote: decode, re-encode, and render like Kafka's tools.

One test per sub-run of ../shared/conformance/kafka-4.0.0 (not per record); an assertion lists
the first mismatches with their partition/offset so a failure is actionable.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.decoder import Codec, DecodeError, KafkaJson
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from tests.decoder.strategies import CONFORMANCE_RUNS, RealRecord, real_records, run_info

SHOW = 5  # mismatches quoted in a failure message


def _where(r: RealRecord) -> str:
    return f"{r.run} p{r.partition}@{r.offset}"


def _fail_message(what: str, problems: list[str]) -> str:
    head = "\n  ".join(problems[:SHOW])
    return f"{len(problems)} records: {what}:\n  {head}"


def _decode_all(records: tuple[RealRecord, ...]) -> list[tuple[RealRecord, Any]]:
    codec = Codec()
    decoded = []
    problems = []
    for r in records:
        try:
            decoded.append((r, codec.decode(r.key, r.value, r.partition, r.offset, r.timestamp)))
        except DecodeError as error:
            value = None if r.value is None else r.value.hex()
            problems.append(f"{_where(r)}: {error} (key {r.key.hex()} value {value})")
    assert not problems, _fail_message("decode failed", problems)
    return decoded


def test_every_documented_sub_run_is_present(conformance_dir: Path) -> None:
    on_disk = {p.parent.name for p in (conformance_dir / "runs").glob("*/records.jsonl")}
    assert on_disk == set(CONFORMANCE_RUNS)


@pytest.mark.parametrize("run", CONFORMANCE_RUNS)
def test_decode_and_reencode(conformance_dir: Path, run: str) -> None:
    records = real_records(conformance_dir, run)
    assert records
    codec = Codec()
    problems = []
    for r, record in _decode_all(records):
        assert isinstance(record, Record), f"{_where(r)}: unknown key type {record.key_type}"
        assert (record.partition, record.offset, record.timestamp) == (
            r.partition,
            r.offset,
            r.timestamp,
        )
        key, value = codec.encode(record)
        if key != r.key:
            problems.append(f"{_where(r)}: key {key.hex()} != {r.key.hex()}")
        if value != r.value:
            got = None if value is None else value.hex()
            want = None if r.value is None else r.value.hex()
            problems.append(f"{_where(r)}: value {got} != {want}")
    assert not problems, _fail_message("encode is not byte-identical", problems)


@pytest.mark.parametrize("run", CONFORMANCE_RUNS)
def test_dump_log_json_matches_kafka(conformance_dir: Path, run: str) -> None:
    kafka = KafkaJson()
    problems = []
    for r, record in _decode_all(real_records(conformance_dir, run)):
        # compare as parsed JSON, the way the expected objects were stored
        got = json.loads(json.dumps(kafka.dump_log(record)))
        if got != r.expected:
            problems.append(
                f"{_where(r)}:\n    got      {json.dumps(got)}\n"
                f"    expected {json.dumps(r.expected)}"
            )
    assert not problems, _fail_message("dump-log JSON differs", problems)


@pytest.mark.parametrize("run", CONFORMANCE_RUNS)
def test_console_formatter_json_matches_kafka(conformance_dir: Path, run: str) -> None:
    kafka = KafkaJson()
    problems = []
    printed = 0
    for r, record in _decode_all(real_records(conformance_dir, run)):
        got = kafka.console(record)
        if got is not None:
            got = json.loads(json.dumps(got))
            printed += 1
        if got != r.formatter:
            problems.append(
                f"{_where(r)}:\n    got      {json.dumps(got)}\n"
                f"    expected {json.dumps(r.formatter)}"
            )
    assert not problems, _fail_message("console formatter JSON differs", problems)
    assert printed == sum(1 for r in real_records(conformance_dir, run) if r.formatter is not None)


@pytest.mark.parametrize("run", CONFORMANCE_RUNS)
def test_counts_by_key_type_and_value_version(conformance_dir: Path, run: str) -> None:
    info = run_info(conformance_dir, run)
    decoded = _decode_all(real_records(conformance_dir, run))
    counts: Counter[str] = Counter()
    for _, record in decoded:
        version = "tombstone" if record.value is None else str(record.value_version)
        counts[f"{record.key_type}/{version}"] += 1
    assert dict(counts) == info["records_by_key_type_and_value_version"]
    by_type = Counter(str(record.key_type) for _, record in decoded)
    assert dict(by_type) == info["records_by_key_type"]
    assert len(decoded) == info["records"]


def test_every_sub_run_renders_canonical_json(conformance_dir: Path) -> None:
    canonical = Canonical()
    for _, record in _decode_all(real_records(conformance_dir)):
        json.loads(canonical.to_json(record))


# -- metadata with a trailing NUL (confluent-kafka quirk) --------------------------------------

NUL_GROUP = "admin-alter-existing-6d94"


def _latest_commits(conformance_dir: Path, group: str) -> dict[tuple[str, int], Record]:
    latest: dict[tuple[str, int], Record] = {}
    for _, record in _decode_all(real_records(conformance_dir, "main")):
        key = record.key
        if isinstance(key, OffsetCommitKey) and key.group == group and record.value is not None:
            latest[(key.topic, key.partition)] = record
    return latest


def test_trailing_nul_metadata_is_shown_faithfully(conformance_dir: Path) -> None:
    latest = _latest_commits(conformance_dir, NUL_GROUP)
    with_nul = [rec for rec in latest.values() if "\x00" in getattr(rec.value, "metadata", "")]
    assert with_nul, f"no NUL-terminated metadata found for {NUL_GROUP}"
    record = with_nul[0]
    assert isinstance(record.value, OffsetCommitValue)
    assert record.value.metadata == "admin-reset\x00"
    kafka = KafkaJson()
    dump = kafka.dump_log(record)
    assert isinstance(dump["payload"], dict)
    assert dump["payload"]["data"]["metadata"] == "admin-reset\x00"
    console = kafka.console(record)
    assert console is not None
    assert console["value"]["data"]["metadata"] == "admin-reset\x00"
    # in JSON text the NUL is an escape, not dropped or truncated
    assert '"admin-reset\\u0000"' in json.dumps(dump)
    assert '"metadata":"admin-reset\\u0000"' in Canonical().to_json(record)
    # and the bytes survive: 12 bytes of metadata, re-encoded identically
    _, value = Codec().encode(record)
    assert value is not None and b"\x00\x0cadmin-reset\x00" in value


def test_nul_metadata_agrees_with_offset_fetch(conformance_dir: Path) -> None:
    """groups-final.json (OffsetFetch v5) returned the same strings, NUL included."""
    final = json.loads((conformance_dir / "runs" / "main" / "groups-final.json").read_text())
    checked = 0
    for group, entry in final.items():
        rows = [row for row in entry.get("offsets", []) if "\x00" in (row.get("metadata") or "")]
        if not rows:
            continue
        latest = _latest_commits(conformance_dir, group)
        for row in rows:
            record = latest[(row["topic"], row["partition"])]
            assert isinstance(record.value, OffsetCommitValue)
            assert record.value.metadata == row["metadata"], (group, row)
            assert len(record.value.metadata.encode()) == row["metadata_bytes"]
            checked += 1
    assert checked, "groups-final.json holds no NUL-terminated metadata"
