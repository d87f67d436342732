"""Bytes <-> typed records: the decoder's public entry points.

`Codec.decode(key, value)` turns one `__consumer_offsets` record into a `Record` (or an
`UnknownRecord` for a key type nobody knows yet) and raises exactly one exception type,
`DecodeError`, for bad bytes. `Codec.encode(record)` is the inverse, byte for byte.
`Codec.decode_many(messages)` decodes a sequence of records in one loop (same results).

Speed (see benchmarks/decode.py): commit streams are almost only OffsetCommitValue v3 with
empty metadata under a handful of repeating keys. Decoded keys are cached; such a value is
read with one `struct` call, checked (version 3, metadata length 0, 24 bytes) and built
without the generic reader; `Record` and the value are built through `codegen.builder_for`
builders (plain slot stores, then `__class__` assignment) instead of the frozen `__init__`.

C accelerator: when the optional extension `offsetwatch.decoder._speedups`
(decoder/_speedups.c, built by
`pip install`, see setup.py) is importable and reads the layouts this module checks it
against, `decode`/`decode_many` go through it first. It covers offset commits (key types 0/1:
key decoding into the same key cache, values v0-v3), classic group metadata values v0-v3
(type 2) and tombstones, and builds the very same frozen dataclass instances; for anything
else or unusual (flexible versions, bad lengths, invalid UTF-8, ...) it hands the record to
the pure-Python path below, which stays the reference and the only source of DecodeError.
`Codec(accelerate=False)` or OFFSETWATCH_NO_SPEEDUPS=1 turns it off;
tests/decoder/test_speedups.py checks both paths give identical results and errors.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from offsetwatch.decoder.codegen import Compiler, EncodeError, Reader, Writer, builder_for
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.layout import NO_TAGS, VERSION_MAX, Kind, field_layouts
from offsetwatch.decoder.records import (
    AnyRecord,
    GroupMetadataValue,
    Key,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    UnknownRecord,
    Value,
)
from offsetwatch.decoder.registry import RECORD_TYPES, RecordType

_I16: Final = struct.Struct(">h")
_DEFAULT_KEY_CACHE: Final = 200_000

DecodedKey = tuple[RecordType, Key]
#: what `decode_many` takes: key, value, partition, offset, timestamp
Message = tuple[bytes | None, bytes | None, int, int, int]


def _builder(cls: type) -> Any:
    builder = builder_for(cls)
    if builder is None:  # pragma: no cover - records.py convention: frozen slots dataclasses
        raise TypeError(f"{cls.__name__} is not a plain frozen slots dataclass")
    return builder


#: Record/OffsetCommitValue are built from these (plain slot stores + __class__ assignment)
_RecordBuilder: Final = _builder(Record)
_CommitBuilder: Final = _builder(OffsetCommitValue)
_new: Final[Any] = object.__new__


def _commit_v3_layout() -> tuple[int, str] | None:
    """(expire_timestamp default, topic_id default) if OffsetCommitValue v3 is what the fast
    path reads: int64 offset, int32 leader epoch, string metadata, int64 commit timestamp,
    not flexible, every other field at its default. None disables the fast path."""
    fields = field_layouts(OffsetCommitValue)
    present = [(f.name, f.wire.kind) for f in fields if 3 in f.wire.versions]
    expected = [
        ("offset", Kind.INT64),
        ("leader_epoch", Kind.INT32),
        ("metadata", Kind.STRING),
        ("commit_timestamp", Kind.INT64),
    ]
    defaults = {f.name: f.wire.default for f in fields if 3 not in f.wire.versions}
    if present != expected or set(defaults) != {"expire_timestamp", "topic_id"}:
        return None
    for key_type in (0, 1):
        rtype = RECORD_TYPES[key_type]
        if rtype.value_classes != (OffsetCommitValue,) or 3 not in rtype.value_versions:
            return None
        if rtype.flexible_from is not None and rtype.flexible_from <= 3:
            return None
    return defaults["expire_timestamp"], defaults["topic_id"]


_COMMIT_V3_DEFAULTS: Final = _commit_v3_layout()
#: OffsetCommitValue v3 with empty metadata: version, offset, leader epoch, metadata length
#: (0), commit timestamp - 24 bytes
_unpack_commit_v3: Final = struct.Struct(">hqihq").unpack
_COMMIT_V3_SIZE: Final = 24
_EXPIRE_DEFAULT: Final = -1 if _COMMIT_V3_DEFAULTS is None else _COMMIT_V3_DEFAULTS[0]
_TOPIC_ID_DEFAULT: Final = "" if _COMMIT_V3_DEFAULTS is None else _COMMIT_V3_DEFAULTS[1]
#: key types 0..this one (legacy and current offset commits) take the fast path; -1: none
_COMMIT_FAST_MAX_TYPE: Final = -1 if _COMMIT_V3_DEFAULTS is None else 1


# -- the optional C accelerator ------------------------------------------------------------

#: environment variable that turns the C accelerator off (`1`, `true` or `yes`)
NO_SPEEDUPS_ENV: Final = "OFFSETWATCH_NO_SPEEDUPS"

_STR, _BYTES, _I32, _I64, _ARR = Kind.STRING, Kind.BYTES, Kind.INT32, Kind.INT64, Kind.ARRAY
#: what decoder/_speedups.c reads, field by field (name, kind, nullable), per class and
#: (non-flexible) version; it is only used when the layouts say exactly the same
_COMMIT_V0: Final = [
    ("offset", _I64, False),
    ("metadata", _STR, False),
    ("commit_timestamp", _I64, False),
]
_GROUP_V0: Final = [
    ("protocol_type", _STR, False),
    ("generation", _I32, False),
    ("protocol", _STR, True),
    ("leader", _STR, True),
]
_MEMBER_V0: Final = [
    ("member_id", _STR, False),
    ("client_id", _STR, False),
    ("client_host", _STR, False),
]
_MEMBER_END: Final = [
    ("session_timeout", _I32, False),
    ("subscription", _BYTES, False),
    ("assignment", _BYTES, False),
]
_C_LAYOUTS: Final[dict[type, dict[int, list[tuple[str, Kind, bool]]]]] = {
    OffsetCommitKey: {
        0: [("group", _STR, False), ("topic", _STR, False), ("partition", _I32, False)]
    },
    OffsetCommitValue: {
        0: _COMMIT_V0,
        1: [*_COMMIT_V0, ("expire_timestamp", _I64, False)],
        2: _COMMIT_V0,
        3: [
            ("offset", _I64, False),
            ("leader_epoch", _I32, False),
            ("metadata", _STR, False),
            ("commit_timestamp", _I64, False),
        ],
    },
    GroupMetadataValue: {
        0: [*_GROUP_V0, ("members", _ARR, False)],
        1: [*_GROUP_V0, ("members", _ARR, False)],
        2: [*_GROUP_V0, ("current_state_timestamp", _I64, False), ("members", _ARR, False)],
        3: [*_GROUP_V0, ("current_state_timestamp", _I64, False), ("members", _ARR, False)],
    },
    MemberMetadata: {
        0: [*_MEMBER_V0, *_MEMBER_END],
        1: [*_MEMBER_V0, ("rebalance_timeout", _I32, False), *_MEMBER_END],
        2: [*_MEMBER_V0, ("rebalance_timeout", _I32, False), *_MEMBER_END],
        3: [
            _MEMBER_V0[0],
            ("group_instance_id", _STR, True),
            *_MEMBER_V0[1:],
            ("rebalance_timeout", _I32, False),
            *_MEMBER_END,
        ],
    },
}


def _layouts_match_speedups() -> bool:
    """The layouts and the registry are what decoder/_speedups.c reads (else it stays off)."""
    for cls, versions in _C_LAYOUTS.items():
        fields = field_layouts(cls)
        for version, expected in versions.items():
            present = [
                (f.name, f.wire.kind, version in f.wire.nullable)
                for f in fields
                if version in f.wire.versions
            ]
            if present != expected:
                return False
    members = next(f for f in field_layouts(GroupMetadataValue) if f.name == "members")
    if members.wire.item is not MemberMetadata:
        return False
    for key_type, key_class, value_class in (
        (0, OffsetCommitKey, OffsetCommitValue),
        (1, OffsetCommitKey, OffsetCommitValue),
        (2, None, GroupMetadataValue),
    ):
        rtype = RECORD_TYPES.get(key_type)
        if rtype is None or rtype.value_classes != (value_class,):
            return False
        if key_class is not None and rtype.key_class is not key_class:
            return False
        if not all(version in rtype.value_versions for version in range(4)):
            return False
        if rtype.flexible_from is not None and rtype.flexible_from <= 3:
            return False
    return True


def _default(cls: type, name: str) -> Any:
    return next(f.wire.default for f in field_layouts(cls) if f.name == name)


def configure_speedups(module: Any) -> None:
    """Hand decoder._speedups the classes it builds and the defaults of absent fields."""
    module.configure(
        Record,
        OffsetCommitKey,
        OffsetCommitValue,
        MemberMetadata,
        GroupMetadataValue,
        NO_TAGS,
        _default(OffsetCommitValue, "leader_epoch"),
        _default(OffsetCommitValue, "expire_timestamp"),
        _default(OffsetCommitValue, "topic_id"),
        _default(MemberMetadata, "group_instance_id"),
        _default(MemberMetadata, "rebalance_timeout"),
        _default(GroupMetadataValue, "current_state_timestamp"),
    )


#: the wire readers the C accelerators share (decoder/_wire.h); setup.py hashes it after the
#: source of every module that includes it
WIRE_HEADER: Final = Path(__file__).with_name("_wire.h")


def built_from(name: str, source: Path, depends: tuple[Path, ...] = ()) -> tuple[Any, str]:
    """(the C extension module `name`, "") when it is built and, in a source checkout, built
    from this very `source` and the headers it `depends` on (setup.py hashes the same bytes
    in the same order); else (None, why it is not used)."""
    try:
        module = importlib.import_module(name)
    except ImportError as error:
        return None, f"{name} is not built ({error})"
    if source.exists():
        missing = [path.name for path in depends if not path.exists()]
        if missing:
            # a source beside the module but not the header it was built with: what it was
            # built from cannot be told, so it is not used (rather than failing the import)
            return None, f"{name}: {', '.join(missing)} is missing beside {source.name}"
        digest = hashlib.sha256(
            b"".join(path.read_bytes() for path in (source, *depends))
        ).hexdigest()
        if getattr(module, "SOURCE_SHA256", None) != digest:
            built = " / ".join(path.name for path in (source, *depends))
            return None, (
                f"{name} was built from another version of {built}: run `pip install -e .` again"
            )
    return module, ""


def in_use(built: tuple[Any, str]) -> tuple[Any, str]:
    """`built_from`'s answer, unless OFFSETWATCH_NO_SPEEDUPS turns the accelerators off."""
    module, why = built
    if module is not None and speedups_disabled_by_environment():
        return None, f"turned off by {NO_SPEEDUPS_ENV}"
    return module, why


