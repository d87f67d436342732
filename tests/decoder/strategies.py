"""Hypothesis strategies for valid `__consumer_offsets` records, derived from the layouts.

Nothing here knows a record type by name: every strategy is built from the `Wire`
descriptions that `offsetwatch.decoder.layout.field_layouts` exposes (kind, versions,
nullability, tag,
default, item/struct), the same descriptions `codegen` compiles the readers and writers from.

A generated record is *valid* and in the normal form the decoder produces:

* a field absent from the record's version holds its default;
* `None` only where the version allows it;
* `Tags.present` lists (ascending) every known tagged field that is not at its default, plus
  a random choice of tagged fields written explicitly although at their default (the Kafka 4.0
  null `ClassicMemberMetadata` tag); it is empty when the struct is not flexible;
* `Tags.unknown` holds tags no layout of the struct knows, ascending and distinct.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from offsetwatch.decoder.codegen import uuid_text
from offsetwatch.decoder.consumer_protocol import (
    ConsumerProtocol,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from offsetwatch.decoder.layout import NO_TAGS, Kind, Tags, Wire, field_layouts, has_tags_field
from offsetwatch.decoder.records import GroupMetadataValue, MemberMetadata, Record
from offsetwatch.decoder.registry import RECORD_TYPES, RecordType

#: value versions above the known range that types 0-2 accept (read with the newest layout)
NEWER_VERSIONS = 2

INT_RANGES: dict[Kind, tuple[int, int]] = {
    Kind.INT8: (-(1 << 7), (1 << 7) - 1),
    Kind.INT16: (-(1 << 15), (1 << 15) - 1),
    Kind.INT32: (-(1 << 31), (1 << 31) - 1),
    Kind.INT64: (-(1 << 63), (1 << 63) - 1),
    Kind.UINT16: (0, (1 << 16) - 1),
}

MAX_ARRAY = 3
MAX_TEXT = 12
MAX_BYTES = 24

# Kafka tag numbers are unsigned varints that fit an int32
_MAX_TAG = (1 << 31) - 1


def uuids() -> st.SearchStrategy[str]:
    """Kafka's Uuid.toString(): URL-safe base64 (no padding) of 16 random bytes."""
    return st.binary(min_size=16, max_size=16).map(uuid_text)


def texts() -> st.SearchStrategy[str]:
    # any text the wire can carry: non-ASCII, NUL, astral characters (no lone surrogates,
    # which are not valid UTF-8)
    return st.text(max_size=MAX_TEXT)


def primitive(kind: Kind) -> st.SearchStrategy[Any]:
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return st.integers(low, high)
    if kind is Kind.BOOL:
        return st.booleans()
    if kind is Kind.UUID:
        return uuids()
    if kind is Kind.STRING:
        return texts()
    if kind is Kind.BYTES:
        return st.binary(max_size=MAX_BYTES)
    raise AssertionError(f"not a primitive kind: {kind}")


