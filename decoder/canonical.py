"""offsetwatch's canonical record shape (documented in docs/canonical-schema.md).

One object per record, the same in the republished topic, the archive files, the Avro schema
and the Spark jobs:

    type            record type name ("offset_commit", "group_metadata", ...; "unknown")
    key_type        the int16 key type K
    value_version   the int16 value version, null for a tombstone
    tombstone       true when the value is null (a deletion)
    newer_version   the value version is above what this decoder knows (read with the newest layout)
    partition, offset, timestamp   position in __consumer_offsets (timestamp in epoch ms)
    group           the group id (every record type belongs to one group)
    key             the key fields, snake_case
    value           the value fields, snake_case (all of them: a field absent from the
                    record's version holds its default), or null for a tombstone
    transaction     committed / aborted / pending where the writer knows it, else null
    schema_version  the contract's version (`contract.SCHEMA_VERSION`)

The field names and the transaction rule are `contract`'s.

Bytes are kept as `bytes` in the dict (Avro writes them natively) and become standard base64
in JSON. Classic members of a "consumer" group also carry `subscription_decoded` /
`assignment_decoded` (the consumer-protocol blobs), null when not decodable.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from offsetwatch.decoder import contract as c
from offsetwatch.decoder.consumer_protocol import ConsumerProtocol
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.layout import field_layouts
from offsetwatch.decoder.records import (
    AnyRecord,
    GroupKey,
    GroupMemberKey,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    Record,
    RegularExpressionKey,
)
from offsetwatch.decoder.registry import RECORD_TYPES


def group_of(record: AnyRecord) -> str | None:
    """The group a record belongs to (None only for unknown record types)."""
    if not isinstance(record, Record):
        return None
    key = record.key
    if isinstance(key, OffsetCommitKey | GroupMetadataKey):
        return key.group
    assert isinstance(key, GroupKey | GroupMemberKey | RegularExpressionKey)
    return key.group_id


def struct_dict(obj: Any) -> dict[str, Any]:
    """All wire fields of a struct, snake_case, nested structs as dicts (tags dropped)."""
    out: dict[str, Any] = {}
    for f in field_layouts(type(obj)):
        out[f.name] = _plain(getattr(obj, f.name))
    tags = getattr(obj, "tags", None)
    if tags is not None and tags.unknown:
        out["unknown_tags"] = [{"tag": tag, "data": data} for tag, data in tags.unknown]
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return struct_dict(value)
    return value


@dataclass(slots=True)
class Canonical:
    """Builds canonical dicts/JSON; holds the consumer-protocol reader it needs."""

    protocol: ConsumerProtocol = field(default_factory=ConsumerProtocol)

    def to_dict(self, record: AnyRecord, transaction: str | None = None) -> dict[str, Any]:
        """The canonical dict; `transaction`: the outcome of the record's transaction where
        the caller knows it (`contract.OUTCOMES`; segment files tell it)."""
        if not isinstance(record, Record):
            return {
                c.TYPE: c.UNKNOWN_TYPE,
                c.KEY_TYPE: record.key_type,
                c.VALUE_VERSION: None,
                c.TOMBSTONE: record.value is None,
                c.NEWER_VERSION: False,
                c.PARTITION: record.partition,
                c.OFFSET: record.offset,
                c.TIMESTAMP: record.timestamp,
                c.GROUP: None,
                c.KEY: {"raw": record.key},
                c.VALUE: None if record.value is None else {"raw": record.value},
                c.TRANSACTION: transaction,
                c.SCHEMA: c.SCHEMA_VERSION,
            }
        value: dict[str, Any] | None = None
        if record.value is not None:
            value = struct_dict(record.value)
            if isinstance(record.value, GroupMetadataValue):
                self._add_decoded_blobs(record.value, value)
        return {
            c.TYPE: RECORD_TYPES[record.key_type].name,
            c.KEY_TYPE: record.key_type,
            c.VALUE_VERSION: record.value_version,
            c.TOMBSTONE: record.value is None,
            c.NEWER_VERSION: record.newer_than_known,
            c.PARTITION: record.partition,
            c.OFFSET: record.offset,
            c.TIMESTAMP: record.timestamp,
            c.GROUP: group_of(record),
            c.KEY: struct_dict(record.key),
            c.VALUE: value,
            c.TRANSACTION: transaction,
            c.SCHEMA: c.SCHEMA_VERSION,
        }

    def _add_decoded_blobs(self, group: GroupMetadataValue, value: dict[str, Any]) -> None:
        consumer = group.protocol_type == "consumer"
        for member, rendered in zip(group.members, value["members"], strict=True):
            rendered["subscription_decoded"] = None
            rendered["assignment_decoded"] = None
            if not consumer:
                continue
            try:
                version, sub = self.protocol.decode_subscription(member.subscription)
                rendered["subscription_decoded"] = {"version": version, **struct_dict(sub)}
            except DecodeError:
                pass
            try:
                version, asg = self.protocol.decode_assignment(member.assignment)
                rendered["assignment_decoded"] = {"version": version, **struct_dict(asg)}
            except DecodeError:
                pass

    def to_json(self, record: AnyRecord, transaction: str | None = None) -> str:
        return dumps(self.to_dict(record, transaction))


def identity_key(record: AnyRecord) -> bytes:
    """The republished record's key: its type plus key fields, so compaction keeps the latest."""
    if not isinstance(record, Record):
        return dumps(
            {c.TYPE: c.UNKNOWN_TYPE, c.KEY_TYPE: record.key_type, "raw": record.key}
        ).encode()
    ident = {c.TYPE: RECORD_TYPES[record.key_type].name, **struct_dict(record.key)}
    # raw bytes of invalid UTF-8 stay in the key: two different corrupt ids must not collide
    return _raw_dumps(ident).encode("utf-8", "surrogateescape")


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _raw_dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), default=_json_default, ensure_ascii=False)


def dumps(obj: Any) -> str:
    """Compact JSON with bytes as base64.

    Strings decoded from invalid UTF-8 keep their raw bytes as lone surrogates (so the encoder
    can write them back); JSON must be valid UTF-8, so those become U+FFFD here - what Kafka's
    own tools print for such bytes.
    """
    text = _raw_dumps(obj)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def is_valid_utf8(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (no surrogate escapes of bad bytes)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def replace_surrogates(text: str) -> str:
    """Text as UTF-8 sinks hold it: bytes kept as surrogate escapes become U+FFFD, as in
    `dumps` (and as Kafka's own tools print them)."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # lone surrogates that never were bytes
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


def scrub_text(value: Any) -> Any:
    """A copy of a dict / list / tuple tree with every text valid UTF-8 (`replace_surrogates`)."""
    if isinstance(value, str):
        return value if is_valid_utf8(value) else replace_surrogates(value)
    if isinstance(value, dict):
        return {k: scrub_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_text(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_text(v) for v in value)
    return value
