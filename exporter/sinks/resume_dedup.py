"""Exactly once across an exporter crash: what was already written after the checkpoint.

The checkpoint positions lie behind the last record the sinks took (deliveries still
unconfirmed, a checkpoint interval of records since). After a crash the exporter reads from
those positions again, so without this module every record between the checkpoint and the
crash would be published and archived a second time.

The pieces:

* `SinceMarks` gives every checkpoint, per `__consumer_offsets` partition, a wall-clock lower
  bound ("since") for the moment any sink was handed a record at or after the checkpointed
  position. It keeps a few (position, time) marks taken before records are ingested: a mark
  (o, t) says that every record at offset >= o reached the sinks at t or later, so the newest
  mark at or below a checkpoint position is such a bound. Records found after a restart (and so
  not written again) keep the bound of the checkpoint they were found with until the
  checkpoint passes them: they were written by the previous run, before any mark of this one.
* `scan_topics` reads the republished topic (and the dead-letter topic) from
  `offsets_for_times(since - margin)` to its end and collects the source positions that the
  headers `offsetwatch.source.*` name at or after the checkpoint positions.
* `scan_archive` does the same with the archive files modified since `since - margin`
  (salvaged in-progress files included: salvaging rewrites them).
* `SkipSet` answers, per record read again, whether a sink already has it. Memory is bounded
  by what was written after the checkpoint: positions below it are never collected, and a
  partition's set is dropped once reading passed its last entry. In a fleet it also holds,
  per partition gained, the position its earlier owners' sinks reached (every record below
  it is skipped: exporter/sinks/fleet_sinks.py), and the partitions being handed over
  (nothing of theirs is written any more).

A wrong bound can only cost duplicates (what the scan does not reach is written again), never
a loss: only positions actually found are skipped.
"""

from __future__ import annotations

import gzip
import logging
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from offsetwatch.decoder import contract
from offsetwatch.decoder.avro_wire import Truncated, read_long
from offsetwatch.exporter.sinks.publisher import (
    HEADER_SOURCE,
    HEADER_SOURCE_CLUSTER,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
)

log = logging.getLogger(__name__)

#: scanned before the bound too: the output topic may stamp LogAppendTime with the broker's
#: clock, and a file system's clock may differ from ours by a little
MARGIN_MS: Final = 60_000
#: marks are taken at most this often (one per partition each time)
MARK_INTERVAL_MS: Final = 1_000
#: marks kept per partition while checkpoints fail; dropping old marks only loosens the bound
MAX_MARKS: Final = 4_096


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------------------------------
# Lower bounds in time for checkpoints
# ------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class PartitionMarks:
    """One partition's marks, as `SinceMarks.take` hands them to another exporter."""

    start_ms: int
    marks: tuple[tuple[int, int], ...]
    floor: tuple[int, int] | None


