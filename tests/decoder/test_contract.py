"""The record contract: one envelope, its schema version, the transaction outcome, and what a
reader refuses (decoder/contract.py)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import fastavro
import pytest

from offsetwatch.decoder import Canonical, Codec, contract
from offsetwatch.decoder.avro import AvroCodec, avro_schema
from offsetwatch.decoder.log_end import log_end_record

REPO = Path(__file__).resolve().parents[2]
# an offset commit (key v1, value v3) of group "g1", topic "t", partition 0, offset 100
KEY = bytes.fromhex("00010002673100017400000000")
VALUE = bytes.fromhex("0003 0000000000000064 ffffffff 0000 0000018bcfe56800".replace(" ", ""))


def _commit(transaction: str | None = None) -> dict[str, object]:
    record = Codec().decode(KEY, VALUE, partition=4, offset=7, timestamp=1)
    return Canonical().to_dict(record, transaction)


def test_every_writer_of_the_envelope_uses_the_contract_order() -> None:
    assert list(_commit()) == list(contract.ENVELOPE)
    assert list(log_end_record("t", 0, 5, 1, 1)) == list(contract.ENVELOPE)
    avro_top = [f["name"] for f in avro_schema()["fields"]]
    assert avro_top == list(contract.ENVELOPE)


def test_records_carry_the_schema_version_and_the_outcome() -> None:
    out = _commit(contract.ABORTED)
    assert out[contract.SCHEMA] == contract.SCHEMA_VERSION == 2
    assert out[contract.TRANSACTION] == "aborted"
    assert json.loads(Canonical().to_json(Codec().decode(KEY, VALUE), "pending"))[
        "transaction"
    ] == ("pending")
    assert _commit()[contract.TRANSACTION] is None


@pytest.mark.parametrize("outcome", [None, *contract.OUTCOMES])
def test_avro_keeps_the_outcome(outcome: str | None) -> None:
    codec = AvroCodec()
    record = _commit(outcome)
    assert codec.decode(codec.encode(record)) == record
    buffer = io.BytesIO()
    codec.write_container(buffer, [record])
    buffer.seek(0)
    assert list(codec.read_container(buffer)) == [record]


def _version_one(record: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in record.items() if k not in (contract.TRANSACTION, contract.SCHEMA)}


def test_bodies_and_files_of_schema_version_one_still_read() -> None:
    """What offsetwatch 0.1 wrote (the republished topic's bodies, archive files)."""
    codec = AvroCodec()
    old_schema = fastavro.parse_schema(avro_schema(contract.FIRST_SCHEMA_VERSION))
    old = _version_one(_commit())
    body = io.BytesIO()
    fastavro.schemaless_writer(body, old_schema, codec.to_avro_dict(old))
    expected = {**old, contract.TRANSACTION: None, contract.SCHEMA: 1}
    assert codec.decode(body.getvalue()) == expected
    container = io.BytesIO()
    fastavro.writer(container, old_schema, [codec.to_avro_dict(old)])
    container.seek(0)
    assert list(codec.read_container(container)) == [expected]


def test_the_checked_in_avro_schema_of_version_one_is_what_0_1_wrote() -> None:
    """The v1 schema is the v2 schema without the two later fields (nothing else moved)."""
    first = avro_schema(contract.FIRST_SCHEMA_VERSION)["fields"]
    now = avro_schema()["fields"]
    assert now[: len(first)] == first
    assert [f["name"] for f in now[len(first) :]] == [contract.TRANSACTION, contract.SCHEMA]


def test_a_reader_accepts_what_the_contract_allows() -> None:
    assert contract.problem(_commit()) is None
    assert contract.problem(_version_one(_commit())) is None  # version 1
    for outcome in contract.OUTCOMES:
        assert contract.problem(_commit(outcome)) is None


def test_a_newer_schema_version_is_refused_in_one_line_naming_file_and_position() -> None:
    found = contract.problem({**_commit(), contract.SCHEMA: 3})
    assert found is not None and found.reason == contract.REASON_NEWER_SCHEMA
    line = found.at("archive/x.jsonl", 12)
    assert "\n" not in line
    assert re.match(r"archive/x\.jsonl:12: .*schema_version 3.*upgrade offsetwatch", line)


@pytest.mark.parametrize("outcome", ["none", "COMMITTED", "txn", 1, True])
def test_an_unknown_outcome_is_refused(outcome: object) -> None:
    found = contract.problem({**_commit(), contract.TRANSACTION: outcome})
    assert found is not None and found.reason == contract.REASON_BAD_TRANSACTION


@pytest.mark.parametrize("version", [0, -1, "2", 2.0, True])
def test_a_bad_schema_version_is_refused(version: object) -> None:
    found = contract.problem({**_commit(), contract.SCHEMA: version})
    assert found is not None and found.reason == contract.REASON_BAD_SCHEMA


def test_only_committed_and_plain_records_count() -> None:
    assert contract.counts(None) and contract.counts(contract.COMMITTED)
    assert not contract.counts(contract.ABORTED) and not contract.counts(contract.PENDING)


def test_no_other_module_spells_the_outcome_field() -> None:
    """The seam bug of issue 13: `decode` wrote "transaction", Spark read "txn". The field's
    name is written once, in the contract."""
    spelled = []
    for folder in ("decoder", "exporter", "spark_jobs", "offsetwatch"):
        for path in (REPO / folder).rglob("*.py"):
            if path.is_symlink() or any(p.is_symlink() for p in path.parents if p != REPO):
                continue
            if path.name == "contract.py":
                continue
            text = path.read_text(encoding="utf-8")
            if re.search(r"""["']transaction["']\s*[:\]]""", text):
                spelled.append(str(path.relative_to(REPO)))
    assert spelled == []


def test_the_documented_envelope_is_the_contract() -> None:
    """docs/canonical-schema.md's envelope table lists exactly the contract's fields, in order."""
    text = (REPO / "docs" / "canonical-schema.md").read_text(encoding="utf-8")
    table = text.split("## The envelope", 1)[1].split("## Conventions", 1)[0]
    names = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE)
    assert names == list(contract.ENVELOPE)
    versions = text.split("### Schema versions", 1)[1].split("\n#", 1)[0]
    documented = re.findall(r"^\| (\d+) \|", versions, flags=re.MULTILINE)
    assert documented == [str(v) for v in range(1, contract.SCHEMA_VERSION + 1)]
    for reason in (
        contract.REASON_NEWER_SCHEMA,
        contract.REASON_BAD_TRANSACTION,
        contract.REASON_BAD_SCHEMA,
    ):
        assert f"`{reason}`" in text
