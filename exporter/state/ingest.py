"""Decode + apply: the pure stage between fetched messages and the state store.

Every message either becomes a decoded record applied to the state (and handed to the
sinks), or - when its bytes are bad - is counted by reason and handed to the quarantine
callback with its error. Nothing is dropped silently and nothing stops the stream.

C accelerator: with no sink to feed, offset commits (the bulk of any catch-up: value versions
0-4, the metadata clients send, a new group or table made as `OffsetState.apply_many` makes
it) are applied by `offsetwatch.exporter.state._ingest_speedups`
(exporter/state/_ingest_speedups.c) straight from the fetched messages into the state's columns,
with no Record objects. It stops at the first message it does not cover; that one message
takes the Python path below (the reference), and the C loop goes on after it.
`Ingestor.fast_path_records` counts what it applied per record kind.
`Ingestor(accelerate=False)` or OFFSETWATCH_NO_SPEEDUPS=1 turns it off;
tests/exporter/state/test_ingest_speedups.py checks both paths leave the same state.

With sinks (republishing, archiving) the C loop runs too when every sink takes encoded
batches (`EncodedSink`: the archive's and the publisher's guards, exporter/sinks/): the same
module's `encode_commits` builds each commit's canonical JSON and identity key from its bytes
(what `Canonical.to_json` and `identity_key` give for the decoded record, byte for byte:
tests/exporter/sinks/test_encoded_sinks.py), `apply_commits` applies them, and the sinks take
them as one `EncodedBatch`, in order. An Avro sink (--publish-format avro, an Avro archive)
asks the batch for `avro_items`: the same commits' Avro bodies, built from the bytes by
`encode_commits_avro` with the union branches `decoder.avro.commit_branches` derives from the
schema (what `AvroCodec.encode` writes, byte for byte: tests/exporter/sinks/test_encoded_avro.py);
a message it does not take is encoded on the Python path, that record alone. Anything else -
another record kind, a tombstone, bytes the encoder does not read to the last, a sink that
takes records one by one (the live stream while watched) - takes the Python path, record by
record, between the batches.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, cast

from offsetwatch.decoder.codec import WIRE_HEADER, Codec, built_from, in_use
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.records import AnyRecord, Record
from offsetwatch.decoder.registry import RECORD_TYPES
from offsetwatch.exporter.state.offset_state import GroupState, OffsetState, PartitionTable
from offsetwatch.exporter.stats import PipelineStats, UnknownSeen, version_label

log = logging.getLogger(__name__)

#: a key's type and a value's version: the big-endian int16 each starts with
_I16: Final = struct.Struct(">h")
#: the value versions the C loop covers (0-4) and its (key type 0/1, version) kinds
_C_VERSIONS: Final = 5
_C_KINDS: Final = 2 * _C_VERSIONS


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

#: one encoded commit: (partition, offset, timestamp) in `__consumer_offsets`, its identity
#: key and its canonical JSON, both UTF-8 bytes (`encode_commits`)
Encoded = tuple[int, int, int, bytes, bytes]


@dataclass(frozen=True, slots=True)
class AvroForm:
    """How an Avro sink wants a batch's commits: `header` before each body (Confluent's
    framing, or none), `spec` the C encoder's union branches (decoder.avro.commit_branches;
    None: every record on the Python path), `encode` the Python path of one record (the
    reference: header and body of its canonical dict)."""

    header: bytes
    spec: tuple[bytes | int, ...] | None
    encode: Callable[[AnyRecord], bytes]


@dataclass(slots=True)
class EncodedBatch:
    """Consecutive applied commits as the C encoder wrote them, for the sinks.

    `items[k]` is `messages[k]`'s; `record(k)` decodes that message on the Python path, for a
    sink that must keep a record it could not take (exporter/sinks/sink_guard.py).
    `avro_items(form)` is the same items with their Avro bodies in place of the JSON.

    With `json` false the encoder left the JSON out (b''; the ingest does so while no sink
    asked for it: every sink Avro); `items` builds it then, once, from the messages, so a
    sink that wants JSON always gets it. `json_asked` says whether one did."""

    encoded: list[Encoded]
    messages: list[RawMessage]
    codec: Codec
    json: bool = True
    json_asked: bool = False
    #: avro_items' answers by header: both Avro sinks of one header share them
    _avro: dict[bytes, list[Encoded]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.encoded)

    @property
    def items(self) -> list[Encoded]:
        self.json_asked = True
        if not self.json:
            encode = _encode_json()
            assert encode is not None  # a batch without JSON comes from the C encoder
            full: list[Encoded] = []
            if encode(self.messages, 0, full) != len(self.encoded):
                raise AssertionError("encode_commits covered other messages the second time")
            self.encoded, self.json = full, True
        return self.encoded

    def avro_items(self, form: AvroForm) -> list[Encoded]:
        """`items` with `form.header` + the record's Avro body as the value: built from the
        messages' bytes in C (`encode_commits_avro`) where it covers them, and for a message
        it does not (or without the module) by `form.encode` of the decoded record, that
        record alone."""
        done = self._avro.get(form.header)
        if done is not None:
            return done
        encode = _encode_avro() if form.spec is not None else None
        items = self.encoded  # the Avro encoder reads the messages, and the keys from these
        out: list[Encoded] = []
        n = len(items)
        k = 0
        while k < n:
            if encode is not None:
                k = encode(self.messages, items, k, form.spec, form.header, out)
                if k >= n:
                    break
            partition, offset, timestamp, key, _json = items[k]
            out.append((partition, offset, timestamp, key, form.encode(self.record(k))))
            k += 1
        self._avro[form.header] = out
        return out

    def record(self, k: int) -> AnyRecord:
        message = self.messages[k]
        return self.codec.decode(
            message.key(),
            message.value(),
            message.partition() or 0,
            message.offset() or 0,
            message.timestamp()[1],
        )


class EncodedSink(Protocol):
    """A sink that also takes encoded batches (the sinks' guards)."""

    def __call__(self, record: AnyRecord) -> None: ...

    @property
    def takes_encoded(self) -> bool: ...

    def take_encoded(self, batch: EncodedBatch) -> None: ...


_BUILT: Final = built_from(
    "offsetwatch.exporter.state._ingest_speedups",
    Path(__file__).with_name("_ingest_speedups.c"),
    (WIRE_HEADER,),
)


def ingest_accelerator() -> tuple[Any, str]:
    """(exporter.state._ingest_speedups or None, why it is not used)."""
    return in_use(_BUILT)


def _encode_json() -> Callable[..., int] | None:
    """The accelerator's `encode_commits`, or None."""
    module, _why = ingest_accelerator()
    return None if module is None else getattr(module, "encode_commits", None)


def _encode_avro() -> Callable[..., int] | None:
    """The accelerator's `encode_commits_avro`, or None (every record on the Python path)."""
    module, _why = ingest_accelerator()
    return None if module is None else getattr(module, "encode_commits_avro", None)


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
    #: apply plain offset commits through exporter.state._ingest_speedups when it is built
    accelerate: bool = True
    #: (record type name, value version label) -> records the C loop applied, keyed as
    #: `PipelineStats.records_total` (which counts every record, both paths): the rest of a
    #: kind went the Python path. A kind whose share drops (a new value version, a tag or
    #: metadata the C loop does not read) shows here before it shows as CPU.
    fast_path_records: dict[tuple[str, str], int] = field(default_factory=dict)
    _apply_commits: Any = field(default=None, init=False, repr=False, compare=False)
    _encode_commits: Any = field(default=None, init=False, repr=False, compare=False)
    #: whether the last batch's sinks read its JSON: when none did (every sink Avro), the
    #: next batches are encoded without it (EncodedBatch builds it if a sink asks after all)
    _json_wanted: bool = field(default=True, init=False, repr=False, compare=False)

    @property
    def encodes_json(self) -> bool:
        """Whether the next batch is encoded with its JSON (False while no sink reads it)."""
        return self._json_wanted

    def __post_init__(self) -> None:
        if self.accelerate:
            module, _why = ingest_accelerator()
            if module is not None:
                self._apply_commits = module.apply_commits
                self._encode_commits = getattr(module, "encode_commits", None)

    @property
    def accelerated(self) -> bool:
        return self._apply_commits is not None

    def ingest(self, messages: Iterable[RawMessage]) -> int:
        """Decode and apply a batch; returns how many messages were handled."""
        apply_commits = self._apply_commits
        if apply_commits is None or type(messages) is not list:
            return self._ingest(messages)
        if self.sinks:
            takers = self._encoded_takers()
            if takers is None:
                return self._ingest(messages)
            return self._ingest_encoded(messages, takers)
        # counts[key_type * 5 + version] of what the C loop applied (versions 0-4),
        # counts[10] all of it; filled in also when it raises, so the counters stay true
        counts = [0] * (_C_KINDS + 1)
        n = len(messages)
        i = 0
        # the window clock rolls only between batches (the judge): read once per batch
        clock = _clock_of(self.state)
        try:
            while True:
                i = apply_commits(
                    messages,
                    i,
                    self.state.groups,
                    self.positions,
                    counts,
                    GroupState,
                    PartitionTable,
                    clock,
                )
                if i >= n:
                    break
                self._ingest(messages[i : i + 1])
                i += 1
        finally:
            self._count_fast(counts)
        return n

    def _encoded_takers(self) -> list[Callable[[EncodedBatch], None]] | None:
        """Every sink's `take_encoded`, or None when a sink takes records only one by one."""
        if self._encode_commits is None:
            return None
        takers: list[Callable[[EncodedBatch], None]] = []
        for sink in self.sinks:
            if not getattr(sink, "takes_encoded", False):
                return None
            takers.append(cast(EncodedSink, sink).take_encoded)
        return takers

    def _ingest_encoded(
        self, messages: list[RawMessage], takers: list[Callable[[EncodedBatch], None]]
    ) -> int:
        """`ingest` with sinks that take encoded batches: runs of commits are encoded, then
        applied, then handed to every sink as one batch; each message the C loops stop at
        takes the Python path alone (applied, then handed to the sinks as a record), so the
        sinks see every record in the order of the messages."""
        encode = self._encode_commits
        apply_commits = self._apply_commits
        counts = [0] * (_C_KINDS + 1)
        n = len(messages)
        i = 0
        clock = _clock_of(self.state)
        try:
            while i < n:
                items: list[Encoded] = []
                end = encode(messages, i, items, self._json_wanted)
                if end > i:
                    chunk = messages if i == 0 and end == n else messages[i:end]
                    before = counts[_C_KINDS]
                    try:
                        applied = apply_commits(
                            chunk, 0, self.state.groups, self.positions, counts,
                            GroupState, PartitionTable, clock,
                        )  # fmt: skip
                    except BaseException:
                        # what it applied before raising is in the positions: the sinks
                        # get it too, or a checkpoint would pass records they never saw
                        self._hand_over(items, chunk, counts[_C_KINDS] - before, takers)
                        raise
                    self._hand_over(items, chunk, applied, takers)
                    i += applied
                    if i < end:  # the apply loop stopped before the encoder: that one alone
                        self._ingest(messages[i : i + 1])
                        i += 1
                    continue
                self._ingest(messages[i : i + 1])
                i += 1
        finally:
            self._count_fast(counts)
        return n

    def _hand_over(
        self,
        items: list[Encoded],
        chunk: list[RawMessage],
        applied: int,
        takers: list[Callable[[EncodedBatch], None]],
    ) -> None:
        """The first `applied` encoded commits, as one batch, to every sink."""
        if not applied:
            return
        if applied < len(items):
            del items[applied:]
            chunk = chunk[:applied]
        batch = EncodedBatch(items, chunk, self.codec, self._json_wanted)
        for take in takers:
            take(batch)
        self._json_wanted = batch.json_asked

    def _count_fast(self, counts: list[int]) -> None:
        """What the C loop applied, into the state's counters and the stats."""
        counters = self.state.counters
        counters.records += counts[_C_KINDS]
        counters.commits += counts[_C_KINDS]
        self.stats.fast_path_records_total += counts[_C_KINDS]
        fast = self.fast_path_records
        for kind, count in enumerate(counts[:_C_KINDS]):
            if count:
                key_type, version = divmod(kind, _C_VERSIONS)
                name = RECORD_TYPES[key_type].name
                self.stats.count_record(name, version, count)
                label = version_label(version)
                fast[name, label] = fast.get((name, label), 0) + count

    def fast_path_share(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(record type name, value version label) -> (records the C loop applied, records
        of that kind in all): what `fast_path_records` and the stats' `records_total` say."""
        fast = self.fast_path_records
        return {kind: (fast.get(kind, 0), n) for kind, n in self.stats.records_total.items()}

    def _ingest(self, messages: Iterable[RawMessage]) -> int:
        """The Python path of `ingest`, the reference.

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
                        if error.kind == "version":
                            self._unknown(partition, offset, message, "value_version")
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
                            self._unknown(partition, offset, message, "key_type")
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

    def _unknown(self, partition: int, offset: int, message: RawMessage, what: str) -> None:
        key = message.key() or b""
        value = message.value()
        seen = UnknownSeen(
            partition,
            offset,
            _I16.unpack_from(key)[0] if len(key) >= 2 else -1,
            _I16.unpack_from(value)[0] if value is not None and len(value) >= 2 else -1,
            what,
        )
        first = (seen.key_type, seen.value_version) not in self.stats.unknown_total
        self.stats.note_unknown(seen)
        if first and what == "key_type":
            # once per (type, version): the counter and /api/v1/health name every other one
            log.warning(
                "partition %d offset %d: record key type %d (value version %d) is unknown to "
                "this offsetwatch: counted and skipped, the records around it apply; a Kafka "
                "newer than offsetwatch wrote it? upgrade offsetwatch",
                partition,
                offset,
                seen.key_type,
                seen.value_version,
            )

    def _quarantine(self, item: Quarantined) -> None:
        self.stats.count_error(item.error.kind)
        for sink in self.quarantine:
            sink(item)


def _clock_of(state: OffsetState) -> tuple[int, int, int]:
    """The boundaries apply_commits buckets commits by, as PartitionTable.commit does."""
    clock = state.window_clock
    return (clock.window_ms, clock.next_ms, clock.bucket_ms)
