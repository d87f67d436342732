"""The C accelerator of the ingest (exporter/state/_ingest_speedups.c) leaves the state the Python
path leaves, on every stream.

`Ingestor()` applies plain offset commits through `offsetwatch.exporter.state._ingest_speedups`
when it is built; `Ingestor(accelerate=False)` is the pure-Python reference. Each test feeds
the same batches of messages to both and compares everything they touch: every column of
every table, the metadata, each group's records, history and counters, the state's counters,
the positions, the counts by record type and version, and what was quarantined. Streams: every
record Kafka 4.0 wrote in the conformance captures, and seeded random streams mixing commits
of all value versions, metadata, rewinds, tombstones, group records, table growth, invalid
UTF-8, undecodable bytes and window rolls between batches.

Under CI=true the accelerator must be active; locally a failed build only skips.
"""

from __future__ import annotations

import base64
import hashlib
import random
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.decoder.codec import Codec, built_from
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from offsetwatch.decoder.registry import RECORD_TYPES
from offsetwatch.decoder.segments import read_partition_dir
from offsetwatch.exporter.state.ingest import Ingestor, Quarantined, ingest_accelerator
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import PipelineStats
from tests.conftest import require_accelerator
from tests.decoder.strategies import real_records

T0 = 1_700_000_000_000
CODEC = Codec()


def _accelerator() -> Any:
    return require_accelerator(ingest_accelerator(), "ingest accelerator")


@dataclass(slots=True)
class Message:
    """What confluent_kafka.Message offers the ingest."""

    _partition: int | None
    _offset: int | None
    _timestamp: int
    _key: bytes | None
    _value: bytes | None

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> None:
        return None


def _state_of(ingestor: Ingestor, quarantined: list[Quarantined]) -> Any:
    state = ingestor.state
    groups = {}
    for group_id, group in state.groups.items():
        tables = {}
        for topic, table in group.topics.items():
            size = len(table.present)
            tables[topic] = {name: list(getattr(table, name))[:size] for name in _COLUMNS} | {
                "metadata": [table.metadata_of(p) for p in range(size)]
            }
        groups[group_id] = (
            group.commits_total,
            group.last_record_ts,
            sorted((k, repr(r)) for k, r in group.records.items()),
            repr(group.history),
            tables,
        )
    return (
        groups,
        repr(state.counters),
        dict(ingestor.positions),
        dict(ingestor.stats.records_total),
        dict(ingestor.stats.decode_errors_total),
        [(q.partition, q.offset, q.timestamp, q.key, q.value, str(q.error)) for q in quarantined],
    )


#: every array column of a PartitionTable (its metadata is compared through metadata_of)
_COLUMNS = (
    "present",
    "committed",
    "commit_ts",
    "leader_epoch",
    "window_offset",
    "window_commits",
    "next_offset",
    "next_commits",
    "bucket_offset",
    "bucket_commits",
    "first_commit_ts",
    "rewind_ts",
    "move_ts",
)


def _both(batches: list[list[Message]], roll_every: int = 0) -> tuple[Any, Any, Ingestor]:
    """Feed the same batches to the C and the Python path; (C state, Python state, C one)."""
    results = []
    fast_ingestor = None
    for accelerate in (True, False):
        ingestor = Ingestor(OffsetState(), PipelineStats(), Codec(), accelerate=accelerate)
        assert ingestor.accelerated is accelerate
        quarantined: list[Quarantined] = []
        ingestor.quarantine.append(quarantined.append)
        for n, batch in enumerate(batches):
            assert ingestor.ingest(list(batch)) == len(batch)
            if roll_every and n % roll_every == roll_every - 1:
                ingestor.state.roll_windows(T0 + n * 1000, 4000)
        results.append(_state_of(ingestor, quarantined))
        if accelerate:
            fast_ingestor = ingestor
    assert fast_ingestor is not None
    return results[0], results[1], fast_ingestor


def test_every_real_record_leaves_the_same_state(conformance_dir: Path) -> None:
    _accelerator()
    messages = [
        Message(r.partition, r.offset, r.timestamp, r.key, r.value)
        for r in real_records(conformance_dir)
    ]
    batches = [messages[i : i + 97] for i in range(0, len(messages), 97)]
    fast, slow, _ = _both(batches)
    assert fast == slow
    assert fast[0], "the captures hold groups with offsets"


