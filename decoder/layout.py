"""Record layouts as data.

Kafka keeps the layouts of `__consumer_offsets` records as JSON schemas and generates the
readers. We do the same in Python: every record struct is a frozen dataclass whose fields
carry a `Wire` description (kind, versions, nullability, tag, default). `codegen` compiles
those descriptions once into fast readers and writers; the renderers and the Avro schema
read the same descriptions, so there is one source of truth for every layout.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field
from typing import Any, Final

VERSION_MAX: Final = 0x7FFF


class Kind(enum.Enum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    UINT16 = "uint16"
    BOOL = "bool"
    UUID = "uuid"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    STRUCT = "struct"


#: struct format characters of the fixed-width kinds.
FIXED_FORMATS: Final = {
    Kind.INT8: "b",
    Kind.INT16: "h",
    Kind.INT32: "i",
    Kind.INT64: "q",
    Kind.UINT16: "H",
    Kind.BOOL: "?",
}

ZERO_UUID: Final = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass(frozen=True, slots=True)
class Versions:
    low: int
    high: int = VERSION_MAX

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @staticmethod
    def parse(text: str) -> Versions:
        """Kafka's notation: "3+", "1", "0-2", "none"."""
        if text == "none":
            return Versions(1, 0)
        if text.endswith("+"):
            return Versions(int(text[:-1]))
        if "-" in text:
            low, high = text.split("-")
            return Versions(int(low), int(high))
        return Versions(int(text), int(text))


@dataclass(frozen=True, slots=True)
class Wire:
    """How one dataclass field is laid out on the wire."""

    kind: Kind
    versions: Versions
    nullable: Versions
    tag: int | None
    default: Any
    #: element of an array: a Kind for primitives, a struct class otherwise
    item: Kind | type | None
    #: class of a struct field
    struct: type | None
    #: the field's name in Kafka's JSON (camelCase)
    kafka_name: str | None


def wire(
    kind: Kind,
    *,
    versions: str = "0+",
    nullable: str = "none",
    tag: int | None = None,
    default: Any = None,
    item: Kind | type | None = None,
    struct: type | None = None,
    name: str | None = None,
) -> Any:
    """A dataclass field with its wire description attached."""
    if default is None and kind in FIXED_FORMATS and kind is not Kind.BOOL:
        default = 0
    description = Wire(
        kind=kind,
        versions=Versions.parse(versions),
        nullable=Versions.parse(nullable),
        tag=tag,
        default=default,
        item=item,
        struct=struct,
        kafka_name=name,
    )
    return field(metadata={"wire": description})


@dataclass(frozen=True, slots=True)
class Tags:
    """Tagged-field bookkeeping of one flexible struct, kept for byte-exact re-encoding.

    `present` lists the known tags that were on the wire even when they held their default
    (Kafka 4.0 writes a null ClassicMemberMetadata tag); `unknown` keeps tags this decoder
    does not know, in wire order, so newer records survive a decode/encode round trip.
    """

    present: tuple[int, ...] = ()
    unknown: tuple[tuple[int, bytes], ...] = ()


NO_TAGS: Final = Tags()


def tags_field() -> Any:
    return field(default=NO_TAGS, metadata={"tags": True})


@dataclass(frozen=True, slots=True)
class FieldLayout:
    name: str
    kafka_name: str
    wire: Wire


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def field_layouts(cls: type) -> tuple[FieldLayout, ...]:
    """The wire fields of a struct class, in declaration (= wire) order."""
    cached: tuple[FieldLayout, ...] | None = cls.__dict__.get("__wire_layout__")
    if cached is not None:
        return cached
    layouts = []
    for f in dataclasses.fields(cls):
        description = f.metadata.get("wire")
        if description is None:
            continue
        layouts.append(FieldLayout(f.name, description.kafka_name or _camel(f.name), description))
    result = tuple(layouts)
    type.__setattr__(cls, "__wire_layout__", result)
    return result


def has_tags_field(cls: type) -> bool:
    return any(f.metadata.get("tags") for f in dataclasses.fields(cls))


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
