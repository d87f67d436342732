"""Plain offset-commit batches decoded as columns (segment_columns) give the record path's rows.

Every case reads one split twice in-process - the columnar path where it applies, then the
record path alone (`runs` replaced by one record-path run) - and compares rows and
quarantine rows. No Spark needed: this is what one task yields.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
import pyarrow as pa
import pytest

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from offsetwatch.decoder.segments import RecordSpec, write_batch
from offsetwatch.spark_jobs.schema import CanonicalRows, records_struct
from offsetwatch.spark_jobs.sources import Collector
from offsetwatch.spark_jobs.sources import segments as source
from offsetwatch.spark_jobs.sources.segment_columns import Run, decode_run, runs

_GZIP = 1
_CODEC = Codec()


def _commit(
    offset: int,
    *,
    version: int = 3,
    key_type: int = 1,
    group: str = "g",
    metadata: str = "",
    tombstone: bool = False,
    timestamp: int = 1000,
) -> RecordSpec:
    value = OffsetCommitValue(
        offset,
        7 if version >= 3 else -1,
        metadata,
        1000 + offset,
        5000 if version == 1 else -1,
        ZERO_UUID,
    )
    record = Record(
        key_type,
        OffsetCommitKey(group, f"topic-{offset % 3}", offset % 5),
        None if tombstone else version,
        None if tombstone else value,
        -1,
        -1,
        timestamp,
    )
    key, raw = _CODEC.encode(record)
    return RecordSpec(offset_delta=0, timestamp=timestamp, key=key, value=raw)


def _group_metadata() -> RecordSpec:
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 1000, ())
    key, raw = _CODEC.encode(Record(2, GroupMetadataKey("g"), 3, value, -1, -1, 1000))
    return RecordSpec(offset_delta=0, timestamp=1000, key=key, value=raw)


def _write(
    path: Path, batches: list[list[RecordSpec]], codecs: dict[int, int] | None = None
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(
        write_batch(
            [RecordSpec(i, s.timestamp, s.key, s.value, s.headers) for i, s in enumerate(specs)],
            base_offset=1000 * n,
            codec=(codecs or {}).get(n, 0),
        )
        for n, specs in enumerate(batches)
    )
    path.write_bytes(data)
    return path


def _read(path: Path, quarantine: bool) -> list[Any]:
    (split,) = source.plan_splits(source.segment_partitions([str(path)]), 1 << 40)
    out = list(source.read_split(split, Collector.of(records_struct(), source.SOURCE, quarantine)))
    if quarantine:
        return sorted(out, key=repr)
    rows = [row for batch in out for row in batch.to_pylist()]
    return sorted(rows, key=lambda r: (r["offset"], repr(r)))


def _record_path_only(data: bytes) -> Iterator[Run]:
    yield Run(0, len(data), None)


def _assert_same_as_record_path(
    path: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool = True
) -> list[Any]:
    data = path.read_bytes()
    took_columns = any(run.batches is not None for run in runs(data))
    assert took_columns == columnar
    rows, bad = _read(path, False), _read(path, True)
    with monkeypatch.context() as patch:
        patch.setattr(source, "runs", _record_path_only)
        assert _read(path, False) == rows
        assert _read(path, True) == bad
    return rows


def _many(n: int, **kwargs: Any) -> list[RecordSpec]:
    return [_commit(i, **kwargs) for i in range(n)]


def test_every_plain_commit_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches = [
        [_commit(i, version=v, key_type=k) for i in range(12)] for v in range(4) for k in (0, 1)
    ]
    batches.append([_commit(i, tombstone=True) for i in range(9)])
    batches.append([*_many(5), _commit(9, tombstone=True), *_many(4, version=1)])
    batches.append([_commit(i, metadata="méta" * i, group="grüppe") for i in range(10)])
    batches.append([])  # an empty batch is plain too
    batches.extend([_commit(i)] for i in range(30))  # batches of one record
    rows = _assert_same_as_record_path(
        _write(tmp_path / "__consumer_offsets-3" / "0.log", batches), monkeypatch
    )
    assert {r["partition"] for r in rows} == {3}
    assert {r["value_version"] for r in rows} == {0, 1, 2, 3, None}
    assert sum(r["tombstone"] for r in rows) == 10


def test_unusual_batches_take_the_record_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _many(2)
    header = RecordSpec(0, 1000, plain[0].key, plain[0].value, (("h", b"v"),))
    late = _commit(1, timestamp=1000 + (1 << 40))  # a timestamp delta of a 6-byte varint
    batches = [
        *[plain] * 5,
        [*plain, _group_metadata()],
        [*plain, header],
        [_commit(0), late],
        [*plain, RecordSpec(0, 1000, plain[0].key, b"\x00\x03 not a value")],
        *[plain] * 5,
        plain,
        *[plain] * 5,
    ]
    path = _write(tmp_path / "__consumer_offsets-0" / "0.log", batches, {15: _GZIP})
    rows = _assert_same_as_record_path(path, monkeypatch)
    assert len(rows) == 2 * 19 + 1 + 1 + 2


def test_only_the_unusual_batches_leave_the_columns(tmp_path: Path) -> None:
    plain = _many(3)
    batches = [*[plain] * 10, [_group_metadata()], *[plain] * 10, [*plain, _group_metadata()]]
    data = _write(tmp_path / "__consumer_offsets-0" / "0.log", batches).read_bytes()
    (run,) = runs(data)
    assert run.batches is not None
    parts = list(decode_run(data, run, 0, CanonicalRows(records_struct())))
    kinds = [
        (type(p).__name__, p.num_rows if isinstance(p, pa.RecordBatch) else None) for p in parts
    ]
    assert kinds == [("RecordBatch", 30), ("Run", None), ("RecordBatch", 30), ("Run", None)]


def test_bad_utf8_crc_and_tail_read_as_on_the_record_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = [_many(2)] * 24
    batches[3] = _many(2, group="bad-")
    path = _write(tmp_path / "__consumer_offsets-0" / "0.log", batches)
    data = bytearray(path.read_bytes())
    starts, _ = source.scan_batches(path)
    at = data.index(b"bad-", starts[3])
    data[at + 3] = 0xFF  # a group name that is not UTF-8, its batch's CRC made right again
    crc = crc32c.crc32c(bytes(data[starts[3] + 21 : starts[4]]))
    data[starts[3] + 17 : starts[3] + 21] = crc.to_bytes(4, "big")
    data[starts[12] + 70] ^= 0x01  # a flipped bit inside another batch: CRC mismatch
    data += data[starts[1] : starts[1] + 40]  # a partial write at the end
    path.write_bytes(bytes(data))
    _assert_same_as_record_path(path, monkeypatch)


def test_a_few_large_batches_take_the_record_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One numpy step per record of the largest batch would cost more than it saves."""
    path = _write(tmp_path / "__consumer_offsets-0" / "0.log", [_many(200), _many(3)])
    _assert_same_as_record_path(path, monkeypatch, columnar=False)