@dataclass(slots=True)
class SinceMarks:
    """Per source partition, when the sinks could first have taken a record at or after a
    position (see the module docs). Used by the main loop only (not thread-safe)."""

    #: for partitions with no mark at or below the position: nothing reached the sinks before
    start_ms: int = field(default_factory=_now_ms)
    _marks: dict[int, deque[tuple[int, int]]] = field(default_factory=dict)
    #: partition -> (last position found already written, the bound it was found with)
    _floors: dict[int, tuple[int, int]] = field(default_factory=dict)
    _next_ms: int = 0

    def due(self, now_ms: int) -> bool:
        """Whether `note` would take marks now (a second since the last ones)."""
        return now_ms >= self._next_ms

    def note(self, positions: Mapping[int, int], now_ms: int, force: bool = False) -> None:
        """Call before ingesting: `positions` are the next offsets to read, so every record
        at or after them reaches the sinks from now on. Name every partition read, with 0 for
        those nothing was read from yet (else a partition's first records get the bound of
        the start, and a restart reads the output back from then)."""
        if not force and now_ms < self._next_ms:
            return
        self._next_ms = now_ms + MARK_INTERVAL_MS
        for partition, position in positions.items():
            marks = self._marks.get(partition)
            if marks is None:
                marks = self._marks[partition] = deque()
            elif marks[-1][0] == position:
                # nothing read since: the newer time is the tighter (still true) bound
                marks[-1] = (position, now_ms)
                continue
            marks.append((position, now_ms))
            if len(marks) > MAX_MARKS:
                marks.popleft()

    def bounds(self, positions: Mapping[int, int]) -> dict[int, int]:
        """The bound of each checkpointed position; forgets marks the next checkpoint cannot
        need (positions only move forward until `reset`)."""
        out: dict[int, int] = {}
        for partition, position in positions.items():
            bound = self.start_ms
            marks = self._marks.get(partition)
            if marks:
                while len(marks) > 1 and marks[1][0] <= position:
                    marks.popleft()
                if marks[0][0] <= position:
                    bound = marks[0][1]
            floor = self._floors.get(partition)
            if floor is not None:
                if position <= floor[0]:
                    bound = min(bound, floor[1])
                else:
                    del self._floors[partition]
            out[partition] = bound
        return out

    def found(self, partition: int, last_offset: int, bound_ms: int) -> None:
        """A previous run wrote records of `partition` up to `last_offset` at `bound_ms` or
        later (found by a scan): later checkpoints before them keep that bound."""
        known = self._floors.get(partition)
        if known is not None:
            last_offset, bound_ms = max(last_offset, known[0]), min(bound_ms, known[1])
        self._floors[partition] = (last_offset, bound_ms)

    def take(self, partition: int) -> PartitionMarks:
        """Remove and return `partition`'s marks (it moves to another exporter)."""
        return PartitionMarks(
            self.start_ms,
            tuple(self._marks.pop(partition, ())),
            self._floors.pop(partition, None),
        )

    def put(self, partition: int, marks: PartitionMarks) -> None:
        """Take over marks another exporter's `take` returned. Its start bound comes along
        as the oldest mark, so a checkpoint before every mark keeps that exporter's bound."""
        merged = [(0, marks.start_ms), *marks.marks] if marks.start_ms < self.start_ms else []
        if not merged:
            merged = list(marks.marks)
        if merged:
            self._marks[partition] = deque(merged[-MAX_MARKS:])
        if marks.floor is not None:
            self._floors[partition] = marks.floor

    def reset(self, now_ms: int) -> None:
        """The source starts over (rebuild): what was written before now may be read again
        and written again, as without this module."""
        self._marks.clear()
        self._floors.clear()
        self.start_ms = now_ms
        self._next_ms = 0


# ------------------------------------------------------------------------------------------
# Positions already written
# ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SkipSet:
    """Source positions a sink already holds: each is skipped once when read again."""

    _by_partition: dict[int, set[int]] = field(default_factory=dict)
    _last: dict[int, int] = field(default_factory=dict)
    #: partition -> every record below this offset is skipped (dropped once read past)
    _floors: dict[int, int] = field(default_factory=dict)
    #: partitions whose records are all skipped (handed to another exporter)
    _closed: set[int] = field(default_factory=set)
    skipped: int = 0

    @classmethod
    def of(cls, positions: Iterable[tuple[int, int]]) -> SkipSet:
        skip = cls()
        for partition, offset in positions:
            skip.add(partition, offset)
        return skip

    def add(self, partition: int, offset: int) -> None:
        self._by_partition.setdefault(partition, set()).add(offset)
        if offset > self._last.get(partition, -1):
            self._last[partition] = offset

    def __len__(self) -> int:
        return sum(len(offsets) for offsets in self._by_partition.values())

    def __bool__(self) -> bool:
        return bool(self._by_partition or self._floors or self._closed)

    def floor(self, partition: int, offset: int) -> None:
        """Skip every record of `partition` below `offset` (a sink has them all)."""
        if offset > 0:
            self._floors[partition] = offset

    def close(self, partition: int) -> None:
        """Skip every record of `partition` from now on (until `take_partition`)."""
        self._closed.add(partition)

    def last_offsets(self) -> dict[int, int]:
        return dict(self._last)

    def take(self, partition: int, offset: int) -> bool:
        """True (once) when the sink already has this record: do not write it again."""
        if self._closed and partition in self._closed:
            self.skipped += 1
            return True
        if self._floors:
            floor = self._floors.get(partition)
            if floor is not None:
                if offset < floor:
                    self.skipped += 1
                    return True
                del self._floors[partition]  # read past it
        offsets = self._by_partition.get(partition)
        if offsets is None:
            return False
        if offset in offsets:
            offsets.discard(offset)
            if not offsets:
                self._drop(partition)
            self.skipped += 1
            return True
        if offset > self._last[partition]:
            # read past every entry: what is left was compacted away meanwhile
            self._drop(partition)
        return False

    def take_partition(self, partition: int) -> frozenset[int]:
        """Remove and return the offsets of `partition` still to be skipped (its floor and
        closing go too: the partition is another exporter's)."""
        self._floors.pop(partition, None)
        self._closed.discard(partition)
        offsets = self._by_partition.get(partition)
        if offsets is None:
            return frozenset()
        self._drop(partition)
        return frozenset(offsets)

    def put_partition(self, partition: int, offsets: Iterable[int]) -> None:
        for offset in offsets:
            self.add(partition, offset)

    def _drop(self, partition: int) -> None:
        del self._by_partition[partition]
        del self._last[partition]

    def clear(self) -> None:
        self._by_partition.clear()
        self._last.clear()
        self._floors.clear()
        # a partition being handed over stays closed: a rebuild does not make it ours again


