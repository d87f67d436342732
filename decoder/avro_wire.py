"""Avro's binary encoding of a long, read without fastavro: what the archive's block reader
(spark_jobs/sources/archive.py) and the restart's read-back of republished Avro values
(exporter/sinks/resume_dedup.py) need, and no more (importing fastavro is kept off the
exporter's start-up)."""

from __future__ import annotations


class Truncated(Exception):
    """Data ends inside a varint or a declared length."""


def read_long(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """An Avro int or long (zigzag varint) at `position`: (value, next position). Raises
    Truncated past the end, ValueError for a varint longer than 10 bytes."""
    shift = 0
    result = 0
    while True:
        if position >= len(data):
            raise Truncated
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
