"""Offset planning of the `kafka` source: positions -> per-partition offset ranges. Pure.

Everything here works on numbers the driver fetched from the cluster (watermarks and
timestamp lookups), so the rules are tested without Kafka. A range is half-open
`[start, end)`; with `read_committed` (the source's default) librdkafka asks ListOffsets with
that isolation level, so the "high" watermark is the last stable offset and a planned range
never reaches into an open transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from offsetwatch.spark_jobs.sources.kafka_options import EARLIEST, LATEST, PositionSpec


class DataLossError(RuntimeError):
    """Offsets to read are gone (retention, DeleteRecords, a recreated topic)."""


@dataclass(frozen=True, slots=True)
class Watermarks:
    low: int  # log start offset
    high: int  # log end offset (last stable offset under read_committed)


@dataclass(frozen=True, slots=True)
class OffsetRange:
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


#: stream offsets as Structured Streaming stores them: {"<topic>": {"<partition>": offset}}
StreamOffset = dict[str, dict[str, int]]


def offset_for_timestamp(found: int, watermarks: Watermarks) -> int:
    """The offset a timestamp lookup (ListOffsets by time) resolves to.

    Kafka answers the first offset whose record timestamp is >= T, or -1 when no record is
    that recent: reading then starts (or stops) at the end, as Spark's connector does with
    its "latest" strategy. librdkafka's mock cluster answers -1 to every timestamp lookup,
    so on the mock a timestamp always means "the end".
    """
    return watermarks.high if found < 0 else max(found, watermarks.low)


def resolve(
    spec: PositionSpec,
    partition: int,
    watermarks: Watermarks,
    timestamp_offsets: Mapping[int, int],
    default: int,
) -> int:
    """The concrete offset `spec` names for one partition.

    `default` (a sentinel, EARLIEST or LATEST) applies to partitions a per-partition spec
    does not list, e.g. partitions added after the job was written.
    """
    if spec.kind == "earliest":
        return watermarks.low
    if spec.kind == "latest":
        return watermarks.high
    if spec.kind == "timestamp":
        found = timestamp_offsets.get(partition)
        if found is None:
            return _sentinel(default, watermarks)
        return offset_for_timestamp(found, watermarks)
    return _sentinel(spec.per_partition.get(partition, default), watermarks)


def _sentinel(offset: int, watermarks: Watermarks) -> int:
    if offset == EARLIEST:
        return watermarks.low
    if offset == LATEST:
        return watermarks.high
    return offset


def timestamps_to_look_up(spec: PositionSpec, partitions: Iterable[int]) -> dict[int, int]:
    """partition -> timestamp (ms) for the ListOffsets-by-time request `spec` needs."""
    if spec.kind != "timestamp":
        return {}
    if spec.everywhere is not None:
        return {p: spec.everywhere for p in partitions}
    return {p: ts for p, ts in spec.per_partition.items() if p in set(partitions)}


def plan_ranges(
    starts: Mapping[int, int],
    ends: Mapping[int, int],
    watermarks: Mapping[int, Watermarks],
    topic: str,
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """Non-empty ranges per partition, checked against what the log still holds.

    A start below the log start means records were removed before they were read: an error
    with failOnDataLoss (the default), otherwise reading starts at the log start. An end past
    the log end is cut there (nothing beyond it can be read now).
    """
    ranges: list[OffsetRange] = []
    for partition in sorted(starts):
        marks = watermarks[partition]
        start, end = starts[partition], min(ends.get(partition, marks.high), marks.high)
        if start < marks.low or start > marks.high:
            if fail_on_data_loss:
                raise DataLossError(
                    f"{topic}[{partition}]: offset {start} is outside the log "
                    f"[{marks.low}, {marks.high}) (records removed or topic recreated); "
                    "set option failOnDataLoss=false to read what is left"
                )
            start = marks.low if start < marks.low else end
        if start < end:
            ranges.append(OffsetRange(partition, start, end))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Cut big ranges so there are at least `min_partitions` Spark partitions.

    Each range gets a share of the target in proportion to its size (at least one piece), so
    a skewed topic spreads its big partitions over several tasks, as `minPartitions` does in
    Spark's connector.
    """
    total = sum(r.size for r in ranges)
    if min_partitions is None or len(ranges) >= min_partitions or total == 0:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, round(r.size * min_partitions / total)))
        bounds = [r.start + r.size * i // pieces for i in range(pieces + 1)]
        out.extend(OffsetRange(r.partition, a, b) for a, b in pairwise(bounds))
    return out


def limit_ends(
    starts: Mapping[int, int], latest: Mapping[int, int], max_records: int
) -> dict[int, int]:
    """End offsets that read at most `max_records` records in all (maxOffsetsPerTrigger).

    Shared in proportion to what each partition has waiting (as Spark's connector does);
    rounding leftovers go to the partitions with most waiting, so every trigger makes
    progress while anything waits.
    """
    waiting = {p: max(0, latest[p] - starts.get(p, latest[p])) for p in latest}
    total = sum(waiting.values())
    if total <= max_records:
        return dict(latest)
    share = {p: n * max_records // total for p, n in waiting.items()}
    leftover = max_records - sum(share.values())
    for p in sorted(waiting, key=lambda q: waiting[q] - share[q], reverse=True):
        if leftover <= 0:
            break
        extra = min(leftover, waiting[p] - share[p])
        share[p] += extra
        leftover -= extra
    return {p: starts.get(p, latest[p]) + share[p] for p in latest}


def to_stream_offset(topic: str, offsets: Mapping[int, int]) -> StreamOffset:
    return {topic: {str(p): offsets[p] for p in sorted(offsets)}}


def from_stream_offset(topic: str, offset: Mapping[str, object]) -> dict[int, int]:
    """The per-partition offsets of a stream offset (as stored in a checkpoint)."""
    per_partition = offset.get(topic)
    if not isinstance(per_partition, Mapping):
        raise ValueError(
            f"stream offset {dict(offset)!r} is not for topic {topic!r}: the checkpoint belongs "
            "to a query that read another topic"
        )
    return {int(p): int(o) for p, o in per_partition.items()}
