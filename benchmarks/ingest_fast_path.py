"""The C ingest fast path beside the Python path, and the share of records it takes.

    .venv/bin/python benchmarks/ingest_fast_path.py             # synthetic streams (~1-2 min)
    .venv/bin/python benchmarks/ingest_fast_path.py --quick     # smaller streams, fewer runs
    .venv/bin/python benchmarks/ingest_fast_path.py --broker 4.0 --broker 4.4
                                                                # + commits of real clients

1. Synthetic streams, one per kind of commit a catch-up is made of: OffsetCommitValue v3
   (Kafka up to 4.0) and v4 (4.1+; with the topic id tag from 4.2), with the metadata each
   client sends (Java's consumer and Admin: none; librdkafka: a NUL when the application sets
   any, none otherwise; an application's own text). Each is 1,000 groups x 4 topics x 25
   partitions x 5 rounds (500,000 records; --quick: 200 groups), one commit request per group
   and round as consecutive records on the group's `__consumer_offsets` partition (Kafka's
   partitioner, 50 partitions), as real confluent_kafka.Message objects. `Ingestor.ingest`
   over batches of 50,000 (what the daemon's step asks the source for), fresh state each
   run, best of N, C path (`Ingestor()`) and Python path (`Ingestor(accelerate=False)`)
   alternating. Printed: records/s (wall) and records per CPU second of each path, the
   ratio, and the share of the stream's records the fast path took, per record kind
   (`Ingestor.fast_path_share`). Two more streams are what a compacted log holds: one commit
   per partition of 5,000 groups x 20 single-partition topics, each the first of its table
   (the C loop makes the group and the table).
2. With --broker VERSION (repeatable; a version or a line, as scripts/kafka/broker takes): a
   real broker of that release (started in a temporary directory, stopped at the end), a
   20-partition topic, and commits written by real clients, each kind under its own groups:
   confluent-kafka consumers (librdkafka) that subscribe, consume and `commit()`; the same
   committing explicit offsets with metadata (`TopicPartition(..., metadata=...)`);
   confluent-kafka's `AdminClient.alter_consumer_group_offsets`; Java's
   `kafka-console-consumer.sh` (auto-commit) and `kafka-consumer-groups.sh --reset-offsets`
   (Java Admin). Then all of `__consumer_offsets` is read back with a plain consumer and each
   client kind's records are ingested by an Ingestor of their own: printed per client kind,
   the value versions and metadata seen, and the share of their commits the fast path took.

Nothing here is asserted; tests never time (tests/exporter/state/test_ingest_speedups.py
checks that both paths leave the same state). Wall-clock figures on a shared 2-core machine
are noisy: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import gc
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # tests.real_broker (run as a script, benchmarks/ is path[0])
    sys.path.insert(0, str(REPO))

from offsetwatch.core.topics import OFFSETS_TOPIC  # noqa: E402
from offsetwatch.decoder.codec import Codec  # noqa: E402
from offsetwatch.decoder.layout import ZERO_UUID  # noqa: E402
from offsetwatch.decoder.partitioner import partition_for  # noqa: E402
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record  # noqa: E402
from offsetwatch.exporter.daemon import GC_GEN0_THRESHOLD  # noqa: E402
from offsetwatch.exporter.state.ingest import Ingestor, ingest_accelerator  # noqa: E402
from offsetwatch.exporter.state.offset_state import OffsetState  # noqa: E402
from offsetwatch.exporter.stats import PipelineStats  # noqa: E402

OFFSETS_PARTITIONS = 50
BATCH = 50_000  # what Exporter.step asks the source for
BASE_TS = 1_700_000_000_000
TOPIC_ID = bytes(range(1, 17))  # tag 0 of a v4 commit value (Kafka 4.2+)
CODEC = Codec()

# -- synthetic streams -------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of commit value: its version, metadata and (v4) tagged fields."""

    name: str
    version: int
    metadata: bytes
    tags: tuple[tuple[int, bytes], ...] = ()
    #: what a compacted log holds: one commit per partition (one round), here of
    #: single-partition topics, so each record is the first of its table
    compacted: bool = False

    def packer(self) -> Callable[[int, int], bytes]:
        """(offset, commit ts) -> the value's bytes, packed with struct: encoding 500,000
        values through the generic encoder would take longer than what is measured."""
        meta = self.metadata
        if self.version == 3:
            head = struct.Struct(">hqih")
            tail = struct.Struct(">q")
            return lambda offset, ts: head.pack(3, offset, -1, len(meta)) + meta + tail.pack(ts)
        assert self.version == 4
        head4 = struct.Struct(">hqi")
        mid = _uvarint(len(meta) + 1) + meta
        ts4 = struct.Struct(">q")
        tags = _uvarint(len(self.tags)) + b"".join(
            _uvarint(tag) + _uvarint(len(data)) + data for tag, data in self.tags
        )
        return lambda offset, ts: head4.pack(4, offset, -1) + mid + ts4.pack(ts) + tags

    def check(self) -> None:
        """The packed bytes decode to what was packed and, without an unknown tag, are what
        the codec writes."""
        packed = self.packer()(123, BASE_TS)
        key = CODEC.encode_key(1, OffsetCommitKey("g", "t", 0))
        decoded = CODEC.decode(key, packed)
        assert isinstance(decoded, Record) and decoded.value_version == self.version, self
        value = decoded.value
        assert isinstance(value, OffsetCommitValue), self
        assert (value.offset, value.metadata) == (123, self.metadata.decode()), self
        if all(tag == 0 for tag, _ in self.tags):
            assert CODEC.encode_value(1, self.version, value) == packed, self


