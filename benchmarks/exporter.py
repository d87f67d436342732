"""Exporter figures in one run: ingest rate, end-to-end rate, memory, /metrics scrape, catch-up.

    .venv/bin/python benchmarks/exporter.py            # full run (~3 minutes on a 2-core box)
    .venv/bin/python benchmarks/exporter.py --quick    # smaller inputs, fewer runs

The workload is a realistic commit stream: 1,000 groups, each committing 4 topics x 25
partitions (100,000 distinct (group, topic, partition) keys, repeating every round), one
commit request per group and round written as consecutive records to the group's own
`__consumer_offsets` partition (Kafka's partitioner, 50 partitions), plus one classic
GroupMetadata record per group (a rebalance) at the start. Keys and values are
`RecordFactory.commit` / `classic_group` bytes; the commit values of every round are packed
with `struct` in the same layout (checked byte for byte against `RecordFactory`), since
encoding 2M values through the generic encoder would take longer than everything measured.

Figures (printed as a table at the end; nothing here is asserted anywhere, tests never time):

* ingest, pre-fetched: `Ingestor.ingest` (decode + apply + counting) over the confluent-kafka
  `Message` objects a plain consumer fetched from the mock, best of N, fresh state each run;
* end to end on the mock: `OffsetsTopicSource.poll_batch` + `Ingestor.ingest` until every
  partition reached its end, against a bare `confluent_kafka.Consumer` with the same
  configuration that only consumes (same topic, same run, best of N each, alternating);
* memory: a child process ingests commits for 1,000,000 distinct partitions (10,000 groups x
  4 topics x 25 partitions) and reports its RSS before and after (messages are generated in
  batches and dropped, so the delta is the exporter's state, key cache included), then the
  time to save that state as a checkpoint and to load it back;
* /metrics: ~100,000 series (16,500 partitions with sampled log ends, so lag, lag seconds
  and status exist) served by `ExporterHttpServer`, fetched over real HTTP: the first scrape
  after a new snapshot (renders it) and repeated scrapes (cached), plus the snapshot build,
  beside prometheus_client's `generate_latest` of the same collector (the naive path);
* catch-up: the whole daemon (`ExporterService` with the default configuration: source,
  ingest, state, snapshots every 5 s, log-end sampler every 10 s, HTTP server) from
  construction until it reports ready, on the 2M records, beside the bare consume time of
  the same records. Ready also waits for a sampler round that covered the tracked
  partitions, so with the 10 s sampling interval it is never much below 10 s.

The mock cluster (librdkafka's, in this process) serves fetches at ~100-250k records/s and
keeps ~150k records per partition, so the topic is spread over 50 partitions (<= 150k each).
Wall-clock figures on a shared 2-core machine are noisy: best of N is reported, and CPU
seconds are printed beside them (the ingest rate also as CPU time of the ingesting thread).
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition
from prometheus_client import CollectorRegistry, generate_latest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # tests.kafka_fixtures (run as a script, benchmarks/ is path[0])
    sys.path.insert(0, str(REPO))

from offsetwatch.core.topics import OFFSETS_TOPIC  # noqa: E402
from offsetwatch.decoder.codec import Codec  # noqa: E402
from offsetwatch.decoder.partitioner import partition_for  # noqa: E402
from offsetwatch.exporter.config import ExporterConfig  # noqa: E402
from offsetwatch.exporter.judge.snapshot import Snapshot, SnapshotBuilder  # noqa: E402
from offsetwatch.exporter.serve.http_server import ExporterHttpServer  # noqa: E402
from offsetwatch.exporter.serve.metrics import SnapshotCollector  # noqa: E402
from offsetwatch.exporter.service import ExporterService  # noqa: E402
from offsetwatch.exporter.sinks.checkpoint import (  # noqa: E402
    CheckpointMeta,
    load_checkpoint,
    save_checkpoint,
)
from offsetwatch.exporter.sources.kafka_source import OffsetsTopicSource, consumer_config  # noqa: E402
from offsetwatch.exporter.state.ingest import Ingestor  # noqa: E402
from offsetwatch.exporter.state.lag import LogEndHistory  # noqa: E402
from offsetwatch.exporter.state.offset_state import OffsetState  # noqa: E402
from offsetwatch.exporter.stats import PipelineStats  # noqa: E402
from offsetwatch.mock_cluster import MockCluster  # noqa: E402
from offsetwatch.record_factory import Member, RecordFactory  # noqa: E402
from tests.kafka_fixtures import produce_raw  # noqa: E402

OFFSETS_PARTITIONS = 50
MOCK_PARTITION_LIMIT = 150_000
BATCH = 50_000  # what Exporter.step asks the source for
BASE_TS = 1_700_000_000_000
ROUND_MS = 60_000

# -- the commit stream ------------------------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_COMMIT_V3 = struct.Struct(">hqihq")  # version, offset, epoch, metadata length 0, commit ts


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey bytes (key type 1), as RecordFactory.commit encodes them."""
    return _I16.pack(1) + _string(group) + _string(topic) + _I32.pack(partition)


