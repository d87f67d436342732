"""Decoder throughput: offsetwatch's `Codec` beside a naive struct-based decoder.

    .venv/bin/python benchmarks/decode.py                 # everything (~2-3 minutes here)
    .venv/bin/python benchmarks/decode.py --quick         # smaller inputs, fewer runs
    .venv/bin/python benchmarks/decode.py --no-segments   # only the in-process decode figures

Figures (one table: figure, records/s, baseline records/s, ratio, target, met?):

* `Codec.decode` (one call per record) and `Codec.decode_many` (batches of 100) on offset
  commits (a realistic repeating-key stream, and every key unique), classic group metadata
  with 100 members, and KIP-848 member records (types 5 and 8);
* the figures of benchmarks/segments.py (`measure()`), the log-segment reader;
* end to end: `offsetwatch decode --format dump-log --input segments` on the real 1M-record
  segment (shared/bench), wall clock in a child process, interpreter start-up included like
  the JVM's in Kafka's 7.8 s `kafka-dump-log` reference, with a CPU split read/decode/render.

How they are taken, the same way for offsetwatch and for the baseline:

* Inputs are built before timing. Keys and values are fresh `bytes` objects sliced out of one
  buffer, as a segment or a consumer hands them over, so no key hash is precomputed.
* `gc.collect(); gc.freeze()` before each timed run moves the input corpus out of the
  collector's way (it is not the decoder's cost); the collector stays enabled while decoding.
* Every decoded record is consumed (the last one is kept and checked, the count is checked).
* Best of N runs; a fresh `Codec` (cold key cache) for every run.
* records/s is per CPU second of this process (single-core throughput, what the targets are
  about); the wall-clock rate is printed beside it, lower when the machine is shared.
* The baseline is the decoder one writes first: a cursor class with one `struct.unpack_from`
  per field, plain classes for the records, no caching. It is written below, in this file.

No figure is asserted anywhere: tests never time anything.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offsetwatch.decoder.codec import Codec, speedups_status
from offsetwatch.decoder.consumer_protocol import (
    ConsumerProtocol,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartitionList,
)
from offsetwatch.decoder.layout import ZERO_UUID, Tags
from offsetwatch.decoder.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    GroupMemberKey,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TopicPartitions,
)

HERE = Path(__file__).resolve().parent
#: the 1M-record segment: $OFFSETWATCH_BENCH_DIR, else ../shared/bench beside the checkout
BENCH_DIR = Path(os.environ.get("OFFSETWATCH_BENCH_DIR") or HERE.parent.parent / "shared" / "bench")
BENCH_SEGMENT = BENCH_DIR / "consumer-offsets-1m.log.zst"
KAFKA_DUMP_LOG_SECONDS = 7.8  # shared/bench/README.md: kafka-dump-log on the 1M segment, wall
SEGMENT_RECORDS = 1_000_000
SEGMENT_NAME = "00000000000000000000.log"
BATCH = 100  # records per batch, as in the real segment

Message = tuple[bytes | None, bytes | None, int, int, int]


# =============================================================================================
# Naive baseline: a cursor with one struct.unpack_from per field, plain classes, no caching.


class NaiveCursor:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def int8(self) -> int:
        value: int = struct.unpack_from(">b", self.data, self.pos)[0]
        self.pos += 1
        return value

    def int16(self) -> int:
        value: int = struct.unpack_from(">h", self.data, self.pos)[0]
        self.pos += 2
        return value

    def int32(self) -> int:
        value: int = struct.unpack_from(">i", self.data, self.pos)[0]
        self.pos += 4
        return value

    def int64(self) -> int:
        value: int = struct.unpack_from(">q", self.data, self.pos)[0]
        self.pos += 8
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def varint(self) -> int:
        raw = self.uvarint()
        return (raw >> 1) ^ -(raw & 1)

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self.raw(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.raw(n)

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n).decode("utf-8")

    def uuid(self) -> str:
        import base64

        return base64.urlsafe_b64encode(self.raw(16)).rstrip(b"=").decode("ascii")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())


class NaiveRecord:
    def __init__(
        self,
        key_type: int,
        key: object,
        version: int | None,
        value: object,
        partition: int,
        offset: int,
        timestamp: int,
    ) -> None:
        self.key_type = key_type
        self.key = key
        self.version = version
        self.value = value
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp


class NaiveOffsetKey:
    def __init__(self, group: str | None, topic: str | None, partition: int) -> None:
        self.group = group
        self.topic = topic
        self.partition = partition


class NaiveMemberKey:
    def __init__(self, group_id: str | None, member_id: str | None) -> None:
        self.group_id = group_id
        self.member_id = member_id


class NaiveGroupKey:
    def __init__(self, group: str | None) -> None:
        self.group = group


class NaiveOffsetValue:
    def __init__(
        self, offset: int, leader_epoch: int, metadata: str | None, commit: int, expire: int
    ) -> None:
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp = commit
        self.expire_timestamp = expire


class NaiveMember:
    def __init__(self, c: NaiveCursor) -> None:
        self.member_id = c.string()
        self.group_instance_id = c.string()
        self.client_id = c.string()
        self.client_host = c.string()
        self.rebalance_timeout = c.int32()
        self.session_timeout = c.int32()
        self.subscription = c.bytes_()
        self.assignment = c.bytes_()


class NaiveGroupMetadata:
    def __init__(self, c: NaiveCursor) -> None:
        self.protocol_type = c.string()
        self.generation = c.int32()
        self.protocol = c.string()
        self.leader = c.string()
        self.current_state_timestamp = c.int64()
        self.members = [NaiveMember(c) for _ in range(c.int32())]


class NaiveMemberMetadata:
    def __init__(self, c: NaiveCursor) -> None:
        self.instance_id = c.compact_string()
        self.rack_id = c.compact_string()
        self.client_id = c.compact_string()
        self.client_host = c.compact_string()
        self.subscribed_topic_names = [c.compact_string() for _ in range(c.uvarint() - 1)]
        self.subscribed_topic_regex = c.compact_string()
        self.rebalance_timeout_ms = c.int32()
        self.server_assignor = c.compact_string()
        c.skip_tags()


class NaiveTopicPartitions:
    def __init__(self, c: NaiveCursor) -> None:
        self.topic_id = c.uuid()
        self.partitions = [c.int32() for _ in range(c.uvarint() - 1)]
        c.skip_tags()


class NaiveCurrentAssignment:
    def __init__(self, c: NaiveCursor) -> None:
        self.member_epoch = c.int32()
        self.previous_member_epoch = c.int32()
        self.state = c.int8()
        self.assigned = [NaiveTopicPartitions(c) for _ in range(c.uvarint() - 1)]
        self.pending = [NaiveTopicPartitions(c) for _ in range(c.uvarint() - 1)]
        c.skip_tags()


def naive_decode(
    key: bytes | None, value: bytes | None, partition: int, offset: int, timestamp: int
) -> NaiveRecord:
    assert key is not None
    kc = NaiveCursor(key)
    key_type = kc.int16()
    key_obj: object
    if key_type in (0, 1):
        key_obj = NaiveOffsetKey(kc.string(), kc.string(), kc.int32())
    elif key_type == 2:
        key_obj = NaiveGroupKey(kc.string())
    elif key_type in (5, 8):
        key_obj = NaiveMemberKey(kc.string(), kc.string())
    else:
        raise ValueError(f"baseline does not know key type {key_type}")
    if value is None:
        return NaiveRecord(key_type, key_obj, None, None, partition, offset, timestamp)
    c = NaiveCursor(value)
    version = c.int16()
    value_obj: object
    if key_type in (0, 1):
        off = c.int64()
        epoch = c.int32() if version >= 3 else -1
        metadata = c.string()
        commit = c.int64()
        expire = c.int64() if version == 1 else -1
        value_obj = NaiveOffsetValue(off, epoch, metadata, commit, expire)
    elif key_type == 2:
        value_obj = NaiveGroupMetadata(c)
    elif key_type == 5:
        value_obj = NaiveMemberMetadata(c)
    else:
        value_obj = NaiveCurrentAssignment(c)
    if c.pos != len(value):
        raise ValueError("trailing bytes")
    return NaiveRecord(key_type, key_obj, version, value_obj, partition, offset, timestamp)


# --- naive segment reading (uncompressed magic-2 batches) and dump-log rendering ---------------


class NaiveRawRecord:
    def __init__(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value


def naive_read_segment(data: bytes) -> Iterator[list[NaiveRawRecord]]:
    import crc32c

    pos = 0
    while pos + 61 <= len(data):
        base_offset = struct.unpack_from(">q", data, pos)[0]
        length = struct.unpack_from(">i", data, pos + 8)[0]
        magic = struct.unpack_from(">b", data, pos + 16)[0]
        crc = struct.unpack_from(">I", data, pos + 17)[0]
        attributes = struct.unpack_from(">h", data, pos + 21)[0]
        base_timestamp = struct.unpack_from(">q", data, pos + 27)[0]
        count = struct.unpack_from(">i", data, pos + 57)[0]
        end = pos + 12 + length
        if magic != 2 or attributes & 7 or end > len(data):
            raise ValueError("baseline reads uncompressed magic-2 batches only")
        if crc32c.crc32c(data[pos + 21 : end]) != crc:
            raise ValueError("crc mismatch")
        c = NaiveCursor(data, pos + 61)
        records = []
        for _ in range(count):
            c.varint()  # record length
            c.int8()  # attributes
            ts_delta = c.varint()
            offset_delta = c.varint()
            klen = c.varint()
            key = None if klen < 0 else c.raw(klen)
            vlen = c.varint()
            value = None if vlen < 0 else c.raw(vlen)
            for _ in range(c.varint()):  # headers
                c.raw(c.varint())
                hlen = c.varint()
                if hlen >= 0:
                    c.raw(hlen)
            records.append(
                NaiveRawRecord(base_offset + offset_delta, base_timestamp + ts_delta, key, value)
            )
        yield records
        pos = end


def naive_dump_log(record: NaiveRecord) -> str:
    key = record.key
    value = record.value
    assert isinstance(key, NaiveOffsetKey) and isinstance(value, NaiveOffsetValue)
    data: dict[str, Any] = {"offset": value.offset}
    if record.version is not None and record.version >= 3:
        data["leaderEpoch"] = value.leader_epoch
    data["metadata"] = value.metadata
    data["commitTimestamp"] = value.commit_timestamp
    if record.version == 1:
        data["expireTimestamp"] = value.expire_timestamp
    line = {
        "key": {
            "type": str(record.key_type),
            "data": {"group": key.group, "topic": key.topic, "partition": key.partition},
        },
        "payload": {"version": str(record.version), "data": data},
    }
    return json.dumps(line, separators=(",", ":"))


# =============================================================================================
# Inputs


@dataclass(slots=True)
class Corpus:
    """Keys and values packed into two buffers; `messages()` slices fresh bytes objects."""

    keys: bytes
    values: bytes
    # (key start, key end, value start, value end or -1 for a tombstone, offset, timestamp)
    spans: list[tuple[int, int, int, int, int, int]]

    @staticmethod
    def pack(records: Iterable[tuple[bytes, bytes | None, int]]) -> Corpus:
        keys = bytearray()
        values = bytearray()
        spans = []
        for offset, (key, value, timestamp) in enumerate(records):
            k0 = len(keys)
            keys += key
            v0 = len(values)
            if value is None:
                v1 = -1
            else:
                values += value
                v1 = len(values)
            spans.append((k0, len(keys), v0, v1, offset, timestamp))
        return Corpus(bytes(keys), bytes(values), spans)

    def __len__(self) -> int:
        return len(self.spans)

    def messages(self) -> list[Message]:
        kb, vb = self.keys, self.values
        return [
            (kb[k0:k1], None if v1 < 0 else vb[v0:v1], 0, offset, ts)
            for k0, k1, v0, v1, offset, ts in self.spans
        ]


def offset_commit_corpus(groups: int, partitions: int, rounds: int, unique: bool) -> Corpus:
    """Commit rounds: every group commits all its partitions, round after round.

    Values are v3 with empty metadata, except 1 % carrying a short metadata string. With
    `unique`, every commit gets a key never seen before (a new group per round).
    """
    codec = Codec()
    out = []
    ts = 1_795_000_000_000
    n = 0
    for r in range(rounds):
        for g in range(groups):
            group = f"svc-{g + (r * groups if unique else 0):05d}-consumer"
            topic = f"orders-{g % 40:02d}"
            for p in range(partitions):
                n += 1
                ts += 3
                metadata = f"checkpoint={n}" if n % 100 == 0 else ""
                rec = Record(
                    1,
                    OffsetCommitKey(group, topic, p),
                    3,
                    OffsetCommitValue(1000 * r + n, 5, metadata, ts, -1, ZERO_UUID),
                )
                key, value = codec.encode(rec)
                out.append((key, value, ts))
    return Corpus.pack(out)


def group_metadata_corpus(groups: int, members: int, rounds: int) -> Corpus:
    codec = Codec()
    protocol = ConsumerProtocol()
    out = []
    ts = 1_795_000_000_000
    for r in range(rounds):
        for g in range(groups):
            group = f"classic-{g:05d}"
            member_objs = []
            for m in range(members):
                member_id = f"consumer-{group}-{m}-0b4adb80-bf62-422f-83e0-{r:04d}{m:08d}"
                subscription = protocol.encode(
                    3,
                    ConsumerProtocolSubscription(
                        ("orders", "payments"),
                        None,
                        (TopicPartitionList("orders", (2 * m, 2 * m + 1)),),
                        r,
                        "rack-a",
                    ),
                )
                assignment = protocol.encode(
                    3,
                    ConsumerProtocolAssignment(
                        (
                            TopicPartitionList("orders", (2 * m, 2 * m + 1)),
                            TopicPartitionList("payments", (2 * m, 2 * m + 1)),
                        ),
                        None,
                    ),
                )
                member_objs.append(
                    MemberMetadata(
                        member_id,
                        None,
                        f"consumer-{m}",
                        f"/10.0.{m // 250}.{m % 250}",
                        300_000,
                        45_000,
                        subscription,
                        assignment,
                    )
                )
            ts += 11
            value = GroupMetadataValue(
                "consumer", r + 1, "range", member_objs[0].member_id, ts, tuple(member_objs)
            )
            key, raw = codec.encode(Record(2, GroupMetadataKey(group), 3, value))
            out.append((key, raw, ts))
    return Corpus.pack(out)


def member_metadata_corpus(groups: int, members: int, rounds: int) -> Corpus:
    """Type 5 value v0, laid out the way Kafka 4.0 writes it (explicit null tag 0)."""
    codec = Codec()
    out = []
    ts = 1_795_000_000_000
    for r in range(rounds):
        for g in range(groups):
            for m in range(members):
                ts += 1
                value = ConsumerGroupMemberMetadataValue(
                    None,
                    None,
                    f"consumer-{m}",
                    f"/10.1.{m // 250}.{m % 250}",
                    ("orders", "payments") if m % 2 else ("orders",),
                    "",
                    300_000 + r,
                    None,
                    None,
                    Tags(present=(0,)),
                )
                key = GroupMemberKey(f"kip848-{g:05d}", f"m{m:03d}-hQHZavCtQjK9YpuhZYHosQ")
                k, v = codec.encode(Record(5, key, 0, value))
                out.append((k, v, ts))
    return Corpus.pack(out)


def current_assignment_corpus(groups: int, members: int, rounds: int) -> Corpus:
    """Type 8 value v0: one or two topics assigned, nothing pending."""
    codec = Codec()
    out = []
    ts = 1_795_000_000_000
    topics = ["hQHZavCtQjK9YpuhZYHosQ", "OVoGuyKOR5mBV7OJqIl0_Q"]
    for r in range(rounds):
        for g in range(groups):
            for m in range(members):
                ts += 1
                assigned = tuple(
                    TopicPartitions(topics[t], (2 * m, 2 * m + 1), None) for t in range(1 + m % 2)
                )
                value = ConsumerGroupCurrentMemberAssignmentValue(r + 2, r + 1, 0, assigned, ())
                key = GroupMemberKey(f"kip848-{g:05d}", f"m{m:03d}-hQHZavCtQjK9YpuhZYHosQ")
                k, v = codec.encode(Record(8, key, 0, value))
                out.append((k, v, ts))
    return Corpus.pack(out)


# =============================================================================================
# Timing


Rates = tuple[float, float]  # records per CPU second, records per wall second


def _best(runs: int, once: Callable[[], Rates]) -> Rates:
    """The best CPU rate and the best wall rate over `runs` runs."""
    results = [once() for _ in range(runs)]
    return max(r[0] for r in results), max(r[1] for r in results)


def _timed(corpus: Corpus, run: Callable[[Any], object], chunked: bool) -> Rates:
    """Records/s of one run of `run` over fresh messages (chunks of BATCH if `chunked`)."""
    messages = corpus.messages()
    data: Any = messages
    if chunked:
        data = [messages[i : i + BATCH] for i in range(0, len(messages), BATCH)]
    gc.collect()
    gc.freeze()
    wall, cpu = time.perf_counter(), time.process_time()
    last = run(data)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    gc.unfreeze()
    if last is None:
        raise AssertionError("nothing decoded")
    return len(corpus) / cpu, len(corpus) / wall


def codec_decode(corpus: Corpus, runs: int) -> Rates:
    def once() -> Rates:
        decode = Codec().decode

        def run(messages: list[Message]) -> object:
            last = None
            for key, value, partition, offset, timestamp in messages:
                last = decode(key, value, partition, offset, timestamp)
            return last

        return _timed(corpus, run, chunked=False)

    return _best(runs, once)


def codec_decode_many(corpus: Corpus, runs: int) -> Rates:
    def once() -> Rates:
        decode_many = Codec().decode_many

        def run(chunks: list[list[Message]]) -> object:
            last: object = None
            count = 0
            for chunk in chunks:
                out = decode_many(chunk)
                count += len(out)
                last = out[-1]
            assert count == len(corpus)
            return last

        return _timed(corpus, run, chunked=True)

    return _best(runs, once)


def baseline_decode(corpus: Corpus, runs: int) -> Rates:
    def run(messages: list[Message]) -> object:
        last = None
        for key, value, partition, offset, timestamp in messages:
            last = naive_decode(key, value, partition, offset, timestamp)
        return last

    return _best(runs, lambda: _timed(corpus, run, chunked=False))


# =============================================================================================
# Segments (decoder/segments.py, benchmarks/segments.py) and the end-to-end figure


def _load_segments_benchmark() -> Any:
    """benchmarks/segments.py as a module (None when it is not there)."""
    path = HERE / "segments.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("_segments_benchmark", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def segment_rows(measured: list[tuple[str, float, str]]) -> list[Row]:
    """benchmarks/segments.py's rows as figures: CPU records/s (wall in the note), with its
    naive reader's rate as the baseline of the rows on the same real segment."""
    rows: list[Row] = []
    wall = {name: value for name, value, unit in measured if unit == "records/s (wall)"}
    naive = next(
        (v for n, v, u in measured if "naive" in n and u == "records/s (CPU)" and "1M" in n),
        None,
    )
    for name, value, unit in measured:
        if unit in ("x", "MiB", "records/s (wall)") or "naive" in name:
            continue  # speed-ups are the ratio column; its RSS would be this process's
        if unit != "records/s (CPU)":
            rows.append(Row(f"segments: {name}", None, None, "-", None, f"{value:,.0f} {unit}"))
            continue
        compressed = any(codec in name for codec in ("gzip", "snappy", "lz4", "zstd"))
        # the 1M/s target is for segments as Kafka writes them under load (batches of
        # many records); 1-record batches measure the per-batch overhead, for information
        untargeted = compressed or "1-record" in name
        rows.append(
            Row(
                f"segments: {name}",
                value,
                naive if "1M" in name else None,
                "-" if untargeted else ">= 1,000,000",
                None if untargeted else value >= 1_000_000,
                f"wall: {wall.get(name, float('nan')):,.0f}/s",
            )
        )
    return rows