def _load_speedups() -> tuple[Any, str]:
    """(the configured decoder._speedups module or None, why it is not used)."""
    module, why = built_from(
        "offsetwatch.decoder._speedups", Path(__file__).with_name("_speedups.c"), (WIRE_HEADER,)
    )
    if module is None:
        return None, why
    if not _layouts_match_speedups():
        return None, "the record layouts differ from what decoder/_speedups.c reads"
    try:
        configure_speedups(module)
    except (TypeError, AttributeError) as error:  # pragma: no cover - classes changed shape
        return None, f"offsetwatch.decoder._speedups cannot build these classes ({error})"
    return module, ""


_SPEEDUPS, _SPEEDUPS_MISSING = _load_speedups()


def speedups_disabled_by_environment() -> bool:
    return os.environ.get(NO_SPEEDUPS_ENV, "").strip().lower() in ("1", "true", "yes")


def accelerated(name: str) -> Any | None:
    """The C accelerator's function `name`, or None when the accelerator is not used."""
    if _SPEEDUPS is None or speedups_disabled_by_environment():
        return None
    return getattr(_SPEEDUPS, name, None)


def speedups_status() -> tuple[bool, str]:
    """(whether a new `Codec()` uses the C accelerator, why not when it does not)."""
    if _SPEEDUPS is None:
        return False, _SPEEDUPS_MISSING
    if speedups_disabled_by_environment():
        return False, f"disabled by {NO_SPEEDUPS_ENV}"
    return True, ""


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