def _int_header(value: bytes | str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def source_position(
    headers: Iterable[tuple[str, bytes | str | None]] | None,
    source_topic: str,
    cluster_id: str | None,
) -> tuple[int, int] | None:
    """The source position a republished record or dead letter names, if it is one of ours."""
    if not headers:
        return None
    named: dict[str, bytes | str | None] = dict(headers)
    compact = named.get(HEADER_SOURCE)
    if compact is not None:
        return _compact_position(_text(compact), source_topic, cluster_id)
    partition = _int_header(named.get(HEADER_SOURCE_PARTITION))
    offset = _int_header(named.get(HEADER_SOURCE_OFFSET))
    if partition is None or offset is None:
        return None
    topic = named.get(HEADER_SOURCE_TOPIC)
    if topic is not None and _text(topic) != source_topic:
        return None
    cluster = named.get(HEADER_SOURCE_CLUSTER)
    if cluster is not None and cluster_id is not None and _text(cluster) != cluster_id:
        return None
    return partition, offset


def _compact_position(
    text: str, source_topic: str, cluster_id: str | None
) -> tuple[int, int] | None:
    """CLUSTER/TOPIC/PARTITION/OFFSET (publisher.HEADER_SOURCE), if it is one of ours."""
    parts = text.split("/")
    if len(parts) != 4 or parts[1] != source_topic:
        return None
    cluster = parts[0]
    if cluster and cluster_id is not None and cluster != cluster_id:
        return None
    partition, offset = _int_header(parts[2]), _int_header(parts[3])
    if partition is None or offset is None:
        return None
    return partition, offset


#: the JSON envelope's position, as in archive lines (`_POSITION` below)
def _json_value_position(value: bytes) -> tuple[int, int] | None:
    found = _POSITION.search(value)
    return None if found is None else (int(found[1]), int(found[2]))


def avro_value_position(body: bytes) -> tuple[int, int] | None:
    """partition and offset of a bare Avro body of offsetwatch.CanonicalRecord, read from
    the envelope's first fields (type, key_type, value_version, tombstone, newer_version,
    partition, offset: decoder/contract.py) without decoding the rest."""
    try:
        length, at = read_long(body, 0)
        at += length  # type
        _key_type, at = read_long(body, at)
        branch, at = read_long(body, at)  # value_version: null | int
        if branch == 1:
            _version, at = read_long(body, at)
        elif branch != 0:
            return None
        at += 2  # tombstone, newer_version: one byte each
        partition, at = read_long(body, at)
        offset, _at = read_long(body, at)
    except (Truncated, ValueError):
        return None
    return partition, offset


def value_position_reader(
    publish_format: str, framed: bool
) -> Callable[[bytes], tuple[int, int] | None]:
    """How to read the source position from a republished value (`--publish-headers none`):
    the envelope's `partition` and `offset`, which equal the source headers' by contract."""
    if publish_format != "avro":
        return _json_value_position
    if not framed:
        return avro_value_position
    return lambda value: avro_value_position(value[5:]) if value[:1] == b"\x00" else None


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def scan_topics(
    config: Mapping[str, object],
    topics: Iterable[str],
    positions: Mapping[int, int],
    since_ms: int,
    *,
    source_topic: str,
    cluster_id: str | None,
    timeout_s: float = 60.0,
    values_of: tuple[str, Callable[[bytes], tuple[int, int] | None]] | None = None,
) -> set[tuple[int, int]]:
    """Source positions at or after `positions` named by the records of `topics` produced
    since `since_ms - MARGIN_MS` (read_committed, to the end as of now). `values_of`
    (topic, reader): that topic's records without source headers name their position in
    their value (`--publish-headers none`); log-end samples name partition -1.

    A topic that does not exist holds nothing. A scan cut short (timeout, broker error) keeps
    what it found and logs a warning: what was not found is written again (a duplicate, never a
    loss)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer_config: dict[str, object] = dict(config)
    consumer_config.update(
        {
            "group.id": f"offsetwatch-resume-{uuid.uuid4().hex}",  # never joins, never commits
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "latest",
            "client.id": "offsetwatch-resume-scan",
        }
    )
    consumer_config.setdefault("logger", logging.getLogger(f"{__name__}.librdkafka"))
    consumer = Consumer(consumer_config)
    found: set[tuple[int, int]] = set()
    deadline = time.monotonic() + timeout_s
    try:
        ranges = _ranges(consumer, topics, since_ms - MARGIN_MS, deadline)
        if not ranges:
            return found
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in ranges.items()])
        pending = set(ranges)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"still reading {sorted(pending)} after {timeout_s:g} s")
            for message in consumer.consume(10_000, min(left, 1.0)):
                where = (str(message.topic()), int(message.partition() or 0))
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(where)
                    continue
                if int(message.offset() or 0) >= ranges[where][1] - 1:
                    pending.discard(where)
                headers: Any = message.headers()
                named = source_position(headers, source_topic, cluster_id)
                if named is None and values_of is not None and where[0] == values_of[0]:
                    value = message.value()
                    named = None if not value else values_of[1](value)
                if named is not None and named[0] >= 0 and named[1] >= positions.get(named[0], 0):
                    found.add(named)
    except (KafkaException, TimeoutError) as error:
        log.warning(
            "reading back what was published since the checkpoint stopped early (%s): records "
            "not found are published again (duplicates)",
            error,
        )
    finally:
        consumer.close()
    return found


def _ranges(
    consumer: Any, topics: Iterable[str], since_ms: int, deadline: float
) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (first offset at or after since_ms, high watermark) to read."""
    from confluent_kafka import TopicPartition

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    out: dict[tuple[str, int], tuple[int, int]] = {}
    for topic in topics:
        metadata = consumer.list_topics(topic, timeout=left()).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            continue  # no such topic (yet): nothing was published to it
        asked = [TopicPartition(topic, p, max(since_ms, 0)) for p in sorted(metadata.partitions)]
        for answer in consumer.offsets_for_times(asked, timeout=left()):
            if answer.offset < 0:
                continue  # nothing at or after the bound
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, answer.partition), timeout=left()
            )
            if answer.offset < high:
                out[(topic, answer.partition)] = (answer.offset, high)
    return out


