"""`offsetwatch decode` tells a torn tail from corruption in the middle, on a real segment.

A real Kafka 4.0 segment (78 records) whose 4th batch claims 1,000,000 bytes, with 8.6 KB of
good batches after it, was read as "an incomplete batch (partial write) ... ignored, as Kafka
does on recovery": 3 of 78 records and exit 0. A torn write leaves a prefix of one batch at the
end of the last segment, never complete batches behind it: those make it corruption, reported
with the file and byte position, exit 1, every record around it still written.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from offsetwatch.cli import main
from offsetwatch.decoder.segments import read_segment

SEGMENT = "runs/main/segments/__consumer_offsets-0/00000000000000000000.log"


def decode(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, list[int], str]:
    code = main(["decode", "--format", "json", *map(str, paths)])
    out, err = capsys.readouterr()
    offsets = [json.loads(line)["offset"] for line in out.splitlines() if line.strip()]
    return code, offsets, err


def batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(byte position, first offset, last offset) of every batch."""
    return [
        (b.header.position, b.header.base_offset, b.header.last_offset) for b in read_segment(path)
    ]


def test_a_corrupt_length_in_the_middle_is_an_error_and_the_rest_is_still_decoded(
    conformance_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = conformance_dir / SEGMENT
    code, every, _ = decode(capsys, original)
    assert code == 0 and len(every) == 78
    batches = batch_positions(original)
    position, first, last = batches[3]
    corrupt = tmp_path / "__consumer_offsets-0" / original.name
    corrupt.parent.mkdir()
    data = bytearray(original.read_bytes())
    data[position + 8 : position + 12] = struct.pack(">i", 1_000_000)
    corrupt.write_bytes(bytes(data))

    code, offsets, err = decode(capsys, corrupt)
    assert code == 1
    lost = set(range(first, last + 1))
    assert offsets == [o for o in every if o not in lost]  # only the corrupt batch is missing
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(corrupt) in lines[0]
    assert f"byte {position}" in lines[0] and "corrupt batch length 1000000" in lines[0]


def test_the_cut_end_of_the_last_segment_is_a_torn_tail_not_an_error(
    conformance_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = conformance_dir / SEGMENT
    batches = batch_positions(source)
    position, first, _ = batches[-1]
    directory = tmp_path / "__consumer_offsets-0"
    directory.mkdir()
    cut = directory / source.name
    cut.write_bytes(source.read_bytes()[: position + 30])
    code, offsets, err = decode(capsys, directory)
    assert code == 0 and offsets and max(offsets) < first
    assert "partial write" in err and "ignored" in err


def test_a_cut_rolled_segment_is_an_error_because_kafka_only_appends_to_the_last(
    conformance_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partition = conformance_dir / Path(SEGMENT).parent
    directory = tmp_path / partition.name
    shutil.copytree(partition, directory)
    rolled = directory / Path(SEGMENT).name
    position, first, _ = batch_positions(rolled)[-1]
    rolled.chmod(0o644)
    rolled.write_bytes(rolled.read_bytes()[: position + 30])
    code, offsets, err = decode(capsys, directory)
    assert code == 1
    assert first not in offsets and len(offsets) > 78  # the later segments are decoded
    assert str(rolled) in err and "rolled segment" in err