def field_value(w: Wire, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    """Any valid value of one field that is present in `version`."""
    base: st.SearchStrategy[Any]
    if w.kind is Kind.ARRAY:
        item = w.item
        assert item is not None
        element = (
            primitive(item) if isinstance(item, Kind) else struct_value(item, version, flexible)
        )
        base = st.lists(element, max_size=MAX_ARRAY).map(tuple)
    elif w.kind is Kind.STRUCT:
        assert w.struct is not None
        base = struct_value(w.struct, version, flexible)
    else:
        base = primitive(w.kind)
    if version in w.nullable:
        return st.none() | base
    return base


def _known_tags(cls: type) -> frozenset[int]:
    return frozenset(f.wire.tag for f in field_layouts(cls) if f.wire.tag is not None)


def unknown_tags(cls: type) -> st.SearchStrategy[tuple[tuple[int, bytes], ...]]:
    """Tagged fields no layout of `cls` knows, in the ascending order a writer emits them."""
    known = _known_tags(cls)
    tag = st.one_of(st.integers(0, 40), st.integers(0, _MAX_TAG)).filter(lambda t: t not in known)
    return st.lists(
        st.tuples(tag, st.binary(max_size=8)), max_size=2, unique_by=lambda t: t[0]
    ).map(lambda items: tuple(sorted(items)))


@cache
def struct_value(cls: type, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    """A valid instance of struct `cls` as written in `version` (flexible or not)."""
    layouts = field_layouts(cls)
    with_tags = flexible and has_tags_field(cls)

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        kwargs: dict[str, Any] = {}
        required: list[int] = []
        optional: list[int] = []
        for f in layouts:
            w = f.wire
            if version not in w.versions:
                kwargs[f.name] = w.default
                continue
            value = draw(field_value(w, version, flexible))
            kwargs[f.name] = value
            if w.tag is not None and flexible:
                (optional if value == w.default else required).append(w.tag)
        if with_tags:
            explicit = draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []
            present = tuple(sorted(required + explicit))
            kwargs["tags"] = Tags(present, draw(unknown_tags(cls)))
        elif has_tags_field(cls):
            kwargs["tags"] = NO_TAGS
        return cls(**kwargs)

    return build()


def _flexible(rtype: RecordType, version: int) -> bool:
    return rtype.flexible_from is not None and version >= rtype.flexible_from


def value_versions(rtype: RecordType) -> list[int]:
    """Every known value version, plus a few newer ones where the type reads them."""
    versions = list(range(rtype.value_versions.low, rtype.value_versions.high + 1))
    if rtype.read_newer_versions:
        top = rtype.value_versions.high
        versions += [top + i for i in range(1, NEWER_VERSIONS + 1)]
    return versions


def values(rtype: RecordType, version: int, cls: type | None = None) -> st.SearchStrategy[Any]:
    """A value of record type `rtype` in `version` (any of its layouts unless `cls` is given)."""
    layout = min(version, rtype.value_versions.high)
    flexible = _flexible(rtype, layout)
    classes = rtype.value_classes if cls is None else (cls,)
    return st.one_of(*(struct_value(c, layout, flexible) for c in classes))


def keys(rtype: RecordType) -> st.SearchStrategy[Any]:
    return struct_value(rtype.key_class, 0, False)


positions = st.integers(-1, (1 << 31) - 1)
offsets = st.integers(-1, (1 << 62))
timestamps = st.integers(-1, (1 << 45))


@st.composite
def records(
    draw: st.DrawFn,
    key_type: int | None = None,
    version: int | None = None,
    *,
    tombstones: bool = True,
) -> Record:
    """A valid Record of any (or the given) type and value version; may be a tombstone."""
    if key_type is None:
        key_type = draw(st.sampled_from(sorted(RECORD_TYPES)))
    rtype = RECORD_TYPES[key_type]
    key = draw(keys(rtype))
    common = (draw(positions), draw(offsets), draw(timestamps))
    if tombstones and draw(st.integers(0, 9)) == 0:
        return Record(key_type, key, None, None, *common)
    if version is None:
        version = draw(st.sampled_from(value_versions(rtype)))
    value = draw(values(rtype, version))
    return Record(key_type, key, version, value, *common)


def all_type_versions() -> list[tuple[int, int]]:
    """(key type, value version) for every type and every version a test should cover."""
    return [(k, v) for k, rtype in sorted(RECORD_TYPES.items()) for v in value_versions(rtype)]


# ------------------------------------------------------------------------------------------
# Consumer-protocol blobs (the subscription/assignment bytes of classic members)

PROTOCOL = ConsumerProtocol()
PROTOCOL_VERSIONS = range(0, 4)


def subscriptions(version: int) -> st.SearchStrategy[ConsumerProtocolSubscription]:
    strategy: st.SearchStrategy[ConsumerProtocolSubscription] = struct_value(
        ConsumerProtocolSubscription, version, False
    )
    return strategy


def assignments(version: int) -> st.SearchStrategy[ConsumerProtocolAssignment]:
    strategy: st.SearchStrategy[ConsumerProtocolAssignment] = struct_value(
        ConsumerProtocolAssignment, version, False
    )
    return strategy


@st.composite
def consumer_members(draw: st.DrawFn, value_version: int, protocol_version: int) -> Any:
    """A classic member whose subscription/assignment are real consumer-protocol blobs."""
    member = draw(struct_value(MemberMetadata, value_version, value_version >= 4))
    subscription = draw(subscriptions(protocol_version))
    assignment = draw(assignments(protocol_version))
    return (
        type(member)(
            **{
                **{f.name: getattr(member, f.name) for f in field_layouts(MemberMetadata)},
                "subscription": PROTOCOL.encode(protocol_version, subscription),
                "assignment": PROTOCOL.encode(protocol_version, assignment),
                "tags": member.tags,
            }
        ),
        subscription,
        assignment,
    )


@st.composite
def consumer_groups(draw: st.DrawFn, value_version: int, protocol_version: int) -> Any:
    """(GroupMetadataValue of protocol type "consumer", the members' decoded blobs)."""
    group = draw(struct_value(GroupMetadataValue, value_version, value_version >= 4))
    members = draw(
        st.lists(consumer_members(value_version, protocol_version), min_size=1, max_size=3)
    )
    fields = {f.name: getattr(group, f.name) for f in field_layouts(GroupMetadataValue)}
    fields.update(protocol_type="consumer", members=tuple(m for m, _, _ in members))
    value = GroupMetadataValue(**fields, tags=group.tags)
    return value, [(s, a) for _, s, a in members]


# ------------------------------------------------------------------------------------------
# The real records of the conformance vectors (seed corpus for the mutation fuzzer and the
# record-level tests)

#: sub-runs documented in kafka-4.0.0/README.md
CONFORMANCE_RUNS = ("main", "codec-gzip", "codec-snappy", "codec-lz4", "codec-zstd", "expiry")


@dataclasses.dataclass(frozen=True, slots=True)
class RealRecord:
    run: str
    partition: int
    offset: int
    timestamp: int
    key: bytes
    value: bytes | None
    expected: Any
    formatter: Any


@cache
def _load_run(run_dir: Path) -> tuple[RealRecord, ...]:
    out = []
    with (run_dir / "records.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            raw = json.loads(line)
            out.append(
                RealRecord(
                    run=run_dir.name,
                    partition=raw["partition"],
                    offset=raw["offset"],
                    timestamp=raw["timestamp"],
                    key=bytes.fromhex(raw["key"]),
                    value=None if raw["value"] is None else bytes.fromhex(raw["value"]),
                    expected=raw["expected"],
                    formatter=raw["formatter"],
                )
            )
    return tuple(out)


def real_records(conformance_dir: Path, run: str | None = None) -> tuple[RealRecord, ...]:
    """Every record of one sub-run (or of all of them), in file order."""
    runs = CONFORMANCE_RUNS if run is None else (run,)
    return tuple(r for name in runs for r in _load_run(conformance_dir / "runs" / name))


def run_info(conformance_dir: Path, run: str) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(
        (conformance_dir / "runs" / run / "run.json").read_text(encoding="utf-8")
    )
    return info
