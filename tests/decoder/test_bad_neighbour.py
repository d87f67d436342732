"""One corrupted record inside a fast batch of a real broker's segment (issue 22, "Bad input").

The first batches of the real 1M-record Kafka 4.0 segment (../shared/bench) hold 100 offset
commits each, uncompressed: the shape `_decode_records_fast` and the batched paths read.
One record's value in the middle batch gets an unknown value version (the batch's CRC is
fixed, so the framing is sound and only that record is undecodable). Then:

* `offsetwatch decode` (canonical JSON and dump-log) prints exactly the clean file's lines
  for every other record and an error naming the bad record's offset, exit 1;
* the exporter's ingest applies every other record (the state equals the clean records'
  state without the bad one) and quarantines that one record, nothing else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import cramjam
import pytest
from crc32c import crc32c

from offsetwatch.cli import main
from offsetwatch.decoder import Codec
from offsetwatch.decoder.records import Record
from offsetwatch.decoder.segments import read_segment
from offsetwatch.exporter.state.ingest import Ingestor, Quarantined
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import PipelineStats

BATCHES = 3
BAD_INDEX = 150  # record 50 of the second batch


@dataclass(frozen=True, slots=True)
class Message:
    """What the ingest reads of a confluent_kafka.Message."""

    p: int
    o: int
    ts: int
    k: bytes | None
    v: bytes | None

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o

    def timestamp(self) -> tuple[int, int]:
        return (1, self.ts)

    def key(self) -> bytes | None:
        return self.k

    def value(self) -> bytes | None:
        return self.v


@pytest.fixture(scope="module")
def prefix(bench_dir: Path) -> bytes:
    """The first BATCHES batches of the real segment (decompressed once: 67 MB)."""
    data = bytes(cramjam.zstd.decompress((bench_dir / "consumer-offsets-1m.log.zst").read_bytes()))
    end = 0
    for _ in range(BATCHES):
        end += 12 + struct.unpack_from(">i", data, end + 8)[0]
    return data[:end]


def _corrupt(clean: bytes, tmp_path: Path) -> tuple[Path, Path, int]:
    directory = tmp_path / "__consumer_offsets-7"
    directory.mkdir()
    clean_path = directory / "00000000000000000000.log"
    clean_path.write_bytes(clean)
    batches = list(read_segment(clean_path))
    assert [len(b.records) for b in batches] == [100] * BATCHES
    assert all(b.header.codec == 0 for b in batches)  # uncompressed: the fast loop
    bad = batches[1].records[BAD_INDEX - 100]
    start = batches[1].header.position
    end = start + 12 + struct.unpack_from(">i", clean, start + 8)[0]
    data = bytearray(clean)
    assert bad.value is not None
    at = data.find(bad.value, start, end)
    assert at > 0 and data.find(bad.value, at + 1, end) < 0
    data[at : at + 2] = b"\x7f\x7f"  # an offset commit value version no Kafka wrote
    struct.pack_into(">I", data, start + 17, crc32c(bytes(data[start + 21 : end])))
    bad_dir = tmp_path / "bad" / "__consumer_offsets-7"
    bad_dir.mkdir(parents=True)
    bad_path = bad_dir / "00000000000000000000.log"
    bad_path.write_bytes(bytes(data))
    return clean_path, bad_path, bad.offset


@pytest.mark.parametrize("fmt", ["json", "dump-log"])
def test_decode_writes_every_good_neighbour(
    prefix: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    clean_path, bad_path, bad_offset = _corrupt(prefix, tmp_path)
    assert main(["decode", "--format", fmt, "--no-progress", str(clean_path)]) == 0
    clean_lines = capsys.readouterr().out.splitlines()
    assert len(clean_lines) == 100 * BATCHES
    code = main(["decode", "--format", fmt, "--no-progress", str(bad_path)])
    out, err = capsys.readouterr()
    assert code == 1
    assert out.splitlines() == clean_lines[:BAD_INDEX] + clean_lines[BAD_INDEX + 1 :]
    assert f"offset {bad_offset}" in err


def test_ingest_applies_every_good_neighbour(prefix: bytes, tmp_path: Path) -> None:
    clean_path, bad_path, bad_offset = _corrupt(prefix, tmp_path)
    raw = [r for b in read_segment(bad_path) for r in b.records]
    messages = [Message(7, r.offset, r.timestamp, r.key, r.value) for r in raw]
    quarantined: list[Quarantined] = []
    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), quarantine=[quarantined.append])
    assert ingestor.ingest(messages) == 100 * BATCHES
    assert [(q.partition, q.offset) for q in quarantined] == [(7, bad_offset)]
    assert f"offset {bad_offset}" in str(quarantined[0].error)
    assert ingestor.positions == {7: raw[-1].offset + 1}

    codec = Codec()
    reference = OffsetState()
    applied = 0
    for record in (r for b in read_segment(clean_path) for r in b.records):
        if record.offset == bad_offset:
            continue
        decoded = codec.decode(record.key, record.value, 7, record.offset, record.timestamp)
        assert isinstance(decoded, Record)
        reference.apply(decoded)
        applied += 1
    assert applied == 100 * BATCHES - 1

    def projection(s: OffsetState) -> dict[tuple[str, str, int], tuple[int, int, str]]:
        return {
            (g, t, p): (table.committed[p], table.commit_ts[p], table.metadata_of(p))
            for g, group in s.groups.items()
            for t, table in group.topics.items()
            for p in table.partitions()
        }

    assert projection(state) == projection(reference)
    assert len(projection(state)) > 0
