"""Kafka messages -> canonical dicts, in the executors, for each `format` of the kafka source.

* `raw`: `__consumer_offsets` bytes, decoded with offsetwatch's decoder (C accelerator when
  built); the canonical position is the message's own partition/offset/timestamp.
* `json`: the exporter's republished canonical JSON (`Canonical.to_json`); bytes fields are
  base64 text there and become bytes again (`CanonicalRows.from_json`).
* `avro`: the exporter's republished Avro bodies, bare or with Confluent framing (magic byte
  0 + schema id); a bare body never starts with 0 (it starts with the non-empty `type`).

In the republished formats the canonical record carries the `__consumer_offsets` position it
came from; the republished message's own position only locates a bad message.
Undecodable messages come back as `Rejected` (never dropped): they become quarantine rows.
"""

from __future__ import annotations

import binascii
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from offsetwatch.decoder import contract
from offsetwatch.decoder.avro import AvroCodec, AvroError
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.codec import Codec, Message
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.spark_jobs.schema import CanonicalRows
from offsetwatch.spark_jobs.sources.columns import decode_records
from offsetwatch.spark_jobs.sources.kafka_options import Format
from offsetwatch.spark_jobs.sources.segment_columns import decode_messages


@dataclass(frozen=True, slots=True)
class Rejected:
    """A message that could not be decoded, with where it was and why."""

    partition: int
    offset: int
    reason: str
    error: str
    key: bytes | None
    value: bytes | None

    def raw_text(self) -> str:
        """The message's bytes as hex, as the conformance records and `decode --hex` take them."""
        key = None if self.key is None else self.key.hex()
        value = None if self.value is None else self.value.hex()
        return json.dumps({"key": key, "value": value}, separators=(",", ":"))


#: a decoded message: its offset in the read topic and its canonical dict
Decoded = tuple[int, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Decoding:
    """What one batch of messages decoded to."""

    #: the plain offset commits, already in Arrow (raw format only; None when there are none)
    commits: pa.RecordBatch | None
    #: every other good message, in order
    records: list[Decoded]
    rejected: list[Rejected]


@dataclass(slots=True)
class MessageDecoder:
    """Decodes one task's messages; holds per-thread codecs, so build one per task."""

    format: Format
    rows: CanonicalRows
    _codec: Codec = field(default_factory=Codec, init=False)
    _canonical: Canonical = field(default_factory=Canonical, init=False)
    _avro: AvroCodec | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.format == "avro":
            self._avro = AvroCodec()

    def decode(self, messages: list[Message]) -> Decoding:
        """The good messages (commits as one Arrow batch, the rest as dicts) and the bad."""
        if self.format == "raw":
            return self._decode_raw(messages)
        good: list[Decoded] = []
        bad: list[Rejected] = []
        for message in messages:
            try:
                canonical = self._decode_republished(message[1])
            except (ValueError, TypeError, KeyError) as error:
                bad.append(_rejected(message, _reason(error), str(error)))
                continue
            broken = contract.problem(canonical)
            if broken is not None:
                where = f"partition {message[2]} offset {message[3]}"
                bad.append(_rejected(message, broken.reason, broken.at(where, None)))
                continue
            good.append((message[3], canonical))
        return Decoding(None, good, bad)

    def _decode_raw(self, messages: list[Message]) -> Decoding:
        plain, rest = decode_messages(messages, self.rows)
        if not rest:
            return Decoding(plain, [], [])
        decoded = self._decode_records([messages[i] for i in rest] if plain else messages)
        if plain is None or decoded.commits is None:
            return Decoding(plain or decoded.commits, decoded.records, decoded.rejected)
        both = pa.concat_batches([plain, decoded.commits])
        return Decoding(both, decoded.records, decoded.rejected)

    def _decode_records(self, messages: list[Message]) -> Decoding:
        """Record by record: flat records (offset commits) as columns, the rest as dicts."""
        bad: list[Rejected] = []

        def rejected(_index: int, message: Message, error: DecodeError) -> None:
            bad.append(_rejected(message, error.kind, str(error)))

        txn: list[str | None] = [None] * len(messages)  # a topic tells no outcomes
        decoded = decode_records(self._codec, self._canonical, self.rows, messages, txn, rejected)
        batches = decoded.batches
        commits = (
            None
            if not batches
            else batches[0]
            if len(batches) == 1
            else (pa.concat_batches(batches))
        )
        records = [(messages[index][3], row) for index, row in decoded.rest]
        return Decoding(commits, records, bad)

    def _decode_republished(self, value: bytes | None) -> dict[str, Any]:
        if value is None:
            raise ValueError("a null value: the republished topic holds no tombstones")
        if self._avro is not None:
            if value[:1] == b"\x00":
                return self._avro.decode_confluent(value)[1]
            return self._avro.decode(value)
        record = json.loads(value)
        if not isinstance(record, dict) or not isinstance(record.get(contract.TYPE), str):
            raise ValueError("not a canonical record: a JSON object with a 'type' is expected")
        return self.rows.from_json(record)


def _rejected(message: Message, reason: str, error: str) -> Rejected:
    key, value, partition, offset, _timestamp = message
    return Rejected(partition, offset, reason, error, key, value)


def _reason(error: Exception) -> str:
    if isinstance(error, AvroError):
        return "bad_avro"
    if isinstance(error, binascii.Error):
        return "bad_base64"
    if isinstance(error, json.JSONDecodeError | UnicodeDecodeError):
        return "bad_json"
    kind = getattr(error, "kind", None)
    if isinstance(kind, str):
        return kind
    return type(error).__name__.lower()
