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

`dump_log_text(record)` / `console_text(record)` give the same JSON as text, exactly what
`canonical.dumps` makes of the dicts, without building them: the text of each key object is
cached (the codec hands out one object per distinct key), and each (struct class, version,
flexible) layout is compiled once into a Python function that formats its fields straight
into one f-string, so rendering stays generic over every record type.
"""

from __future__ import annotations

import base64
import json
import struct
from binascii import b2a_base64
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, Final, cast

from offsetwatch.decoder.codec import accelerated
from offsetwatch.decoder.consumer_protocol import (
    ConsumerProtocol,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.layout import Kind, Wire, field_layouts
from offsetwatch.decoder.records import (
    AnyRecord,
    GroupMetadataValue,
    MemberMetadata,
    Record,
    UnknownRecord,
)
from offsetwatch.decoder.registry import RECORD_TYPES

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


def _unknown_message(record: UnknownRecord) -> str:
    return f"Unknown record type {record.key_type} at offset {record.offset}, skipping."


def key_json(record: Record) -> dict[str, Any]:
    return struct_json(record.key, 0, False)


@dataclass(slots=True)
class KafkaJson:
    """Renders records the way Kafka's tools do; holds the blob decoder it needs."""

    protocol: ConsumerProtocol = field(default_factory=ConsumerProtocol)
    #: `dumps(dump_log(record))`, rendered straight to text (see the module docstring)
    dump_log_text: Callable[[AnyRecord], str] = field(init=False, repr=False, compare=False)
    #: `dumps(console(record))` as text, or None where `console` gives None
    console_text: Callable[[AnyRecord], str | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.dump_log_text, self.console_text = _text_renderers(self.protocol)

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
            return {"key": _unknown_message(record), "payload": None}
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


# -- text rendering --------------------------------------------------------------------------

#: key texts kept per key type and renderer; the codec keeps as many decoded key objects
#: (both caches are cleared wholesale when full)
KEY_TEXT_CACHE_SIZE: Final = 200_000

#: struct -> its JSON text
Renderer = Callable[[Any], str]
#: (struct, text before it) -> that text, a literal head, the struct's JSON, a literal tail
PrefixedRenderer = Callable[[Any, str], str]

_INT_KINDS: Final = frozenset({Kind.INT8, Kind.INT16, Kind.INT32, Kind.INT64, Kind.UINT16})
_STRING_KINDS: Final = frozenset({Kind.STRING, Kind.UUID})
#: consumer-protocol blobs of classic members that dump-log prints decoded
_BLOB_FIELDS: Final = {"subscription": "_subscription", "assignment": "_assignment"}


def _json_text(text: str) -> str:
    """A Kafka string as `dumps` writes it: a JSON string literal, invalid UTF-8 as U+FFFD."""
    if text.isascii():
        return encode_basestring(text)
    return encode_basestring(_kafka_string(text))


def _json_bytes(data: bytes) -> str:
    return '"' + b2a_base64(data, newline=False).decode("ascii") + '"'


def _json_any(value: Any) -> str:
    # kinds no record layout uses today (bool): the generic encoder
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _f_literal(text: str) -> str:
    """`text` as the literal part of a generated f'...' string."""
    if not (text.isascii() and text.isprintable()):  # pragma: no cover - names are identifiers
        raise ValueError(f"cannot inline {text!r}")
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("{", "{{").replace("}", "}}")


@dataclass(slots=True)
class _TextCompiler:
    """Compiles struct layouts into functions that return the struct's JSON text.

    `struct(cls, version, flexible, blobs)` renders exactly what
    `dumps(struct_json(obj, version, flexible))` gives; with `blobs`, classic members'
    subscription/assignment are decoded as `KafkaJson.value_json(..., decode_blobs=True)`
    does. `prefixed(..., head, tail)` renders `text + head + <that JSON> + tail` for a
    `(obj, text)` call, all in one string build (the top level of a line).
    """

    protocol: ConsumerProtocol
    _structs: dict[tuple[type, int, bool, bool], Renderer] = field(default_factory=dict)
    _prefixed: dict[tuple[type, int, bool, bool, str, str], PrefixedRenderer] = field(
        default_factory=dict
    )

    def struct(self, cls: type, version: int, flexible: bool, blobs: bool) -> Renderer:
        key = (cls, version, flexible, blobs)
        found = self._structs.get(key)
        if found is None:
            found = self._structs[key] = self._compile(cls, version, flexible, blobs, None)
        return found

    def prefixed(
        self, cls: type, version: int, flexible: bool, blobs: bool, head: str, tail: str
    ) -> PrefixedRenderer:
        key = (cls, version, flexible, blobs, head, tail)
        found = self._prefixed.get(key)
        if found is None:
            found = self._compile(cls, version, flexible, blobs, (head, tail))
            self._prefixed[key] = found
        return found

    def _subscription(self, raw: bytes) -> str:
        try:
            version, subscription = self.protocol.decode_subscription(raw)
        except DecodeError:
            return _json_bytes(raw)
        return self.struct(ConsumerProtocolSubscription, version, False, False)(subscription)

    def _assignment(self, raw: bytes) -> str:
        try:
            version, assignment = self.protocol.decode_assignment(raw)
        except DecodeError:
            return _json_bytes(raw)
        return self.struct(ConsumerProtocolAssignment, version, False, False)(assignment)

    def _compile(
        self,
        cls: type,
        version: int,
        flexible: bool,
        blobs: bool,
        around: tuple[str, str] | None,
    ) -> Any:
        namespace: dict[str, Any] = {
            "_enc": encode_basestring,
            "_text": _json_text,
            "_bytes": _json_bytes,
            "_any": _json_any,
        }
        body: list[str] = []
        #: (condition or None, f-string fragment) per rendered field, in schema order
        parts: list[tuple[str | None, str]] = []
        uses_tags = False
        for index, f in enumerate(field_layouts(cls)):
            w = f.wire
            if version not in w.versions:
                continue
            x = f"x{index}"
            body.append(f"{x} = o.{f.name}")
            if blobs and cls is MemberMetadata and f.name in _BLOB_FIELDS:
                namespace[f"_blob{index}"] = getattr(self, _BLOB_FIELDS[f.name])
                expr = f"{{_blob{index}({x})}}"
            else:
                nullable = version in w.nullable or w.default is None
                expr = self._value(namespace, index, x, w, version, flexible, blobs, nullable)
            fragment = _f_literal(encode_basestring(f.kafka_name) + ":") + expr
            condition = None
            if w.tag is not None and flexible:
                # struct_json's rule: a tagged field at its default is left out, except a
                # struct tag that was on the wire (Kafka 4.0's explicit null)
                namespace[f"_d{index}"] = w.default
                condition = f"not ({x} == _d{index})"
                if w.kind is Kind.STRUCT:
                    uses_tags = True
                    condition += f" or (tags is not None and {w.tag} in tags.present)"
            parts.append((condition, fragment))
        if uses_tags:
            body.insert(0, 'tags = getattr(o, "tags", None)')
        head, tail = around if around is not None else ("", "")
        if all(condition is None for condition, _ in parts):
            inner = ",".join(fragment for _, fragment in parts)
            text = f"{_f_literal(head)}{{{{{inner}}}}}{_f_literal(tail)}"
            body.append(f"return f'{{h}}{text}'" if around is not None else f"return f'{text}'")
        else:
            body.append("p = []")
            merged: list[str] = []  # consecutive unconditional fragments, appended as one
            for condition, fragment in [*parts, ("", "")]:
                if condition is None:
                    merged.append(fragment)
                    continue
                if merged:
                    body.append(f"p.append(f'{','.join(merged)}')")
                    merged = []
                if condition:
                    body.append(f"if {condition}:")
                    body.append(f"    p.append(f'{fragment}')")
            joined = f"{head + '{'!r} + ','.join(p) + {'}' + tail!r}"
            body.append(f"return h + {joined}" if around is not None else f"return {joined}")
        name = f"render_{cls.__name__}_v{version}{'_flexible' if flexible else ''}"
        params = "o, h" if around is not None else "o"
        source = f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in body)
        exec(compile(source, f"<kafka_json {name}>", "exec"), namespace)
        return namespace[name]

    def _value(
        self,
        namespace: dict[str, Any],
        index: int,
        x: str,
        w: Wire,
        version: int,
        flexible: bool,
        blobs: bool,
        nullable: bool,
    ) -> str:
        """The f-string fragment `{...}` rendering local `x`, a value of field `w`."""
        kind = w.kind
        if kind in _INT_KINDS:
            if not nullable:
                return f"{{{x}}}"
            text = x
        elif kind in _STRING_KINDS:
            text = f"_enc({x}) if {x}.isascii() else _text({x})"
        elif kind is Kind.BYTES:
            text = f"_bytes({x})"
        elif kind is Kind.STRUCT:
            assert w.struct is not None
            namespace[f"_r{index}"] = self.struct(w.struct, version, flexible, blobs)
            text = f"_r{index}({x})"
        elif kind is Kind.ARRAY:
            item = w.item
            if isinstance(item, Kind):
                if item in _INT_KINDS:
                    text = f'"[" + ",".join(map(str, {x})) + "]"'
                elif item in _STRING_KINDS:
                    text = f'"[" + ",".join([_text(v) for v in {x}]) + "]"'
                elif item is Kind.BYTES:
                    text = f'"[" + ",".join([_bytes(v) for v in {x}]) + "]"'
                else:
                    text = f"_any(list({x}))"
            else:
                assert isinstance(item, type)
                namespace[f"_r{index}"] = self.struct(item, version, flexible, blobs)
                text = f'"[" + ",".join([_r{index}(v) for v in {x}]) + "]"'
        else:
            text = f"_any({x})"
        # null wherever the dicts hold None (struct_json renders None as null for every kind)
        return f'{{"null" if {x} is None else {text}}}'


