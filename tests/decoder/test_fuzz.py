"""Hostile bytes: Codec.decode returns a record or raises DecodeError, never anything else.

Inputs are random bytes and mutations of the real conformance records (bit flips,
truncations, inserted/deleted bytes, huge varints and array counts). A DecodeError must carry
the partition/offset it was called with. Truncating a valid value must never yield a record.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetwatch.decoder import Codec, DecodeError, KafkaJson
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.records import Record, UnknownRecord
from offsetwatch.decoder.registry import RECORD_TYPES
from tests.decoder import strategies as S
from tests.decoder.strategies import RealRecord, real_records

CODEC = Codec()
KAFKA = KafkaJson()
CANONICAL = Canonical()

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

#: byte strings that make length prefixes/counts absurd: 5-byte uvarints, int32 max,
#: -2 (not -1) lengths, an over-long varint
HUGE = (
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\x07",
    b"\x80\x80\x80\x80\x80\x80\x01",
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\xfe",
    b"\x80\x00\x00\x00",
    b"\xff\xfe",
    b"\x7f\xff",
)

known_types = st.sampled_from(sorted(RECORD_TYPES)).map(lambda k: k.to_bytes(2, "big"))


def check_decode(key: bytes | None, value: bytes | None, partition: int, offset: int) -> Any:
    """Decode; only DecodeError may escape (with the location). Renders whatever decodes."""
    try:
        record = CODEC.decode(key, value, partition, offset, 123)
    except DecodeError as error:
        assert (error.partition, error.offset) == (partition, offset)
        assert f"offset {offset}" in str(error)
        assert error.kind
        return None
    assert isinstance(record, Record | UnknownRecord)
    assert (record.partition, record.offset, record.timestamp) == (partition, offset, 123)
    # whatever decodes can be shown by Kafka's renderings and as canonical JSON
    KAFKA.dump_log(record)
    KAFKA.console(record)
    json.loads(CANONICAL.to_json(record))
    return record


# -- random bytes ------------------------------------------------------------------------------


@FUZZ
@given(
    key=st.none() | st.binary(max_size=64),
    value=st.none() | st.binary(max_size=256),
    partition=st.integers(0, 49),
    offset=st.integers(0, 1 << 40),
)
def test_random_key_and_value(
    key: bytes | None, value: bytes | None, partition: int, offset: int
) -> None:
    check_decode(key, value, partition, offset)


@FUZZ
@given(prefix=known_types, body=st.binary(max_size=64), value=st.binary(max_size=256))
def test_random_bytes_behind_a_known_key_type(prefix: bytes, body: bytes, value: bytes) -> None:
    check_decode(prefix + body, value, 4, 99)


@st.composite
def valid_keys(draw: st.DrawFn) -> tuple[int, bytes]:
    key_type = draw(st.sampled_from(sorted(RECORD_TYPES)))
    return key_type, CODEC.encode_key(key_type, draw(S.keys(RECORD_TYPES[key_type])))


@FUZZ
@given(
    key=valid_keys(),
    version=st.sampled_from([0, 1, 2, 3, 4, 5, 0x7FFF, -1]),
    body=st.binary(max_size=200),
)
def test_random_value_behind_a_valid_key(key: tuple[int, bytes], version: int, body: bytes) -> None:
    check_decode(key[1], version.to_bytes(2, "big", signed=True) + body, 1, 2)


# -- mutated real records ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(conformance_dir: Path) -> tuple[RealRecord, ...]:
    records = real_records(conformance_dir)
    assert records
    return records


def _target(draw: st.DrawFn, record: RealRecord) -> tuple[bool, bytearray]:
    """Which part to mutate (the value mostly) and a mutable copy of it."""
    mutate_key = record.value is None or draw(st.integers(0, 4)) == 0
    return mutate_key, bytearray(record.key if mutate_key else (record.value or b""))


@st.composite
def mutations(draw: st.DrawFn, corpus: tuple[RealRecord, ...]) -> tuple[bytes, bytes | None]:
    record = draw(st.sampled_from(corpus))
    mutate_key, data = _target(draw, record)
    kind = draw(st.sampled_from(["flip", "insert", "delete", "huge", "replace", "truncate"]))
    n = len(data)
    if kind == "flip":
        for _ in range(draw(st.integers(1, 4))):
            if n:
                bit = draw(st.integers(0, n * 8 - 1))
                data[bit // 8] ^= 1 << (bit % 8)
    elif kind == "insert":
        at = draw(st.integers(0, n))
        data[at:at] = draw(st.binary(min_size=1, max_size=8))
    elif kind == "delete" and n:
        at = draw(st.integers(0, n - 1))
        del data[at : at + draw(st.integers(1, 8))]
    elif kind == "huge":
        at = draw(st.integers(0, n))
        width = draw(st.integers(0, 5))
        data[at : at + width] = draw(st.sampled_from(HUGE))
    elif kind == "replace" and n:
        at = draw(st.integers(0, n - 1))
        data[at] = draw(st.integers(0, 255))
    elif kind == "truncate":
        del data[draw(st.integers(0, n)) :]
    if mutate_key:
        return bytes(data), record.value
    return record.key, bytes(data)


def test_mutated_real_records(corpus: tuple[RealRecord, ...]) -> None:
    @settings(
        max_examples=500,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutations(corpus), st.integers(0, 49), st.integers(0, 1 << 40))
    def run(pair: tuple[bytes, bytes | None], partition: int, offset: int) -> None:
        check_decode(pair[0], pair[1], partition, offset)

    run()


def test_seeded_mutation_sweep(corpus: tuple[RealRecord, ...]) -> None:
    """A cheap deterministic sweep with many more cases than hypothesis runs."""
    rng = random.Random(20261117)
    for i in range(40_000):
        record = rng.choice(corpus)
        mutate_key = record.value is None or rng.random() < 0.2
        data = bytearray(record.key if mutate_key else (record.value or b""))
        n = len(data)
        choice = rng.randrange(5)
        if choice == 0 and n:
            for _ in range(rng.randint(1, 3)):
                bit = rng.randrange(n * 8)
                data[bit // 8] ^= 1 << (bit % 8)
        elif choice == 1:
            at = rng.randrange(n + 1)
            data[at:at] = rng.randbytes(rng.randint(1, 6))
        elif choice == 2 and n:
            at = rng.randrange(n)
            del data[at : at + rng.randint(1, 6)]
        elif choice == 3:
            at = rng.randrange(n + 1)
            data[at : at + rng.randint(0, 5)] = rng.choice(HUGE)
        else:
            data = bytearray(rng.randbytes(n))
        key, value = (bytes(data), record.value) if mutate_key else (record.key, bytes(data))
        check_decode(key, value, record.partition, i)


# -- truncation ------------------------------------------------------------------------------------


def test_every_truncation_of_every_real_value_is_a_decode_error(
    corpus: tuple[RealRecord, ...],
) -> None:
    codec = Codec()
    problems = []
    cases = 0
    for record in corpus:
        if record.value is None:
            continue
        value = record.value
        for length in range(len(value)):
            cases += 1
            try:
                codec.decode(record.key, value[:length], record.partition, record.offset)
            except DecodeError as error:
                if (error.partition, error.offset) != (record.partition, record.offset):
                    problems.append(f"{record.run} p{record.partition}@{record.offset}: {error}")
            else:
                problems.append(
                    f"{record.run} p{record.partition}@{record.offset}: value truncated to "
                    f"{length} bytes decoded: {value[:length].hex()}"
                )
    assert cases > 50_000
    assert not problems, f"{len(problems)} truncations: " + "\n  ".join(problems[:5])


def test_every_truncation_of_every_real_key_is_a_decode_error(
    corpus: tuple[RealRecord, ...],
) -> None:
    codec = Codec()
    seen: set[bytes] = set()
    for record in corpus:
        if record.key in seen:
            continue
        seen.add(record.key)
        for length in range(len(record.key)):
            with pytest.raises(DecodeError) as info:
                codec.decode(record.key[:length], record.value, 5, 6)
            assert (info.value.partition, info.value.offset) == (5, 6)


def test_null_key_is_a_decode_error() -> None:
    with pytest.raises(DecodeError) as info:
        CODEC.decode(None, b"\x00\x00", 7, 8)
    assert (info.value.partition, info.value.offset) == (7, 8)


@pytest.mark.parametrize(
    "value_hex",
    [
        # OffsetCommit v4: metadata length as a 6-byte varint
        "0004 0000000000000064 00000005 808080808001 0000018bcfe56800 00",
        # OffsetCommit v4: tagged section claims 2^32 fields
        "0004 0000000000000064 00000005 01 0000018bcfe56800 ffffffff0f",
        # OffsetCommit v4: a tag whose size runs far past the end
        "0004 0000000000000064 00000005 01 0000018bcfe56800 01 00 ffffffff0f",
        # OffsetCommit v4: TopicId tag of the wrong size
        "0004 0000000000000064 00000005 01 0000018bcfe56800 01 00 04 00000000",
        # OffsetCommit v3: metadata length -2 and int16 max
        "0003 0000000000000064 00000005 fffe 0000018bcfe56800",
        "0003 0000000000000064 00000005 7fff 0000018bcfe56800",
        # trailing byte
        "0003 0000000000000064 00000005 0000 0000018bcfe56800 00",
    ],
)
def test_hostile_offset_commit_values(value_hex: str) -> None:
    key = bytes.fromhex("00010002673100017400000000")
    with pytest.raises(DecodeError) as info:
        CODEC.decode(key, bytes.fromhex(value_hex.replace(" ", "")), 1, 2)
    assert (info.value.partition, info.value.offset) == (1, 2)


@pytest.mark.parametrize(
    ("key_hex", "value_hex"),
    [
        # GroupMetadata v3 claiming 2^31-1 members
        (
            "0002 00026731",
            "0003 0008636f6e73756d6572 00000001 ffff ffff 0000018bcfe57b88 7fffffff",
        ),
        # ... and -2 members
        (
            "0002 00026731",
            "0003 0008636f6e73756d6572 00000001 ffff ffff 0000018bcfe57b88 fffffffe",
        ),
        # KIP-848 member assignment: a topic count near 2^35
        ("0008 00026731 00026d31", "0000 00000005 00000004 00 ffffffff7f"),
        # ConsumerGroupPartitionMetadata: a huge nested racks array
        (
            "0004 00026731",
            "0000 02 0102030405060708090a0b0c0d0e0f10 0274 00000001 02 00000000 ffffffff0f",
        ),
        # StreamsGroupTopology: 2^28 subtopologies
        ("0017 00026731", "0000 00000001 8080808001"),
    ],
)
def test_hostile_counts_do_not_allocate(key_hex: str, value_hex: str) -> None:
    key = bytes.fromhex(key_hex.replace(" ", ""))
    with pytest.raises(DecodeError):
        CODEC.decode(key, bytes.fromhex(value_hex.replace(" ", "")), 0, 0)