KINDS = (
    Kind("v3, no metadata (Java consumer/Admin, Kafka <= 4.0)", 3, b""),
    Kind("v3, NUL metadata (librdkafka, metadata set)", 3, b"\x00"),
    Kind("v3, text metadata (application's own)", 3, b"ckpt=42;host=worker-1\x00"),
    Kind("v4, no tag (Kafka 4.1)", 4, b""),
    Kind("v4, topic id (Kafka 4.2+)", 4, b"", ((0, TOPIC_ID),)),
    Kind("v4, topic id, NUL metadata", 4, b"\x00", ((0, TOPIC_ID),)),
    Kind("v4, topic id + an unknown tag", 4, b"", ((0, TOPIC_ID), (7, b"abc"))),
    Kind("v4, non-ASCII metadata", 4, "r\u00e9sum\u00e9 \U0001f680\x00".encode(), ((0, TOPIC_ID),)),
    Kind("v4, topic id, compacted (1-partition tables)", 4, b"", ((0, TOPIC_ID),), compacted=True),
    Kind("v3, NUL, compacted (1-partition tables)", 3, b"\x00", compacted=True),
)


def stream(kind: Kind, groups: int, rounds: int) -> list[Message]:
    """Commits of `groups` x 4 topics x 25 partitions x `rounds` as confluent_kafka Messages;
    compacted: 5x the groups x 20 single-partition topics, once."""
    pack = kind.packer()
    topics, partitions = (20, 1) if kind.compacted else (4, 25)
    if kind.compacted:
        groups, rounds = groups * 5, 1
    keys = {}
    for g in range(groups):
        for t in range(topics):
            for p in range(partitions):
                keys[g, t, p] = CODEC.encode_key(
                    1, OffsetCommitKey(f"group-{g:05d}", f"topic-{t}", p)
                )
    partition_of = [partition_for(f"group-{g:05d}", OFFSETS_PARTITIONS) for g in range(groups)]
    position = [0] * OFFSETS_PARTITIONS
    messages = []
    for r in range(rounds):
        for g in range(groups):
            partition = partition_of[g]
            ts = BASE_TS + r * 60_000 + g
            for t in range(topics):
                for p in range(partitions):
                    messages.append(
                        Message(
                            topic=OFFSETS_TOPIC,
                            partition=partition,
                            offset=position[partition],
                            key=keys[g, t, p],
                            value=pack(r * 1000 + p, ts),
                            timestamp=(1, ts),
                        )
                    )
                    position[partition] += 1
    return messages


def ingest_once(messages: list[Message], accelerate: bool) -> tuple[float, float, Ingestor]:
    """(wall s, CPU s, the Ingestor) of ingesting `messages` in batches into a fresh state."""
    ingestor = Ingestor(OffsetState(), PipelineStats(), Codec(), accelerate=accelerate)
    batches = [messages[i : i + BATCH] for i in range(0, len(messages), BATCH)]
    gc.collect()
    # the collector as the daemon's main loop sets it (Exporter.run): with the default
    # gen-0 threshold, making 100,000 tables costs more in collections than in the tables
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, thresholds[1], thresholds[2])
    try:
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        for batch in batches:
            ingestor.ingest(batch)
        return time.perf_counter() - wall0, time.thread_time() - cpu0, ingestor
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def share_text(ingestor: Ingestor) -> str:
    parts = []
    for (name, version), (taken, total) in sorted(ingestor.fast_path_share().items()):
        parts.append(f"{name} v{version}: {taken / total:6.1%} of {total:,}")
    return "; ".join(parts)


