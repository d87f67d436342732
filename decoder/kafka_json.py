"""The exact JSON Kafka 4.0's own tools print for `__consumer_offsets` records.

* `dump_log(record)`: what `kafka-dump-log --offsets-decoder` prints after `key:` and
  `payload:` - type/version as JSON strings, consumer-protocol blobs decoded, "<DELETE>" for
  tombstones.
* `console(record)`: what `OffsetsMessageFormatter` / `GroupMetadataMessageFormatter` print
  (key types 0-2 only) - type/version as numbers, blobs as base64.

Rules shared by both (Kafka's generated JsonConverters): camelCase names in schema order,
only fields of the record's version, tagged fields only when not at their default (a nullable
struct tag Kafka 4.0 wrote explicitly as null prints as null), bytes as standard base64,
UUIDs in Kafka's URL-safe base64 form.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Final

from decoder.consumer_protocol import ConsumerProtocol
from decoder.errors import DecodeError
from decoder.layout import Kind, field_layouts
from decoder.records import AnyRecord, GroupMetadataValue, MemberMetadata, Record
from decoder.registry import RECORD_TYPES

DELETE: Final = "<DELETE>"
_CONSOLE_TYPES: Final = (0, 1, 2)
_CONSOLE_MAX_VERSION: Final = 4


def struct_json(obj: Any, version: int, flexible: bool) -> dict[str, Any]:
    """A record struct as Kafka's JsonConverter writes it for `version`."""
    out: dict[str, Any] = {}
    tags = getattr(obj, "tags", None)
    for f in field_layouts(type(obj)):
        w = f.wire
        if version not in w.versions:
            continue
        value = getattr(obj, f.name)
        if w.tag is not None and flexible:
            explicit_null = w.kind is Kind.STRUCT and tags is not None and w.tag in tags.present
            if value == w.default and not explicit_null:
                continue
        out[f.kafka_name] = _value_json(value, w.kind, w.item, version, flexible)
    return out


def _value_json(value: Any, kind: Kind, item: Any, version: int, flexible: bool) -> Any:
    if value is None:
        return None
    if kind is Kind.BYTES:
        return base64.b64encode(value).decode("ascii")
    if kind is Kind.STRING:
        return _kafka_string(value)
    if kind is Kind.STRUCT:
        return struct_json(value, version, flexible)
    if kind is Kind.ARRAY:
        if isinstance(item, Kind):
            if item is Kind.STRING:
                return [_kafka_string(v) for v in value]
            return list(value)
        return [struct_json(v, version, flexible) for v in value]
    return value


def _kafka_string(text: str) -> str:
    # Java decodes invalid UTF-8 as U+FFFD; we keep the raw bytes (surrogateescape) for
    # re-encoding, so map them back here
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def _flexible(record: Record) -> bool:
    rtype = RECORD_TYPES[record.key_type]
    version = record.value_version
    assert version is not None
    return rtype.flexible_from is not None and version >= rtype.flexible_from


def _layout_version(record: Record) -> int:
    rtype = RECORD_TYPES[record.key_type]
    version = record.value_version
    assert version is not None
    return min(version, rtype.value_versions.high)


def key_json(record: Record) -> dict[str, Any]:
    return struct_json(record.key, 0, False)


@dataclass(slots=True)
class KafkaJson:
    """Renders records the way Kafka's tools do; holds the blob decoder it needs."""

    protocol: ConsumerProtocol = field(default_factory=ConsumerProtocol)

    def value_json(self, record: Record, *, decode_blobs: bool) -> dict[str, Any]:
        assert record.value is not None
        version = _layout_version(record)
        data = struct_json(record.value, version, _flexible(record))
        value = record.value
        if (
            decode_blobs
            and isinstance(value, GroupMetadataValue)
            and value.protocol_type == "consumer"
        ):
            for member, rendered in zip(value.members, data["members"], strict=True):
                self._decode_member_blobs(member, rendered)
        return data

    def _decode_member_blobs(self, member: MemberMetadata, rendered: dict[str, Any]) -> None:
        # dump-log replaces the base64 by the decoded object; on failure the base64 stays
        try:
            sub_version, subscription = self.protocol.decode_subscription(member.subscription)
            rendered["subscription"] = struct_json(subscription, sub_version, False)
        except DecodeError:
            pass
        try:
            asg_version, assignment = self.protocol.decode_assignment(member.assignment)
            rendered["assignment"] = struct_json(assignment, asg_version, False)
        except DecodeError:
            pass

    def dump_log(self, record: AnyRecord) -> dict[str, Any]:
        """`{"key": ..., "payload": ...}` as kafka-dump-log --offsets-decoder prints them."""
        if not isinstance(record, Record):
            offset = record.offset
            return {
                "key": f"Unknown record type {record.key_type} at offset {offset}, skipping.",
                "payload": None,
            }
        key = {"type": str(record.key_type), "data": key_json(record)}
        if record.value is None:
            return {"key": key, "payload": DELETE}
        payload = {
            "version": str(record.value_version),
            "data": self.value_json(record, decode_blobs=True),
        }
        return {"key": key, "payload": payload}

    def console(self, record: AnyRecord) -> dict[str, Any] | None:
        """What Kafka 4.0's Offsets/GroupMetadata formatters print, or None (they skip it)."""
        if not isinstance(record, Record) or record.key_type not in _CONSOLE_TYPES:
            return None
        key = {"type": record.key_type, "data": key_json(record)}
        if record.value is None:
            return {"key": key, "value": None}
        version = record.value_version
        assert version is not None
        data: Any
        if version > _CONSOLE_MAX_VERSION:
            data = "unknown"
        else:
            data = self.value_json(record, decode_blobs=False)
        return {"key": key, "value": {"version": version, "data": data}}
