"""Bytes <-> typed records: the decoder's public entry points.

`Codec.decode(key, value)` turns one `__consumer_offsets` record into a `Record` (or an
`UnknownRecord` for a key type nobody knows yet) and raises exactly one exception type,
`DecodeError`, for bad bytes. `Codec.encode(record)` is the inverse, byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from decoder.codegen import Compiler, EncodeError, Reader, Writer
from decoder.errors import DecodeError
from decoder.layout import VERSION_MAX
from decoder.records import AnyRecord, Key, Record, UnknownRecord, Value
from decoder.registry import RECORD_TYPES, RecordType

_I16: Final = struct.Struct(">h")
_DEFAULT_KEY_CACHE: Final = 200_000

DecodedKey = tuple[RecordType, Key]


@dataclass(frozen=True, slots=True)
class _TypeCodec:
    rtype: RecordType
    key_reader: Reader
    key_writer: Writer
    #: value version -> readers of its layout variants
    value_readers: dict[int, tuple[Reader, ...]]
    newest: int


def _build(compiler: Compiler, rtype: RecordType) -> _TypeCodec:
    readers: dict[int, tuple[Reader, ...]] = {}
    versions = rtype.value_versions
    for version in range(versions.low, versions.high + 1):
        flexible = rtype.flexible_from is not None and version >= rtype.flexible_from
        readers[version] = tuple(
            compiler.reader(cls, version, flexible) for cls in rtype.value_classes
        )
    return _TypeCodec(
        rtype=rtype,
        key_reader=compiler.reader(rtype.key_class, 0, False),
        key_writer=compiler.writer(rtype.key_class, 0, False),
        value_readers=readers,
        newest=versions.high,
    )


@dataclass(slots=True)
class Codec:
    """Decoder and encoder of `__consumer_offsets` keys and values.

    Keep one per thread: it caches decoded keys (commit streams repeat the same keys all the
    time), bounded by `key_cache_size` entries and cleared wholesale when full, which keeps
    memory flat without the bookkeeping cost of an LRU on the hot path.
    """

    key_cache_size: int = _DEFAULT_KEY_CACHE
    _compiler: Compiler = field(default_factory=Compiler)
    _types: dict[int, _TypeCodec] = field(default_factory=dict)
    _key_cache: dict[bytes, DecodedKey] = field(default_factory=dict)
    _new_record: Callable[..., Record] = field(init=False)

    def __post_init__(self) -> None:
        for key_type, rtype in RECORD_TYPES.items():
            self._types[key_type] = _build(self._compiler, rtype)
        self._new_record = _fast_constructor(Record)

    # -- decoding --------------------------------------------------------------------------

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        partition: int = -1,
        offset: int = -1,
        timestamp: int = -1,
    ) -> AnyRecord:
        """Decode one record; raises DecodeError (located at partition/offset) for bad bytes."""
        try:
            if key is None:
                raise DecodeError("null key (only control records have none)", part="key")
            decoded = self._key_cache.get(key)
            if decoded is None:
                if len(key) >= 2:
                    key_type = _I16.unpack_from(key)[0]
                    if key_type not in self._types:
                        return UnknownRecord(key_type, key, value, partition, offset, timestamp)
                decoded = self.decode_key(key)
            rtype, key_obj = decoded
            if value is None:
                return self._new_record(
                    rtype.key_type, key_obj, None, None, partition, offset, timestamp
                )
            version, value_obj = self._decode_value(rtype, value)
            return self._new_record(
                rtype.key_type, key_obj, version, value_obj, partition, offset, timestamp
            )
        except DecodeError as error:
            raise error.at(partition, offset) from None

    def decode_key(self, key: bytes) -> DecodedKey:
        """Decode a key (and cache it); an unknown key type is a DecodeError here."""
        if len(key) < 2:
            raise DecodeError(
                f"key of {len(key)} bytes is shorter than its type prefix", part="key"
            )
        key_type = _I16.unpack_from(key)[0]
        codec = self._types.get(key_type)
        if codec is None:
            raise DecodeError(f"unknown record type {key_type}", part="key", byte_position=0)
        try:
            key_obj, end = codec.key_reader(key, 2)
        except DecodeError as error:
            raise DecodeError(error.reason, part="key", byte_position=error.byte_position) from None
        if end != len(key):
            raise DecodeError(
                f"{len(key) - end} trailing bytes after a type {key_type} key",
                part="key",
                byte_position=end,
            )
        decoded = (codec.rtype, key_obj)
        if len(self._key_cache) >= self.key_cache_size:
            self._key_cache.clear()
        self._key_cache[key] = decoded
        return decoded

    def decode_value(self, key_type: int, value: bytes) -> tuple[int, Value]:
        codec = self._types.get(key_type)
        if codec is None:
            raise DecodeError(f"unknown record type {key_type}", part="key", byte_position=0)
        return self._decode_value(codec.rtype, value)

    def _decode_value(self, rtype: RecordType, value: bytes) -> tuple[int, Any]:
        codec = self._types[rtype.key_type]
        if len(value) < 2:
            raise DecodeError(
                f"value of {len(value)} bytes is shorter than its version prefix", part="value"
            )
        version = _I16.unpack_from(value)[0]
        readers = codec.value_readers.get(version)
        if readers is None:
            if version > codec.newest and rtype.read_newer_versions:
                readers = codec.value_readers[codec.newest]
            else:
                raise DecodeError(
                    f"unsupported value version {version} for record type {rtype.key_type} "
                    f"({rtype.kafka_name}; known {rtype.value_versions.low}.."
                    f"{rtype.value_versions.high})",
                    part="value",
                    byte_position=0,
                )
        first_error: DecodeError | None = None
        for reader in readers:
            try:
                obj, end = reader(value, 2)
            except DecodeError as error:
                first_error = first_error or error
                continue
            if end == len(value):
                return version, obj
            first_error = first_error or DecodeError(
                f"{len(value) - end} trailing bytes after a {rtype.kafka_name} value "
                f"of version {version}",
                byte_position=end,
            )
        assert first_error is not None
        raise DecodeError(first_error.reason, part="value", byte_position=first_error.byte_position)

    # -- encoding --------------------------------------------------------------------------

    def encode(self, record: AnyRecord) -> tuple[bytes, bytes | None]:
        """The exact key and value bytes of a record (None value for a tombstone)."""
        if isinstance(record, UnknownRecord):
            return record.key, record.value
        key = self.encode_key(record.key_type, record.key)
        if record.value is None:
            return key, None
        assert record.value_version is not None
        return key, self.encode_value(record.key_type, record.value_version, record.value)

    def encode_key(self, key_type: int, key: Key) -> bytes:
        codec = self._types.get(key_type)
        if codec is None:
            raise EncodeError(f"unknown record type {key_type}")
        if not isinstance(key, codec.rtype.key_class):
            raise EncodeError(
                f"record type {key_type} needs a {codec.rtype.key_class.__name__} key, "
                f"not {type(key).__name__}"
            )
        out = bytearray(_I16.pack(key_type))
        codec.key_writer(key, out)
        return bytes(out)

    def encode_value(self, key_type: int, version: int, value: Value) -> bytes:
        codec = self._types.get(key_type)
        if codec is None:
            raise EncodeError(f"unknown record type {key_type}")
        rtype = codec.rtype
        if type(value) not in rtype.value_classes:
            raise EncodeError(
                f"record type {key_type} has no layout {type(value).__name__}; expected one "
                f"of {', '.join(c.__name__ for c in rtype.value_classes)}"
            )
        if not 0 <= version <= VERSION_MAX:
            raise EncodeError(f"value version {version} out of range")
        layout_version = version
        if version not in rtype.value_versions:
            if not (rtype.read_newer_versions and version > rtype.value_versions.high):
                raise EncodeError(
                    f"record type {key_type} has no value version {version} "
                    f"(known {rtype.value_versions.low}..{rtype.value_versions.high})"
                )
            layout_version = rtype.value_versions.high
        flexible = rtype.flexible_from is not None and layout_version >= rtype.flexible_from
        writer = self._compiler.writer(type(value), layout_version, flexible)
        out = bytearray(_I16.pack(version))
        writer(value, out)
        return bytes(out)


def _fast_constructor(cls: type) -> Callable[..., Any]:
    """Positional constructor of a frozen slots dataclass that skips its checked __init__."""
    names = list(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    ns: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    body = []
    for i, name in enumerate(names):
        ns[f"_s{i}"] = getattr(cls, name).__set__
        body.append(f"    _s{i}(o, {name})")
    src = (
        f"def new_{cls.__name__}({', '.join(names)}):\n    o = _new(_cls)\n"
        + "\n".join(body)
        + "\n    return o\n"
    )
    exec(compile(src, f"<constructor {cls.__name__}>", "exec"), ns)
    constructor: Callable[..., Any] = ns[f"new_{cls.__name__}"]
    return constructor
