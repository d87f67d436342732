"""Offsets as CSV `topic,partition,offset`, no header: what kafka-consumer-groups
`--reset-offsets --export` writes and `--from-file` reads."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping

from offsetwatch.offset_ops.model import OffsetOpsError, TopicPartitionKey


def parse_offsets_csv(text: str, source: str) -> dict[TopicPartitionKey, int]:
    """Rows in file order; a malformed or repeated row is an error naming its line."""
    out: dict[TopicPartitionKey, int] = {}
    lines: dict[TopicPartitionKey, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        try:
            if len(fields) != 3 or not fields[0]:
                raise ValueError
            key = (fields[0], int(fields[1]))
            offset = int(fields[2])
            if key[1] < 0 or offset < 0:
                raise ValueError
        except ValueError:
            raise OffsetOpsError(
                f"{source} line {number}: expected topic,partition,offset with numbers >= 0, "
                f"got {line.strip()!r}"
            ) from None
        if key in lines:
            raise OffsetOpsError(
                f"{source} line {number}: {key[0]}:{key[1]} repeats line {lines[key]}"
            )
        lines[key] = number
        out[key] = offset
    if not out:
        raise OffsetOpsError(f"{source}: no topic,partition,offset rows")
    return out


def offsets_csv(offsets: Mapping[TopicPartitionKey, int] | Iterable[tuple[str, int, int]]) -> str:
    rows = [(t, p, o) for (t, p), o in offsets.items()] if isinstance(offsets, Mapping) else offsets
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(sorted(rows))
    return buffer.getvalue()