def commit_value(offset: int, commit_ts: int, leader_epoch: int = 5) -> bytes:
    """OffsetCommitValue v3 bytes with empty metadata, as RecordFactory.commit encodes them."""
    return _COMMIT_V3.pack(3, offset, leader_epoch, 0, commit_ts)


def _check_encoding() -> None:
    factory = RecordFactory()
    for group, topic, partition, offset, ts in (("g", "t", 0, 0, 0), ("grp-é", "x" * 40, 9, 7, 5)):
        key, value = factory.commit(group, topic, partition, offset, ts, leader_epoch=5)
        assert key == commit_key(group, topic, partition), "key layout drifted"
        assert value == commit_value(offset, ts), "value layout drifted"


@dataclass(frozen=True)
class Workload:
    groups: int = 1_000
    topics_per_group: int = 4
    partitions_per_topic: int = 25
    offsets_partitions: int = OFFSETS_PARTITIONS

    @property
    def keys_per_group(self) -> int:
        return self.topics_per_group * self.partitions_per_topic

    @property
    def tracked(self) -> int:
        return self.groups * self.keys_per_group

    def group(self, g: int) -> str:
        return f"group-{g:06d}"

    def topic(self, g: int, t: int) -> str:
        # groups share topics (200 distinct topics), as consumers of one topic do
        return f"topic-{g % 50:02d}-{t}"

    def topics(self) -> dict[str, int]:
        return {
            self.topic(g, t): self.partitions_per_topic
            for g in range(min(self.groups, 50))
            for t in range(self.topics_per_group)
        }

    def records(self, total: int | None = None, rounds: int | None = None) -> Iterator[Raw]:
        """(offsets partition, key, value): GroupMetadata per group, then commit rounds.

        Stops after `total` records or `rounds` commit rounds.
        """
        factory = RecordFactory()
        parts = [partition_for(self.group(g), self.offsets_partitions) for g in range(self.groups)]
        keys = [
            [
                commit_key(self.group(g), self.topic(g, t), p)
                for t in range(self.topics_per_group)
                for p in range(self.partitions_per_topic)
            ]
            for g in range(self.groups)
        ]
        n = 0
        for g in range(self.groups):
            key, value = factory.classic_group(
                self.group(g), 1, self._members(g), BASE_TS - ROUND_MS
            )
            yield parts[g], key, value
            n += 1
            if total is not None and n >= total:
                return
        rnd = 0
        while rounds is None or rnd < rounds:
            for g in range(self.groups):
                part = parts[g]
                ts = BASE_TS + rnd * ROUND_MS + g
                for i, key in enumerate(keys[g]):
                    # offsets move every round; partition i of topic t consumed at its own pace
                    yield part, key, commit_value(rnd * 1_000 + i * 7, ts)
                    n += 1
                    if total is not None and n >= total:
                        return
            rnd += 1

    def _members(self, g: int) -> list[Member]:
        half = self.partitions_per_topic // 2
        members = []
        for m, span in enumerate((range(half), range(half, self.partitions_per_topic))):
            assignment = tuple(
                (self.topic(g, t), tuple(span)) for t in range(self.topics_per_group)
            )
            members.append(
                Member(f"consumer-{m}-{g}", f"app-{g}", f"/10.0.{g % 250}.{m + 1}", assignment)
            )
        return members


Raw = tuple[int, bytes, bytes | None]


