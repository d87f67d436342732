"""Avro form of the canonical record (`offsetwatch.decoder.canonical`).

The schema is generated from the layouts.

The schema is built from the same `Wire` descriptions the readers and writers are compiled
from, so it cannot drift from the decoder; `offsetwatch_record.avsc` is a checked-in copy
(a test keeps it equal to `avro_schema()`; regenerate it with
`python -m offsetwatch.decoder.avro > decoder/offsetwatch_record.avsc`).
`python -m offsetwatch.decoder.avro --doc FILE`
rewrites the generated part of docs/canonical-schema.md from the same layouts.

Mapping (documented for readers in docs/canonical-schema.md):

* one top-level record `offsetwatch.CanonicalRecord` with the canonical envelope fields;
  `key` is a union of the key records plus `UnknownKey {raw}`, `value` a union of null, every
  value record and `UnknownValue {raw}`; the writer picks the branch from the record's `type`
  (and, for the two share-group types whose layout changed without a version bump, from the
  value's field names), never by guessing from the data;
* int8/int16/int32/uint16 -> int, int64 -> long, bool -> boolean, string -> string,
  bytes -> bytes, uuid -> string (Kafka's URL-safe base64 text), arrays -> array, structs ->
  named records (namespace `offsetwatch`, name = class name); nullable fields become
  `["null", T]`; fields absent from some versions (or tagged) carry Kafka's default as Avro
  default;
* unknown tagged fields are kept: every flexible struct has an optional
  `unknown_tags: ["null", array<UnknownTag {tag, data}>]` (default null), which is null when
  the canonical dict has no `unknown_tags` entry;
* Avro strings must be UTF-8: text holding invalid UTF-8 from the wire (kept by the decoder
  as surrogate escapes) is written with U+FFFD in place of the bad bytes, as Kafka's own
  tools show it. That is the only case where canonical -> Avro -> canonical is not exact.

`AvroCodec` holds the parsed schema and a reusable buffer: keep one per thread.
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import IO, Any, Final

import fastavro
from fastavro.schema import to_parsing_canonical_form

from offsetwatch.decoder import contract as c
from offsetwatch.decoder.canonical import is_valid_utf8, scrub_text
from offsetwatch.decoder.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from offsetwatch.decoder.layout import (
    VERSION_MAX,
    FieldLayout,
    Kind,
    Wire,
    field_layouts,
    has_tags_field,
)
from offsetwatch.decoder.records import MemberMetadata
from offsetwatch.decoder.registry import (
    OWN_TYPES,
    RECORD_TYPES,
    SHARE_STATE_TOPIC,
    SHARE_STATE_TYPES,
)

NAMESPACE: Final = "offsetwatch"
TOP_NAME: Final = "CanonicalRecord"
UNKNOWN_TYPE: Final = c.UNKNOWN_TYPE
UNKNOWN_KEY: Final = "UnknownKey"
UNKNOWN_VALUE: Final = "UnknownValue"
UNKNOWN_TAG: Final = "UnknownTag"
TAGS_FIELD: Final = "unknown_tags"
SCHEMA_FILE: Final = Path(__file__).with_name("offsetwatch_record.avsc")
DOC_BEGIN: Final = (
    "<!-- BEGIN GENERATED: python -m offsetwatch.decoder.avro --doc docs/canonical-schema.md -->"
)
DOC_END: Final = "<!-- END GENERATED -->"

#: Confluent Schema Registry framing: magic byte 0, then the schema id as big-endian int32.
CONFLUENT_MAGIC: Final = 0
_CONFLUENT_HEADER: Final = struct.Struct(">bI")
_SCHEMA_ID_MAX: Final = 0x7FFFFFFF

_PRIMITIVE: Final = {
    Kind.INT8: "int",
    Kind.INT16: "int",
    Kind.INT32: "int",
    Kind.UINT16: "int",
    Kind.INT64: "long",
    Kind.BOOL: "boolean",
    Kind.STRING: "string",
    Kind.BYTES: "bytes",
    Kind.UUID: "string",
}

#: extra canonical fields of classic-group members: the decoded consumer-protocol blobs.
_EXTRA_FIELDS: Final[dict[type, tuple[tuple[str, type], ...]]] = {
    MemberMetadata: (
        ("subscription_decoded", ConsumerProtocolSubscription),
        ("assignment_decoded", ConsumerProtocolAssignment),
    ),
}
#: records that carry the blob's own int16 version as a leading `version` field.
_VERSIONED: Final = (ConsumerProtocolSubscription, ConsumerProtocolAssignment)

#: container-file codecs fastavro may support, probed at run time (`container_codecs()`).
_CANDIDATE_CODECS: Final = ("null", "deflate", "snappy", "zstandard", "bzip2", "xz")

_TOP_FIELDS: Final = (
    (c.TYPE, "string", "record type name (`offset_commit`, ..., `unknown`)"),
    (c.KEY_TYPE, "int", "the int16 key type K of __consumer_offsets; -1 for a log-end sample"),
    (
        c.VALUE_VERSION,
        ["null", "int"],
        "the int16 value version; null for a tombstone or unknown type",
    ),
    (c.TOMBSTONE, "boolean", "true when the value is null (a deletion)"),
    (c.NEWER_VERSION, "boolean", "value version above what the decoder knows"),
    (c.PARTITION, "int", "partition of __consumer_offsets; -1 for a log-end sample"),
    (c.OFFSET, "long", "offset in that partition; a log-end sample's own id"),
    (c.TIMESTAMP, "long", "record timestamp, epoch milliseconds"),
    (
        c.GROUP,
        ["null", "string"],
        "the group id; null for unknown record types and log-end samples",
    ),
)
#: envelope fields after `key` and `value`, added in schema version 2 (with defaults, so
#: files and bodies of version 1 still read)
_LATER_FIELDS: Final = (
    (
        c.TRANSACTION,
        ["null", "string"],
        None,
        "committed, aborted or pending: the outcome of the record's transaction where the "
        "writer knows it; null otherwise",
    ),
    (c.SCHEMA, "int", c.FIRST_SCHEMA_VERSION, "the canonical record's schema version"),
)


class AvroError(ValueError):
    """A canonical dict that cannot be written as Avro, or bytes that are not one."""


# ---------------------------------------------------------------------------------------------
# Schema generation


def _fullname(name: str) -> str:
    return f"{NAMESPACE}.{name}"


def _may_be_absent(w: Wire) -> bool:
    """Not on the wire in every version: the canonical dict then holds Kafka's default."""
    return w.tag is not None or w.versions.low > 0 or w.versions.high < VERSION_MAX