def read_value(codec: _TypeCodec, value: bytes) -> tuple[int, Any]:
    """(version, value struct) of a value of `codec`'s record type; one rule for every topic
    (`share_state` reads `__share_group_state` with it)."""
    if len(value) < 2:
        raise DecodeError(
            f"value of {len(value)} bytes is shorter than its version prefix", part="value"
        )
    version = _I16.unpack_from(value)[0]
    readers = codec.value_readers.get(version)
    rtype = codec.rtype
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


@dataclass(slots=True)
class Codec:
    """Decoder and encoder of `__consumer_offsets` keys and values.

    Keep one per thread: it caches decoded keys (commit streams repeat the same keys all the
    time), bounded by `key_cache_size` entries and cleared wholesale when full, which keeps
    memory flat without the bookkeeping cost of an LRU on the hot path.
    """

    key_cache_size: int = _DEFAULT_KEY_CACHE
    #: decode through the C accelerator when it is built (read once, at construction;
    #: OFFSETWATCH_NO_SPEEDUPS=1 in the environment has the effect of False)
    accelerate: bool = True
    _compiler: Compiler = field(default_factory=Compiler)
    _types: dict[int, _TypeCodec] = field(default_factory=dict)
    #: key bytes -> decoded key (only keys of known types, 0..255, are cached)
    _key_cache: dict[bytes | None, Key] = field(default_factory=dict)
    #: decoder._speedups.decode / decode_many, None on the pure-Python path
    _fast: Any = field(default=None, init=False, repr=False, compare=False)
    _fast_many: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for key_type in RECORD_TYPES:
            if not 0 <= key_type <= 0xFF:  # pragma: no cover - the cache relies on it
                raise ValueError(f"key type {key_type} does not fit the key cache")
        if self.accelerate and _SPEEDUPS is not None and not speedups_disabled_by_environment():
            self._fast = _SPEEDUPS.decode
            self._fast_many = _SPEEDUPS.decode_many

    @property
    def accelerated(self) -> bool:
        """Whether this codec decodes through the C accelerator (offsetwatch.decoder._speedups)."""
        return self._fast is not None

    def _codec_of(self, key_type: int) -> _TypeCodec | None:
        """The readers and writers of a record type, generated at its first use: a process
        that meets only offset commits (and the C accelerators read those) never pays for
        the other types' code generation (~90 ms at every start-up)."""
        codec = self._types.get(key_type)
        if codec is None:
            rtype = RECORD_TYPES.get(key_type)
            if rtype is None:
                return None
            codec = self._types[key_type] = _build(self._compiler, rtype)
        return codec

    def _known(self, key_type: int) -> _TypeCodec:
        """`_codec_of` a type known to be in the registry (its key was decoded)."""
        codec = self._codec_of(key_type)
        assert codec is not None
        return codec

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
        fast = self._fast
        if fast is not None:
            built: AnyRecord | None = fast(
                self._key_cache, self.key_cache_size, key, value, partition, offset, timestamp
            )
            if built is not None:
                return built
        # the pure-Python path: the reference the C accelerator must agree with
        try:
            key_obj = self._key_cache.get(key)
            if key_obj is None:
                if key is None:
                    raise DecodeError("null key (only control records have none)", part="key")
                key_obj = self._cache_key(key)
                if key_obj is None:
                    key_type = _I16.unpack_from(key)[0]
                    return UnknownRecord(key_type, key, value, partition, offset, timestamp)
            # a cached key is of a known type (0..255): its int16 type is its second byte
            key_type = key[1]  # type: ignore[index]
            if value is None:
                version = value_obj = None
            elif key_type <= _COMMIT_FAST_MAX_TYPE and len(value) == _COMMIT_V3_SIZE:
                version, off, epoch, metadata_length, commit_ts = _unpack_commit_v3(value)
                if version == 3 and metadata_length == 0:
                    value_obj = _new(_CommitBuilder)
                    value_obj.offset = off
                    value_obj.leader_epoch = epoch
                    value_obj.metadata = ""
                    value_obj.commit_timestamp = commit_ts
                    value_obj.expire_timestamp = _EXPIRE_DEFAULT
                    value_obj.topic_id = _TOPIC_ID_DEFAULT
                    value_obj.tags = NO_TAGS
                    value_obj.__class__ = OffsetCommitValue
                else:
                    version, value_obj = self._decode_value(self._known(key_type), value)
            else:
                version, value_obj = self._decode_value(self._known(key_type), value)
        except DecodeError as error:
            raise error.at(partition, offset) from None
        record = _new(_RecordBuilder)
        record.key_type = key_type
        record.key = key_obj
        record.value_version = version
        record.value = value_obj
        record.partition = partition
        record.offset = offset
        record.timestamp = timestamp
        record.__class__ = Record
        result: Record = record
        return result

    def _decode_message(self, message: Message) -> AnyRecord:
        """`decode` of one `decode_many` message (the C loop's fallback)."""
        key, value, partition, offset, timestamp = message
        return self.decode(key, value, partition, offset, timestamp)

    def decode_many(self, messages: Iterable[Message]) -> list[AnyRecord]:
        """`decode` over (key, value, partition, offset, timestamp) tuples, in one loop.

        Returns exactly what `decode` returns for each message, in order; raises the
        DecodeError `decode` raises for the first bad message (a caller that quarantines bad
        records decodes that batch again one by one).
        """
        fast_many = self._fast_many
        if fast_many is not None:
            records: list[AnyRecord] = fast_many(
                self._key_cache, self.key_cache_size, messages, self._decode_message
            )
            return records
        # without the C loop, one call per message: an inlined copy of decode() here was
        # only ~5 % faster, not worth a second copy of the hot path
        decode = self._decode_message
        return [decode(message) for message in messages]

    def decode_key(self, key: bytes) -> DecodedKey:
        """Decode a key (and cache it); an unknown key type is a DecodeError here."""
        key_obj = self._cache_key(key)
        key_type = _I16.unpack_from(key)[0]
        if key_obj is None:
            raise DecodeError(f"unknown record type {key_type}", part="key", byte_position=0)
        return self._known(key_type).rtype, key_obj

    def _cache_key(self, key: bytes) -> Key | None:
        """Decode and cache a key; None for an unknown key type."""
        if len(key) < 2:
            raise DecodeError(
                f"key of {len(key)} bytes is shorter than its type prefix", part="key"
            )
        key_type = _I16.unpack_from(key)[0]
        codec = self._codec_of(key_type)
        if codec is None:
            return None
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
        cache = self._key_cache
        if len(cache) >= self.key_cache_size:
            cache.clear()
        cache[key] = key_obj
        return key_obj  # type: ignore[no-any-return]

    def decode_value(self, key_type: int, value: bytes) -> tuple[int, Value]:
        codec = self._codec_of(key_type)
        if codec is None:
            raise DecodeError(f"unknown record type {key_type}", part="key", byte_position=0)
        return self._decode_value(codec, value)

    def _decode_value(self, codec: _TypeCodec, value: bytes) -> tuple[int, Any]:
        return read_value(codec, value)

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
        codec = self._codec_of(key_type)
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
        codec = self._codec_of(key_type)
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
