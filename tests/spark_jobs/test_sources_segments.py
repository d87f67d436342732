"""The `segments` source: planning, splitting, partition numbers and bad input."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.decoder.segments import RecordSpec, write_batch
from offsetwatch.spark_jobs.reader import InputError, read_quarantine, read_records
from offsetwatch.spark_jobs.sources.segments import scan_batches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

_GZIP = 1


def _commit(codec: Codec, offset: int, group: str = "g") -> RecordSpec:
    key, value = codec.encode(
        Record(
            1,
            OffsetCommitKey(group, "orders", 0),
            3,
            OffsetCommitValue(offset, 0, "", 1000, -1, ZERO_UUID),
            -1,
            -1,
            1000,
        )
    )
    return RecordSpec(offset_delta=0, timestamp=1000, key=key, value=value)


def _segment(directory: Path, batches: list[list[RecordSpec]], gzip_batch: int = -1) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = b"".join(
        write_batch([RecordSpec(i, s.timestamp, s.key, s.value) for i, s in enumerate(specs)],
                    base_offset=10 * n, codec=_GZIP if n == gzip_batch else 0)
        for n, specs in enumerate(batches)
    )  # fmt: skip
    path = directory / "00000000000000000000.log"
    path.write_bytes(data)
    return path


def test_partition_comes_from_the_directory_name(spark: SparkSession, tmp_path: Path) -> None:
    codec = Codec()
    _segment(tmp_path / "logs" / "__consumer_offsets-7", [[_commit(codec, 5)]])
    _segment(tmp_path / "elsewhere", [[_commit(codec, 6)]])
    rows = read_records(spark, "segments", str(tmp_path / "logs")).collect()
    assert [(r.partition, r.offset, r.value.offset) for r in rows] == [(7, 0, 5)]
    other = read_records(spark, "segments", str(tmp_path / "elsewhere")).collect()
    assert [(r.partition, r.txn) for r in other] == [(-1, "none")]


def test_split_ranges_give_the_same_rows(spark: SparkSession, conformance_dir: Path) -> None:
    """A file cut into byte ranges at batch boundaries reads the same as read whole."""
    segments = conformance_dir / "runs" / "codec-zstd" / "segments"
    whole = read_records(spark, "segments", str(segments), splitBytes=str(1 << 30))
    cut = read_records(spark, "segments", str(segments), splitBytes="300")
    assert cut.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert sorted(cut.collect(), key=str) == sorted(whole.collect(), key=str)


def test_a_partition_with_transactions_is_read_whole(conformance_dir: Path) -> None:
    from offsetwatch.spark_jobs.sources.segments import plan_splits, segment_partitions

    segments = conformance_dir / "runs" / "main" / "segments"
    partitions = segment_partitions([str(segments)])
    splits = plan_splits(partitions, 300)
    for item in partitions:
        transactional = any(scan_batches(f)[1] for f in item.files)
        mine = [s for s in splits if s.partition == item.number]
        if transactional:
            assert len(mine) == 1
            assert mine[0].files == tuple(str(f) for f in item.files)
        else:
            assert all(len(s.files) == 1 for s in mine)


def test_bad_batch_and_bad_record_are_quarantined_and_reading_goes_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    codec = Codec()
    good = [_commit(codec, n) for n in range(3)]
    garbage = RecordSpec(0, 1000, good[0].key, b"\x7f\x7f not a value")
    path = _segment(
        tmp_path / "__consumer_offsets-0", [good, [garbage, *good], good, good], gzip_batch=2
    )
    starts, _ = scan_batches(path)
    data = bytearray(path.read_bytes())
    data[starts[3] - 6] ^= 0xFF  # the gzip CRC of the third batch: it does not decompress
    path.write_bytes(bytes(data))

    rows = read_records(spark, "segments", str(path)).collect()
    assert sorted(r.offset for r in rows) == [0, 1, 2, 11, 12, 13, 30, 31, 32]
    bad = {
        (r.reason, r.position): r for r in read_quarantine(spark, "segments", str(path)).collect()
    }
    assert set(bad) == {("bad_record", starts[1]), ("bad_batch", starts[2])}
    assert all(r.file == str(path.resolve()) and r.source == "segments" for r in bad.values())
    assert "7f7f" in bad[("bad_record", starts[1])].raw


def test_missing_or_empty_input_is_an_input_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_records(spark, "segments", str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no segment files"):
        read_records(spark, "segments", str(tmp_path / "empty"))


def test_a_copied_conformance_partition_reads(
    spark: SparkSession, conformance_dir: Path, tmp_path: Path
) -> None:
    source = conformance_dir / "runs" / "main" / "segments" / "__consumer_offsets-1"
    target = tmp_path / "__consumer_offsets-1"
    shutil.copytree(source, target)
    rows = read_records(spark, "segments", str(target)).collect()
    assert rows
    assert {r.partition for r in rows} == {1}