RELEASE_CAPTURES = Path(__file__).resolve().parents[2] / "data" / "releases"


@pytest.mark.parametrize(
    "release", sorted(p.name for p in RELEASE_CAPTURES.iterdir() if p.is_dir())
)
def test_every_release_capture_leaves_the_same_state_and_the_c_loop_takes_its_commits(
    release: str, record_property: Any
) -> None:
    """What each supported Kafka wrote (tests/data/releases: real clients committing, v3
    commits up to 4.0, v4 from 4.1): the same state on both paths, and the share of the
    records the C loop applied, recorded per release."""
    _accelerator()
    data = [
        b.records for b in read_partition_dir(RELEASE_CAPTURES / release / "__consumer_offsets-0")
    ]
    messages = [Message(0, r.offset, r.timestamp, r.key, r.value) for rs in data for r in rs]
    batches = [messages[i : i + 500] for i in range(0, len(messages), 500)]
    fast, slow, ingestor = _both(batches)
    assert fast == slow
    commits = sum(1 for m in messages if m.key()[:2] in (b"\x00\x00", b"\x00\x01") and m.value())
    # every commit: v3 and v4, with the topic id or not, with the metadata the clients sent,
    # also the first of a table (the C loop makes the group and table)
    taken = ingestor.stats.fast_path_records_total
    record_property(f"c_loop_share_{release}", round(taken / commits, 3))
    print(f"kafka {release}: the C loop applied {taken} of {commits} commits")
    assert taken == commits, (taken, commits)


def _commit_bytes(
    rng: random.Random, group: str, topic: str, partition: int, offset: int, ts: int
) -> tuple[bytes, bytes]:
    version = rng.choice((0, 1, 2, 3, 3, 3, 4, 4, 4))
    # what clients send: nothing (Java's consumer), a NUL (librdkafka), text of the app's own
    metadata = rng.choice(
        ("",) * 8
        + ("\x00",) * 4
        + ("m", "consumer-1\x00", "m\u00e9ta", "ckpt=42;host=w-1\x00", "\U0001f680 \u65e5\x00")
    )
    value = OffsetCommitValue(
        offset,
        rng.choice((-1, 0, 7)) if version >= 3 else -1,
        metadata,
        ts,
        ts + 1000 if version == 1 else -1,
        rng.choice((ZERO_UUID, "q1l7tYDYRH6eB2fcB9kpyA")) if version == 4 else ZERO_UUID,
    )
    key_type = rng.choice((1, 1, 1, 0))
    encoded = CODEC.encode_value(key_type, version, value)
    if version == 4 and rng.random() < 0.2:
        # tags no Kafka writes yet, beside the topic id or not: the C loop skips them, the
        # Python path keeps them aside, the state has no place for either
        tags = [(0, TOPIC_ID_BYTES)] if value.topic_id != ZERO_UUID else []
        tags.insert(rng.randrange(len(tags) + 1), (rng.choice((1, 9, 200)), rng.randbytes(3)))
        encoded = _v4(
            metadata.encode(), tags, offset=offset, epoch=value.leader_epoch, commit_ts=ts
        )
    if metadata == "m" and rng.random() < 0.3:
        # metadata that is not UTF-8 (the Python path keeps its bytes): same length as "m"
        at = encoded.index(b"m", 2 + 8 + (4 if version >= 3 else 0))
        encoded = encoded[:at] + b"\xff" + encoded[at + 1 :]
    return CODEC.encode_key(key_type, OffsetCommitKey(group, topic, partition)), encoded


def _random_stream(seed: int, spread: bool = False) -> list[list[Message]]:
    """`spread`: commit times scattered over buckets before, at and after the window clock's
    (out of order, some unknown): each commit counts in the bucket of its own time."""
    rng = random.Random(seed)
    groups = [f"g{i}" for i in range(rng.randrange(1, 6))] + ["gr\u00fcn"]
    topics = ["t", "orders", "\u00e9v\u00e9nements"]
    offsets: dict[tuple[str, str, int], int] = {}
    position = {p: rng.randrange(0, 1000) for p in range(3)}
    messages: list[Message] = []
    ts = T0
    for _ in range(rng.randrange(50, 1500)):
        ts += rng.choice((0, 1, 5, 1000))
        part = rng.randrange(0, 3)
        position[part] += rng.choice((1, 1, 1, 2))
        kind = rng.random()
        key: bytes | None
        value: bytes | None
        if kind < 0.80:
            # a commit request: a run of partitions of one (group, topic)
            group, topic = rng.choice(groups), rng.choice(topics)
            first = rng.randrange(0, 40)
            for p in range(first, first + rng.randrange(1, 90)):
                slot = (group, topic, p)
                offsets[slot] = max(0, offsets.get(slot, 0) + rng.choice((0, 1, 5, 5, 5, -3)))
                commit_ts = ts
                if spread:
                    commit_ts = rng.choice((-1, T0 + rng.randrange(-10_000, 40_000), ts))
                key, value = _commit_bytes(rng, group, topic, p, offsets[slot], commit_ts)
                message_ts = ts + rng.choice((0, 0, -2000, 3))
                messages.append(Message(part, position[part], message_ts, key, value))
                position[part] += 1
            continue
        if kind < 0.86:  # an offset tombstone
            if not offsets:
                continue
            group, topic, p = rng.choice(sorted(offsets))
            key, value = CODEC.encode_key(1, OffsetCommitKey(group, topic, p)), None
        elif kind < 0.91:  # group metadata, or its tombstone
            group = rng.choice(groups)
            key = CODEC.encode_key(2, GroupMetadataKey(group))
            value = (
                None
                if rng.random() < 0.3
                else CODEC.encode_value(
                    2, 3, GroupMetadataValue("consumer", 1, "range", "", ts, ())
                )
            )
        elif kind < 0.94:  # invalid UTF-8 in a group id, a key of unknown type
            key = rng.choice(
                (
                    b"\x00\x01\x00\x02\xff\xfe\x00\x01t\x00\x00\x00\x00",
                    b"\x7f\x00\x00",
                )
            )
            value = struct.pack(">hq", 3, 1)
        elif kind < 0.97:  # bytes nobody can decode
            key = b"\x00\x01\x00"
            value = rng.randbytes(rng.randrange(0, 30))
        else:  # a commit with a truncated or trailing-byte value
            key, value = _commit_bytes(rng, rng.choice(groups), "t", 1, 5, ts)
            value = value[:-1] if rng.random() < 0.5 else value + b"\x00"
        messages.append(Message(rng.choice((part, None)), position[part], ts, key, value))
    batches = []
    while messages:
        size = rng.choice((1, 3, 50, 500))
        batches.append(messages[:size])
        messages = messages[size:]
    return batches


@pytest.mark.parametrize("seed", range(40))
def test_random_streams_leave_the_same_state(seed: int) -> None:
    _accelerator()
    fast, slow, _ = _both(_random_stream(seed), roll_every=1 + seed % 4)
    assert fast == slow


@pytest.mark.parametrize("seed", range(20))
def test_commits_spread_over_buckets_leave_the_same_state(seed: int) -> None:
    """Replayed and skewed commits land in the bucket of their own time on both paths."""
    _accelerator()
    batches = _random_stream(1000 + seed, spread=True)
    fast, slow, ingestor = _both(batches, roll_every=1 + seed % 3)
    assert fast == slow
    # the streams do reach every bucket, and before the window (counted in none)
    assert ingestor.stats.fast_path_records_total > 0
    tables = [t for g in ingestor.state.groups.values() for t in g.topics.values()]
    assert any(sum(t.window_commits) for t in tables)
    assert any(sum(t.next_commits) for t in tables)


def test_the_c_loop_applies_the_bulk_of_a_commit_stream() -> None:
    """Not a speed test: proof that the C loop does run (the equality above would also hold
    if everything fell back to Python)."""
    module = _accelerator()
    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), Codec())
    messages = []
    for round_ in range(5):
        for p in range(100):
            key, value = CODEC.encode(
                Record(
                    1,
                    OffsetCommitKey("g", "t", p),
                    3,
                    OffsetCommitValue(round_, -1, "", T0, -1, ZERO_UUID),
                )
            )
            messages.append(Message(0, len(messages), T0, key, value))
    # the first round creates the table partition by partition (through `ingest`: called
    # without GroupState and PartitionTable, apply_commits makes no table)
    ingestor.ingest(messages[:100])
    counts = [0] * 11
    assert module.apply_commits(messages, 100, state.groups, ingestor.positions, counts) == 500
    assert counts[10] == 400 and counts[1 * 5 + 3] == 400
    assert ingestor.positions == {0: 500}
    assert list(state.groups["g"].topics["t"].committed)[:100] == [4] * 100


@pytest.mark.parametrize(
    ("version", "metadata"), [(4, ""), (4, "\x00"), (3, "\x00"), (4, "m\u00e9ta")]
)
def test_the_c_loop_applies_what_clients_and_current_brokers_write(
    version: int, metadata: str
) -> None:
    """v4 (Kafka 4.1+ writes it for every commit, with its topic id tag) and the metadata
    clients send (librdkafka: a NUL): after a first round through `ingest`, the C loop alone
    (without the classes that make groups and tables) takes the rest."""
    module = _accelerator()
    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), Codec())
    topic_id = "q1l7tYDYRH6eB2fcB9kpyA" if version == 4 else ZERO_UUID
    messages = []
    for round_ in range(3):
        for p in range(50):
            key, value = CODEC.encode(
                Record(
                    1,
                    OffsetCommitKey("g", "t", p),
                    version,
                    OffsetCommitValue(round_, 5, metadata, T0, -1, topic_id),
                )
            )
            messages.append(Message(0, len(messages), T0, key, value))
    ingestor.ingest(messages[:50])
    counts = [0] * 11
    assert module.apply_commits(messages, 50, state.groups, ingestor.positions, counts) == 150
    assert counts[10] == 100 and counts[1 * 5 + version] == 100
    table = state.groups["g"].topics["t"]
    assert [table.metadata_of(p) for p in range(50)] == [metadata] * 50
    assert list(table.committed)[:50] == [2] * 50


def test_sinks_see_every_record_so_the_c_loop_stays_out() -> None:
    _accelerator()
    seen: list[Any] = []
    batches = _random_stream(7)
    ingestor = Ingestor(OffsetState(), PipelineStats(), Codec())
    ingestor.sinks.append(seen.append)
    handled = sum(ingestor.ingest(list(batch)) for batch in batches)
    assert len(seen) + sum(ingestor.stats.decode_errors_total.values()) == handled


def test_a_state_emptied_between_batches_is_rebuilt_not_written_into_old_tables() -> None:
    """The daemon's rebuild clears `state.groups`; nothing may land in a table it dropped."""
    _accelerator()
    batches = _random_stream(3)
    ingestor = Ingestor(OffsetState(), PipelineStats(), Codec())
    ingestor.ingest(list(batches[0]))
    old_tables = [t for g in ingestor.state.groups.values() for t in g.topics.values()]
    before = [list(t.committed) for t in old_tables]
    ingestor.state.groups.clear()
    for batch in batches[1:]:
        ingestor.ingest(list(batch))
    assert [list(t.committed) for t in old_tables] == before


def test_the_source_splits_batches_as_its_python_loop_did() -> None:
    module = _accelerator()

    @dataclass
    class Failed(Message):
        def error(self) -> Any:  # type: ignore[override]
            return "broken"

    good = [Message(p % 3, p, T0, b"k", b"v") for p in range(10)]
    bad = Failed(1, 99, T0, None, None)
    assert module.split_batch(good) == (good, {0: 9, 1: 7, 2: 8}, [])
    assert module.split_batch(good)[0] is good
    mixed = [*good[:4], bad, *good[4:]]
    assert module.split_batch(mixed) == (good, {0: 9, 1: 7, 2: 8}, [bad])
    assert module.split_batch([]) == ([], {}, [])


def test_the_accelerator_is_built_from_this_source() -> None:
    """setup.py hashes the source and the shared header it includes (decoder/_wire.h)."""
    module = _accelerator()
    root = Path(__file__).parents[3]
    source = root / "exporter" / "state" / "_ingest_speedups.c"
    assert '#include "_wire.h"' in source.read_text(encoding="utf-8")
    header = root / "decoder" / "_wire.h"
    digest = hashlib.sha256(source.read_bytes() + header.read_bytes()).hexdigest()
    assert digest == module.SOURCE_SHA256


def test_a_module_built_before_a_header_change_is_not_used(tmp_path: Path) -> None:
    """built_from hashes the header after the source, as setup.py does: a changed or missing
    header sends the exporter to the Python path with the reason, it never fails the import."""
    _accelerator()
    name = "offsetwatch.exporter.state._ingest_speedups"
    root = Path(__file__).parents[3]
    source = tmp_path / "_ingest_speedups.c"
    header = tmp_path / "_wire.h"
    source.write_bytes((root / "exporter" / "state" / "_ingest_speedups.c").read_bytes())
    header.write_bytes((root / "decoder" / "_wire.h").read_bytes())
    assert built_from(name, source, (header,))[0] is not None
    header.write_bytes(header.read_bytes() + b"\n")
    module, why = built_from(name, source, (header,))
    assert module is None and "_ingest_speedups.c / _wire.h" in why, why
    header.unlink()
    module, why = built_from(name, source, (header,))
    assert module is None and "_wire.h is missing" in why, why


def test_the_c_modules_share_one_copy_of_the_wire_readers() -> None:
    """decoder/_wire.h holds the readers; a module with its own copy would miss a fix."""
    root = Path(__file__).parents[3]
    for source in ("decoder/_speedups.c", "exporter/state/_ingest_speedups.c"):
        text = (root / source).read_text(encoding="utf-8")
        assert '#include "_wire.h"' in text, source
        for reader in ("be16(const", "be32(const", "be64(const", "uvarint(const"):
            assert reader not in text, (source, reader)


# -- v4 and metadata, byte by byte ---------------------------------------------------------

#: a topic id as Kafka 4.2+ writes it in tag 0, and its 16 bytes
TOPIC_ID = "q1l7tYDYRH6eB2fcB9kpyA"
TOPIC_ID_BYTES = base64.urlsafe_b64decode(TOPIC_ID + "==")
COMMIT = RECORD_TYPES[1].name


def _uvarint(value: int, pad: int = 0) -> bytes:
    """Kafka's unsigned varint, with `pad` more bytes than needed (a non-minimal form Kafka's
    reader and the Python path both accept)."""
    groups = []
    while True:
        groups.append(value & 0x7F)
        value >>= 7
        if not value:
            break
    groups += [0] * pad
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


def _v4(
    metadata: bytes = b"",
    tags: list[tuple[int, bytes]] | None = None,
    *,
    offset: int = 42,
    epoch: int = 7,
    commit_ts: int = T0,
    length: bytes | None = None,
) -> bytes:
    """An OffsetCommitValue v4 written by hand, so that tags and varints can be any bytes:
    offset, leader epoch, compact metadata (`length` replaces its varint), commit ts, tags."""
    fields = [] if tags is None else tags
    return (
        struct.pack(">hqi", 4, offset, epoch)
        + (_uvarint(len(metadata) + 1) if length is None else length)
        + metadata
        + struct.pack(">q", commit_ts)
        + _uvarint(len(fields))
        + b"".join(_uvarint(tag) + _uvarint(len(data)) + data for tag, data in fields)
    )


def test_the_hand_written_v4_is_what_the_codec_writes() -> None:
    for metadata, topic_id, tags in (("", ZERO_UUID, None), ("m\u00e9ta\x00", TOPIC_ID, [0])):
        value = OffsetCommitValue(42, 7, metadata, T0, -1, topic_id)
        expected = CODEC.encode_value(1, 4, value)
        fields = [(0, TOPIC_ID_BYTES)] if tags else []
        assert _v4(metadata.encode(), fields) == expected


def _after_a_table(values: list[bytes]) -> tuple[Any, Any, Ingestor]:
    """Both paths over a table of ("g", "t") made by v3 commits with metadata (so its
    metadata list exists), then `values` committed to its partition 1, one batch each."""
    setup = []
    for p in range(4):
        key, value = CODEC.encode(
            Record(
                1, OffsetCommitKey("g", "t", p), 3, OffsetCommitValue(1, -1, "x", T0, -1, ZERO_UUID)
            )
        )
        setup.append(Message(0, p, T0, key, value))
    key = CODEC.encode_key(1, OffsetCommitKey("g", "t", 1))
    batches = [setup] + [[Message(0, 4 + i, T0 + i, key, v)] for i, v in enumerate(values)]
    return _both(batches)


#: (case, value, what takes it: "c" the C loop, "python" the Python path decodes it,
#: "error" the Python path raises its DecodeError and quarantines it)
V4_CASES = [
    ("no tags (Kafka 4.1)", _v4(), "c"),
    ("topic id (Kafka 4.2+)", _v4(b"", [(0, TOPIC_ID_BYTES)]), "c"),
    ("NUL (librdkafka)", _v4(b"\x00", [(0, TOPIC_ID_BYTES)]), "c"),
    ("non-ASCII", _v4("r\u00e9sum\u00e9 \u2713 \u65e5\u672c \U0001f680\x00".encode()), "c"),
    ("4000 bytes of metadata", _v4(b"B" * 4000, [(0, TOPIC_ID_BYTES)]), "c"),
    ("an unknown tag", _v4(b"", [(7, b"abc")]), "c"),
    (
        "unknown tags around the topic id",
        _v4(b"m", [(0, TOPIC_ID_BYTES), (5, b""), (300, b"x" * 200)]),
        "c",
    ),
    ("topic id twice", _v4(b"", [(0, TOPIC_ID_BYTES), (0, bytes(16))]), "c"),
    ("non-minimal varints", _v4(b"mm", length=_uvarint(3, pad=2)), "c"),
    ("metadata not UTF-8", _v4(b"\xff\x00", [(0, TOPIC_ID_BYTES)]), "python"),
    ("a surrogate in UTF-8", _v4(b"\xed\xa0\x80"), "python"),
    ("topic id of 15 bytes", _v4(b"", [(0, TOPIC_ID_BYTES[:15])]), "error"),
    ("topic id of 17 bytes", _v4(b"", [(0, TOPIC_ID_BYTES + b"\x00")]), "error"),
    ("null metadata", _v4(b"", length=b"\x00"), "error"),
    # 1 + 2**32 in 5 bytes: a reader that keeps 32 bits would see length 0 and apply it
    ("metadata length past 32 bits", _v4(b"", length=b"\x81\x80\x80\x80\x10"), "error"),
    ("a 6-byte varint", _v4(b"", length=b"\x81\x80\x80\x80\x80\x00"), "error"),
    ("a tag past the end", _v4()[:-1] + b"\x01\x07\x05ab", "error"),
    ("a tag count past the end", _v4()[:-1] + _uvarint(0xFFFFFFFF), "error"),
    ("a tag count past 32 bits", _v4()[:-1] + b"\x81\x80\x80\x80\x10", "error"),
    ("a trailing byte", _v4() + b"\x00", "error"),
]


@pytest.mark.parametrize(
    ("value", "taken_by"), [c[1:] for c in V4_CASES], ids=[c[0] for c in V4_CASES]
)
def test_v4_values_are_taken_by_the_c_loop_only_when_it_reads_every_byte(
    value: bytes, taken_by: str
) -> None:
    _accelerator()
    fast, slow, ingestor = _after_a_table([value])
    assert fast == slow
    v4_fast = ingestor.fast_path_records.get((COMMIT, "4"), 0)
    assert v4_fast == (1 if taken_by == "c" else 0)
    quarantined = fast[5]
    assert len(quarantined) == (1 if taken_by == "error" else 0), quarantined
    assert ingestor.stats.records_total.get((COMMIT, "4"), 0) == (0 if taken_by == "error" else 1)


def _values_of_every_version() -> list[bytes]:
    """Commit values of v0-v4 with the metadata clients send; v4 with and without tags."""
    values = []
    for version in range(5):
        for metadata in ("", "\x00", "ckpt=42;host=w-1\x00", "r\u00e9sum\u00e9 \U0001f680"):
            value = OffsetCommitValue(
                9,
                3 if version >= 3 else -1,
                metadata,
                T0,
                T0 + 1 if version == 1 else -1,
                ZERO_UUID,
            )
            values.append(CODEC.encode_value(1, version, value))
        values.append(_v4(b"m\x00", [(0, TOPIC_ID_BYTES), (9, b"zz")]))
    return values


def test_every_truncation_of_a_commit_is_quarantined_as_the_python_path_does() -> None:
    """Cut at every byte, no commit value is one the C loop may apply: each falls back and
    the Python path raises (and quarantines) its own DecodeError, message and all."""
    _accelerator()
    truncated = [value[:cut] for value in _values_of_every_version() for cut in range(len(value))]
    fast, slow, ingestor = _after_a_table(truncated)
    assert fast == slow
    assert len(fast[5]) == len(truncated)
    assert ingestor.stats.fast_path_records_total == 4  # the setup, its table made in C


