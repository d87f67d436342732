"""What every supported Kafka release wrote to `__consumer_offsets`, without Java: the captures
of tests/data/releases (made by scripts/capture_releases.py, one broker per release) decoded
with `--format dump-log` equal, record by record, that release's own kafka-dump-log text."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from offsetwatch.cli import main
from tests.offsetwatch.test_decode_real_broker import _parse_dump_log

CAPTURES: Final = Path(__file__).resolve().parent.parent / "data" / "releases"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "kafka"))

import kafka_dist  # noqa: E402

MATRIX: Final = kafka_dist.catalog().matrix


def test_every_release_of_the_matrix_has_a_capture() -> None:
    assert sorted(p.name for p in CAPTURES.iterdir() if p.is_dir()) == sorted(MATRIX)


def _decoded(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    code = main(["decode", *argv])
    out = capsys.readouterr()
    assert (code, out.err) == (0, "")
    return out.out.splitlines()


@pytest.mark.parametrize("release", MATRIX)
def test_the_capture_decodes_as_its_releases_dump_log(
    release: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = CAPTURES / release
    summary: dict[str, Any] = json.loads((capture / "capture.json").read_text())
    kafka = _parse_dump_log(
        (capture / "dumplog.txt").read_text().replace("Dumping ", f"Dumping {capture}/")
    )
    segments = str(capture / "__consumer_offsets-0")
    canonical = [json.loads(x) for x in _decoded(capsys, "--input", "segments", segments)]
    dump_log = _decoded(capsys, "--format", "dump-log", "--input", "segments", segments)
    ours = {
        (r["partition"], r["offset"]): line for r, line in zip(canonical, dump_log, strict=True)
    }
    assert ours == kafka.records
    outcomes = {
        (r["partition"], r["offset"]): r["transaction"]
        for r in canonical
        if r["transaction"] is not None
    }
    assert outcomes == kafka.outcomes
    # the workload is in there: every group, both transaction outcomes
    assert set(summary["groups"].values()) <= {r["group"] for r in canonical}
    assert set(outcomes.values()) == {"committed", "aborted"}
    # what changed between releases, as each release wrote it: 4.1+ commit OffsetCommitValue
    # v4 (flexible, KAFKA-19141) and no longer write ConsumerGroupPartitionMetadata (key 4)
    line = tuple(int(x) for x in release.split(".")[:2])
    commits = {r["value_version"] for r in canonical if r["type"] == "offset_commit"} - {None}
    assert commits == ({4} if line >= (4, 1) else {3}), release
    types = {r["type"] for r in canonical}
    assert ("consumer_group_partition_metadata" in types) == (line == (4, 0)), release
    assert ("consumer_group_metadata" in types) == (line >= (4, 0)), release
    # 4.1+: a real Kafka Streams application's whole life (KIP-1071 keys 17 and 19-23, then
    # the tombstones of its leaving member), every layout of each release
    streams = {
        "streams_group_metadata",
        "streams_group_member_metadata",
        "streams_group_target_assignment_metadata",
        "streams_group_target_assignment_member",
        "streams_group_current_member_assignment",
        "streams_group_topology",
    }
    assert (streams <= types) == (line >= (4, 1)), release
    if line >= (4, 1):
        left = {r["type"] for r in canonical if r["type"] in streams and r["value"] is None}
        assert "streams_group_member_metadata" in left, release