def synthetic(groups: int, rounds: int, runs: int) -> None:
    print(f"\n== synthetic streams: {groups} groups x 4 topics x 25 partitions x {rounds} rounds")
    header = (
        f"{'kind':<52} {'C rec/s':>11} {'Py rec/s':>10} {'x':>5} "
        f"{'C rec/CPU s':>12} {'Py rec/CPU s':>12}  fast path share"
    )
    print(header)
    for kind in KINDS:
        kind.check()
        messages = stream(kind, groups, rounds)
        best: dict[bool, tuple[float, float]] = {}
        fast_ingestor = None
        for _ in range(runs):
            for accelerate in (True, False):
                wall, cpu, ingestor = ingest_once(messages, accelerate)
                if accelerate not in best or wall < best[accelerate][0]:
                    best[accelerate] = (wall, cpu)
                if accelerate:
                    fast_ingestor = ingestor
                del ingestor
        assert fast_ingestor is not None
        n = len(messages)
        (c_wall, c_cpu), (py_wall, py_cpu) = best[True], best[False]
        print(
            f"{kind.name:<52} {n / c_wall:>11,.0f} {n / py_wall:>10,.0f} "
            f"{py_wall / c_wall:>5.1f} {n / c_cpu:>12,.0f} {n / py_cpu:>12,.0f}  "
            f"{share_text(fast_ingestor)}",
            flush=True,
        )
        del messages, fast_ingestor
        gc.collect()


# -- real clients on a real broker -------------------------------------------------------------

PARTITIONS = 20
GROUPS_PER_CLIENT = 10
ROUNDS = 10


def _key_group(key: bytes | None) -> str | None:
    """The group id of an offset-commit key (type 0/1), else None."""
    if key is None or len(key) < 4 or key[:2] not in (b"\x00\x00", b"\x00\x01"):
        return None
    length = struct.unpack_from(">h", key, 2)[0]
    return key[4 : 4 + length].decode("utf-8", "replace")


def librdkafka_consumers(bootstrap: str, topic: str, prefix: str) -> None:
    """Consumers that subscribe, consume a few records and commit() what they consumed."""
    for g in range(GROUPS_PER_CLIENT):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{prefix}-{g}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        committed = 0
        deadline = time.monotonic() + 60
        while committed < ROUNDS and time.monotonic() < deadline:
            # enough records that most partitions move between two commits
            got = consumer.consume(num_messages=PARTITIONS * 15, timeout=1.0)
            if got:
                consumer.commit(asynchronous=False)
                committed += 1
        consumer.close()


def librdkafka_metadata(bootstrap: str, topic: str, prefix: str) -> None:
    """A consumer of a simple group (assign, no join) committing explicit offsets with metadata
    each round, as an application that keeps a checkpoint beside its offsets does."""
    for g in range(GROUPS_PER_CLIENT):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}-{g}"})
        for r in range(ROUNDS):
            offsets = [
                TopicPartition(topic, p, r + 1, metadata=f"ckpt={r};host=w-{g}")
                for p in range(PARTITIONS)
            ]
            consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()


def admin_commits(bootstrap: str, topic: str, prefix: str) -> None:
    """AdminClient.alter_consumer_group_offsets, round by round."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for r in range(ROUNDS):
        for g in range(GROUPS_PER_CLIENT):
            # confluent-kafka alters one group per request
            offsets = [TopicPartition(topic, p, r + 1) for p in range(PARTITIONS)]
            request = ConsumerGroupTopicPartitions(f"{prefix}-{g}", offsets)
            for future in admin.alter_consumer_group_offsets([request]).values():
                future.result(timeout=60)


def java_clients(tool: Callable[..., str], topic: str, prefix: str, admin_prefix: str) -> None:
    """Java's console consumer (auto-commit, then a commit at close) and Java's Admin
    (kafka-consumer-groups.sh --reset-offsets), a few JVMs each."""
    for g in range(2):
        tool(
            "kafka-console-consumer.sh",
            "--topic",
            topic,
            "--group",
            f"{prefix}-{g}",
            "--from-beginning",
            "--max-messages",
            str(PARTITIONS * 50),
            "--timeout-ms",
            "20000",
            timeout=120,
            check=False,
        )
    for r in range(2):
        tool(
            "kafka-consumer-groups.sh",
            "--reset-offsets",
            "--group",
            f"{admin_prefix}-0",
            "--topic",
            topic,
            "--to-offset",
            str(r + 1),
            "--execute",
            timeout=120,
        )


def read_offsets_topic(bootstrap: str) -> list[Message]:
    """Every record of __consumer_offsets, in partition order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ingest-fast-path-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    metadata = consumer.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC]
    partitions = sorted(metadata.partitions)
    consumer.assign([TopicPartition(OFFSETS_TOPIC, p, 0) for p in partitions])
    at_end: set[int] = set()
    messages: list[Message] = []
    deadline = time.monotonic() + 120
    while len(at_end) < len(partitions) and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is not None:
                at_end.add(message.partition() or 0)  # end of partition (or an error)
            else:
                messages.append(message)
    consumer.close()
    return messages


