"""Kafka record-batch compression codecs: bytes in, bytes out.

Kafka compresses the *records section* of a v2 batch (and the value of a legacy v0/v1 wrapper
message) with one of four codecs, chosen by the low three bits of the batch attributes. The
framings Kafka really uses, all handled here through `cramjam`:

* gzip: a plain gzip stream (Java `GZIPOutputStream`); concatenated members are accepted.
* snappy: the Java client and broker write the **xerial** framing of snappy-java
  (`b"\\x82SNAPPY\\x00"`, int32 version, int32 min-compatible version, then repeated
  `[int32 BE chunk length][raw snappy block]`); librdkafka historically wrote a **raw** snappy
  block. Both are read (and the snappy *framing* format, `b"\\xff\\x06\\x00\\x00sNaPpY"`, too);
  the writer produces xerial framing, like Kafka.
* lz4: the standard LZ4 frame format. Magic 0 messages carry a header checksum computed the
  wrong way (over the frame magic as well, KAFKA-3160); Kafka ignores that checksum for magic 0,
  so the reader repairs it before decoding, and the writer reproduces it for magic 0.
* zstd: a standard zstd frame (magic 2 only; Kafka rejects zstd in legacy messages).

Errors are `DecodeError(part="batch")`; callers pass the file position of the batch.

Decompression bombs: a few kilobytes of zstd can expand to gigabytes. Every codec decompresses
into a bounded buffer (`limit` bytes, growing geometrically from a guess, never past the limit),
so a bomb costs at most about `limit` bytes of memory and raises `DecompressedSizeError` instead
of exhausting the machine. Snappy blocks announce their length up front, which is checked
before anything is allocated.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import cramjam

from offsetwatch.decoder.errors import DecodeError

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_MAX_RECORD_BYTES",
    "XERIAL_MAGIC",
    "Codec",
    "DecompressedSizeError",
    "batch_limit",
    "compress",
    "decompress",
    "xxh32",
]

#: Default bound on one batch's decompressed records section. Brokers cap a batch's
#: *compressed* size with message.max.bytes (1 MiB by default); the group coordinator's own
#: batches decompress to a few MiB at most. 256 MiB is far above any real batch and still
#: bounds the memory a hostile one can take.
DEFAULT_MAX_BATCH_BYTES = 256 * 1024 * 1024
#: Producers check each record's uncompressed size against max.request.size (1 MiB by
#: default); 64 MiB per record leaves room for huge group-metadata records.
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024
_FIRST_GUESS_MIN = 64 * 1024
_GROWTH = 8


class DecompressedSizeError(DecodeError):
    """A compressed payload expands past the configured bound (a decompression bomb)."""


def batch_limit(record_count: int, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> int:
    """The decompressed-size bound of a batch that claims `record_count` records."""
    return min(max_batch_bytes, max(1, record_count) * DEFAULT_MAX_RECORD_BYTES)


class Codec(IntEnum):
    """The compression codec of a batch (attributes bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The name Kafka's tools print (`compresscodec: none`)."""
        return self.name.lower()


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024  # Kafka's KafkaLZ4BlockOutputStream default (BD = 0x40)


def decompress(
    codec: int,
    data: bytes | memoryview,
    *,
    magic: int = 2,
    position: int | None = None,
    limit: int = DEFAULT_MAX_BATCH_BYTES,
) -> bytes:
    """Decompress a records section / wrapper value written with `codec`, at most `limit` bytes
    (`DecompressedSizeError` beyond)."""
    try:
        if codec == Codec.GZIP:
            return _bounded(
                cramjam.gzip.decompress_into, data, limit, _gzip_size_hint(data), codec, position
            )
        if codec == Codec.SNAPPY:
            return _snappy_decompress(bytes(data), position, limit)
        if codec == Codec.LZ4:
            raw = bytes(data)
            if magic == 0:
                raw = _lz4_repair_header_checksum(raw)
            return _bounded(cramjam.lz4.decompress_into, raw, limit, 0, codec, position)
        if codec == Codec.ZSTD:
            return _bounded(cramjam.zstd.decompress_into, data, limit, 0, codec, position)
    except DecodeError:
        raise
    except Exception as exc:  # cramjam.DecompressionError and friends
        name = _codec_name(codec)
        raise DecodeError(
            f"codec {name}: cannot decompress: {exc}", part="batch", byte_position=position
        ) from exc
    raise DecodeError(
        f"codec {_codec_name(codec)} is not a compression codec",
        part="batch",
        byte_position=position,
    )


def compress(codec: int, data: bytes, *, magic: int = 2) -> bytes:
    """Compress `data` the way a Kafka Java producer/broker would for this codec and magic."""
    if codec == Codec.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Codec.SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == Codec.LZ4:
        return _lz4_frame_compress(data, broken_checksum=magic == 0)
    if codec == Codec.ZSTD:
        if magic < 2:
            raise ValueError("zstd needs magic 2 (Kafka rejects zstd in legacy messages)")
        return bytes(cramjam.zstd.compress(data, level=3))
    raise ValueError(f"codec {_codec_name(codec)} is not a compression codec")


def _codec_name(codec: int) -> str:
    try:
        return Codec(codec).kafka_name
    except ValueError:
        return f"unknown({codec})"


def _too_big(codec: int, limit: int, position: int | None) -> DecompressedSizeError:
    return DecompressedSizeError(
        f"codec {_codec_name(codec)}: decompressed size over the limit of {limit} bytes "
        "(a decompression bomb, or raise the limit: --max-batch-bytes)",
        part="batch",
        byte_position=position,
    )


def _bounded(
    decompress_into: Any,
    data: bytes | memoryview,
    limit: int,
    hint: int,
    codec: int,
    position: int | None,
) -> bytes:
    """Decompress into buffers growing from a guess up to limit + 1 bytes: one byte more than
    the limit tells a payload of exactly `limit` bytes from a bigger one without ever holding
    more than the bound."""
    size = min(limit + 1, max(_FIRST_GUESS_MIN, hint + 1, _GROWTH * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise
            if size > limit:
                raise _too_big(codec, limit, position) from None
            size = min(limit + 1, size * _GROWTH)
            continue
        if n > limit:
            raise _too_big(codec, limit, position)
        return bytes(memoryview(out)[:n])


def _gzip_size_hint(data: bytes | memoryview) -> int:
    """ISIZE, the gzip trailer's uncompressed size (mod 2^32): right for single-member streams."""
    if len(data) < 18:
        return 0
    return int.from_bytes(bytes(data[-4:]), "little")


# --- snappy -----------------------------------------------------------------------------------


def _snappy_decompress(data: bytes, position: int | None, limit: int) -> bytes:
    if data.startswith(XERIAL_MAGIC):
        return _snappy_xerial_decompress(data, position, limit)
    if data.startswith(_SNAPPY_FRAMED_MAGIC):
        return _bounded(cramjam.snappy.decompress_into, data, limit, 0, Codec.SNAPPY, position)
    if cramjam.snappy.decompress_raw_len(data) > limit:
        raise _too_big(Codec.SNAPPY, limit, position)
    return bytes(cramjam.snappy.decompress_raw(data))


def _snappy_xerial_decompress(data: bytes, position: int | None, limit: int) -> bytes:
    if len(data) < len(_XERIAL_HEADER):
        raise DecodeError(
            "codec snappy: truncated xerial header", part="batch", byte_position=position
        )
    pos = len(_XERIAL_HEADER)
    end = len(data)
    out: list[bytes] = []
    total = 0
    while pos < end:
        if pos + 4 > end:
            raise DecodeError(
                "codec snappy: truncated xerial chunk length", part="batch", byte_position=position
            )
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        pos += 4
        if size < 0 or pos + size > end:
            raise DecodeError(
                f"codec snappy: xerial chunk length {size} exceeds the data",
                part="batch",
                byte_position=position,
            )
        chunk = data[pos : pos + size]
        total += cramjam.snappy.decompress_raw_len(chunk)
        if total > limit:
            raise _too_big(Codec.SNAPPY, limit, position)
        out.append(bytes(cramjam.snappy.decompress_raw(chunk)))
        pos += size
    return b"".join(out)


def _snappy_xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        chunk = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts.append(len(chunk).to_bytes(4, "big"))
        parts.append(chunk)
    return b"".join(parts)


# --- lz4 --------------------------------------------------------------------------------------


def _lz4_descriptor_length(data: bytes) -> int:
    """Bytes of the frame descriptor (FLG, BD, optional content size / dict id), without HC."""
    flg = data[4]
    return 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _lz4_repair_header_checksum(data: bytes) -> bytes:
    """Magic 0 frames: Kafka ignores the (historically mis-computed) header checksum."""
    if len(data) < 7 or not data.startswith(_LZ4_MAGIC):
        return data  # let the decompressor report it
    dlen = _lz4_descriptor_length(data)
    hc_at = 4 + dlen
    if hc_at >= len(data):
        return data
    correct = (xxh32(data[4:hc_at]) >> 8) & 0xFF
    if data[hc_at] == correct:
        return data
    return data[:hc_at] + bytes((correct,)) + data[hc_at + 1 :]


def _lz4_frame_compress(data: bytes, *, broken_checksum: bool) -> bytes:
    """An LZ4 frame exactly as Kafka writes it: independent 64 KiB blocks, no checksums."""
    flg, bd = 0x60, 0x40  # version 01, block independence; max block size 64 KiB
    descriptor = bytes((flg, bd))
    hc_input = _LZ4_MAGIC + descriptor if broken_checksum else descriptor
    parts = [_LZ4_MAGIC, descriptor, bytes(((xxh32(hc_input) >> 8) & 0xFF,))]
    for start in range(0, len(data), _LZ4_BLOCK):
        chunk = data[start : start + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            parts.append((len(chunk) | 0x80000000).to_bytes(4, "little"))
            parts.append(chunk)
        else:
            parts.append(len(block).to_bytes(4, "little"))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")  # end mark
    return b"".join(parts)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _lane(data: bytes, i: int) -> int:
    return int.from_bytes(data[i : i + 4], "little")


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 (used by the LZ4 frame header checksum); pure Python, meant for short inputs."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            v1 = (_rotl((v1 + _lane(data, i) * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + _lane(data, i + 4) * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + _lane(data, i + 8) * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + _lane(data, i + 12) * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + n) & _M32
    while i + 4 <= n:
        acc = (_rotl((acc + _lane(data, i) * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        acc = (_rotl((acc + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc
