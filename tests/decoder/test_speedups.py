"""The C accelerator (offsetwatch.decoder._speedups) agrees with the pure-Python path on everything.

`Codec()` decodes through decoder/_speedups.c when it is built; `Codec(accelerate=False)` is
the pure-Python reference. Every comparison here decodes the same bytes with both and wants
the same outcome: equal records of the same classes (and the same repr), or a DecodeError
with the same reason, part, byte position, partition and offset - and afterwards the same
key cache. Inputs: every conformance record, hypothesis records of types 0-2 (all versions,
tombstones, invalid UTF-8), random bytes, and every truncation and single-byte mutation of
real offset-commit and group-metadata values and keys.

Under CI=true the accelerator must be active (CI proves the compiled path); locally a failed
build only skips, with the reason.
"""

from __future__ import annotations

import gc
import importlib
import os
import struct
import tracemalloc
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetwatch.decoder.codec import (
    NO_SPEEDUPS_ENV,
    Codec,
    Message,
    configure_speedups,
    speedups_status,
)
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.records import OffsetCommitValue, Record
from tests.decoder import strategies as S
from tests.decoder.strategies import RealRecord, real_records

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

Outcome = tuple[Any, ...]


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def test_accelerator_is_active() -> None:
    """CI builds from a clean clone: there the compiled path must be the one tested."""
    active, why = speedups_status()
    if not active:
        if _in_ci():
            pytest.fail(f"the C accelerator is not active under CI=true: {why}")
        pytest.skip(f"C accelerator not active, only the pure-Python path is tested: {why}")
    assert Codec().accelerated
    assert not Codec(accelerate=False).accelerated


def test_environment_variable_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_SPEEDUPS_ENV, "1")
    assert not Codec().accelerated
    active, why = speedups_status()
    assert not active and why


@pytest.fixture
def pair(monkeypatch: pytest.MonkeyPatch) -> tuple[Codec, Codec]:
    """(accelerated codec, pure-Python codec); skips when the accelerator is not built."""
    monkeypatch.delenv(NO_SPEEDUPS_ENV, raising=False)
    fast = Codec()
    if not fast.accelerated:
        if _in_ci():
            pytest.fail(f"the C accelerator is not active under CI=true: {speedups_status()[1]}")
        pytest.skip(f"C accelerator not built: {speedups_status()[1]}")
    return fast, Codec(accelerate=False)


_SHARED: list[Codec] = []


def fresh(key_cache_size: int = 200_000) -> tuple[Codec, Codec]:
    """An (accelerated, pure-Python) pair with empty key caches. Building a Codec compiles
    every reader, so hypothesis examples share one pair (pure Python both when the
    accelerator is not built: the tests that need it check `pair`)."""
    if not _SHARED:
        _SHARED.extend((Codec(), Codec(accelerate=False)))
    for codec in _SHARED:
        codec._key_cache.clear()
        codec.key_cache_size = key_cache_size
    return _SHARED[0], _SHARED[1]


def _error(error: BaseException) -> Outcome:
    if isinstance(error, DecodeError):
        return (
            "DecodeError",
            error.reason,
            error.part,
            error.byte_position,
            error.partition,
            error.offset,
            str(error),
        )
    return (type(error).__name__, str(error))


def outcome(codec: Codec, key: Any, value: Any, partition: Any = 7, offset: Any = 42) -> Outcome:
    try:
        record = codec.decode(key, value, partition, offset, 1_700_000_000_000)
    except (DecodeError, TypeError, ValueError) as error:
        return _error(error)
    return ("record", type(record), repr(record), record)


def assert_same(fast: Codec, slow: Codec, key: Any, value: Any, **where: Any) -> Outcome:
    got, want = outcome(fast, key, value, **where), outcome(slow, key, value, **where)
    assert got == want, f"key {key!r} value {value!r}"
    return got


def assert_same_caches(fast: Codec, slow: Codec) -> None:
    assert fast._key_cache == slow._key_cache
    for key, key_obj in fast._key_cache.items():
        assert type(key_obj) is type(slow._key_cache[key])


def _many(codec: Codec, messages: Iterable[Any]) -> Outcome:
    try:
        records = codec.decode_many(messages)
    except (DecodeError, TypeError, ValueError) as error:
        return _error(error)
    return ("records", [type(r) for r in records], [repr(r) for r in records], records)


# -- the conformance records --------------------------------------------------------------------


def _real(conformance_dir: Path) -> tuple[RealRecord, ...]:
    return real_records(conformance_dir)


def test_every_conformance_record(pair: tuple[Codec, Codec], conformance_dir: Path) -> None:
    fast, slow = pair
    records = _real(conformance_dir)
    assert records
    for r in records:
        result = assert_same(fast, slow, r.key, r.value, partition=r.partition, offset=r.offset)
        assert result[0] == "record", f"{r.run} p{r.partition}@{r.offset}: {result}"
    assert_same_caches(fast, slow)