def by_client(
    messages: list[Message], clients: dict[str, str]
) -> Iterator[tuple[str, list[Message]]]:
    """Each client kind's records (keys naming one of its groups), in their order."""
    for name, prefix in clients.items():
        yield name, [m for m in messages if (_key_group(m.key()) or "").startswith(prefix + "-")]


def _metadata_form(metadata: str) -> str:
    if not metadata:
        return "''"
    if metadata == "\x00":
        return "NUL"
    return "text + NUL" if metadata.endswith("\x00") else "text"


def seen_values(messages: list[Message]) -> str:
    """The value versions and metadata forms ('', NUL, text, text + NUL) of the commits among
    `messages`, with one example of each."""
    seen: dict[tuple[int, str], tuple[int, str]] = {}
    for message in messages:
        key, value = message.key(), message.value()
        if value is None or _key_group(key) is None:
            continue
        record = CODEC.decode(key, value)
        assert isinstance(record, Record) and isinstance(record.value, OffsetCommitValue)
        metadata = record.value.metadata
        form = _metadata_form(metadata)
        if record.value.topic_id != ZERO_UUID:
            form += ", topic id"
        kind = (record.value_version or 0, form)
        count, example = seen.get(kind, (0, metadata))
        seen[kind] = (count + 1, example)
    return ", ".join(
        f"v{v} metadata {form} x{n}" + (f" (e.g. {example!r})" if example else "")
        for (v, form), (n, example) in sorted(seen.items())
    )


def real_broker(version: str) -> None:
    from tests import real_broker as rb

    os.environ["OFFSETWATCH_BROKER_VERSION"] = version
    print(f"\n== real broker, Kafka {version}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ingest-fast-path-") as tmp:
        broker = rb.start_broker(Path(tmp) / "broker")
        try:
            bootstrap = broker.bootstrap
            topic = f"fast-path-{version.replace('.', '-')}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
                future.result(timeout=60)
            producer = Producer({"bootstrap.servers": bootstrap})
            for i in range(PARTITIONS * 200):
                producer.produce(topic, b"x", partition=i % PARTITIONS)
            producer.flush(60)
            del producer, admin  # no client of this broker left to retry after it stops
            clients = {
                "librdkafka consumer, commit()": "rdk",
                "librdkafka, commit(offsets with metadata)": "rdkmeta",
                "confluent-kafka Admin alter offsets": "rdkadmin",
                "Java consumer (console, auto-commit)": "javaconsumer",
                "Java Admin (kafka-consumer-groups --reset-offsets)": "javaadmin",
            }
            librdkafka_consumers(bootstrap, topic, "rdk")
            librdkafka_metadata(bootstrap, topic, "rdkmeta")
            admin_commits(bootstrap, topic, "rdkadmin")
            java_clients(broker.tool, topic, "javaconsumer", "javaadmin")
            messages = read_offsets_topic(bootstrap)
            print(f"{len(messages):,} records in {OFFSETS_TOPIC}")
            for name, records in by_client(messages, clients):
                ingestor = Ingestor(OffsetState(), PipelineStats(), Codec())
                for i in range(0, len(records), BATCH):
                    ingestor.ingest(records[i : i + BATCH])
                commits = sum(1 for m in records if m.value() is not None)
                taken = ingestor.stats.fast_path_records_total
                share = taken / commits if commits else 0.0
                # the first commit of a (group, topic) creates its table: the Python path
                tables = sum(len(group.topics) for group in ingestor.state.groups.values())
                print(
                    f"  {name:<50} fast path {taken:>6,} of {commits:>6,} commits ({share:.1%});"
                    f" {tables} tables created"
                )
                print(f"    {seen_values(records)}")
                print(f"    per kind: {share_text(ingestor)}", flush=True)
        finally:
            rb.stop_broker(Path(tmp) / "broker")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="200 groups, 1 run")
    parser.add_argument("--runs", type=int, default=3, help="best of N (default 3)")
    parser.add_argument(
        "--broker", action="append", default=[], metavar="VERSION", help="a real broker too"
    )
    parser.add_argument("--no-synthetic", action="store_true", help="only the --broker part")
    args = parser.parse_args()
    module, why = ingest_accelerator()
    if module is None:
        raise SystemExit(f"the C ingest path is not in use: {why}")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} CPUs")
    if not args.no_synthetic:
        synthetic(200 if args.quick else 1000, 5, 1 if args.quick else args.runs)
    for version in args.broker:
        real_broker(version)


if __name__ == "__main__":
    main()
