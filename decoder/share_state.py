"""`__share_group_state` (KIP-932): the share coordinator's records, bytes <-> typed records.

The same framing as `__consumer_offsets` (an int16 key type, an int16 value version, Kafka's
generated layouts) but another table of key types (`registry.SHARE_STATE_TYPES`): key type 0
is a ShareSnapshot (a share partition's whole state), 1 a ShareUpdate (a change to it). Reading
these bytes with the `__consumer_offsets` table would turn every snapshot into an "offset
commit", so the topic picks the codec (`codec_for_topic`) and the records are
`ShareStateRecord`s, never `Record`s.

Renderers, beside the decoder as for `__consumer_offsets`:

* `dump_log(record)`: what `kafka-dump-log --share-group-state-decoder` prints after `key:` and
  `payload:`. Kafka 4.0's parser labels the value's version `"type"`; 4.1+ (the
  CoordinatorRecordMessageParser) labels it `"version"`, and only 4.1+ writes the 4.1+
  layouts, so the label follows the layout.
* `canonical(record)`: the canonical dict (docs/canonical-schema.md), types `share_snapshot` /
  `share_update`, `partition`/`offset` in `__share_group_state`.
* `share_partition_state(record)`: one plain view of both layouts of both types, for code that
  keeps share-partition state (the exporter), so it never branches on layout classes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from offsetwatch.decoder import contract as c
from offsetwatch.decoder.canonical import Canonical, dumps, struct_dict
from offsetwatch.decoder.codec import Message, _build, read_value
from offsetwatch.decoder.codegen import Compiler, EncodeError
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.kafka_json import DELETE, struct_json
from offsetwatch.decoder.layout import VERSION_MAX
from offsetwatch.decoder.records import (
    DELIVERY_COMPLETE_UNKNOWN,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareSnapshotWithTimestampsValue,
    ShareStateRecord,
    ShareStateValue,
    ShareUpdateValue,
    UnknownRecord,
)
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC, SHARE_STATE_TYPES

__all__ = [
    "SHARE_STATE_TOPIC",
    "BatchState",
    "SharePartitionState",
    "ShareStateCodec",
    "canonical",
    "dump_log",
    "dump_log_text",
    "group_of",
    "share_partition_state",
]

#: delivery states of a state batch (Kafka's RecordState ids; acquired is never persisted)
AVAILABLE: Final = 0
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4
_KEY_TYPE_PREFIX: Final = 2
#: the 4.0 layouts; their dump-log value label is "type" (Kafka 4.0's parser)
_LAYOUTS_4_0: Final = (ShareSnapshotValue, ShareUpdateValue)

AnyShareStateRecord = ShareStateRecord | UnknownRecord


@dataclass(slots=True)
class ShareStateCodec:
    """Decoder and encoder of `__share_group_state` keys and values (same contract as
    `Codec`: one DecodeError type, located at partition/offset; encode(decode(b)) == b)."""

    _compiler: Compiler = field(default_factory=Compiler)
    _types: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key_type, rtype in SHARE_STATE_TYPES.items():
            self._types[key_type] = _build(self._compiler, rtype)

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        partition: int = -1,
        offset: int = -1,
        timestamp: int = -1,
    ) -> AnyShareStateRecord:
        try:
            if key is None:
                raise DecodeError("null key (only control records have none)", part="key")
            if len(key) < _KEY_TYPE_PREFIX:
                raise DecodeError(
                    f"key of {len(key)} bytes is shorter than its type prefix", part="key"
                )
            key_type = int.from_bytes(key[:2], "big", signed=True)
            codec = self._types.get(key_type)
            if codec is None:
                # kept whole, like the __consumer_offsets codec does (Kafka's tool skips it)
                return UnknownRecord(key_type, key, value, partition, offset, timestamp)
            try:
                key_obj, end = codec.key_reader(key, _KEY_TYPE_PREFIX)
            except DecodeError as error:
                raise DecodeError(
                    error.reason, part="key", byte_position=error.byte_position
                ) from None
            if end != len(key):
                raise DecodeError(
                    f"{len(key) - end} trailing bytes after a type {key_type} key",
                    part="key",
                    byte_position=end,
                )
            version: int | None = None
            value_obj: ShareStateValue | None = None
            if value is not None:
                version, value_obj = read_value(codec, value)
        except DecodeError as error:
            raise error.at(partition, offset) from None
        return ShareStateRecord(key_type, key_obj, version, value_obj, partition, offset, timestamp)

    def decode_many(self, messages: Iterable[Message]) -> list[AnyShareStateRecord]:
        """`decode` of (key, value, partition, offset, timestamp) tuples, in order."""
        return [self.decode(*message) for message in messages]

    def encode(self, record: AnyShareStateRecord) -> tuple[bytes, bytes | None]:
        """The exact key and value bytes of a record (None value for a tombstone)."""
        if isinstance(record, UnknownRecord):
            return record.key, record.value
        codec = self._types.get(record.key_type)
        if codec is None:
            raise EncodeError(f"unknown {SHARE_STATE_TOPIC} record type {record.key_type}")
        if not isinstance(record.key, SharePartitionKey):
            raise EncodeError(f"{SHARE_STATE_TOPIC} keys are SharePartitionKey")
        key = bytearray(record.key_type.to_bytes(2, "big", signed=True))
        codec.key_writer(record.key, key)
        if record.value is None:
            return bytes(key), None
        rtype = codec.rtype
        version = record.value_version
        if type(record.value) not in rtype.value_classes:
            raise EncodeError(
                f"record type {record.key_type} has no layout {type(record.value).__name__}"
            )
        if version is None or version not in rtype.value_versions or version > VERSION_MAX:
            raise EncodeError(f"record type {record.key_type} has no value version {version}")
        writer = self._compiler.writer(type(record.value), version, _flexible(record))
        out = bytearray(version.to_bytes(2, "big", signed=True))
        writer(record.value, out)
        return bytes(key), bytes(out)


def codec_for_topic(topic: str) -> ShareStateCodec | None:
    """The codec of an internal topic other than `__consumer_offsets`, None for that one."""
    return ShareStateCodec() if topic == SHARE_STATE_TOPIC else None


def _flexible(record: ShareStateRecord) -> bool:
    rtype = SHARE_STATE_TYPES[record.key_type]
    version = record.value_version
    flexible_from = rtype.flexible_from
    return version is not None and flexible_from is not None and version >= flexible_from


def group_of(record: AnyShareStateRecord) -> str | None:
    return record.key.group_id if isinstance(record, ShareStateRecord) else None


# -- Kafka's tool ----------------------------------------------------------------------------


def dump_log(record: AnyShareStateRecord) -> dict[str, Any]:
    """`{"key": ..., "payload": ...}` as kafka-dump-log --share-group-state-decoder prints them."""
    if not isinstance(record, ShareStateRecord):
        message = f"Unknown record type {record.key_type} at offset {record.offset}, skipping."
        return {"key": message, "payload": None}
    key = {"type": str(record.key_type), "data": struct_json(record.key, record.key_type, False)}
    if record.value is None:
        return {"key": key, "payload": DELETE}
    version = record.value_version
    assert version is not None
    label = "type" if isinstance(record.value, _LAYOUTS_4_0) else "version"
    data = struct_json(record.value, version, _flexible(record))
    return {"key": key, "payload": {label: str(version), "data": data}}


def dump_log_text(record: AnyShareStateRecord) -> str:
    return dumps(dump_log(record))


# -- canonical JSON --------------------------------------------------------------------------


def canonical(record: AnyShareStateRecord, transaction: str | None = None) -> dict[str, Any]:
    """The canonical dict: the envelope of `Canonical.to_dict`, this topic's type names."""
    if not isinstance(record, ShareStateRecord):
        return Canonical().to_dict(record, transaction)
    return {
        c.TYPE: SHARE_STATE_TYPES[record.key_type].name,
        c.KEY_TYPE: record.key_type,
        c.VALUE_VERSION: record.value_version,
        c.TOMBSTONE: record.value is None,
        c.NEWER_VERSION: False,
        c.PARTITION: record.partition,
        c.OFFSET: record.offset,
        c.TIMESTAMP: record.timestamp,
        c.GROUP: record.key.group_id,
        c.KEY: struct_dict(record.key),
        c.VALUE: None if record.value is None else struct_dict(record.value),
        c.TRANSACTION: transaction,
        c.SCHEMA: c.SCHEMA_VERSION,
    }