def test_decode_many_over_the_conformance_records(
    pair: tuple[Codec, Codec], conformance_dir: Path
) -> None:
    fast, slow = pair
    messages: list[Message] = [
        (r.key, r.value, r.partition, r.offset, r.timestamp) for r in _real(conformance_dir)
    ]
    for start in range(0, len(messages), 100):
        batch = messages[start : start + 100]
        got, want = _many(fast, batch), _many(slow, batch)
        assert got == want
        assert got[0] == "records"
    assert_same_caches(fast, slow)
    # one call over everything, and over a generator
    fast, slow = fresh()
    assert _many(fast, messages) == _many(slow, messages)
    fast, slow = fresh()
    assert _many(fast, iter(messages)) == _many(slow, iter(messages))
    assert_same_caches(fast, slow)


def test_the_c_path_covers_commits_group_metadata_and_tombstones(
    pair: tuple[Codec, Codec], conformance_dir: Path
) -> None:
    """The comparisons above exercise C, not only its fallback: every commit value v0-v3,
    classic group metadata v0-v3 and tombstone of the conformance records is decoded by C."""
    fast, _ = pair
    handled = {True: 0, False: 0}
    for r in _real(conformance_dir):
        fast.decode(r.key, r.value)  # caches the key (C or Python)
        version = None if r.value is None else struct.unpack_from(">h", r.value)[0]
        key_type = struct.unpack_from(">h", r.key)[0]
        covered = r.value is None or (key_type <= 2 and 0 <= version <= 3)  # type: ignore[operator]
        record = fast._fast(
            fast._key_cache, fast.key_cache_size, r.key, r.value, r.partition, r.offset, 0
        )
        assert (record is not None) == covered, f"{r.run} p{r.partition}@{r.offset}"
        handled[covered] += 1
    assert handled[True] > 3000 and handled[False] > 100


# -- hypothesis: valid records of types 0-2 -----------------------------------------------------


@SETTINGS
@given(
    record=st.sampled_from([0, 1, 2]).flatmap(lambda key_type: S.records(key_type=key_type)),
    cache_size=st.sampled_from([1, 2, 200_000]),
)
def test_generated_records(record: Record, cache_size: int) -> None:
    fast, slow = fresh(cache_size)
    key, value = slow.encode(record)
    for _ in range(2):  # cold, then cached key
        got = assert_same(fast, slow, key, value, partition=record.partition, offset=record.offset)
        assert got[0] == "record" and got[3] == Record(
            record.key_type,
            record.key,
            record.value_version,
            record.value,
            record.partition,
            record.offset,
            1_700_000_000_000,
        )
    assert_same_caches(fast, slow)


def _commit_key(key_type: int, group: bytes, topic: bytes, partition: int) -> bytes:
    return (
        struct.pack(">hh", key_type, len(group))
        + group
        + struct.pack(">h", len(topic))
        + topic
        + struct.pack(">i", partition)
    )


@SETTINGS
@given(
    key_type=st.sampled_from([0, 1]),
    group=st.binary(max_size=12),
    topic=st.binary(max_size=12),
    metadata=st.binary(max_size=12) | st.text(max_size=8).map(str.encode),
    version=st.sampled_from([0, 1, 2, 3]),
    numbers=st.tuples(
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.integers(-(1 << 63), (1 << 63) - 1),
    ),
)
def test_commits_with_any_string_bytes(
    key_type: int,
    group: bytes,
    topic: bytes,
    metadata: bytes,
    version: int,
    numbers: tuple[int, int, int],
) -> None:
    """Strings that are not valid UTF-8 take the Python path (surrogateescape) and agree."""
    off, epoch, ts = numbers
    body = struct.pack(">q", off)
    if version == 3:
        body += struct.pack(">i", epoch)
    body += struct.pack(">h", len(metadata)) + metadata + struct.pack(">q", ts)
    if version == 1:
        body += struct.pack(">q", epoch)  # expire timestamp
    key = _commit_key(key_type, group, topic, 3)
    value = struct.pack(">h", version) + body
    fast, slow = fresh()
    for _ in range(2):
        assert assert_same(fast, slow, key, value)[0] == "record"
    assert_same_caches(fast, slow)


def _string(text: bytes | None) -> bytes:
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text)) + text


members_st = st.lists(
    st.tuples(
        st.binary(max_size=6),
        st.none() | st.binary(max_size=6),
        st.binary(max_size=6),
        st.binary(max_size=6),
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.binary(max_size=6),
    ),
    max_size=3,
)