def _segment_bytes() -> bytes:
    import cramjam

    return bytes(cramjam.zstd.decompress(BENCH_SEGMENT.read_bytes()))


def naive_end_to_end(path: str) -> None:
    """The baseline of the end-to-end figure: naive reader, decoder and rendering."""
    data = Path(path).read_bytes()
    with open(os.devnull, "w") as sink:
        for records in naive_read_segment(data):
            lines = [
                naive_dump_log(naive_decode(r.key, r.value, 0, r.offset, r.timestamp))
                for r in records
            ]
            sink.write("\n".join(lines) + "\n")


def end_to_end(segment_dir: str, naive: bool) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and max RSS (KiB) of a child process turning the segment into
    dump-log JSON lines (to /dev/null): `offsetwatch decode --format dump-log --input segments
    DIR`, or this file's naive decoder. Interpreter start-up and imports included, like the
    JVM's in Kafka's figure."""
    if naive:
        log = os.path.join(segment_dir, SEGMENT_NAME)
        cmd = [sys.executable, __file__, "--naive-end-to-end", log]
    else:
        cmd = [sys.executable, "-m", "offsetwatch.cli", "decode", "--format", "dump-log"]
        cmd += ["--no-progress", "--input", "segments", segment_dir]
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen(cmd, stdout=sink)
        _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed with status {status}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def end_to_end_breakdown(log: str) -> str:
    """Where the end-to-end CPU time goes: three streaming passes over the segment (read;
    read + decode; read + decode + render), nothing kept, like the CLI."""
    from offsetwatch.decoder.canonical import dumps
    from offsetwatch.decoder.kafka_json import KafkaJson
    from offsetwatch.decoder.segments import read_segment

    kafka = KafkaJson()
    render: Callable[[Any], str]
    if hasattr(kafka, "dump_log_text"):
        render, how = kafka.dump_log_text, "KafkaJson.dump_log_text"
    else:
        dump_log = kafka.dump_log
        render, how = (lambda record: dumps(dump_log(record))), "dumps(KafkaJson.dump_log())"

    def read() -> object:
        last = None
        for batch in read_segment(log):
            for r in batch.records:
                last = r
        return last

    def decode() -> object:
        decode = Codec().decode
        last = None
        for batch in read_segment(log):
            for r in batch.records:
                last = decode(r.key, r.value, 0, r.offset, r.timestamp)
        return last

    def decode_render() -> object:
        decode = Codec().decode
        last = None
        for batch in read_segment(log):
            for r in batch.records:
                last = render(decode(r.key, r.value, 0, r.offset, r.timestamp))
        return last

    seconds = []
    for run in (read, decode, decode_render):
        gc.collect()
        start = time.process_time()
        assert run() is not None
        seconds.append(time.process_time() - start)
    t_read, t_decode, t_render = seconds
    return (
        f"CPU split (in-process passes): read {t_read:.2f} s, decode {t_decode - t_read:.2f} s, "
        f"render ({how}) {t_render - t_decode:.2f} s"
    )


# =============================================================================================
# Report


@dataclass(slots=True)
class Row:
    figure: str
    rate: float | None
    baseline: float | None
    target: str
    met: bool | None
    note: str = ""


def _fmt_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}"


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    first, *rest = zip(values, widths, strict=True)
    return "  ".join([first[0].ljust(first[1]), *(v.rjust(w) for v, w in rest)])


def print_table(rows: Sequence[Row]) -> None:
    header = ("figure", "records/s", "baseline/s", "ratio", "target", "met?")
    cells = []
    for row in rows:
        ratio = "-" if not (row.rate and row.baseline) else f"{row.rate / row.baseline:.2f}x"
        met = "-" if row.met is None else ("yes" if row.met else "NO")
        cells.append(
            (row.figure, _fmt_rate(row.rate), _fmt_rate(row.baseline), ratio, row.target, met)
        )
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    title = _line(header, widths)
    print(title)
    print("-" * len(title))
    for row, values in zip(rows, cells, strict=True):
        print(_line(values, widths))
        if row.note:
            print(f"    {row.note}")


def decode_figures(rows: list[Row], runs: int, base_runs: int, scale: int) -> None:
    def figure(name: str, corpus: Corpus, target: float, note: str = "") -> None:
        _progress(f"{name} ({len(corpus):,} records)")
        base, base_wall = baseline_decode(corpus, base_runs)
        for api, measure in (("decode()", codec_decode), ("decode_many()", codec_decode_many)):
            rate, wall = measure(corpus, runs)
            wall_note = f"wall: {wall:,.0f}/s, baseline {base_wall:,.0f}/s"
            rows.append(
                Row(
                    f"{name}: {api}",
                    rate,
                    base,
                    f">= {target:,.0f}",
                    rate >= target,
                    f"{wall_note}; {note}" if note else wall_note,
                )
            )
            note = ""

    figure(
        "offset commits, realistic stream",
        offset_commit_corpus(1000 // scale, 100, 10, unique=False),
        1_500_000,
        note=(
            f"{1000 // scale} groups x 100 partitions, 10 commit rounds, v3 values (1 % with "
            "metadata), cold key cache: 10 % of the records decode their key"
        ),
    )
    figure(
        "offset commits, every key unique",
        offset_commit_corpus(3000 // scale, 100, 1, unique=True),
        400_000,
        note="the key cache (200,000 keys) fills up and is cleared once",
    )
    figure(
        "group metadata v3, 100 members",
        group_metadata_corpus(200 // scale, 100, 10),
        20_000,
        note="classic GroupMetadataValue v3, protocol type consumer, ~22 KB per value",
    )
    figure(
        "KIP-848 member metadata (type 5 v0)",
        member_metadata_corpus(1000 // scale, 50, 4),
        200_000,
        note="as Kafka 4.0 writes them: with an explicit null classicMemberMetadata tag",
    )
    figure(
        "KIP-848 current assignment (type 8 v0)",
        current_assignment_corpus(1000 // scale, 50, 4),
        200_000,
    )


def end_to_end_figure(runs: int) -> Row:
    """The 1M segment to dump-log JSON lines: offsetwatch's CLI (best wall of `runs`), the
    naive baseline (one run), Kafka's reference."""
    with tempfile.TemporaryDirectory() as tmp:
        segment_dir = os.path.join(tmp, "__consumer_offsets-0")
        os.mkdir(segment_dir)
        log = os.path.join(segment_dir, SEGMENT_NAME)
        Path(log).write_bytes(_segment_bytes())
        _progress(f"end to end: offsetwatch decode --format dump-log (child process) x {runs}")
        seconds, cpu, rss = min(end_to_end(segment_dir, naive=False) for _ in range(runs))
        _progress("end to end: naive baseline (child process)")
        base_seconds, _, _ = end_to_end(segment_dir, naive=True)
        _progress("end to end: CPU split")
        split = end_to_end_breakdown(log)
    goal = KAFKA_DUMP_LOG_SECONDS / 2
    return Row(
        "end to end (wall clock): 1M segment -> dump-log JSON lines",
        SEGMENT_RECORDS / seconds,
        SEGMENT_RECORDS / base_seconds,
        f"< {goal:.1f} s wall",
        seconds < goal,
        f"offsetwatch decode --format dump-log --input segments: {seconds:.2f} s wall "
        f"({cpu:.2f} s CPU, max RSS {rss / 1024:.0f} MiB), {KAFKA_DUMP_LOG_SECONDS / seconds:.2f}x "
        f"kafka-dump-log's {KAFKA_DUMP_LOG_SECONDS} s; naive baseline {base_seconds:.2f} s\n"
        f"    {split}",
    )