def canonical_json(record: AnyShareStateRecord, transaction: str | None = None) -> str:
    return dumps(canonical(record, transaction))


# -- one view of every layout ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchState:
    first_offset: int
    last_offset: int
    #: 0 available, 2 acknowledged, 4 archived
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionState:
    """What one `__share_group_state` record says of a share partition, whatever its layout.

    `snapshot` True: the whole state (ShareSnapshot); False: a change to it (ShareUpdate,
    whose `start_offset` is -1 when unchanged and which carries no `state_epoch`).
    Fields a layout does not have are None (`delivery_complete_count`: also when a 4.2+
    writer left the tag at Kafka's default -1, i.e. did not count).
    """

    group_id: str
    topic_id: str
    partition: int
    snapshot: bool
    snapshot_epoch: int
    state_epoch: int | None
    leader_epoch: int
    start_offset: int
    batches: tuple[BatchState, ...]
    delivery_complete_count: int | None
    create_timestamp: int | None
    write_timestamp: int | None


def share_partition_state(record: ShareStateRecord) -> SharePartitionState | None:
    """The plain view of a record; None for a tombstone (the share partition's state is gone)."""
    value = record.value
    if value is None:
        return None
    key = record.key
    complete = getattr(value, "delivery_complete_count", DELIVERY_COMPLETE_UNKNOWN)
    created = written = None
    if isinstance(value, ShareSnapshotWithTimestampsValue):
        created, written = value.create_timestamp, value.write_timestamp
    return SharePartitionState(
        group_id=key.group_id,
        topic_id=key.topic_id,
        partition=key.partition,
        snapshot=record.key_type == 0,
        snapshot_epoch=value.snapshot_epoch,
        state_epoch=getattr(value, "state_epoch", None),
        leader_epoch=value.leader_epoch,
        start_offset=value.start_offset,
        batches=tuple(
            BatchState(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in value.state_batches
        ),
        delivery_complete_count=None if complete == DELIVERY_COMPLETE_UNKNOWN else complete,
        create_timestamp=created,
        write_timestamp=written,
    )