class FakeMessage:
    """What a fetched message offers (key/value/partition/offset/timestamp), for the child."""

    __slots__ = ("_key", "_offset", "_partition", "_timestamp", "_value")

    def __init__(self, partition: int, offset: int, ts: int, key: bytes, value: bytes | None):
        self._partition = partition
        self._offset = offset
        self._timestamp = (1, ts)
        self._key = key
        self._value = value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def fake_batches(records: Iterator[Raw], size: int = BATCH) -> Iterator[list[FakeMessage]]:
    """The records as fetched message batches (offsets counted per partition)."""
    positions: dict[int, int] = {}
    batch: list[FakeMessage] = []
    for partition, key, value in records:
        offset = positions.get(partition, 0)
        positions[partition] = offset + 1
        batch.append(FakeMessage(partition, offset, BASE_TS + offset, key, value))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# -- measurements -----------------------------------------------------------------------------


def _raw_consumer_config(bootstrap: str) -> dict[str, object]:
    """The exporter source's librdkafka configuration, for a bare consumer."""
    config = consumer_config({"bootstrap.servers": bootstrap, "log_level": 3})
    config.pop("statistics.interval.ms", None)  # no stats callback on the bare consumer
    return config


def _cpu_s() -> float:
    """CPU seconds of this process so far, every thread (librdkafka's and the mock's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    records: int


def raw_consume(
    bootstrap: str, partitions: int, keep: bool = False
) -> tuple[Run, list[list[Message]]]:
    """Bare confluent-kafka consume of the whole topic (and the batches if keep)."""
    started, cpu = time.perf_counter(), _cpu_s()
    consumer = Consumer(_raw_consumer_config(bootstrap))
    consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    eof: set[int] = set()
    count = 0
    batches: list[list[Message]] = []
    while len(eof) < partitions:
        batch = []
        for message in consumer.consume(BATCH, 0.2):
            err = message.error()
            if err is None:
                batch.append(message)
            elif err.code() == KafkaError._PARTITION_EOF:
                eof.add(message.partition() or 0)
        count += len(batch)
        if keep and batch:
            batches.append(batch)
    run = Run(time.perf_counter() - started, _cpu_s() - cpu, count)
    consumer.close()
    return run, batches


def pipeline_consume(bootstrap: str) -> Run:
    """The exporter's source + ingest until every partition was read to its end."""
    started, cpu = time.perf_counter(), _cpu_s()
    source = OffsetsTopicSource({"bootstrap.servers": bootstrap, "log_level": 3})
    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), Codec())
    source.start()
    count = 0
    while not source.caught_up():
        batch = source.poll_batch(BATCH, 0.2)
        if batch.messages:
            count += ingestor.ingest(batch.messages)
    run = Run(time.perf_counter() - started, _cpu_s() - cpu, count)
    source.close()
    return run


def ingest_prefetched(batches: list[list[Message]]) -> tuple[float, float, OffsetState]:
    """Ingest already-fetched messages into a fresh state: wall seconds, CPU seconds, state."""
    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), Codec())
    ingest = ingestor.ingest
    started, cpu = time.perf_counter(), time.thread_time()
    for batch in batches:
        ingest(batch)
    return time.perf_counter() - started, time.thread_time() - cpu, state


def catch_up(bootstrap: str) -> dict[str, float]:
    """The whole daemon from construction until ready; seconds to caught_up and ready."""
    started, cpu = time.perf_counter(), _cpu_s()
    config = ExporterConfig(
        bootstrap_servers=bootstrap,
        kafka_properties={"log_level": "3"},
        http_host="127.0.0.1",
        http_port=0,
        log_level="WARNING",
    )
    service = ExporterService(config)
    service.start()
    exporter = service.exporter
    assert exporter.source is not None
    caught_up = None
    snapshot_s = 0.0
    try:
        while not exporter.stats.ready:
            exporter.step()
            snapshot_s = max(snapshot_s, exporter.stats.snapshot_duration_s)
            if caught_up is None and exporter.source.caught_up():
                caught_up = time.perf_counter() - started
        ready = time.perf_counter() - started
        cpu = _cpu_s() - cpu
        records = exporter.source.messages_total
        tracked = exporter.store.offsets.tracked_count()
    finally:
        service.shutdown()
    return {
        "caught_up_s": caught_up if caught_up is not None else ready,
        "ready_s": ready,
        "cpu_s": cpu,
        "records": records,
        "tracked": tracked,
        "max_snapshot_s": snapshot_s,
    }


