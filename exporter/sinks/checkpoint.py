"""Checkpoints: the exporter's state and its read positions, saved together and atomically.

A restart resumes from the last checkpoint instead of re-reading all of `__consumer_offsets`
(minutes to hours on a big cluster). The daemon calls `save_checkpoint` every
`checkpoint_interval_s` seconds and at shutdown, from the thread that applies records, between
two batches: the state and the positions must describe the same point of the topic (the
positions are the next offset to read per `__consumer_offsets` partition, i.e. last applied
offset + 1). At start it calls `load_checkpoint(path, expect=...)`:

* `CheckpointNotFound` (no file): first start, rebuild from the beginning of the topic;
* any other `CheckpointError` (torn, corrupt, unknown format version, another cluster or
  topic): log the message and rebuild from the beginning of the topic, exactly as without a
  checkpoint. The bad file is left alone and replaced by the next successful save.

Saving is atomic (offsetwatch.core.atomic): the file is written to a temporary file in the
same directory, flushed and fsynced, renamed over the previous checkpoint (`os.replace`), then
the directory is fsynced.
A crash at any moment leaves either the previous checkpoint or the new one, never a mix; a
temporary file left behind by a crash is ignored by `load_checkpoint` and removed by the next
save. One writer per checkpoint path.

File format (version 2), all integers little-endian:

    preamble (32 bytes)
      magic           8 bytes  b"OWCKPT\\r\\n"
      format version  u16      2
      flags           u16      0 (reserved)
      header length   u32      H
      body length     u64      B
      header CRC-32   u32      zlib.crc32 of the header bytes
      body CRC-32     u32      zlib.crc32 of the body bytes
    header (H bytes)   JSON (ASCII): created_ms, writer, meta (topic, cluster id, bootstrap
                       fingerprint), positions, apply counters, the status-window clock
                       (`WindowClock`: window, next and bucket start), byte order and item
                       sizes of the arrays, the list of body sections with their lengths, and
                       optionally `histories`: group id -> its rebalance history
                       (`GroupHistory.to_json`); a checkpoint without it (written before the
                       diagnosis existed) loads with no history; and optionally `share_state`:
                       the `__share_group_state` read positions and the share partitions
                       (`ShareStateStore.to_json`); without it (older checkpoints) the
                       share state is rebuilt from the start of that topic; and optionally
                       `resume_since_ms`: per partition, a wall-clock lower bound (epoch ms)
                       for when the sinks took any record at or after its position
                       (exporter/sinks/resume_dedup.py); without it a restart skips nothing and
                       writes those records again
    body (B bytes), the sections one after the other:
      directory        JSON (ASCII): per group [id, commits_total, last_record_ts,
                       [[topic, slots, metadata index or -1], ...], [[key_type, sub_key], ...]],
                       and the metadata string lists of the tables that have them
      present, committed, commit_ts, leader_epoch, window_offset, window_commits,
      next_offset, next_commits, bucket_offset, bucket_commits, first_commit_ts,
      rewind_ts, move_ts
                       one section per `PartitionTable` column: the raw array bytes of every
                       table, concatenated in directory order (little-endian; int64 "q",
                       int32 "i", present as one byte per slot)
      records          the non-commit records, in directory order: per record
                       <i32 key length, i32 value length (-1 = null), i32 partition,
                       i64 offset, i64 timestamp> then the key and value bytes exactly as
                       `Codec.encode` gives them (decoded back with `Codec.decode`)

The file size must be exactly 32 + H + B: a shorter file is a torn write. Any change to the
layout of `PartitionTable` or of the records needs a new format version (a test pins the
columns to `PartitionTable.__slots__`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import struct
import sys
import time
import zlib
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from offsetwatch.core.atomic import atomic_write
from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.records import Record
from offsetwatch.exporter.state.diagnosis_history import GroupHistory
from offsetwatch.exporter.state.offset_state import (
    ApplyCounters,
    GroupState,
    OffsetState,
    PartitionTable,
    WindowClock,
)

MAGIC: Final = b"OWCKPT\r\n"
#: 2: the sliding status window (three bucket boundaries instead of one tumbling start)
FORMAT_VERSION: Final = 2
_PREAMBLE: Final = struct.Struct("<8sHHIQII")
_RECORD_HEAD: Final = struct.Struct("<iiiqq")
_FORMAT_NAME: Final = "offsetwatch-checkpoint"

#: PartitionTable columns in file order, with their array type codes ("B" = bytearray)
COLUMNS: Final = (
    ("present", "B"),
    ("committed", "q"),
    ("commit_ts", "q"),
    ("leader_epoch", "i"),
    ("window_offset", "q"),
    ("window_commits", "i"),
    ("next_offset", "q"),
    ("next_commits", "i"),
    ("bucket_offset", "q"),
    ("bucket_commits", "i"),
    ("first_commit_ts", "q"),
    ("rewind_ts", "q"),
    ("move_ts", "q"),
)
_ITEMSIZES: Final = {"B": 1, "q": 8, "i": 4}
_SECTIONS: Final = ("directory", *(name for name, _ in COLUMNS), "records")
_SWAP: Final = sys.byteorder != "little"


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the daemon then rebuilds from the topic's start."""


