"""kafka_json.RawCommitLines: dump-log lines of offset commits made from their bytes must be the
lines the generic decode + `KafkaJson.dump_log_text` make, byte for byte, whatever the record
(every record a real broker wrote, generated records of every type and version, commits with
metadata, odd versions and lengths, invalid UTF-8 keys, undecodable bytes), with and without
the C accelerator; and `decode --format dump-log` gives the same file either way.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetwatch import cli
from offsetwatch.commands.decode import loop as decode_loop
from offsetwatch.decode_inputs import InputRecord
from offsetwatch.decoder import Codec, DecodeError, KafkaJson
from offsetwatch.decoder.codec import speedups_status
from offsetwatch.decoder.kafka_json import RawCommitLines
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from tests.decoder import strategies as S
from tests.decoder.strategies import real_records

RAW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Generic:
    """The reference: decode and render each item the generic way, and `learn` from it."""

    def __init__(self, raw: RawCommitLines, accelerate: bool) -> None:
        self.raw = raw
        self.codec = Codec(accelerate=accelerate)
        self.text = KafkaJson().dump_log_text
        self.rendered = 0

    def line(self, item: InputRecord) -> str:
        try:
            record = self.codec.decode(item.key, item.value, item.partition, item.offset)
        except DecodeError as error:
            return f"error: {error}"
        return self.text(record)

    def __call__(self, items: list[Any]) -> list[Any]:
        out = []
        for item in items:
            self.rendered += 1
            line = self.line(item)
            if not line.startswith("error: "):
                record = self.codec.decode(item.key, item.value, item.partition, item.offset)
                self.raw.learn(item.key, item.value, record, line)
            out.append(line)
        return out


def check(items: list[InputRecord], accelerate: bool) -> int:
    """The items twice, as two chunks (learnt, then perhaps made from bytes): the lines equal
    the generic ones, in order; returns how many were made from bytes."""
    raw = RawCommitLines(accelerate)
    assert (raw._fast is not None) == (accelerate and speedups_status()[0])
    generic = Generic(raw, accelerate)
    reference = Generic(RawCommitLines(accelerate), accelerate)
    expected = [reference.line(i) for i in items]
    # a chunk learns, the next one uses what it learnt
    assert raw.lines(items, InputRecord, generic) == expected
    assert generic.rendered == len(items)
    assert raw.lines(items, InputRecord, generic) == expected
    return 2 * len(items) - generic.rendered


def item(key: bytes, value: bytes | None, offset: int = 0) -> InputRecord:
    return InputRecord(0, offset, -1, key, value)


@pytest.mark.parametrize("accelerate", [True, False], ids=["speedups", "pure-python"])
def test_every_conformance_record(conformance_dir: Path, accelerate: bool) -> None:
    records = real_records(conformance_dir)
    items = [item(r.key, r.value, r.offset) for r in records]
    fast = check(items, accelerate)
    # the real runs hold plain v3 commits: some lines must have been made from bytes
    assert fast > 0


@pytest.mark.parametrize("accelerate", [True, False], ids=["speedups", "pure-python"])
def test_commit_edge_cases(accelerate: bool) -> None:
    codec = Codec()
    key = codec.encode_key(1, OffsetCommitKey('g\u00e9"\\', "t", 3))
    legacy = codec.encode_key(0, OffsetCommitKey("g", "t", 0))
    bad_utf8 = struct.pack(">hh", 1, 2) + b"\xff\xfe" + struct.pack(">h", 1) + b"t"
    bad_utf8 += struct.pack(">i", 7)

    def v3(offset: int, epoch: int, ts: int, metadata: bytes = b"", version: int = 3) -> bytes:
        head = struct.pack(">hqih", version, offset, epoch, len(metadata))
        return head + metadata + struct.pack(">q", ts)

    values = [
        v3(0, -1, 0),
        v3(-1, -1, -1),
        v3((1 << 63) - 1, (1 << 31) - 1, -(1 << 63)),
        v3(5, 1, 2, b"meta"),
        v3(5, 1, 2, version=2),  # 24 bytes of another version
        v3(5, 1, 2, version=99),
        codec.encode_value(1, 1, OffsetCommitValue(7, -1, "", 1, 2, ZERO_UUID)),
        codec.encode_value(1, 4, OffsetCommitValue(7, 3, "x", 1, -1, ZERO_UUID)),
        None,
        b"\x00\x03" + b"\x00" * 22,
        b"\x00\x03" + b"\x00" * 21,  # too short
    ]
    items = [
        item(k, v, i) for i, (k, v) in enumerate((k, v) for k in (key, legacy) for v in values)
    ]
    items += [item(bad_utf8, v) for v in values[:3]]
    items.append(item(b"\x7f\x00abc", values[0]))  # unknown key type
    assert check(items, accelerate) > 0


@pytest.mark.parametrize("accelerate", [True, False], ids=["speedups", "pure-python"])
def test_an_error_of_the_generic_path_comes_through(accelerate: bool) -> None:
    def failing(items: list[Any]) -> list[Any]:
        raise ValueError("generic path failed")

    with pytest.raises(ValueError, match="generic path failed"):
        RawCommitLines(accelerate).lines([item(b"k", b"v")], InputRecord, failing)


@RAW
@given(data=st.data())
def test_generated_records(data: st.DataObject) -> None:
    key_type, version = data.draw(st.sampled_from(S.all_type_versions()))
    record = data.draw(S.records(key_type, version))
    codec = Codec()
    try:
        key, value = codec.encode(record)
    except Exception:  # a layout the encoder refuses: not a record to check
        return
    assert isinstance(record, Record)
    check([item(key, value), item(key, value, 1)], accelerate=True)


@pytest.mark.parametrize("no_speedups", [False, True], ids=["speedups", "pure-python"])
def test_cli_same_file_as_generic(
    conformance_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_speedups: bool
) -> None:
    """decode --format dump-log with the raw path and with it off (a swapped renderer)."""
    if no_speedups:
        monkeypatch.setenv("OFFSETWATCH_NO_SPEEDUPS", "1")
    segments = sorted((conformance_dir / "runs" / "main" / "segments").rglob("*.log"))
    assert segments
    paths = [str(s) for s in segments if s.parent.name.startswith("__consumer_offsets-")]
    assert paths

    def run(name: str) -> bytes:
        out = tmp_path / name
        argv = ["decode", "--format", "dump-log", "--no-progress", "-o", str(out), *paths]
        assert cli.main(argv) in (0, 1)
        return out.read_bytes()

    fast = run("fast.jsonl")
    generic = decode_loop._renderer

    def renderer(fmt: str) -> Any:
        return generic(fmt)

    monkeypatch.setattr(decode_loop, "_renderer", renderer)
    assert run("generic.jsonl") == fast
    assert fast.count(b"\n") > 100