class _LineCache:
    """What one renderer keeps per key type.

    `texts`: `id(key)` -> the line up to its value (`{"key":{...},"payload":`); `keys` keeps
    those key objects alive, so no other object can take one of their ids while cached (the
    codec hands out one object per distinct key; both are cleared when full). The value
    renderer of the class and version seen last is kept aside: a commit stream is one layout.
    """

    __slots__ = ("keys", "render", "renderers", "texts", "value_class", "value_version")

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}
        self.keys: list[Any] = []
        self.renderers: dict[tuple[type, int | None], PrefixedRenderer] = {}
        self.value_class: type | None = None
        self.value_version: int | None = None
        self.render: PrefixedRenderer | None = None


def _line_renderer(compiler: _TextCompiler, dump_log: bool) -> Callable[[AnyRecord], str | None]:
    """dump-log (`dump_log`) or console lines: `dumps(KafkaJson.dump_log/console(record))`."""
    caches: dict[int, _LineCache] = {}
    key_tail = '},"payload":' if dump_log else '},"value":'
    tombstone = '"<DELETE>"}' if dump_log else "null}"

    def value_renderer(record: Record) -> PrefixedRenderer:
        """Renders `text + '{"version":V,"data":' + <the value's JSON> + "}}"` for
        `(value, text)`: V a JSON string for dump-log, a number for the console."""
        value = record.value
        assert value is not None
        version = record.value_version
        assert version is not None
        if not dump_log and version > _CONSOLE_MAX_VERSION:
            unknown = '{"version":' + str(version) + ',"data":"unknown"}}'
            return lambda value, text: text + unknown
        number = str(version)
        head = '{"version":' + (encode_basestring(number) if dump_log else number) + ',"data":'
        cls = type(value)
        layout = _layout_version(record)
        flexible = _flexible(record)
        plain = compiler.prefixed(cls, layout, flexible, False, head, "}}")
        if not (dump_log and issubclass(cls, GroupMetadataValue)):
            return plain
        # dump-log decodes the consumer-protocol blobs of "consumer" groups
        consumer = compiler.prefixed(cls, layout, flexible, True, head, "}}")

        def group_metadata(value: GroupMetadataValue, text: str) -> str:
            if value.protocol_type == "consumer":
                return consumer(value, text)
            return plain(value, text)

        return group_metadata

    def slow(record: AnyRecord) -> str | None:
        """Any record: fills the caches `fast` reads."""
        if not isinstance(record, Record):
            if dump_log:
                message = _unknown_message(record)
                return '{"key":' + encode_basestring(message) + ',"payload":null}'
            return None
        key_type = record.key_type
        if not dump_log and key_type not in _CONSOLE_TYPES:
            return None
        cache = caches.get(key_type)
        if cache is None:
            cache = caches[key_type] = _LineCache()
        key = record.key
        text = cache.texts.get(id(key))
        if text is None:
            if len(cache.texts) >= KEY_TEXT_CACHE_SIZE:
                cache.texts.clear()
                cache.keys.clear()
            number = str(key_type)
            head = '{"key":{"type":' + (encode_basestring(number) if dump_log else number)
            render_key = compiler.prefixed(type(key), 0, False, False, head + ',"data":', key_tail)
            text = cache.texts[id(key)] = render_key(key, "")
            cache.keys.append(key)
        value = record.value
        if value is None:
            return text + tombstone
        memo = (value.__class__, record.value_version)
        render = cache.renderers.get(memo)
        if render is None:
            render = cache.renderers[memo] = value_renderer(record)
        cache.value_class, cache.value_version, cache.render = (*memo, render)
        return render(value, text)

    def fast(record: AnyRecord) -> str | None:
        cache = caches.get(record.key_type)
        if cache is not None:
            # an UnknownRecord's key (bytes) is never cached: it goes the slow way
            text = cache.texts.get(id(record.key))
            if text is not None:
                if TYPE_CHECKING:
                    assert isinstance(record, Record) and cache.render is not None
                value = record.value
                if value is None:
                    return text + tombstone
                if (
                    value.__class__ is cache.value_class
                    and record.value_version == cache.value_version
                ):
                    return cache.render(value, text)
        return slow(record)

    return fast