class CheckpointNotFound(CheckpointError):
    """There is no checkpoint file (first start, or checkpoints newly switched on)."""


class CheckpointMismatch(CheckpointError):
    """A valid checkpoint, but of another cluster or another offsets topic."""


@dataclass(frozen=True, slots=True)
class CheckpointMeta:
    """What a checkpoint is a checkpoint of; compared on load to refuse foreign ones.

    `cluster_id` is Kafka's cluster id (from the metadata response) when known. The bootstrap
    fingerprint (`bootstrap_fingerprint()`) is the fallback identity when a cluster id is
    missing on either side. `created_ms` is filled in by `save_checkpoint` when 0.
    """

    topic: str = OFFSETS_TOPIC
    cluster_id: str | None = None
    bootstrap_fingerprint: str | None = None
    created_ms: int = 0

    @classmethod
    def for_cluster(
        cls, topic: str, cluster_id: str | None, bootstrap_servers: str | None
    ) -> CheckpointMeta:
        fingerprint = (
            None if bootstrap_servers is None else bootstrap_fingerprint(bootstrap_servers)
        )
        return cls(topic=topic, cluster_id=cluster_id, bootstrap_fingerprint=fingerprint)

    def check_matches(self, expected: CheckpointMeta, path: Path | str = "checkpoint") -> None:
        """Raise CheckpointMismatch unless this checkpoint belongs to the expected source."""
        if self.topic != expected.topic:
            raise CheckpointMismatch(
                f"{path} is a checkpoint of topic {self.topic!r}, not {expected.topic!r}"
                f" (point --checkpoint-path elsewhere to keep both)"
            )
        if self.cluster_id is not None and expected.cluster_id is not None:
            if self.cluster_id != expected.cluster_id:
                raise CheckpointMismatch(
                    f"{path} is a checkpoint of Kafka cluster {self.cluster_id!r}, but the "
                    f"brokers belong to cluster {expected.cluster_id!r} (use one "
                    "checkpoint path per cluster)"
                )
            return
        if (
            self.bootstrap_fingerprint is not None
            and expected.bootstrap_fingerprint is not None
            and self.bootstrap_fingerprint != expected.bootstrap_fingerprint
        ):
            raise CheckpointMismatch(
                f"{path} was written for other bootstrap servers (fingerprint "
                f"{self.bootstrap_fingerprint}, now {expected.bootstrap_fingerprint}) and no "
                "cluster id is known to prove it is the same cluster"
            )


@dataclass(frozen=True, slots=True)
class LoadedCheckpoint:
    state: OffsetState
    #: next offset to read, per __consumer_offsets partition
    positions: dict[int, int]
    meta: CheckpointMeta
    #: `{"positions": {partition: offset}, "store": ShareStateStore.to_json()}` of
    #: __share_group_state; None in checkpoints written before share groups were read
    share_state: dict[str, Any] | None = None
    #: per partition, when the sinks could first have taken a record at or after its
    #: position (exporter/sinks/resume_dedup.py); None in checkpoints written before it existed
    resume_since_ms: dict[int, int] | None = None


def bootstrap_fingerprint(bootstrap_servers: str) -> str:
    """A short stable id of a bootstrap list: order, case and spaces do not matter."""
    servers = sorted({s.strip().lower() for s in bootstrap_servers.split(",") if s.strip()})
    return hashlib.sha256(",".join(servers).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Saving


def _joined(code: str, columns: list[Any]) -> bytes:
    """One column of every table as little-endian bytes."""
    if _SWAP and _ITEMSIZES[code] > 1:
        swapped = []
        for column in columns:
            copy = array(code, column)
            copy.byteswap()
            swapped.append(copy)
        columns = swapped
    return b"".join(columns)


def _check_itemsizes() -> None:
    for code in ("q", "i"):
        if array(code).itemsize != _ITEMSIZES[code]:
            raise CheckpointError(
                f"array type {code!r} is {array(code).itemsize} bytes on this platform, "
                f"the checkpoint format needs {_ITEMSIZES[code]}"
            )


def _build_sections(state: OffsetState, codec: Codec) -> dict[str, bytes]:
    columns: tuple[list[Any], ...] = tuple([] for _ in COLUMNS)
    names = tuple(name for name, _ in COLUMNS)
    groups: list[list[Any]] = []
    metadata: list[list[str]] = []
    records = bytearray()
    record_head = _RECORD_HEAD.pack
    # one pass, plain attribute access: this loop runs once per (group, topic)
    for group_id, group in state.groups.items():
        table_dir: list[list[Any]] = []
        for topic, table in group.topics.items():
            size = len(table.present)
            table_columns = [getattr(table, name) for name in names]
            if any(len(column) != size for column in table_columns):
                raise CheckpointError(
                    f"group {group_id!r} topic {topic!r}: the columns of its partition table "
                    "have different lengths"
                )
            for out, column in zip(columns, table_columns, strict=True):
                out.append(column)
            meta_index = -1
            if table.metadata is not None:
                if len(table.metadata) != size:
                    raise CheckpointError(
                        f"group {group_id!r} topic {topic!r}: {len(table.metadata)} metadata "
                        f"strings for {size} partitions"
                    )
                meta_index = len(metadata)
                metadata.append(table.metadata)
            table_dir.append([topic, size, meta_index])
        slots: list[list[Any]] = []
        for (key_type, sub_key), record in group.records.items():
            key, value = codec.encode(record)
            records += record_head(
                len(key),
                -1 if value is None else len(value),
                record.partition,
                record.offset,
                record.timestamp,
            )
            records += key
            if value is not None:
                records += value
            slots.append([key_type, sub_key])
        groups.append([group_id, group.commits_total, group.last_record_ts, table_dir, slots])
    directory = {"groups": groups, "metadata": metadata}
    # ensure_ascii: names and metadata decoded from the wire may hold surrogate escapes
    sections = {"directory": json.dumps(directory, separators=(",", ":")).encode("ascii")}
    for (name, code), column in zip(COLUMNS, columns, strict=True):
        sections[name] = _joined(code, column)
    sections["records"] = bytes(records)
    return sections


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic GC: building or walking millions of containers would otherwise
    trigger full collections over the whole (large, acyclic) state again and again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def save_checkpoint(
    path: str | os.PathLike[str],
    state: OffsetState,
    positions: Mapping[int, int],
    *,
    meta: CheckpointMeta,
    codec: Codec | None = None,
    share_state: dict[str, Any] | None = None,
    resume_since_ms: Mapping[int, int] | None = None,
) -> None:
    """Write state + positions to `path` atomically (see the module docs).

    Raises OSError when the file cannot be written (the previous checkpoint stays intact)
    and CheckpointError for a state that cannot be saved.
    """
    _check_itemsizes()
    target = Path(path)
    created_ms = meta.created_ms or time.time_ns() // 1_000_000
    with _no_gc():
        sections = _build_sections(state, codec or Codec())
    counters = state.counters
    header = {
        "format": _FORMAT_NAME,
        "created_ms": created_ms,
        "writer": "offsetwatch",
        "meta": {
            "topic": meta.topic,
            "cluster_id": meta.cluster_id,
            "bootstrap_fingerprint": meta.bootstrap_fingerprint,
        },
        "positions": {str(int(p)): int(o) for p, o in sorted(positions.items())},
        "counters": {
            "records": counters.records,
            "commits": counters.commits,
            "tombstones": counters.tombstones,
            "groups_deleted": counters.groups_deleted,
        },
        "window_clock": {
            "window_ms": state.window_clock.window_ms,
            "next_ms": state.window_clock.next_ms,
            "bucket_ms": state.window_clock.bucket_ms,
        },
        "histories": {
            group_id: group.history.to_json()
            for group_id, group in state.groups.items()
            if group.history is not None
        },
        **({} if share_state is None else {"share_state": share_state}),
        **(
            {}
            if resume_since_ms is None
            else {"resume_since_ms": {str(int(p)): int(t) for p, t in resume_since_ms.items()}}
        ),
        "byteorder": "little",
        "itemsizes": _ITEMSIZES,
        "sections": [[name, len(sections[name])] for name in _SECTIONS],
    }
    header_bytes = json.dumps(header, separators=(",", ":")).encode("ascii")
    body_crc = 0
    for name in _SECTIONS:
        body_crc = zlib.crc32(sections[name], body_crc)
    preamble = _PREAMBLE.pack(
        MAGIC,
        FORMAT_VERSION,
        0,
        len(header_bytes),
        sum(len(s) for s in sections.values()),
        zlib.crc32(header_bytes),
        body_crc,
    )
    with atomic_write(target) as out:
        out.write(preamble)
        out.write(header_bytes)
        for name in _SECTIONS:
            out.write(sections[name])


# ---------------------------------------------------------------------------------------------
# Loading


def _column_array(code: str, data: memoryview) -> array[int]:
    column = array(code)
    column.frombytes(data)
    if _SWAP:
        column.byteswap()
    return column


def _read_preamble(path: Path, data: bytes) -> tuple[int, int]:
    if len(data) < _PREAMBLE.size:
        if data and not MAGIC.startswith(data[: len(MAGIC)]):
            raise CheckpointError(f"{path} is not an offsetwatch checkpoint (bad magic)")
        raise CheckpointError(
            f"{path} is truncated: {len(data)} bytes, shorter than the {_PREAMBLE.size}-byte "
            "preamble (torn write?)"
        )
    magic, version, _flags, header_len, body_len, header_crc, body_crc = _PREAMBLE.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError(f"{path} is not an offsetwatch checkpoint (bad magic {magic!r})")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {version}; this offsetwatch reads version "
            f"{FORMAT_VERSION} (written by a {'newer' if version > FORMAT_VERSION else 'older'} "
            "release)"
        )
    expected = _PREAMBLE.size + header_len + body_len
    if len(data) != expected:
        raise CheckpointError(
            f"{path} is {len(data)} bytes but its preamble says {expected}: "
            f"{'truncated (torn write?)' if len(data) < expected else 'trailing garbage'}"
        )
    header_end = _PREAMBLE.size + header_len
    if zlib.crc32(data[_PREAMBLE.size : header_end]) != header_crc:
        raise CheckpointError(f"{path} is corrupt: header CRC mismatch")
    if zlib.crc32(memoryview(data)[header_end:]) != body_crc:
        raise CheckpointError(f"{path} is corrupt: body CRC mismatch")
    return header_len, body_len


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    expect: CheckpointMeta | None = None,
    codec: Codec | None = None,
) -> LoadedCheckpoint:
    """Read a checkpoint; with `expect`, refuse one of another cluster or topic.

    Raises CheckpointNotFound when there is no file and CheckpointError (or its subclass
    CheckpointMismatch) when it cannot be used: rebuild from the topic's start then.
    """
    _check_itemsizes()
    source = Path(path)
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        raise CheckpointNotFound(f"no checkpoint at {source}") from None
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {source}: {error.strerror}") from None
    header_len, _ = _read_preamble(source, data)
    try:
        with _no_gc():
            loaded = _parse(source, data, header_len, codec or Codec())
    except CheckpointError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, struct.error) as error:
        raise CheckpointError(f"{source} is corrupt: {type(error).__name__}: {error}") from None
    if expect is not None:
        loaded.meta.check_matches(expect, source)
    return loaded


def _parse(path: Path, data: bytes, header_len: int, codec: Codec) -> LoadedCheckpoint:
    view = memoryview(data)
    header = json.loads(bytes(view[_PREAMBLE.size : _PREAMBLE.size + header_len]))
    if header.get("format") != _FORMAT_NAME:
        raise CheckpointError(f"{path}: unexpected format name {header.get('format')!r}")
    if header["byteorder"] != "little" or header["itemsizes"] != _ITEMSIZES:
        raise CheckpointError(f"{path}: unsupported array layout {header['itemsizes']}")
    names = [name for name, _ in header["sections"]]
    if names != list(_SECTIONS):
        raise CheckpointError(f"{path}: unexpected sections {names}")
    sections: dict[str, memoryview] = {}
    position = _PREAMBLE.size + header_len
    for name, length in header["sections"]:
        sections[name] = view[position : position + length]
        position += length
    if position != len(data):
        raise CheckpointError(f"{path}: section lengths do not add up to the body length")

    directory = json.loads(bytes(sections["directory"]))
    group_dirs: list[list[Any]] = directory["groups"]
    metadata: list[list[str]] = directory["metadata"]
    total = sum(size for g in group_dirs for _, size, _ in g[3])
    columns: dict[str, Any] = {}
    for name, code in COLUMNS:
        raw = sections[name]
        if len(raw) != total * _ITEMSIZES[code]:
            raise CheckpointError(
                f"{path}: column {name} holds {len(raw)} bytes, expected {total} slots"
            )
        columns[name] = bytearray(raw) if code == "B" else _column_array(code, raw)

    records = sections["records"]
    record_head = _RECORD_HEAD.unpack_from
    head_size = _RECORD_HEAD.size
    new_table = PartitionTable.__new__
    column_items = tuple(columns.items())
    decode = codec.decode

    state = OffsetState()
    groups = state.groups
    start = 0
    cursor = 0
    for group_id, commits_total, last_record_ts, table_dirs, slots in group_dirs:
        group = GroupState(group_id, commits_total=commits_total, last_record_ts=last_record_ts)
        topics = group.topics
        for topic, size, meta_index in table_dirs:
            end = start + size
            table = new_table(PartitionTable)
            for name, column in column_items:
                setattr(table, name, column[start:end])
            if meta_index < 0:
                table.metadata = None
            else:
                strings = metadata[meta_index]
                if len(strings) != size:
                    raise CheckpointError(
                        f"{path}: group {group_id!r} topic {topic!r}: {len(strings)} metadata "
                        f"strings for {size} slots"
                    )
                table.metadata = list(strings)
            topics[topic] = table
            start = end
        for key_type, sub_key in slots:
            key_len, value_len, partition, offset, timestamp = record_head(records, cursor)
            cursor += head_size
            key = bytes(records[cursor : cursor + key_len])
            cursor += key_len
            value = None
            if value_len >= 0:
                value = bytes(records[cursor : cursor + value_len])
                cursor += value_len
            if cursor > len(records):
                raise CheckpointError(f"{path}: records section truncated")
            try:
                record = decode(key, value, partition, offset, timestamp)
            except DecodeError as error:
                raise CheckpointError(
                    f"{path}: group {group_id!r}: saved record does not decode: {error}"
                ) from None
            if not isinstance(record, Record) or record.key_type != key_type:
                raise CheckpointError(
                    f"{path}: group {group_id!r}: saved record of type {record.key_type} in "
                    f"the slot of type {key_type}"
                )
            group.records[(key_type, sub_key)] = record
        groups[group_id] = group
    if cursor != len(records):
        raise CheckpointError(f"{path}: {len(records) - cursor} unread bytes after the records")

    counters = header["counters"]
    state.counters = ApplyCounters(
        records=int(counters["records"]),
        commits=int(counters["commits"]),
        tombstones=int(counters["tombstones"]),
        groups_deleted=int(counters["groups_deleted"]),
    )
    # absent from checkpoints written before the diagnosis: no history then
    for group_id, history in header.get("histories", {}).items():
        owner = groups.get(group_id)
        if owner is not None:
            owner.history = GroupHistory.from_json(history)
    clock = header["window_clock"]
    state.window_clock = WindowClock(
        window_ms=int(clock["window_ms"]),
        next_ms=int(clock["next_ms"]),
        bucket_ms=int(clock["bucket_ms"]),
    )
    meta = header["meta"]
    return LoadedCheckpoint(
        state=state,
        positions={int(p): int(o) for p, o in header["positions"].items()},
        meta=CheckpointMeta(
            topic=meta["topic"],
            cluster_id=meta["cluster_id"],
            bootstrap_fingerprint=meta["bootstrap_fingerprint"],
            created_ms=int(header["created_ms"]),
        ),
        share_state=header.get("share_state"),
        resume_since_ms=_resume_since(header.get("resume_since_ms")),
    )


def _resume_since(saved: Any) -> dict[int, int] | None:
    # absent from checkpoints written before exactly-once restarts: nothing is skipped then
    if saved is None:
        return None
    return {int(p): int(t) for p, t in saved.items()}