def _is_nullable(w: Wire) -> bool:
    if w.nullable.low <= w.nullable.high:
        return True
    return w.default is None and _may_be_absent(w)


def _avro_default(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(slots=True)
class _SchemaBuilder:
    """One schema generation: named records are defined once, then referenced by name."""

    defined: set[str] = field(default_factory=set)

    def named(self, name: str, build: Callable[[], dict[str, Any]]) -> Any:
        if name in self.defined:
            return _fullname(name)
        self.defined.add(name)
        return build()

    def struct(self, cls: type) -> Any:
        return self.named(cls.__name__, lambda: self._struct_record(cls))

    def _struct_record(self, cls: type) -> dict[str, Any]:
        fields: list[dict[str, Any]] = []
        if cls in _VERSIONED:
            fields.append({"name": "version", "type": "int"})
        fields.extend(self._field(f) for f in field_layouts(cls))
        if has_tags_field(cls):
            fields.append(
                {
                    "name": TAGS_FIELD,
                    "type": ["null", {"type": "array", "items": self.unknown_tag()}],
                    "default": None,
                }
            )
        for name, extra in _EXTRA_FIELDS.get(cls, ()):
            fields.append({"name": name, "type": ["null", self.struct(extra)], "default": None})
        return {"type": "record", "name": cls.__name__, "fields": fields}

    def unknown_tag(self) -> Any:
        return self.named(
            UNKNOWN_TAG,
            lambda: {
                "type": "record",
                "name": UNKNOWN_TAG,
                "fields": [{"name": "tag", "type": "int"}, {"name": "data", "type": "bytes"}],
            },
        )

    def raw(self, name: str) -> Any:
        return self.named(
            name,
            lambda: {"type": "record", "name": name, "fields": [{"name": "raw", "type": "bytes"}]},
        )

    def _field(self, f: FieldLayout) -> dict[str, Any]:
        w = f.wire
        base = self.wire_type(w)
        out: dict[str, Any] = {"name": f.name}
        if not _is_nullable(w):
            out["type"] = base
        elif w.default is None:
            out["type"] = ["null", base]
        else:  # an Avro union's default must match its first branch
            out["type"] = [base, "null"]
        if _may_be_absent(w):
            out["default"] = _avro_default(w.default)
        return out

    def wire_type(self, w: Wire) -> Any:
        if w.kind is Kind.ARRAY:
            item = w.item
            items = _PRIMITIVE[item] if isinstance(item, Kind) else self.struct(_cls(item))
            return {"type": "array", "items": items}
        if w.kind is Kind.STRUCT:
            return self.struct(_cls(w.struct))
        return _PRIMITIVE[w.kind]


def _cls(value: Any) -> type:
    assert isinstance(value, type), value
    return value


def key_classes() -> tuple[type, ...]:
    """The key records of the `key` union, in union order (registry order)."""
    return tuple(dict.fromkeys(t.key_class for t in RECORD_TYPES.values()))


def value_classes() -> tuple[type, ...]:
    """The value records of the `value` union (after null), in union order."""
    return tuple(dict.fromkeys(c for t in RECORD_TYPES.values() for c in t.value_classes))


def own_key_classes() -> tuple[type, ...]:
    """Key records of offsetwatch's own types (log-end samples): after `UnknownKey`, so the
    branch numbers of the `__consumer_offsets` types and of `UnknownKey` never move."""
    return tuple(dict.fromkeys(t.key_class for t in OWN_TYPES))


def own_value_classes() -> tuple[type, ...]:
    """Value records of offsetwatch's own types: after `UnknownValue`, for the same reason."""
    return tuple(dict.fromkeys(c for t in OWN_TYPES for c in t.value_classes))


def share_key_classes() -> tuple[type, ...]:
    """Key records of `__share_group_state` types: last, so no earlier branch number moves."""
    return tuple(dict.fromkeys(t.key_class for t in SHARE_STATE_TYPES.values()))


def share_value_classes() -> tuple[type, ...]:
    """Value records of `__share_group_state` types: last, for the same reason."""
    return tuple(dict.fromkeys(c for t in SHARE_STATE_TYPES.values() for c in t.value_classes))


def avro_schema(version: int = c.SCHEMA_VERSION) -> dict[str, Any]:
    """The Avro schema of `offsetwatch.CanonicalRecord`, generated from the layouts;
    `version`: of an older schema version (what earlier offsetwatch releases wrote)."""
    builder = _SchemaBuilder()
    fields: list[dict[str, Any]] = [
        {"name": name, "type": avro_type, "doc": doc} for name, avro_type, doc in _TOP_FIELDS
    ]
    keys = [builder.struct(cls) for cls in key_classes()]
    keys.append(builder.raw(UNKNOWN_KEY))
    keys.extend(builder.struct(cls) for cls in own_key_classes())
    keys.extend(builder.struct(cls) for cls in share_key_classes())
    values: list[Any] = ["null"]
    values.extend(builder.struct(cls) for cls in value_classes())
    values.append(builder.raw(UNKNOWN_VALUE))
    values.extend(builder.struct(cls) for cls in own_value_classes())
    values.extend(builder.struct(cls) for cls in share_value_classes())
    fields.append({"name": "key", "type": keys, "doc": "the key fields, by record type"})
    fields.append(
        {"name": "value", "type": values, "doc": "the value fields; null for a tombstone"}
    )
    if version >= c.SCHEMA_VERSION:
        fields.extend(
            {"name": name, "type": avro_type, "default": default, "doc": doc}
            for name, avro_type, default, doc in _LATER_FIELDS
        )
    return {
        "type": "record",
        "name": TOP_NAME,
        "namespace": NAMESPACE,
        "doc": "One record of Kafka's __consumer_offsets, decoded by offsetwatch, or a "
        "log-end sample offsetwatch adds (docs/canonical-schema.md).",
        "fields": fields,
    }


def schema_json() -> str:
    """The text of `offsetwatch_record.avsc`."""
    return json.dumps(avro_schema(), indent=2) + "\n"


# ---------------------------------------------------------------------------------------------
# What the exporter's C Avro encoder of offset commits needs (exporter/state/_ingest_speedups.c)


def _branch_index(union: Any, wanted: str) -> int | None:
    """The index of the branch named `wanted` (a primitive or a record's name) in a union."""
    if not isinstance(union, list):
        return None
    for index, branch in enumerate(union):
        name = branch.get("name") if isinstance(branch, dict) else branch
        if name in (wanted, _fullname(wanted)):
            return index
    return None


def _record_fields(node: Any) -> list[tuple[str, Any]]:
    return [(f["name"], f["type"]) for f in node["fields"]] if isinstance(node, dict) else []


#: the top-level fields the C encoder writes, in this order, with the type of each (a name
#: in brackets: a union, the branch of that name is the one written)
_COMMIT_TOP: Final = (
    (c.TYPE, "string"), (c.KEY_TYPE, "int"), (c.VALUE_VERSION, "[int]"),
    (c.TOMBSTONE, "boolean"), (c.NEWER_VERSION, "boolean"), (c.PARTITION, "int"),
    (c.OFFSET, "long"), (c.TIMESTAMP, "long"), (c.GROUP, "[string]"), ("key", "[key]"),
    ("value", "[value]"), (c.TRANSACTION, "[null]"), (c.SCHEMA, "int"),
)  # fmt: skip
_COMMIT_KEY: Final = (("group", "string"), ("topic", "string"), ("partition", "int"))
_COMMIT_VALUE: Final = (
    ("offset", "long"), ("leader_epoch", "int"), ("metadata", "string"),
    ("commit_timestamp", "long"), ("expire_timestamp", "long"), ("topic_id", "string"),
    (TAGS_FIELD, "[null]"),
)  # fmt: skip


def _branches_of(
    node: Any, expected: tuple[tuple[str, str], ...], names: dict[str, str]
) -> list[int] | None:
    """The branch index of each union field of record `node`, in field order, or None when
    its fields are not `expected` (names, types, order)."""
    fields = _record_fields(node)
    if [name for name, _ in fields] != [name for name, _ in expected]:
        return None
    found: list[int] = []
    for (_name, avro_type), (_, wanted) in zip(fields, expected, strict=True):
        if wanted.startswith("["):
            index = _branch_index(avro_type, names.get(wanted[1:-1], wanted[1:-1]))
            if index is None:
                return None
            found.append(index)
        elif avro_type != wanted:
            return None
    return found


def commit_branches(schema: dict[str, Any] | None = None) -> tuple[bytes | int, ...] | None:
    """The C encoder's spec for offset commits (`encode_commits_avro`), derived from the
    schema (default `avro_schema()`): (the type name's UTF-8 bytes, the `int` branch of
    `value_version`, the `string` branch of `group`, the commit key's branch of `key`, the
    commit value's branch of `value`, the null branch of its `unknown_tags`, the null branch
    of `transaction`, the schema version), or None when the schema's fields are not the
    ones, in the order and of the types, that the C encoder writes (it then takes no
    record: the Python path writes them all)."""
    schema = avro_schema() if schema is None else schema
    rtypes = [RECORD_TYPES.get(k) for k in (0, 1)]
    if (
        rtypes[0] is None
        or rtypes[1] is None
        or rtypes[0].key_class is not rtypes[1].key_class
        or rtypes[0].value_classes != rtypes[1].value_classes
        or len(rtypes[1].value_classes) != 1
    ):
        return None
    rtype = rtypes[1]
    names = {"key": rtype.key_class.__name__, "value": rtype.value_classes[0].__name__}
    top = _branches_of(schema, _COMMIT_TOP, names)
    if top is None:
        return None
    version_int, group_string, key_branch, value_branch, txn_null = top
    types = dict(_record_fields(schema))
    key = _branches_of(types["key"][key_branch], _COMMIT_KEY, {})
    value = _branches_of(types["value"][value_branch], _COMMIT_VALUE, {})
    if key is None or value is None:
        return None
    (tags_null,) = value
    return (
        rtype.name.encode("utf-8"),
        version_int,
        group_string,
        key_branch,
        value_branch,
        tags_null,
        txn_null,
        c.SCHEMA_VERSION,
    )


def confluent_header(schema_id: int) -> bytes:
    """Confluent's framing before an Avro body: magic byte 0, the schema id (big-endian)."""
    if not 0 <= schema_id <= _SCHEMA_ID_MAX:
        raise AvroError(f"schema id {schema_id} out of range 0..{_SCHEMA_ID_MAX}")
    return _CONFLUENT_HEADER.pack(CONFLUENT_MAGIC, schema_id)


# ---------------------------------------------------------------------------------------------
# Walking canonical dicts: where the unknown_tags and the text fields are, per record


@dataclass(frozen=True, slots=True)
class _Plan:
    """The parts of one record's dict the codec must visit, derived from its layout."""

    tags: bool
    #: string fields (str or None) and string-array fields (list or None)
    texts: tuple[str, ...]
    text_lists: tuple[str, ...]
    #: nested records (dict or None) and arrays of records, with their plans
    structs: tuple[tuple[str, _Plan], ...]
    struct_lists: tuple[tuple[str, _Plan], ...]
    #: some record below (or this one) has an unknown_tags field
    deep_tags: bool


def _plan(cls: type, cache: dict[type, _Plan]) -> _Plan:
    cached = cache.get(cls)
    if cached is not None:
        return cached
    texts: list[str] = []
    text_lists: list[str] = []
    structs: list[tuple[str, _Plan]] = []
    struct_lists: list[tuple[str, _Plan]] = []
    for f in field_layouts(cls):
        w = f.wire
        if w.kind is Kind.STRING:
            texts.append(f.name)
        elif w.kind is Kind.STRUCT:
            structs.append((f.name, _plan(_cls(w.struct), cache)))
        elif w.kind is Kind.ARRAY and w.item is Kind.STRING:
            text_lists.append(f.name)
        elif w.kind is Kind.ARRAY and isinstance(w.item, type):
            struct_lists.append((f.name, _plan(w.item, cache)))
    for name, extra in _EXTRA_FIELDS.get(cls, ()):
        structs.append((name, _plan(extra, cache)))
    tags = has_tags_field(cls)
    deep = tags or any(p.deep_tags for _, p in (*structs, *struct_lists))
    plan = _Plan(tags, tuple(texts), tuple(text_lists), tuple(structs), tuple(struct_lists), deep)
    cache[cls] = plan
    return plan


_RAW_PLAN: Final = _Plan(False, (), (), (), (), False)


def _strip_tags(plan: _Plan, record: dict[str, Any]) -> None:
    """Drop the null `unknown_tags` Avro gives back (canonical dicts omit them when empty)."""
    if plan.tags and record.get(TAGS_FIELD, 0) is None:
        del record[TAGS_FIELD]
    for name, child in plan.structs:
        sub = record.get(name)
        if sub is not None and child.deep_tags:
            _strip_tags(child, sub)
    for name, child in plan.struct_lists:
        items = record.get(name)
        if items and child.deep_tags:
            for item in items:
                _strip_tags(child, item)


def _has_bad_text(plan: _Plan, record: dict[str, Any]) -> bool:
    """Some text of the record cannot be written as Avro (UTF-8) as it is."""
    for name in plan.texts:
        text = record.get(name)
        if text is not None and not is_valid_utf8(text):
            return True
    for name in plan.text_lists:
        items = record.get(name)
        if items and not all(is_valid_utf8(text) for text in items):
            return True
    for name, child in plan.structs:
        sub = record.get(name)
        if sub is not None and _has_bad_text(child, sub):
            return True
    for name, child in plan.struct_lists:
        items = record.get(name)
        if items and any(_has_bad_text(child, item) for item in items):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# The codec


@dataclass(frozen=True, slots=True)
class _Branch:
    """The key/value union branches of one canonical record type."""

    key_name: str
    key_plan: _Plan
    #: (field names of the layout, Avro full name, plan); several when one version has
    #: several layouts (share groups in preview): the one whose fields the value has wins
    values: tuple[tuple[frozenset[str], str, _Plan], ...]


def _branches() -> dict[str, _Branch]:
    cache: dict[type, _Plan] = {}
    branches: dict[str, _Branch] = {}
    for rtype in (*RECORD_TYPES.values(), *OWN_TYPES, *SHARE_STATE_TYPES.values()):
        values = tuple(
            (
                frozenset(f.name for f in field_layouts(cls)),
                _fullname(cls.__name__),
                _plan(cls, cache),
            )
            for cls in rtype.value_classes
        )
        branch = _Branch(_fullname(rtype.key_class.__name__), _plan(rtype.key_class, cache), values)
        if branches.setdefault(rtype.name, branch) != branch:  # types 0/1 share a name
            raise AssertionError(f"record type {rtype.name} has two different layouts")
    unknown_value = ((frozenset({"raw"}), _fullname(UNKNOWN_VALUE), _RAW_PLAN),)
    branches[UNKNOWN_TYPE] = _Branch(_fullname(UNKNOWN_KEY), _RAW_PLAN, unknown_value)
    return branches


@dataclass(slots=True)
class AvroCodec:
    """Canonical dicts <-> Avro: schemaless bodies, Confluent framing, container files.

    Holds the parsed schema, the union branch of every record type and a reused output
    buffer, so it is not thread-safe: keep one per thread.
    """

    #: the generated schema (`avro_schema()`); the branches below are derived from the same layouts
    schema: dict[str, Any] = field(init=False, repr=False)
    _parsed: Any = field(init=False, repr=False)
    _branches: dict[str, _Branch] = field(init=False, repr=False)
    _plans_by_name: dict[str, _Plan] = field(init=False, repr=False)
    _canonical_form: str = field(init=False, repr=False)
    _buffer: io.BytesIO = field(init=False, repr=False, default_factory=io.BytesIO)
    #: the parsed schema of version 1, made when a body of that version first arrives
    _first_version: Any = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self.schema = avro_schema()
        self._parsed = fastavro.parse_schema(self.schema)
        self._canonical_form = to_parsing_canonical_form(self._parsed)
        self._branches = _branches()
        self._plans_by_name = {
            name: plan for b in self._branches.values() for _, name, plan in b.values
        }

    # -- canonical <-> Avro dicts ---------------------------------------------------------------

    def _value_branch(self, branch: _Branch, record_type: str, value: dict[str, Any]) -> str:
        if len(branch.values) == 1:
            return branch.values[0][1]
        names = value.keys() - {TAGS_FIELD}
        for fields, name, _plan in branch.values:
            if names == fields:
                return name
        raise AvroError(
            f"{record_type} value with fields {sorted(names)} matches none of its layouts"
        )

    def to_avro_dict(self, canonical: dict[str, Any]) -> dict[str, Any]:
        """A shallow copy with `key`/`value` in fastavro's tuple notation `(name, fields)`."""
        record_type = canonical.get("type")
        branch = self._branches.get(record_type) if isinstance(record_type, str) else None
        if branch is None or not isinstance(record_type, str):
            raise AvroError(f"unknown record type {record_type!r}")
        out = dict(canonical)
        out["key"] = (branch.key_name, canonical["key"])
        value = canonical["value"]
        if value is not None:
            out["value"] = (self._value_branch(branch, record_type, value), value)
        return out

    def from_avro_dict(self, record: dict[str, Any]) -> dict[str, Any]:
        """The canonical dict of a record read with this schema (modified in place)."""
        value = record["value"]
        if value is not None and record["type"] != UNKNOWN_TYPE:
            branch = self._branches.get(record["type"])
            if branch is not None:
                if len(branch.values) == 1:
                    plan = branch.values[0][2]
                else:
                    plan = self._plans_by_name[self._value_branch(branch, record["type"], value)]
                if plan.deep_tags:
                    _strip_tags(plan, value)
        return record

    def _checked(self, canonical: dict[str, Any]) -> dict[str, Any]:
        """`to_avro_dict`, with text that is not UTF-8 replaced first (for container files)."""
        avro = self.to_avro_dict(canonical)
        branch = self._branches[canonical["type"]]
        value = canonical["value"]
        bad = (
            (canonical["group"] is not None and not is_valid_utf8(canonical["group"]))
            or _has_bad_text(branch.key_plan, canonical["key"])
            or (value is not None and _has_bad_text(self._plans_by_name[avro["value"][0]], value))
        )
        return scrub_text(avro) if bad else avro

    # -- schemaless bodies ------------------------------------------------------------------

    def _write(self, out: IO[bytes], canonical: dict[str, Any]) -> None:
        avro = self.to_avro_dict(canonical)
        start = out.tell()
        try:
            try:
                fastavro.schemaless_writer(out, self._parsed, avro)
            except UnicodeEncodeError:  # text kept from invalid UTF-8: rare, so retried
                out.seek(start)
                out.truncate()
                fastavro.schemaless_writer(out, self._parsed, scrub_text(avro))
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as error:
            raise AvroError(f"{_where(canonical)}: cannot write as Avro: {error}") from error

    def encode(self, canonical: dict[str, Any]) -> bytes:
        """The schemaless Avro body of one canonical record."""
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        self._write(buffer, canonical)
        return buffer.getvalue()

    def decode(self, data: bytes) -> dict[str, Any]:
        """The canonical dict of one schemaless Avro body written with this schema, or with
        the schema of version 1 (earlier releases' republished topics): a version-1 body
        ends where version 2 has two more fields, so it cannot pass for one."""
        source = io.BytesIO(data)
        try:
            record = fastavro.schemaless_reader(source, self._parsed, None)
        except EOFError:
            record = self._decode_first_version(data)
        except (ValueError, IndexError, KeyError, TypeError, OverflowError) as error:
            raise AvroError(f"not an Avro {TOP_NAME}: {error!r}{_framing_hint(data)}") from error
        else:
            if source.tell() != len(data):
                raise AvroError(
                    f"{len(data) - source.tell()} bytes after the Avro {TOP_NAME}"
                    f"{_framing_hint(data)}"
                )
        if not isinstance(record, dict):
            raise AvroError(f"not an Avro {TOP_NAME}")
        return self.from_avro_dict(record)

    def _decode_first_version(self, data: bytes) -> Any:
        if self._first_version is None:
            self._first_version = fastavro.parse_schema(avro_schema(c.FIRST_SCHEMA_VERSION))
        source = io.BytesIO(data)
        try:
            record = fastavro.schemaless_reader(source, self._first_version, self._parsed)
        except (EOFError, ValueError, IndexError, KeyError, TypeError, OverflowError) as error:
            raise AvroError(f"not an Avro {TOP_NAME}: {error!r}{_framing_hint(data)}") from error
        if source.tell() != len(data):
            raise AvroError(
                f"{len(data) - source.tell()} bytes after the Avro {TOP_NAME}{_framing_hint(data)}"
            )
        return record

    # -- Confluent Schema Registry framing ----------------------------------------------------

    def encode_confluent(self, canonical: dict[str, Any], schema_id: int) -> bytes:
        """Magic byte 0, the schema id (big-endian int32), then the Avro body."""
        header = confluent_header(schema_id)
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        buffer.write(header)
        self._write(buffer, canonical)
        return buffer.getvalue()

    def decode_confluent(self, data: bytes) -> tuple[int, dict[str, Any]]:
        """(schema id, canonical dict) of a Confluent-framed message.

        The body is read with this codec's schema whatever the id says: map ids to schemas
        (or reject unknown ids) before calling this when several schema versions are live.
        """
        if len(data) < _CONFLUENT_HEADER.size:
            raise AvroError(
                f"{len(data)} bytes: shorter than the {_CONFLUENT_HEADER.size}-byte "
                "Confluent header"
            )
        magic, schema_id = _CONFLUENT_HEADER.unpack_from(data)
        if magic != CONFLUENT_MAGIC:
            raise AvroError(
                f"magic byte {magic & 0xFF:#04x} is not Confluent's {CONFLUENT_MAGIC:#04x}: "
                "not a Schema Registry framed message"
            )
        return schema_id, self.decode(data[_CONFLUENT_HEADER.size :])

    # -- Avro object container files ----------------------------------------------------------

    def write_container(
        self,
        target: str | PathLike[str] | IO[bytes],
        records: Iterable[dict[str, Any]],
        codec: str = "deflate",
        *,
        metadata: dict[str, str] | None = None,
    ) -> int:
        """Write canonical records to an Avro container file; returns how many were written.

        `codec` is one of `container_codecs()` ("null" and "deflate" always; "snappy" with
        cramjam; "zstandard" when fastavro finds its zstd library).
        """
        _require_codec(codec)  # before a file is created
        if isinstance(target, str | PathLike):
            with open(target, "wb") as out:
                return self._write_all(out, records, codec, metadata)
        return self._write_all(target, records, codec, metadata)

    def _write_all(
        self,
        out: IO[bytes],
        records: Iterable[dict[str, Any]],
        codec: str,
        metadata: dict[str, str] | None,
    ) -> int:
        writer = self.container_writer(out, codec, metadata=metadata)
        for canonical in records:
            writer.write(canonical)
        writer.flush()
        return writer.count

    def container_writer(
        self, out: IO[bytes], codec: str = "deflate", *, metadata: dict[str, str] | None = None
    ) -> ContainerWriter:
        """A container file written record by record; `flush()` ends the current block, so a
        follower (or a crash) sees every record written before it."""
        _require_codec(codec)
        return ContainerWriter(self, out, codec, metadata)

    def writes_like(self, writer_schema: Any) -> bool:
        """Whether a container file's writer schema is this codec's own (its records need no
        resolution)."""
        return bool(to_parsing_canonical_form(writer_schema) == self._canonical_form)

    def read_container(self, source: str | PathLike[str] | IO[bytes]) -> Iterator[dict[str, Any]]:
        """The canonical dicts of an Avro container file written with this (or an older,
        compatible) schema: records are resolved to this codec's schema."""
        if isinstance(source, str | PathLike):
            with open(source, "rb") as data:
                yield from self._read_container(data)
        else:
            yield from self._read_container(source)

    def _read_container(self, data: IO[bytes]) -> Iterator[dict[str, Any]]:
        start = data.tell() if data.seekable() else None
        try:
            reader = fastavro.reader(data)
            if not self.writes_like(reader.writer_schema):
                # written with another schema: resolve every record to ours (slower)
                if start is None:
                    raise AvroError(
                        "container file written with another schema: pass a seekable file "
                        "to read it resolved to this schema"
                    )
                data.seek(start)
                reader = fastavro.reader(data, self._parsed)
        except (EOFError, ValueError, KeyError, TypeError) as error:
            if isinstance(error, AvroError):
                raise
            raise AvroError(f"not an Avro container file of {TOP_NAME}: {error!r}") from error
        from_avro = self.from_avro_dict
        for record in reader:
            assert isinstance(record, dict)
            yield from_avro(record)


def _framing_hint(data: bytes) -> str:
    # a body starts with the length of `type`, never empty: a 0 byte is Confluent's magic
    if data[:1] == bytes([CONFLUENT_MAGIC]):
        return " (Confluent-framed? use decode_confluent)"
    return ""


def _where(canonical: dict[str, Any]) -> str:
    return (
        f"{canonical.get('type')} record at partition {canonical.get('partition')} "
        f"offset {canonical.get('offset')}"
    )


def _codec_available(codec: str) -> bool:
    """fastavro can write `codec` here (probed with a one-record file: depends on libraries)."""
    probe_schema = {"type": "record", "name": "Probe", "fields": []}
    try:
        fastavro.writer(io.BytesIO(), probe_schema, [{}], codec=codec)
    except (ValueError, ImportError):
        return False
    return True


def container_codecs() -> tuple[str, ...]:
    """The container-file codecs fastavro can write here."""
    return tuple(codec for codec in _CANDIDATE_CODECS if _codec_available(codec))


# ---------------------------------------------------------------------------------------------
# Documentation: the generated part of docs/canonical-schema.md


def _kind_text(w: Wire) -> str:
    if w.kind is Kind.ARRAY:
        item = w.item
        inner = str(item.value) if isinstance(item, Kind) else f"[{_cls(item).__name__}]"
        return f"array of {inner}"
    if w.kind is Kind.STRUCT:
        return f"[{_cls(w.struct).__name__}]"
    return str(w.kind.value)


def _avro_text(avro_type: Any) -> str:
    if isinstance(avro_type, list):
        return " \\| ".join(_avro_text(t) for t in avro_type)
    if isinstance(avro_type, dict):
        if avro_type["type"] == "array":
            return f"array<{_avro_text(avro_type['items'])}>"
        return str(avro_type["name"])
    text = str(avro_type)
    return text.removeprefix(f"{NAMESPACE}.")


def _versions_text(w: Wire) -> str:
    if w.versions.high == VERSION_MAX:
        return f"{w.versions.low}+"
    if w.versions.low == w.versions.high:
        return f"{w.versions.low} only"
    return f"{w.versions.low}-{w.versions.high}"


def _notes(w: Wire) -> str:
    notes = []
    if w.versions.low > 0 or w.versions.high < VERSION_MAX:
        notes.append(f"versions {_versions_text(w)}")
    if w.tag is not None:
        notes.append(f"tagged (tag {w.tag})")
    if w.nullable.low <= w.nullable.high:
        low, high = w.nullable.low, w.nullable.high
        if low <= w.versions.low and high == VERSION_MAX:
            notes.append("nullable")
        else:
            notes.append(f"nullable in versions {low}{'+' if high == VERSION_MAX else f'-{high}'}")
    if _may_be_absent(w):
        notes.append(f"default `{json.dumps(_avro_default(w.default))}` when absent")
    if w.kind is Kind.UUID:
        notes.append("Kafka UUID text (URL-safe base64, 22 chars)")
    return "; ".join(notes)


def _anchor(name: str) -> str:
    return name.lower()


def _linked(text: str) -> str:
    """`[Name]` -> a markdown link to that record's table."""
    out = []
    rest = text
    while "[" in rest:
        head, _, tail = rest.partition("[")
        name, _, rest = tail.partition("]")
        out.append(f"{head}[{name}](#{_anchor(name)})")
    out.append(rest)
    return "".join(out)


def _record_table(
    cls: type, avro_fields: dict[str, dict[str, Any]], intro: str | None = None
) -> list[str]:
    lines = [f"#### {cls.__name__}", ""]
    if intro:
        lines += [intro, ""]
    lines += [
        "| field | Kafka type | Avro type | notes |",
        "| --- | --- | --- | --- |",
    ]
    if cls in _VERSIONED:
        lines.append("| `version` | int16 | `int` | the blob's own version prefix |")
    for f in field_layouts(cls):
        avro_type = _avro_text(avro_fields[f.name]["type"])
        lines.append(
            f"| `{f.name}` | {_linked(_kind_text(f.wire))} | `{avro_type}` | {_notes(f.wire)} |"
        )
    if has_tags_field(cls):
        lines.append(
            f"| `{TAGS_FIELD}` | unknown tagged fields | `null \\| array<{UNKNOWN_TAG}>` | "
            "see [unknown tagged fields](#unknown-tagged-fields) |"
        )
    for name, extra in _EXTRA_FIELDS.get(cls, ()):
        lines.append(
            f"| `{name}` | {_linked(f'[{extra.__name__}]')} | `null \\| {extra.__name__}` | "
            "the blob above decoded; null unless the protocol type is `consumer` and it "
            "decodes |"
        )
    return [*lines, ""]


def _collect_records(schema: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Record name -> its fields by name, for every named record of the schema."""
    found: dict[str, dict[str, dict[str, Any]]] = {}

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            if node.get("type") == "record":
                found[node["name"]] = {f["name"]: f for f in node["fields"]}
                for f in node["fields"]:
                    visit(f["type"])
            elif node.get("type") == "array":
                visit(node["items"])

    visit(schema)
    return found


def _nested_classes(roots: Iterable[type]) -> list[type]:
    """Struct classes reachable from the roots' fields (and blob extras), first use first."""
    seen: dict[type, None] = {}

    def visit(cls: type) -> None:
        for f in field_layouts(cls):
            child = f.wire.struct if f.wire.kind is Kind.STRUCT else f.wire.item
            if isinstance(child, type) and child not in seen:
                seen[child] = None
                visit(child)
        for _, extra in _EXTRA_FIELDS.get(cls, ()):
            if extra not in seen:
                seen[extra] = None
                visit(extra)

    for root in roots:
        visit(root)
    return list(seen)


def schema_markdown() -> str:
    """The generated part of docs/canonical-schema.md: record types and every record's fields."""
    schema = avro_schema()
    records = _collect_records(schema)
    keys = key_classes()
    values = value_classes()
    lines = [
        "### Record types",
        "",
        "`key branch` / `value branch` are the positions in the `key` / `value` unions "
        "(null not counted): Spark names the union struct's fields `member<N>` after them.",
        "",
        "| key type K | `type` | value versions | key record | value record(s) "
        "| key branch | value branch |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for rtype in RECORD_TYPES.values():
        versions = rtype.value_versions
        version_text = (
            str(versions.low)
            if versions.low == versions.high
            else f"{versions.low}-{versions.high}"
        )
        value_names = " or ".join(
            f"[{c.__name__}](#{_anchor(c.__name__)})" for c in rtype.value_classes
        )
        value_branch = " or ".join(f"member{values.index(c)}" for c in rtype.value_classes)
        key_name = rtype.key_class.__name__
        lines.append(
            f"| {rtype.key_type} | `{rtype.name}` | {version_text} | "
            f"[{key_name}](#{_anchor(key_name)}) | {value_names} | "
            f"member{keys.index(rtype.key_class)} | {value_branch} |"
        )
    lines.append(
        f"| any other | `{UNKNOWN_TYPE}` | - | [{UNKNOWN_KEY}](#{_anchor(UNKNOWN_KEY)}) | "
        f"[{UNKNOWN_VALUE}](#{_anchor(UNKNOWN_VALUE)}) | member{len(keys)} | "
        f"member{len(values)} |"
    )
    own_keys, own_values = own_key_classes(), own_value_classes()
    for rtype in OWN_TYPES:
        key_name = rtype.key_class.__name__
        value_cls = rtype.value_classes[0]
        lines.append(
            f"| {rtype.key_type} (not in `__consumer_offsets`) | `{rtype.name}` | "
            f"{rtype.value_versions.low} | [{key_name}](#{_anchor(key_name)}) | "
            f"[{value_cls.__name__}](#{_anchor(value_cls.__name__)}) | "
            f"member{len(keys) + 1 + own_keys.index(rtype.key_class)} | "
            f"member{len(values) + 1 + own_values.index(value_cls)} |"
        )
    share_keys, share_values = share_key_classes(), share_value_classes()
    key_base, value_base = len(keys) + 1 + len(own_keys), len(values) + 1 + len(own_values)
    for rtype in SHARE_STATE_TYPES.values():
        key_name = rtype.key_class.__name__
        value_names = " or ".join(
            f"[{c.__name__}](#{_anchor(c.__name__)})" for c in rtype.value_classes
        )
        value_branch = " or ".join(
            f"member{value_base + share_values.index(c)}" for c in rtype.value_classes
        )
        lines.append(
            f"| {rtype.key_type} (of `{SHARE_STATE_TOPIC}`) | `{rtype.name}` | "
            f"{rtype.value_versions.low} | [{key_name}](#{_anchor(key_name)}) | {value_names} | "
            f"member{key_base + share_keys.index(rtype.key_class)} | {value_branch} |"
        )
    lines += ["", "### Key records", ""]
    for cls in keys:
        lines += _record_table(cls, records[cls.__name__])
    lines += ["### Value records", ""]
    for cls in values:
        used_by = {f"`{t.name}`": None for t in RECORD_TYPES.values() if cls in t.value_classes}
        lines += _record_table(cls, records[cls.__name__], f"Value of {', '.join(used_by)}.")
    lines += ["### Records offsetwatch adds (not from `__consumer_offsets`)", ""]
    for cls in own_keys:
        lines += _record_table(cls, records[cls.__name__])
    for cls in own_values:
        used_by = {f"`{t.name}`": None for t in OWN_TYPES if cls in t.value_classes}
        lines += _record_table(cls, records[cls.__name__], f"Value of {', '.join(used_by)}.")
    lines += [f"### Records of `{SHARE_STATE_TOPIC}`", ""]
    for cls in share_keys:
        lines += _record_table(cls, records[cls.__name__])
    for cls in share_values:
        used_by = {
            f"`{t.name}`": None for t in SHARE_STATE_TYPES.values() if cls in t.value_classes
        }
        lines += _record_table(cls, records[cls.__name__], f"Value of {', '.join(used_by)}.")
    lines += ["### Nested records", ""]
    for cls in _nested_classes((*keys, *values, *share_values)):
        lines += _record_table(cls, records[cls.__name__])
    lines += [
        "### Records of unknown types and unknown tags",
        "",
        "| record | field | Avro type | notes |",
        "| --- | --- | --- | --- |",
        f'| <a id="{_anchor(UNKNOWN_KEY)}"></a>{UNKNOWN_KEY} | `raw` | `bytes` | '
        "the whole key as read (type prefix included) |",
        f'| <a id="{_anchor(UNKNOWN_VALUE)}"></a>{UNKNOWN_VALUE} | `raw` | `bytes` | '
        "the whole value as read (version prefix included) |",
        f'| <a id="{_anchor(UNKNOWN_TAG)}"></a>{UNKNOWN_TAG} | `tag` | `int` | the tag number |',
        f"| {UNKNOWN_TAG} | `data` | `bytes` | the tag's payload as on the wire |",
    ]
    return "\n".join(lines) + "\n"


def update_doc(path: Path) -> bool:
    """Rewrite the generated part of the doc (between the markers); True if it changed."""
    text = path.read_text(encoding="utf-8")
    head, begin, rest = text.partition(DOC_BEGIN)
    _old, end, tail = rest.partition(DOC_END)
    if not begin or not end:
        raise ValueError(f"{path}: generated-section markers not found")
    new = f"{head}{DOC_BEGIN}\n\n{schema_markdown()}\n{DOC_END}{tail}"
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m offsetwatch.decoder.avro",
        description="Print the generated Avro schema of offsetwatch's canonical record.",
    )
    parser.add_argument("--doc", type=Path, help="rewrite the generated part of this markdown")
    parser.add_argument(
        "--markdown", action="store_true", help="print the generated record tables instead"
    )
    args = parser.parse_args(argv)
    if args.doc is not None:
        changed = update_doc(args.doc)
        print(f"{args.doc}: {'updated' if changed else 'up to date'}", file=sys.stderr)
    elif args.markdown:
        sys.stdout.write(schema_markdown())
    else:
        sys.stdout.write(schema_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _require_codec(codec: str) -> None:
    if not _codec_available(codec):
        raise AvroError(
            f"container codec {codec!r} is not available here (available: "
            f"{', '.join(container_codecs())}); 'zstandard' needs fastavro's zstd library "
            "(backports.zstd before Python 3.14)"
        )


class ContainerWriter:
    """An Avro object container being written (see `AvroCodec.container_writer`)."""

    def __init__(
        self, codec: AvroCodec, out: IO[bytes], compression: str, metadata: dict[str, str] | None
    ) -> None:
        from fastavro.write import Writer

        self._checked = codec._checked
        self.count = 0
        self._writer = Writer(out, codec._parsed, codec=compression, metadata=metadata)

    def write(self, canonical: dict[str, Any]) -> None:
        try:
            self._writer.write(self._checked(canonical))
        except AvroError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as error:
            raise AvroError(f"record #{self.count}: cannot write as Avro: {error}") from error
        self.count += 1

    def flush(self) -> None:
        """Write the records held for the current block as a complete block."""
        self._writer.flush()
