"""Decompression bombs and bad batches in segment files (hostile or corrupt input).

A segment handed to a decoder may be corrupt or hostile: a few KB of compressed zeros that
expand to gigabytes must be refused with a bounded amount of memory, for every codec Kafka
uses, and a bad batch whose length is sound must not hide the batches after it.
Memory is measured in a child process (ru_maxrss of a fresh interpreter), never timed.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import cramjam
import crc32c
import pytest

from offsetwatch.decoder.compression import (
    DEFAULT_MAX_BATCH_BYTES,
    Codec,
    DecompressedSizeError,
    batch_limit,
    compress,
    decompress,
)
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.segments import RecordSpec, SegmentReader, iter_batches, write_batch

GIB = 1 << 30
MIB = 1 << 20
CHUNK = b"\0" * (4 * MIB)

_V2_HEAD = struct.Struct(">qiibIhiqqqhii")


def _stream(compressor: Callable[[bytes], bytes], finish: Callable[[], bytes], size: int) -> bytes:
    """Compress `size` zero bytes without ever holding them (a bomb made in constant memory)."""
    parts = [compressor(CHUNK) for _ in range(size // len(CHUNK))]
    parts.append(finish())
    return b"".join(parts)


def gzip_bomb(size: int) -> bytes:
    engine = zlib.compressobj(9, zlib.DEFLATED, 31)
    return _stream(engine.compress, engine.flush, size)


def _cramjam_stream(engine: cramjam.zstd.Compressor | cramjam.lz4.Compressor, size: int) -> bytes:
    def feed(data: bytes) -> bytes:
        engine.compress(data)  # returns a count; the output comes from flush()
        return bytes(engine.flush())

    return _stream(feed, lambda: bytes(engine.finish()), size)


def zstd_bomb(size: int) -> bytes:
    return _cramjam_stream(cramjam.zstd.Compressor(level=3), size)


def lz4_bomb(size: int) -> bytes:
    return _cramjam_stream(cramjam.lz4.Compressor(), size)


def snappy_xerial_bomb(size: int) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(b"\0" * (32 * 1024)))
    chunk = len(block).to_bytes(4, "big") + block
    header = b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
    return header + chunk * (size // (32 * 1024))


def snappy_raw_bomb(size: int) -> bytes:
    """A raw block announcing `size` bytes: refused from its preamble, before any allocation."""
    varint = bytearray()
    value = size
    while value >= 0x80:
        varint.append((value & 0x7F) | 0x80)
        value >>= 7
    varint.append(value)
    return bytes(varint) + bytes(cramjam.snappy.compress_raw(b"\0" * 4096))[2:]


BOMBS: dict[str, tuple[Codec, Callable[[int], bytes]]] = {
    "gzip": (Codec.GZIP, gzip_bomb),
    "zstd": (Codec.ZSTD, zstd_bomb),
    "lz4": (Codec.LZ4, lz4_bomb),
    "snappy-xerial": (Codec.SNAPPY, snappy_xerial_bomb),
    "snappy-raw": (Codec.SNAPPY, snappy_raw_bomb),
}


def frame_v2(payload: bytes, codec: Codec, count: int, base_offset: int) -> bytes:
    """A v2 batch with a sound length and CRC around an arbitrary records section."""
    body = struct.pack(">hiqqqhii", int(codec), count - 1, 0, 0, -1, -1, -1, count) + payload
    crc = crc32c.crc32c(body)
    length = 4 + 1 + 4 + len(body)  # leader epoch, magic, crc, then the CRC-covered part
    return struct.pack(">qiibI", base_offset, length, 0, 2, crc) + body


def good_batch(base_offset: int) -> bytes:
    specs = [RecordSpec(i, key=b"k%d" % i, value=b"v%d" % i, timestamp=1000 + i) for i in range(3)]
    return write_batch(specs, base_offset=base_offset, codec=Codec.ZSTD)


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bomb_is_refused_at_the_limit(name: str) -> None:
    codec, make = BOMBS[name]
    bomb = make(64 * MIB)
    with pytest.raises(DecompressedSizeError) as caught:
        decompress(codec, bomb, position=123, limit=8 * MIB)
    assert caught.value.byte_position == 123
    assert "limit of 8388608 bytes" in caught.value.reason
    assert caught.value.kind == "limit"


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
@pytest.mark.parametrize("size", [0, 1, 70_000, 3 * MIB])
def test_payloads_up_to_the_limit_decompress_whole(codec: Codec, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    packed = compress(codec, data)
    assert decompress(codec, packed, limit=max(size, 1)) == data
    if size > 1:
        with pytest.raises(DecompressedSizeError):
            decompress(codec, packed, limit=size - 1)


def test_batch_limit_scales_with_the_claimed_record_count() -> None:
    assert batch_limit(1) == 64 * MIB
    assert batch_limit(0) == 64 * MIB
    assert batch_limit(1_000_000) == DEFAULT_MAX_BATCH_BYTES
    assert batch_limit(2, max_batch_bytes=MIB) == MIB


def test_bad_batch_in_the_middle_does_not_hide_the_rest() -> None:
    data = (
        good_batch(0)
        + frame_v2(zstd_bomb(64 * MIB), Codec.ZSTD, 1, 3)
        + frame_v2(b"not zstd at all", Codec.ZSTD, 1, 4)
        + good_batch(5)
    )
    errors: list[DecodeError] = []
    batches = list(iter_batches(data, on_error=errors.append, max_batch_bytes=8 * MIB))
    assert [b.header.base_offset for b in batches] == [0, 5]
    assert [r.offset for b in batches for r in b.records] == [0, 1, 2, 5, 6, 7]
    assert isinstance(errors[0], DecompressedSizeError)
    assert errors[0].byte_position == len(good_batch(0))
    assert "cannot decompress" in errors[1].reason
    # without on_error the first bad batch is raised, as before
    with pytest.raises(DecompressedSizeError):
        list(SegmentReader(data, max_batch_bytes=8 * MIB))


def test_broken_length_still_stops_the_file() -> None:
    data = bytearray(good_batch(0) + good_batch(3))
    struct.pack_into(">i", data, 8, 3)  # the first batch's length below any valid size
    errors: list[DecodeError] = []
    with pytest.raises(DecodeError, match="below the minimum"):
        list(iter_batches(bytes(data), on_error=errors.append))
    assert errors == []


CHILD = """
import json, resource, sys
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.segments import read_segment
errors = []
records = sum(len(b.records) for b in read_segment(sys.argv[1], on_error=errors.append,
                                                   max_batch_bytes=int(sys.argv[2])))
print(json.dumps({"records": records, "errors": [e.kind for e in errors],
                  "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

BASELINE = """
import json, resource
import offsetwatch.decoder.segments
print(json.dumps({"maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _child(code: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_one_gib_bomb_in_a_segment_costs_bounded_memory(name: str, tmp_path: Path) -> None:
    codec, make = BOMBS[name]
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(good_batch(0) + frame_v2(make(GIB), codec, 1, 3) + good_batch(4))
    limit = 32 * MIB
    result = _child(CHILD, str(segment), str(limit))
    baseline = _child(BASELINE)
    assert result["records"] == 6
    assert result["errors"] == ["limit"]
    grown = float(result["maxrss_mib"]) - float(baseline["maxrss_mib"])  # type: ignore[arg-type]
    # the bound plus the mapped file and the decoder's own buffers; the bomb itself is 1 GiB
    assert grown < limit / MIB + 96, f"{name}: RSS grew by {grown:.0f} MiB"
