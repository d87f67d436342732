"""The kafka source's columnar path (`columns.flat_batches`, shared with the segments
source) gives exactly the dict path's Arrow batches on every real Kafka 4.0 commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.codec import Codec, Message
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.spark_jobs.schema import CanonicalRows
from offsetwatch.spark_jobs.sources.columns import flat_batches
from offsetwatch.spark_jobs.sources.kafka_decode import MessageDecoder
from tests.conformance_data import run_names
from tests.spark_jobs.kafka_source_data import conformance_records


@pytest.fixture(scope="module")
def rows() -> CanonicalRows:
    return CanonicalRows()


def test_every_conformance_commit_matches_the_dict_path(
    conformance_dir: Path, rows: CanonicalRows
) -> None:
    codec, canonical = Codec(), Canonical()
    commits = []
    for run in run_names(conformance_dir):
        for r in conformance_records(conformance_dir, run):
            record = codec.decode(r.key, r.value, r.partition, r.offset, r.timestamp)
            if isinstance(record, Record) and record.type_name == "offset_commit":
                commits.append(record)
    assert any(c.value is None for c in commits)  # tombstones (deletions, expiry) included
    assert {c.value_version for c in commits if c.value is not None} >= {3}
    batches, rest = flat_batches(rows, commits, [None] * len(commits))
    assert rest == []
    fast = [row for batch in batches for row in batch.to_pylist()]
    by_dicts = rows.to_batch([canonical.to_dict(c) for c in commits]).to_pylist()
    assert sorted(fast, key=_position) == sorted(by_dicts, key=_position)


def _position(row: dict[str, object]) -> str:
    # runs share positions: the whole row orders them
    return repr(sorted(row.items()))


def test_text_from_invalid_utf8_falls_back_to_the_dict_path(rows: CanonicalRows) -> None:
    bad_group = b"caf\xe9".decode("utf-8", "surrogateescape")
    commit = OffsetCommitValue(5, 0, "", 1, -1, "A" * 22)
    record = Record(1, OffsetCommitKey(bad_group, "t", 0), 3, commit)
    assert flat_batches(rows, [record], [None]) == ([], [0])
    # the decoder then renders it through the dict path, as every other source does
    key, value = Codec().encode(record)
    decoded = MessageDecoder("raw", rows).decode([(key, value, 0, 9, 1)])
    assert decoded.commits is None
    assert [offset for offset, _ in decoded.records] == [9]
    assert rows.to_batch([c for _, c in decoded.records]).num_rows == 1


def test_other_record_types_take_the_dict_path(conformance_dir: Path, rows: CanonicalRows) -> None:
    records = conformance_records(conformance_dir)
    messages: list[Message] = [
        (r.key, r.value, r.partition, r.offset, r.timestamp) for r in records
    ]
    decoded = MessageDecoder("raw", rows).decode(messages)
    assert decoded.commits is not None
    assert not decoded.rejected
    assert decoded.commits.num_rows + len(decoded.records) == len(records)
    assert all(c["type"] != "offset_commit" for _, c in decoded.records)
