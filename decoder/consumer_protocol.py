"""The consumer-protocol blobs inside classic GroupMetadata members (subscription/assignment).

Both start with an int16 version and are never flexible. A version newer than we know is
read with the newest layout, as Kafka's ConsumerProtocol does (fields are only appended);
trailing bytes are tolerated for the same reason.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from offsetwatch.decoder.codegen import Compiler, Reader, Writer
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.layout import Kind, wire

NEWEST_VERSION: Final = 3
_I16: Final = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class TopicPartitionList:
    topic: str = wire(Kind.STRING)
    partitions: tuple[int, ...] = wire(Kind.ARRAY, item=Kind.INT32)


@dataclass(frozen=True, slots=True)
class ConsumerProtocolSubscription:
    topics: tuple[str, ...] = wire(Kind.ARRAY, item=Kind.STRING)
    user_data: bytes | None = wire(Kind.BYTES, nullable="0+")
    owned_partitions: tuple[TopicPartitionList, ...] = wire(
        Kind.ARRAY, item=TopicPartitionList, versions="1+", default=()
    )
    generation_id: int = wire(Kind.INT32, versions="2+", default=-1)
    rack_id: str | None = wire(Kind.STRING, versions="3+", nullable="3+")


@dataclass(frozen=True, slots=True)
class ConsumerProtocolAssignment:
    assigned_partitions: tuple[TopicPartitionList, ...] = wire(Kind.ARRAY, item=TopicPartitionList)
    user_data: bytes | None = wire(Kind.BYTES, nullable="0+")


@dataclass(slots=True)
class ConsumerProtocol:
    """Reads and writes the blobs; shares the record compiler's generated code cache."""

    compiler: Compiler = field(default_factory=Compiler)

    def _reader(self, cls: type, version: int) -> Reader:
        return self.compiler.reader(cls, min(version, NEWEST_VERSION), False)

    def _writer(self, cls: type, version: int) -> Writer:
        return self.compiler.writer(cls, min(version, NEWEST_VERSION), False)

    def _decode(self, cls: type, raw: bytes) -> tuple[int, object]:
        if len(raw) < 2:
            raise DecodeError("blob shorter than its version prefix", part=cls.__name__)
        version = _I16.unpack_from(raw)[0]
        if version < 0:
            raise DecodeError(f"negative version {version}", part=cls.__name__, byte_position=0)
        try:
            obj, _end = self._reader(cls, version)(raw, 2)
        except DecodeError as error:
            raise DecodeError(
                error.reason, part=cls.__name__, byte_position=error.byte_position
            ) from None
        return version, obj

    def decode_subscription(self, raw: bytes) -> tuple[int, ConsumerProtocolSubscription]:
        version, obj = self._decode(ConsumerProtocolSubscription, raw)
        assert isinstance(obj, ConsumerProtocolSubscription)
        return version, obj

    def decode_assignment(self, raw: bytes) -> tuple[int, ConsumerProtocolAssignment]:
        version, obj = self._decode(ConsumerProtocolAssignment, raw)
        assert isinstance(obj, ConsumerProtocolAssignment)
        return version, obj

    def encode(
        self, version: int, blob: ConsumerProtocolSubscription | ConsumerProtocolAssignment
    ) -> bytes:
        out = bytearray(_I16.pack(version))
        self._writer(type(blob), version)(blob, out)
        return bytes(out)
