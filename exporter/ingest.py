"""Decode + apply: the pure stage between fetched messages and the state store.

Every message either becomes a decoded record applied to the state (and handed to the
sinks), or - when its bytes are bad - is counted by reason and handed to the quarantine
callback with its error. Nothing is dropped silently and nothing stops the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from decoder.codec import Codec
from decoder.errors import DecodeError
from decoder.records import AnyRecord, Record
from decoder.registry import RECORD_TYPES
from exporter.state import OffsetState
from exporter.stats import PipelineStats


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
        """Decode and apply a batch; returns how many messages were handled."""
        decode = self.codec.decode
        apply = self.state.apply
        # counted per batch, handed to the stats once: the per-record cost stays one dict op
        counts: dict[tuple[int, int | None], int] = {}
        sinks = self.sinks
        positions = self.positions
        handled = 0
        for message in messages:
            partition = message.partition() or 0
            offset = message.offset() or 0
            timestamp = message.timestamp()[1]
            try:
                record = decode(message.key(), message.value(), partition, offset, timestamp)
            except DecodeError as error:
                self._quarantine(Quarantined(
                    partition, offset, timestamp, message.key(), message.value(), error
                ))  # fmt: skip
            else:
                if isinstance(record, Record):
                    apply(record)
                    kind = (record.key_type, record.value_version)
                else:
                    kind = (-1, -1)  # unknown key type: version label "-1"
                counts[kind] = counts.get(kind, 0) + 1
                for sink in sinks:
                    sink(record)
            positions[partition] = offset + 1
            handled += 1
        for (key_type, version), n in counts.items():
            name = RECORD_TYPES[key_type].name if key_type in RECORD_TYPES else "unknown"
            self.stats.count_record(name, version, n)
        return handled

    def _quarantine(self, item: Quarantined) -> None:
        self.stats.count_error(item.error.kind)
        for sink in self.quarantine:
            sink(item)