@SETTINGS
@given(
    version=st.sampled_from([0, 1, 2, 3]),
    strings=st.tuples(st.binary(max_size=6), st.none() | st.binary(max_size=6)),
    members=members_st,
)
def test_group_metadata_with_any_string_bytes(
    version: int, strings: tuple[bytes, bytes | None], members: list[Any]
) -> None:
    protocol_type, protocol = strings
    value = struct.pack(">h", version) + _string(protocol_type) + struct.pack(">i", 5)
    value += _string(protocol) + _string(None if protocol is None else b"leader")
    if version >= 2:
        value += struct.pack(">q", 99)
    value += struct.pack(">i", len(members))
    for member_id, instance, client, host, timeout, blob in members:
        value += _string(member_id)
        if version >= 3:
            value += _string(instance)
        value += _string(client) + _string(host)
        if version >= 1:
            value += struct.pack(">i", timeout)
        value += struct.pack(">i", -timeout if timeout > -(1 << 31) else 0)
        value += struct.pack(">i", len(blob)) + blob + struct.pack(">i", len(blob)) + blob
    key = struct.pack(">hh", 2, 1) + b"g"
    fast, slow = fresh()
    for _ in range(2):
        assert_same(fast, slow, key, value)
    assert_same_caches(fast, slow)


# -- random and hostile bytes -------------------------------------------------------------------

KEYS = (
    _commit_key(1, b"group", b"topic", 0),
    _commit_key(0, b"legacy", b"t", 7),
    struct.pack(">hh", 2, 5) + b"group",
    struct.pack(">hh", 5, 1) + b"g" + struct.pack(">h", 1) + b"m",
)


@SETTINGS
@given(
    key=st.sampled_from(KEYS) | st.binary(max_size=40) | st.none(),
    version=st.none() | st.integers(-2, 6),
    rest=st.binary(max_size=80),
    tombstone=st.booleans(),
)
def test_random_bytes(key: bytes | None, version: int | None, rest: bytes, tombstone: bool) -> None:
    value = None if tombstone else (b"" if version is None else struct.pack(">h", version)) + rest
    fast, slow = fresh()
    for _ in range(2):
        assert_same(fast, slow, key, value)
    assert_same_caches(fast, slow)


def _samples(conformance_dir: Path) -> list[RealRecord]:
    """Real commit (every value version, metadata of several lengths) and group-metadata
    values: the seeds of the mutation tests."""
    chosen: dict[tuple[int, int, int], RealRecord] = {}
    for r in _real(conformance_dir):
        key_type = struct.unpack_from(">h", r.key)[0]
        if r.value is None or key_type > 2:
            continue
        version = struct.unpack_from(">h", r.value)[0]
        size = len(r.value) if key_type < 2 else len(r.value) // 100
        chosen.setdefault((key_type, version, min(size, 80)), r)
    return sorted(chosen.values(), key=lambda r: (r.key, r.value or b""))


def _mutations(data: bytes) -> Iterator[bytes]:
    """Every truncation and every single-byte mutation (all 256 bytes at each position of a
    short value, a hostile handful at each position of a long one)."""
    for end in range(len(data)):
        yield data[:end]
    for i, byte in enumerate(data):
        if len(data) <= 64:
            replacements: Sequence[int] = range(256)
        else:
            replacements = sorted({0x00, 0x01, 0x7F, 0x80, 0xC3, 0xED, 0xFE, 0xFF, byte ^ 0x80})
        for replacement in replacements:
            if replacement != byte:
                yield data[:i] + bytes([replacement]) + data[i + 1 :]
    yield data + b"\x00"


def test_truncations_and_mutations_of_real_values(
    pair: tuple[Codec, Codec], conformance_dir: Path
) -> None:
    fast, slow = pair
    samples = _samples(conformance_dir)
    seen = {struct.unpack_from(">h", r.key)[0] for r in samples}
    assert seen >= {1, 2}
    kinds: dict[str, int] = {}
    for r in samples:
        assert r.value is not None
        for value in _mutations(r.value):
            kind = assert_same(fast, slow, r.key, value)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds.get("record", 0) > 1000 and kinds.get("DecodeError", 0) > 1000
    assert_same_caches(fast, slow)


def test_truncations_and_mutations_of_real_keys(
    pair: tuple[Codec, Codec], conformance_dir: Path
) -> None:
    for r in _samples(conformance_dir)[:8]:
        fast, slow = fresh(50)
        for key in _mutations(r.key):
            assert_same(fast, slow, key, r.value)
            assert_same(fast, slow, key, None)
        assert_same_caches(fast, slow)