def _rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def memory_child(groups: int) -> None:
    """Child process: ingest one commit per partition of `groups` groups; print RSS as JSON."""
    workload = Workload(groups=groups)
    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), Codec())
    gc.collect()
    before = _rss_bytes()
    for batch in fake_batches(workload.records(rounds=1)):
        ingestor.ingest(batch)
    del batch
    gc.collect()
    after = _rss_bytes()
    # the checkpoint of that state (save: every 30 s and at shutdown; load: at start)
    meta = CheckpointMeta.for_cluster(OFFSETS_TOPIC, "bench", "kafka-1:9092")
    with tempfile.TemporaryDirectory(prefix="offsetwatch-bench-") as scratch:
        path = Path(scratch) / "state.ckpt"
        started = time.perf_counter()
        save_checkpoint(path, state, {0: 1}, meta=meta)
        save_s = time.perf_counter() - started
        size = path.stat().st_size
        started = time.perf_counter()
        loaded = load_checkpoint(path, expect=meta)
        load_s = time.perf_counter() - started
    assert loaded.state.tracked_count() == state.tracked_count()
    print(
        json.dumps(
            {
                "before": before,
                "after": after,
                "tracked": state.tracked_count(),
                "checkpoint_save_s": save_s,
                "checkpoint_load_s": load_s,
                "checkpoint_bytes": size,
            }
        )
    )


