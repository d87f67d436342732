"""Decode + apply: the pure stage between fetched messages and the state store.

Every message either becomes a decoded record applied to the state (and handed to the
sinks), or - when its bytes are bad - is counted by reason and handed to the quarantine
callback with its error. Nothing is dropped silently and nothing stops the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.records import AnyRecord, Record
from offsetwatch.decoder.registry import RECORD_TYPES
from offsetwatch.exporter.state import OffsetState
from offsetwatch.exporter.stats import PipelineStats


class RawMessage(Protocol):
    """What a fetched message offers (confluent_kafka.Message and test doubles alike)."""

    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class Quarantined:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    error: DecodeError


RecordSink = Callable[[AnyRecord], None]
QuarantineSink = Callable[[Quarantined], None]


@dataclass(slots=True)
class Ingestor:
    state: OffsetState
    stats: PipelineStats
    codec: Codec = field(default_factory=Codec)
    #: called with every decoded record, in order (republish, archive)
    sinks: list[RecordSink] = field(default_factory=list)
    #: called with every undecodable message (dead-letter topic, log line)
    quarantine: list[QuarantineSink] = field(default_factory=list)
    #: next offset to read per __consumer_offsets partition, after what was applied
    positions: dict[int, int] = field(default_factory=dict)

    def ingest(self, messages: Iterable[RawMessage]) -> int:
        """Decode and apply a batch; returns how many messages were handled.

        Per message, in order: decode, apply to the state, hand to the sinks, advance the
        position (or count and quarantine it when it cannot be decoded). The decoding side
        is a generator that `OffsetState.apply_many` pulls from: the state applies each
        record before the generator resumes, hands it to the sinks and decodes the next.
        """
        # Counts reach the stats once per batch, positions once per run of messages from one
        # partition: consecutive records mostly share their (key type, version) and their
        # partition, so each costs two comparisons instead of a tuple and two dict updates.
        counts: dict[tuple[int, int | None], int] = {}
        handled = 0

        def decoded() -> Generator[Record, None, None]:
            nonlocal handled
            decode = self.codec.decode
            sinks = self.sinks
            positions = self.positions
            run_type: int = -1
            run_version: int | None = -1
            run = 0
            # the partition of the current run of messages, and the position after it
            run_partition = -1
            position = 0
            n = 0
            try:
                for message in messages:
                    partition = message.partition() or 0
                    offset = message.offset() or 0
                    timestamp = message.timestamp()[1]
                    try:
                        record = decode(
                            message.key(), message.value(), partition, offset, timestamp
                        )
                    except DecodeError as error:
                        self._quarantine(Quarantined(
                            partition, offset, timestamp, message.key(), message.value(), error
                        ))  # fmt: skip
                    else:
                        if type(record) is Record:
                            key_type = record.key_type
                            version = record.value_version
                            yield record  # applied when the state asks for the next one
                        else:
                            key_type = version = -1  # unknown key type: version label "-1"
                        if key_type != run_type or version != run_version:
                            if run:
                                kind = (run_type, run_version)
                                counts[kind] = counts.get(kind, 0) + run
                            run_type, run_version, run = key_type, version, 0
                        run += 1
                        if sinks:
                            for sink in sinks:
                                sink(record)
                    if partition != run_partition:
                        if run_partition >= 0:
                            positions[run_partition] = position
                        run_partition = partition
                    position = offset + 1
                    n += 1
            finally:
                # also when a sink raised: what was handled before stays counted as before
                if run_partition >= 0:
                    positions[run_partition] = position
                handled = n
            if run:
                kind = (run_type, run_version)
                counts[kind] = counts.get(kind, 0) + run

        records = decoded()
        try:
            self.state.apply_many(records)
        finally:
            records.close()  # when apply raised: settle positions and counts now
        for (key_type, version), n in counts.items():
            name = RECORD_TYPES[key_type].name if key_type in RECORD_TYPES else "unknown"
            self.stats.count_record(name, version, n)
        return handled

    def _quarantine(self, item: Quarantined) -> None:
        self.stats.count_error(item.error.kind)
        for sink in self.quarantine:
            sink(item)