def test_errors_keep_their_location_and_other_inputs_agree(pair: tuple[Codec, Codec]) -> None:
    fast, slow = pair
    key = KEYS[0]
    good = struct.pack(">hqihq", 3, 1, 2, 0, 3)
    for value in (good[:-1], good + b"\x00", struct.pack(">h", -1), b"\x00"):
        got = assert_same(fast, slow, key, value, partition=3, offset=99)
        assert got[0] == "DecodeError" and got[4:6] == (3, 99)
    # not bytes: whatever Python does (an error or a record), C does too
    for other in (bytearray(key), memoryview(key), 5, None):
        assert_same(fast, slow, other, good)
    for value_other in (bytearray(good), memoryview(good)):
        assert_same(fast, slow, key, value_other)
    # partition/offset/timestamp are stored as given
    assert_same(fast, slow, key, good, partition=None, offset="x")
    assert_same_caches(fast, slow)


def test_decode_many_agrees_on_bad_batches(pair: tuple[Codec, Codec]) -> None:
    good = struct.pack(">hqihq", 3, 1, 2, 0, 3)
    batches: list[list[Any]] = [
        [(KEYS[0], good, 0, 1, 2), (KEYS[0], good[:-1], 0, 2, 3), (KEYS[0], good, 0, 3, 4)],
        [(KEYS[0], good, 0, 1, 2), [KEYS[0], good, 0, 2, 3]],
        [(KEYS[0], good, 0, 1, 2), (KEYS[0], good, 0, 2)],
        [(KEYS[1], None, 0, 1, 2), (b"\x00\x63\x00", good, 0, 2, 3), (KEYS[2], None, 1, 2, 3)],
        [],
    ]
    for batch in batches:
        fast, slow = fresh()
        assert _many(fast, batch) == _many(slow, batch)
        assert_same_caches(fast, slow)
    with pytest.raises(TypeError):
        Codec().decode_many(5)  # type: ignore[arg-type]


def test_cache_limit_of_any_type(pair: tuple[Codec, Codec]) -> None:
    """key_cache_size is a plain attribute: whatever it holds, both paths cache alike."""
    for size in (0, -1, 1, 2.5, True):
        fast, slow = fresh()
        fast.key_cache_size = slow.key_cache_size = size  # type: ignore[assignment]
        for key in KEYS * 2:
            assert_same(fast, slow, key, None)
            assert_same_caches(fast, slow)


# -- the objects C builds -----------------------------------------------------------------------


def test_built_objects_are_ordinary_frozen_records(pair: tuple[Codec, Codec]) -> None:
    fast, _ = pair
    value = struct.pack(">hqih", 3, 10, 2, 2) + b"md" + struct.pack(">q", 5)
    record = fast.decode(KEYS[0], value, 1, 2, 3)
    assert type(record) is Record and type(record.value) is OffsetCommitValue
    assert record.value == OffsetCommitValue(10, 2, "md", 5, -1, "AAAAAAAAAAAAAAAAAAAAAA")
    assert hash(record) == hash(Codec(accelerate=False).decode(KEYS[0], value, 1, 2, 3))
    with pytest.raises(AttributeError):
        record.value.offset = 5  # type: ignore[misc]
    # nothing it holds keeps the collector from reclaiming a cycle through the record
    gc.collect()


def test_no_leaks_on_the_paths_that_hand_over_to_python(
    pair: tuple[Codec, Codec], conformance_dir: Path
) -> None:
    """Bail out halfway through a group's members (truncations, invalid UTF-8) many times:
    memory must not grow."""
    fast, _ = pair
    group = next(
        r
        for r in _samples(conformance_dir)
        if r.value is not None and struct.unpack_from(">h", r.key)[0] == 2 and len(r.value) > 300
    )
    assert group.value is not None
    fast.decode(group.key, group.value)
    raw = group.value
    inputs = [raw[:end] for end in range(len(raw) // 2, len(raw), 7)]
    inputs += [raw[:i] + b"\xff" + raw[i + 1 :] for i in range(len(raw) // 2, len(raw), 11)]
    inputs.append(raw)
    call = fast._fast

    def run() -> None:
        for value in inputs:
            call(fast._key_cache, fast.key_cache_size, group.key, value, 0, 0, 0)

    run()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(50):
            run()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes more after {50 * len(inputs)} calls"


def test_speedups_module_rejects_misuse(pair: tuple[Codec, Codec]) -> None:
    speedups = importlib.import_module("offsetwatch.decoder._speedups")
    with pytest.raises(TypeError):
        speedups.decode({}, 1, b"")
    with pytest.raises(TypeError):
        speedups.decode([], 1, KEYS[0], None, 0, 0, 0)
    fast, slow = pair
    value = struct.pack(">hqihq", 3, 1, 2, 0, 3)
    try:
        with pytest.raises(TypeError):
            speedups.configure(*([int] * 12))
        # not configured: everything goes to the Python path, still the same results
        assert speedups.decode(fast._key_cache, 10, KEYS[0], value, 0, 0, 0) is None
        assert_same(fast, slow, KEYS[0], value)
    finally:
        configure_speedups(speedups)
    assert speedups.decode(fast._key_cache, 10, KEYS[0], value, 0, 0, 0) is not None
