"""The kafka source's raw messages: plain offset commits read as columns (segment_columns)
give the rows the record-by-record path gives, and everything else still takes that path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offsetwatch.decoder.codec import Codec, Message
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.spark_jobs.schema import CanonicalRows
from offsetwatch.spark_jobs.sources.kafka_decode import Decoding, MessageDecoder
from offsetwatch.spark_jobs.sources.segment_columns import decode_messages
from tests.conformance_data import run_names
from tests.spark_jobs.kafka_source_data import conformance_records


def _rows(decoded: Decoding, rows: CanonicalRows) -> list[dict[str, Any]]:
    out = [] if decoded.commits is None else decoded.commits.to_pylist()
    if decoded.records:
        out += rows.to_batch([c for _, c in decoded.records]).to_pylist()
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


def _same_as_record_path(messages: list[Message]) -> Decoding:
    rows = CanonicalRows()
    decoder = MessageDecoder("raw", rows)
    decoded = decoder.decode(messages)
    reference = decoder._decode_records(messages)
    assert _rows(decoded, rows) == _rows(reference, rows)
    assert decoded.rejected == reference.rejected
    return decoded


def test_conformance_runs_read_the_same(conformance_dir: Path) -> None:
    for run in run_names(conformance_dir):
        records = conformance_records(conformance_dir, run)
        messages: list[Message] = [
            (r.key, r.value, r.partition, r.offset, r.timestamp) for r in records
        ]
        _same_as_record_path(messages)
        commits, rest = decode_messages(messages, CanonicalRows())
        assert commits is not None and commits.num_rows > len(rest)


def _commit(offset: int, group: str = "g", version: int = 3) -> tuple[bytes, bytes | None]:
    epoch = 4 if version >= 3 else -1
    value = OffsetCommitValue(offset, epoch, "meta", 77, 5000 if version == 1 else -1, ZERO_UUID)
    record = Record(1, OffsetCommitKey(group, "t", 2), version, value, -1, -1, 1)
    return Codec().encode(record)


def test_odd_messages_take_the_record_path() -> None:
    key, value = _commit(1)
    assert value is not None
    messages: list[Message] = [(*_commit(n, version=n % 4), 0, n, 1000 + n) for n in range(8)]
    messages += [
        (key, None, 0, 20, 1),  # a tombstone: columns too
        (None, value, 0, 21, 1),  # no key: rejected by the decoder
        (key, value + b"\x00", 1, 22, 1),  # a trailing byte
        (key[:-1], value, 1, 23, 1),
        (b"", None, 1, 24, 1),
    ]
    decoded = _same_as_record_path(messages)
    assert decoded.commits is not None and decoded.commits.num_rows == 9
    bad_group = _commit(30, group="caf\xe9")[0].replace("caf\xe9".encode(), b"caf\xe9\xe9")
    _same_as_record_path([*messages, (bad_group, value, 1, 30, 1)])