@pytest.mark.parametrize("seed", range(20))
def test_mutated_commit_values_leave_the_same_state(seed: int) -> None:
    """Seeded byte flips, insertions and deletions in commits of every version: whatever
    the C loop takes, it takes as the Python path decodes it; the rest falls back."""
    _accelerator()
    rng = random.Random(seed)
    originals = _values_of_every_version()
    values = []
    for _ in range(300):
        value = bytearray(rng.choice(originals))
        for _ in range(rng.choice((1, 1, 2, 3))):
            at = rng.randrange(len(value))
            what = rng.random()
            if what < 0.6:
                value[at] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
            elif what < 0.8:
                value.insert(at, rng.randrange(256))
            elif len(value) > 2:
                del value[at]
        values.append(bytes(value))
    fast, slow, _ = _after_a_table(values)
    assert fast == slow


def test_the_fast_path_counter_tells_each_kind_s_share() -> None:
    """`fast_path_records` counts what the C loop applied per (type, version) label as
    `records_total` counts everything, so the share is theirs; the Python path's records
    count in `records_total` only."""
    _accelerator()
    _, _, ingestor = _both(_random_stream(11))
    share = ingestor.fast_path_share()
    assert sum(taken for taken, _ in share.values()) == ingestor.stats.fast_path_records_total
    assert all(0 <= taken <= total for taken, total in share.values())
    assert share[COMMIT, "4"][0] > 0 and share[COMMIT, "3"][0] > 0
    assert share[COMMIT, "tombstone"][0] == 0
    python_only = Ingestor(OffsetState(), PipelineStats(), Codec(), accelerate=False)
    for batch in _random_stream(11):
        python_only.ingest(list(batch))
    assert python_only.fast_path_records == {}


def _compacted(metadata: str, version: int) -> list[Message]:
    """What a compacted __consumer_offsets holds: one commit per (group, topic, partition),
    here 300 groups x 3 single-partition topics plus one 8-partition topic each."""
    messages = []
    for g in range(300):
        for topic, partitions in (("a", 1), ("b", 1), ("c", 1), ("wide", 8)):
            for p in range(partitions):
                key, value = CODEC.encode(
                    Record(
                        1,
                        OffsetCommitKey(f"group-{g}", topic, p),
                        version,
                        OffsetCommitValue(
                            g + p, 3, metadata, T0 + g, -1, TOPIC_ID if version == 4 else ZERO_UUID
                        ),
                    )
                )
                messages.append(Message(g % 7, len(messages), T0 + g, key, value))
    return messages


@pytest.mark.parametrize(("version", "metadata"), [(3, ""), (3, "ckpt\x00"), (4, ""), (4, "\x00")])
def test_a_compacted_log_is_applied_by_the_c_loop_groups_and_tables_included(
    version: int, metadata: str
) -> None:
    """A compacted log holds one commit per partition: every (group, topic) appears once, so a
    C loop that left each new table to the Python path would leave it 2 records in 3 here
    (all of them on a single-partition table). It makes the group and the table, and the
    metadata list at the first commit with metadata, as apply_many does."""
    _accelerator()
    messages = _compacted(metadata, version)
    batches = [messages[i : i + 500] for i in range(0, len(messages), 500)]
    fast, slow, ingestor = _both(batches)
    assert fast == slow
    assert ingestor.stats.fast_path_records_total == len(messages)
    table = ingestor.state.groups["group-5"].topics["wide"]
    assert [table.metadata_of(p) for p in range(8)] == [metadata] * 8
    assert (table.metadata is None) == (metadata == "")


def test_a_table_made_with_empty_metadata_takes_its_first_metadata_in_the_c_loop() -> None:
    """Java commits (no metadata) made the table; a librdkafka tool then commits with
    metadata: the C loop allocates the metadata list as PartitionTable.commit does."""
    _accelerator()
    key = [CODEC.encode_key(1, OffsetCommitKey("g", "t", p)) for p in range(6)]
    value = [
        CODEC.encode_value(1, 3, OffsetCommitValue(o, -1, m, T0, -1, ZERO_UUID))
        for o, m in ((1, ""), (2, "admin-reset\x00"), (3, ""))
    ]
    stream = [Message(0, p, T0, key[p], value[0]) for p in range(4)]
    stream += [Message(0, 4, T0, key[2], value[1]), Message(0, 5, T0, key[5], value[2])]
    fast, slow, ingestor = _both([stream[:4], stream[4:]])
    assert fast == slow
    assert ingestor.stats.fast_path_records_total == 6
    table = ingestor.state.groups["g"].topics["t"]
    assert [table.metadata_of(p) for p in range(6)] == ["", "", "admin-reset\x00", "", "", ""]