def _text_renderers(
    protocol: ConsumerProtocol,
) -> tuple[Callable[[AnyRecord], str], Callable[[AnyRecord], str | None]]:
    """(dump_log_text, console_text), sharing one compiler."""
    compiler = _TextCompiler(protocol)
    # never None for dump-log (every record has a line)
    dump_log_text = cast(Callable[[AnyRecord], str], _line_renderer(compiler, True))
    return dump_log_text, _line_renderer(compiler, False)


# -- dump-log lines of offset commits, straight from the record's bytes ----------------------

#: OffsetCommitValue v3 with empty metadata (the bulk of a commit stream): version, offset,
#: leader epoch, metadata length (0), commit timestamp - 24 bytes
_COMMIT_V3: Final = struct.Struct(">hqihq")
_COMMIT_V3_SIZE: Final = 24
#: what follows the offset in such a line; the key's text and everything up to the offset is
#: learnt per key from a line the generic renderer made (see `RawCommitLines`)
_COMMIT_V3_MIDDLE: Final = ',"leaderEpoch":'
_COMMIT_V3_TAIL: Final = ',"metadata":"","commitTimestamp":'
_COMMIT_V3_HEAD: Final = '"payload":{"version":"3","data":{"offset":'


class RawCommitLines:
    """dump-log lines of OffsetCommitValue v3 commits with empty metadata, made from the key
    and value bytes without decoding them into objects (a 1M-commit segment spends most of its
    time there otherwise).

    `lines(items, ...)` renders the commits whose key was seen already and hands every other
    item to the generic decode and render, which shows its result to `learn`. A key's text
    (everything before the offset) is learnt only when the template reproduces that generic
    line byte for byte, so a line made here is always the line `KafkaJson.dump_log_text`
    makes of the decoded record.
    """

    __slots__ = ("_fast", "_prefixes")

    def __init__(self, accelerate: bool = True) -> None:
        #: key bytes -> the line up to the offset's digits
        self._prefixes: dict[bytes, str] = {}
        #: this very loop in decoder/_speedups.c (a third of a dump-log run's CPU in Python)
        self._fast: Callable[..., list[Any]] | None = (
            accelerated("commit_v3_lines") if accelerate else None
        )

    def lines(
        self,
        items: list[Any],
        record_type: Any,
        others: Callable[[list[Any]], list[Any]],
    ) -> list[Any]:
        """The output of `items`, in order: the lines of the commits this class renders,
        `others(run)` for each run of the other items. An item of `record_type` is a tuple
        with the key bytes at index 3 and the value bytes at index 4 (decode_inputs'
        InputRecord); `others` decodes and renders the generic way, and calls `learn`."""
        prefixes = self._prefixes
        if self._fast is not None:
            return self._fast(items, record_type, prefixes, others)
        unpack = _COMMIT_V3.unpack
        out: list[Any] = []
        append = out.append
        pending: list[Any] = []
        for item in items:
            if type(item) is record_type:
                value = item[4]
                if value is not None and len(value) == 24:  # _COMMIT_V3_SIZE
                    prefix = prefixes.get(item[3])
                    if prefix is not None:
                        version, offset, epoch, metadata_length, timestamp = unpack(value)
                        if version == 3 and metadata_length == 0:
                            if pending:
                                out += others(pending)  # in place: `append` stays bound
                                pending = []
                            # _COMMIT_V3_MIDDLE and _COMMIT_V3_TAIL, inlined
                            append(
                                f'{prefix}{offset},"leaderEpoch":{epoch},"metadata":"",'
                                f'"commitTimestamp":{timestamp}}}}}}}'
                            )
                            continue
            pending.append(item)
        if pending:
            out += others(pending)
        return out

    def learn(self, key: bytes | None, value: bytes | None, record: object, line: object) -> None:
        """Keep the key's text when `line` (the generic renderer's line of `record`, decoded
        from `key` and `value`) is what the template would have made."""
        if (
            key is None
            or value is None
            or len(value) != _COMMIT_V3_SIZE
            or not isinstance(line, str)
            or not isinstance(record, Record)
            or record.value_version != 3
        ):
            return
        version, offset, epoch, metadata_length, timestamp = _COMMIT_V3.unpack(value)
        if version != 3 or metadata_length != 0:
            return
        cut = line.rfind(_COMMIT_V3_HEAD)
        if cut < 0:
            return
        prefix = line[: cut + len(_COMMIT_V3_HEAD)]
        made = f"{prefix}{offset}{_COMMIT_V3_MIDDLE}{epoch}{_COMMIT_V3_TAIL}{timestamp}}}}}}}"
        if made != line:
            return
        if len(self._prefixes) >= KEY_TEXT_CACHE_SIZE:
            self._prefixes.clear()
        self._prefixes[key] = prefix