def archive_files(directory: Path, since_ms: int) -> Iterator[Path]:
    """Archive files (final names) modified since `since_ms - MARGIN_MS`."""
    for path in sorted(directory.glob("date=*/hour=*/offsetwatch-*")):
        try:
            modified_ms = path.stat().st_mtime_ns // 1_000_000
        except FileNotFoundError:
            continue
        if modified_ms >= since_ms - MARGIN_MS:
            yield path


#: canonical JSON writes the envelope first (decoder/contract.py ENVELOPE): the first
#: "partition" of a line is the record's own, followed by its "offset" (nested objects come
#: after them), so a search finds the position without parsing the whole line
_POSITION: Final = re.compile(rb'"partition":(-?\d+),"offset":(-?\d+)')


def _positions(path: Path) -> Iterator[tuple[int, int]]:
    """(partition, offset) of every record of an archive file (log-end samples included)."""
    name = path.name
    if name.endswith(".avro"):
        from offsetwatch.decoder.avro import AvroCodec

        for record in AvroCodec().read_container(path):
            partition, offset = record.get(contract.PARTITION), record.get(contract.OFFSET)
            if isinstance(partition, int) and isinstance(offset, int):
                yield partition, offset
        return
    opener = gzip.open if name.endswith(".gz") else open
    search = _POSITION.search
    with opener(path, "rb") as lines:
        for line in lines:
            found = search(line)
            if found is not None:
                yield int(found[1]), int(found[2])
            elif line.strip():
                raise ValueError(f"a line with no position: {line[:80]!r}")


def scan_archive(
    directory: Path, positions: Mapping[int, int], since_ms: int
) -> set[tuple[int, int]]:
    """Source positions at or after `positions` held by the archive files written since
    `since_ms - MARGIN_MS`. Call it after the writer salvaged the in-progress files. A file
    that cannot be read is logged and left out (its records are archived again)."""
    found: set[tuple[int, int]] = set()
    for path in archive_files(directory, since_ms):
        try:
            for partition, offset in _positions(path):
                # log-end samples have partition -1: not records of the source
                if partition >= 0 and offset >= positions.get(partition, 0):
                    found.add((partition, offset))
        except Exception as error:  # any reader error: archive those records again
            log.warning(
                "archive file %s could not be read back (%s): records after the checkpoint in "
                "it may be archived again",
                path,
                error,
            )
    return found