def memory(groups: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(groups)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def _scrape(port: int, gzip: bool = False) -> tuple[float, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    started = time.perf_counter()
    connection.request("GET", "/metrics", headers=headers)
    response = connection.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - started
    connection.close()
    assert response.status == 200, response.status
    return elapsed, body


def scrape(groups: int, repeats: int) -> dict[str, float]:
    """State of `groups` groups with sampled log ends, snapshot, then real HTTP scrapes."""
    workload = Workload(groups=groups)
    state = OffsetState()
    stats = PipelineStats()
    ingestor = Ingestor(state, stats, Codec())
    for batch in fake_batches(workload.records(rounds=3)):
        ingestor.ingest(batch)
    now = BASE_TS + 3 * ROUND_MS
    histories: dict[tuple[str, int], LogEndHistory] = {}
    for topic, partition in state.tracked_partitions():
        history = histories[(topic, partition)] = LogEndHistory()
        for i, t in enumerate(range(now - 2 * ROUND_MS, now + 1, ROUND_MS // 2)):
            history.record(t, 2_000 + 300 * i + partition)
    stats.mark_ready(now)
    builder = SnapshotBuilder()

    def build(at: int) -> tuple[float, Snapshot]:
        started = time.perf_counter()
        snapshot = builder.build(state, histories, at, ready=True)
        return time.perf_counter() - started, snapshot

    build_s, current = build(now)
    collector = SnapshotCollector(lambda: (current, stats), clock_ms=lambda: now)
    server = ExporterHttpServer(collector, host="127.0.0.1", port=0)
    server.start()
    try:
        first_s, body = _scrape(server.port)
        series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        repeated_s = min(_scrape(server.port)[0] for _ in range(repeats))
        # a new snapshot object: the next scrape renders it again
        build2_s, current = build(now + 5_000)
        first2_s, _ = _scrape(server.port)
        repeated2_s = min(_scrape(server.port)[0] for _ in range(repeats))
        _, current = build(now + 10_000)
        gzip_first_s, gz = _scrape(server.port, gzip=True)
        gzip_repeated_s = min(_scrape(server.port, gzip=True)[0] for _ in range(repeats))
    finally:
        server.stop()
    # the naive baseline: prometheus_client's own exposition of the same collector
    registry = CollectorRegistry()
    registry.register(collector)
    started = time.perf_counter()
    generate_latest(registry)
    generate_latest_s = time.perf_counter() - started
    return {
        "partitions": state.tracked_count(),
        "series": series,
        "bytes": len(body),
        "gzip_bytes": len(gz),
        "build_s": min(build_s, build2_s),
        "build_first_s": build_s,
        "first_s": max(first_s, first2_s),
        "repeated_s": max(repeated_s, repeated2_s),
        "gzip_first_s": gzip_first_s,
        "gzip_repeated_s": gzip_repeated_s,
        "generate_latest_s": generate_latest_s,
    }


def snapshot_build(state: OffsetState) -> float:
    """Build time of a snapshot of a whole state (no log ends sampled)."""
    started = time.perf_counter()
    SnapshotBuilder().build(state, {}, BASE_TS, ready=True)
    return time.perf_counter() - started


# -- report -----------------------------------------------------------------------------------


@dataclass
class Table:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)

    def add(self, figure: str, measured: str, target: str = "", met: bool | None = None) -> None:
        verdict = "" if met is None else ("yes" if met else "NO")
        self.rows.append((figure, measured, target, verdict))

    def print(self) -> None:
        header = ("figure", "measured", "target", "met?")
        widths = [max(len(r[i]) for r in [header, *self.rows]) for i in range(4)]
        line = "  ".join("-" * w for w in widths)
        print(line)
        for row in [header, *self.rows]:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
            if row is header:
                print(line)
        print(line)


def _say(text: str) -> None:
    print(text, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer runs")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child is not None:
        memory_child(args.memory_child)
        return

    quick = args.quick
    total = 400_000 if quick else 2_000_000
    runs = 2 if quick else 3
    memory_groups = 1_000 if quick else 10_000
    _check_encoding()
    workload = Workload()
    table = Table()
    _say(
        f"workload: {workload.groups} groups x {workload.topics_per_group} topics x "
        f"{workload.partitions_per_topic} partitions = {workload.tracked:,} keys; "
        f"{total:,} records over {workload.offsets_partitions} partitions of {OFFSETS_TOPIC}"
    )
    per_partition: dict[int, int] = {}
    for partition, _, _ in workload.records(total):
        per_partition[partition] = per_partition.get(partition, 0) + 1
    assert max(per_partition.values()) <= MOCK_PARTITION_LIMIT, per_partition
    _say(
        f"  {len(per_partition)} partitions used, {min(per_partition.values()):,}.."
        f"{max(per_partition.values()):,} records each"
    )

    with MockCluster() as cluster:
        bootstrap = cluster.bootstrap_servers
        cluster.create_topic(OFFSETS_TOPIC, workload.offsets_partitions)
        for topic, partitions in workload.topics().items():
            cluster.create_topic(topic, partitions)
        started = time.perf_counter()
        produce_raw(bootstrap, workload.records(total), timeout_s=600)
        _say(f"produced {total:,} records to the mock in {time.perf_counter() - started:.1f} s")

        # 1. bare consume (keeping the messages), then ingest of those pre-fetched messages
        raw, batches = raw_consume(bootstrap, workload.offsets_partitions, keep=True)
        assert raw.records == total, (raw, total)
        _say(f"bare consume, kept {len(batches)} batches: {_run(raw)}")
        gc.collect()
        gc.freeze()  # the fetched messages are input, not the exporter's garbage to scan
        results = []
        for _ in range(runs):
            results.append(ingest_prefetched(batches))
            gc.collect()
        wall = min(r[0] for r in results)
        cpu = min(r[1] for r in results)
        state = results[-1][2]
        tracked = state.tracked_count()
        del results
        _say(
            f"ingest, pre-fetched: best {total / wall:,.0f}/s wall, {total / cpu:,.0f}/s CPU; "
            f"{tracked:,} partitions tracked"
        )
        build_s = snapshot_build(state)
        _say(f"snapshot build of {tracked:,} partitions (no log ends sampled): {build_s:.2f} s")
        del state, batches
        gc.unfreeze()
        gc.collect()

        # 2. end to end: source + ingest vs bare consume, alternating
        raws = [raw]
        pipes: list[Run] = []
        for _ in range(1 if quick else 2):
            pipes.append(pipeline_consume(bootstrap))
            assert pipes[-1].records == total, (pipes[-1], total)
            gc.collect()
            raws.append(raw_consume(bootstrap, workload.offsets_partitions)[0])
        for run in raws:
            _say(f"  bare consume: {_run(run)}")
        for run in pipes:
            _say(f"  source + ingest: {_run(run)}")
        raw_best = min(raws, key=lambda r: r.wall_s)
        pipe_best = min(pipes, key=lambda r: r.wall_s)

        # 3. catch-up of the whole daemon
        catches = []
        for _ in range(1 if quick else 2):
            catches.append(catch_up(bootstrap))
            assert catches[-1]["records"] == total, catches[-1]
            c = catches[-1]
            _say(
                f"  daemon catch-up: caught up {c['caught_up_s']:.2f} s, ready "
                f"{c['ready_s']:.2f} s, CPU {c['cpu_s']:.2f} s; {c['tracked']:,} partitions; "
                f"slowest snapshot {c['max_snapshot_s']:.2f} s"
            )
            gc.collect()
        catch = min(catches, key=lambda c: c["ready_s"])

    # 4. /metrics
    shot = scrape(165, repeats=3 if quick else 5)  # 165 groups x 100 partitions
    _say(
        f"scrape: {shot['partitions']:,} partitions, {shot['series']:,} series, "
        f"{shot['bytes'] / 1e6:.1f} MB (gzip {shot['gzip_bytes'] / 1e6:.2f} MB); snapshot build "
        f"{shot['build_first_s']:.3f} s first, {shot['build_s']:.3f} s best; gzip scrape first "
        f"{shot['gzip_first_s'] * 1000:.0f} ms, repeated {shot['gzip_repeated_s'] * 1000:.1f} ms"
    )

    # 5. memory (child process)
    mem = memory(memory_groups)
    per = (mem["after"] - mem["before"]) / mem["tracked"]
    _say(
        f"memory: {mem['tracked']:,} partitions; RSS {mem['before'] / 1e6:.0f} MB before, "
        f"{mem['after'] / 1e6:.0f} MB after"
    )

    table.add(
        "ingest (decode+apply+count), pre-fetched Messages",
        f"{total / wall:,.0f} rec/s",
        ">= 300,000 rec/s",
        total / wall >= 300_000,
    )
    table.add("  same, CPU time of the ingesting thread", f"{total / cpu:,.0f} rec/s")
    ratio = raw_best.wall_s / pipe_best.wall_s
    table.add(
        "end to end on the mock: source+decode+apply",
        f"{total / pipe_best.wall_s:,.0f} rec/s",
    )
    table.add("  bare confluent-kafka consume, same topic", f"{total / raw_best.wall_s:,.0f} rec/s")
    table.add("  ratio (end to end / bare consume)", f"{ratio:.2f}", ">= 0.7", ratio >= 0.7)
    full = mem["tracked"] >= 1_000_000  # fewer: the decoder's key cache dominates
    table.add(
        f"memory per tracked partition ({mem['tracked']:,})",
        f"{per:.0f} B",
        "<= 400 B" if full else "",
        per <= 400 if full else None,
    )
    table.add(
        f"  total RSS with {mem['tracked']:,} tracked",
        f"{mem['after'] / 1e6:.0f} MB",
        "< 500 MB" if full else "",
        mem["after"] < 500e6 if full else None,
    )
    series = f"{shot['series']:,} series"
    table.add(
        f"/metrics first scrape after a new snapshot ({series})",
        f"{shot['first_s'] * 1000:.0f} ms",
        "< 1 s",
        shot["first_s"] < 1,
    )
    table.add(
        f"/metrics repeated scrape ({series})",
        f"{shot['repeated_s'] * 1000:.1f} ms",
        "< 1 s",
        shot["repeated_s"] < 1,
    )
    table.add(
        f"  prometheus_client generate_latest, same collector ({series})",
        f"{shot['generate_latest_s'] * 1000:.0f} ms",
    )
    table.add(f"  snapshot build ({shot['partitions']:,} partitions)", f"{shot['build_s']:.3f} s")
    table.add(f"  snapshot build ({tracked:,} partitions, no log ends)", f"{build_s:.3f} s")
    table.add(
        f"checkpoint of {mem['tracked']:,} tracked: save / load",
        f"{mem['checkpoint_save_s']:.2f} s / {mem['checkpoint_load_s']:.2f} s "
        f"({mem['checkpoint_bytes'] / 1e6:.0f} MB)",
    )
    table.add(
        f"catch-up of {total:,} records, start to ready",
        f"{catch['ready_s']:.2f} s",
        "< 15 s",
        catch["ready_s"] < 15,
    )
    table.add(
        "  of which start to caught up (every partition read)", f"{catch['caught_up_s']:.2f} s"
    )
    table.add(f"  bare consume of the same {total:,} records", f"{raw_best.wall_s:.2f} s")
    table.add("  ratio (bare consume / catch-up)", f"{raw_best.wall_s / catch['ready_s']:.2f}")
    print()
    print(
        f"machine: {os.cpu_count()} CPUs; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end (other processes included)"
    )
    table.print()


def _run(run: Run) -> str:
    return (
        f"{run.records:,} records in {run.wall_s:.2f} s ({run.records / run.wall_s:,.0f}/s), "
        f"process CPU {run.cpu_s:.2f} s"
    )


if __name__ == "__main__":
    main()