def _progress(text: str) -> None:
    print(f"  {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer runs")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (best is kept)")
    parser.add_argument(
        "--no-segments", action="store_true", help="skip the segment and end-to-end figures"
    )
    parser.add_argument("--naive-end-to-end", metavar="LOG", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.naive_end_to_end:
        naive_end_to_end(args.naive_end_to_end)
        return
    runs = args.runs or (2 if args.quick else 3)
    base_runs = 1 if args.quick else 2
    scale = 10 if args.quick else 1
    load_before = os.getloadavg()[0]
    decode_rows: list[Row] = []
    segment_rows_: list[Row] = []
    end_rows: list[Row] = []
    print("measuring (inputs are built before each timed run) ...", file=sys.stderr)
    with_segments = not args.no_segments
    if with_segments and not BENCH_SEGMENT.exists():
        end_rows.append(Row("segment figures", None, None, "-", None, f"missing {BENCH_SEGMENT}"))
        with_segments = False
    if with_segments:
        # first, while this process is small: a child's max RSS counts its parent's pages
        end_rows.append(end_to_end_figure(runs))
    decode_figures(decode_rows, runs, base_runs, scale)
    if with_segments:
        segments_bench = _load_segments_benchmark()
        if segments_bench is None or not hasattr(segments_bench, "measure"):
            segment_rows_.append(
                Row("segment figures", None, None, "-", None, "benchmarks/segments.py absent")
            )
        else:
            _progress("benchmarks/segments.py measure()")
            segment_rows_ += segment_rows(segments_bench.measure())

    rows = decode_rows + segment_rows_ + end_rows
    print()
    print(
        "records/s: records per CPU second of this process (one core), the wall-clock rate in "
        "each note;\nend to end: records per wall second of the child process, like Kafka's "
        "reference.\nbaseline: the naive struct.unpack_from decoder of this file (segments: "
        "benchmarks/segments.py's naive reader). Best of "
        f"{runs} runs (baseline {base_runs}).\n"
    )
    print_table(rows)
    active, why = speedups_status()
    print(
        "\nC accelerator (offsetwatch.decoder._speedups): "
        + ("active" if active else f"NOT active, pure-Python path measured ({why})")
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    met = sum(1 for r in rows if r.met)
    total = sum(1 for r in rows if r.met is not None)
    print(
        f"\npeak RSS of this process: {peak / 1024:.0f} MiB. Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, load average {load_before:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at the end. Targets met: {met} of {total}."
    )


if __name__ == "__main__":
    main()
