"""Republishing and archiving beside their ceilings, on a real broker (issue 30).

    .venv/bin/python benchmarks/republish_archive.py                 # ~200k commits, a few min
    .venv/bin/python benchmarks/republish_archive.py --groups 300    # the issue's 1.5M commits
    .venv/bin/python benchmarks/republish_archive.py --kafka 4.0 --runs 3

It starts its own broker (the cached release `--kafka` names, default the tests' 4.4.0;
benchmarks/real_broker.py's `own_broker`, stopped at the end, also on Ctrl-C), writes real
commits with the Admin API (`--groups` x `--partitions` x `--rounds`, the broker's group
coordinator writing them; default 40 x 1,000 x 5 = 200,000) and then measures, each as a
child process (its own wall time and CPU seconds), side by side in one run:

* `bare consume`: a confluent-kafka consumer with the exporter's source settings reading
  every `__consumer_offsets` partition to its end, decoding nothing (the ceiling of
  monitoring and archiving);
* `bare copy`: the same consumer producing each record's key and value to a topic with the
  exporter's producer settings (`producer_config`: lz4, idempotent, acks=all, linger 50 ms),
  until every record is delivered (the ceiling of republishing);
* `offsetwatch export` with no sinks, `--archive-dir` (JSON lines, plain and gzip; Avro,
  deflate blocks), `--publish-topic` (JSON; Avro in Confluent framing, `--publish-format avro
  --publish-schema-id 1`), and both sinks (JSON; Avro); the publish runs again with
  `--publish-headers compact` and `none` (one source header, or none, in place of the
  four): from spawn until what a user waits for, read
  from `/api/v1/health` every 0.2 s: every record of `__consumer_offsets` ingested
  (`records_total`), and with sinks every one of them archived (`archive_records_total`,
  its bytes with the OS within the second after) and delivered to the publish topic
  (`published_total`, delivery reports of the brokers). CPU seconds are the process's at
  that moment.

Each publish run writes to a topic of its own (12 partitions, made before the run). Printed:
records/s and records per CPU second of each, beside its ceiling (bare consume for no sinks
and the archive, bare copy for the publish runs) and the ratio, and the share of records the
C fast path took (`fast_path_records_total`). Nothing is asserted, no test times anything;
wall-clock figures on a shared 2-core machine are noisy (the broker, the writers and the
measured process share the cores): the load average is printed, compare ratios of one run.

Steady state (`--steady-rate 50000 --steady-s 60`, issue 30's last target; `--runs 0` skips
the catch-up table): after the catch-up, an exporter with both sinks (`--steady-format json`
or `avro`) is started and waited for until it has taken everything; then writer processes
commit at the rate for the time (benchmarks/real_broker.py's paced writers) while it
follows. Every second: the source lag (the sum of `offsetwatch_source_lag` from
/api/v1/health, in records and in seconds of the traffic: records / rate) and how far each
sink is behind what was ingested; at the end the exporter's CPU per record (its CPU seconds
over the phase / the records it read). Then the same writers again with a bare copy
following from the log end (consume + produce each record, as above), for its CPU per record
at that rate (time.process_time of the copying process, its threads included, from its first
record to its last delivery).

Child mode (used by the script itself): `--child copy`, `--child follow`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)

from benchmarks import real_broker as rb  # noqa: E402
from offsetwatch.core.topics import OFFSETS_TOPIC  # noqa: E402
from offsetwatch.exporter.sinks.publisher import producer_config  # noqa: E402
from offsetwatch.exporter.sources.kafka_source import consumer_config  # noqa: E402
from tests.real_broker import test_kafka  # noqa: E402

PUBLISH_PARTITIONS = 12


# -- child: the bare copy ---------------------------------------------------------------------


def child_copy(bootstrap: str, topic: str) -> None:
    """Consume every `__consumer_offsets` partition to its end and produce each record's key
    and value to `topic` with the exporter's producer settings; done once all is delivered."""
    started = time.perf_counter()
    config = consumer_config({"bootstrap.servers": bootstrap})
    config.pop("statistics.interval.ms", None)
    consumer = Consumer(config)
    settings = producer_config({"bootstrap.servers": bootstrap})
    settings.pop("statistics.interval.ms", None)
    producer = Producer(settings)
    partitions = consumer.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC].partitions
    consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
    at_end: set[int] = set()
    records = 0
    failed = 0

    def delivered(error: KafkaError | None, _message: object) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    while len(at_end) < len(partitions):
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            error = message.error()
            if error is None:
                while True:
                    try:
                        producer.produce(
                            topic, message.value(), message.key(), on_delivery=delivered
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                records += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(int(message.partition() or 0))
            else:
                raise SystemExit(f"bare copy: {error}")
        producer.poll(0)
    left = producer.flush(300)
    consumer.close()
    if left or failed:
        raise SystemExit(f"bare copy: {left} records not delivered, {failed} failed")
    print(json.dumps({"records": records, "seconds": time.perf_counter() - started}))


def child_follow(bootstrap: str, topic: str, seconds: float, idle_s: float = 5.0) -> None:
    """The bare copy from the log end while writers commit: copies for at least `seconds`,
    then until nothing came for `idle_s`; prints the records and the CPU seconds of this
    process (all its threads) from the first record to the last delivery."""
    config = consumer_config({"bootstrap.servers": bootstrap})
    config.pop("statistics.interval.ms", None)
    consumer = Consumer(config)
    settings = producer_config({"bootstrap.servers": bootstrap})
    settings.pop("statistics.interval.ms", None)
    producer = Producer(settings)
    partitions = consumer.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC].partitions
    consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_END) for p in partitions])
    print("ready", flush=True)  # the parent starts the writers on this line
    started = time.perf_counter()
    last = started
    cpu0: float | None = None
    records = failed = 0

    def delivered(error: KafkaError | None, _message: object) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    while True:
        now = time.perf_counter()
        if now - started >= seconds and now - last >= idle_s:
            break
        for message in consumer.consume(num_messages=10_000, timeout=0.5):
            if message.error() is not None:
                continue  # partition EOF: the copy follows on
            if cpu0 is None:
                cpu0 = time.process_time()
            while True:
                try:
                    producer.produce(topic, message.value(), message.key(), on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            records += 1
            last = time.perf_counter()
        producer.poll(0)
    left = producer.flush(300)
    cpu = time.process_time() - (cpu0 if cpu0 is not None else time.process_time())
    consumer.close()
    if left or failed:
        raise SystemExit(f"bare follow: {left} records not delivered, {failed} failed")
    print(json.dumps({"records": records, "cpu_s": cpu}))


# -- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Result:
    name: str
    records: int
    wall_s: float
    cpu_s: float
    fast_share: float | None = None

    @property
    def rate(self) -> float:
        return self.records / self.wall_s

    @property
    def per_cpu(self) -> float:
        return self.records / self.cpu_s if self.cpu_s else float("nan")


def run_bare(bootstrap: str) -> tuple[float, float, int]:
    done = rb.run_measured(
        [sys.executable, rb.__file__, "--child", "bare", "--bootstrap", bootstrap]
    )
    report = json.loads(done.output.strip().splitlines()[-1])
    return done.usage.wall_s, done.usage.cpu_s, int(report["records"])


def run_copy(bootstrap: str, topic: str) -> tuple[float, float, int]:
    argv = [sys.executable, __file__, "--child", "copy", "--bootstrap", bootstrap, "--topic", topic]
    done = rb.run_measured(argv)
    report = json.loads(done.output.strip().splitlines()[-1])
    return done.usage.wall_s, done.usage.cpu_s, int(report["records"])


def run_export(
    bootstrap: str,
    records: int,
    extra: Sequence[str],
    log_path: Path,
    *,
    archive: bool,
    publish: bool,
    timeout_s: float = 1800.0,
) -> tuple[float, float, float]:
    """(wall s, cpu s, fast-path share) of `offsetwatch export` until it has ingested every
    record and, with the sinks, archived and published (delivered) every one."""
    started = time.perf_counter()
    with _export(bootstrap, extra, log_path) as export:
        health = export.wait_caught_up(
            records, archive=archive, publish=publish, timeout_s=timeout_s
        )
        wall = time.perf_counter() - started
        cpu = export.cpu_s()
    fast = int(health.get("fast_path_records_total") or 0)
    return wall, cpu, fast / max(1, int(health["records_total"]))


@dataclass(slots=True)
class _Export:
    """`offsetwatch export` as a child of this script, followed through /api/v1/health (the
    catch-up runs and the steady state: one way to start, poll and measure it)."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def health(self) -> dict[str, Any] | None:
        """/api/v1/health, or None while it does not answer (starting, or busy)."""
        with contextlib.suppress(OSError, ValueError):
            status, body = rb.http_get(self.port, "/api/v1/health")
            if status == 200:
                found: dict[str, Any] = json.loads(body)
                return found
        return None

    def cpu_s(self) -> float:
        """Its CPU seconds so far (it is still running: no rusage yet, /proc has them)."""
        return rb.proc_cpu_s(self.proc.pid)

    def wait_caught_up(
        self,
        records: int,
        *,
        archive: bool,
        publish: bool,
        timeout_s: float,
        every_s: float = 0.2,
        late: str = "offsetwatch export did not catch up in time",
    ) -> dict[str, Any]:
        """The first health that has `records` ingested (and archived, published with those
        sinks), read every `every_s`; raises with the log's tail if the process exits,
        with `late` after `timeout_s`."""
        deadline = time.perf_counter() + timeout_s
        while True:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"offsetwatch export exited {self.proc.returncode}:\n{tail}")
            if time.perf_counter() > deadline:
                raise RuntimeError(late)
            health = self.health()
            if health is not None and _caught_up(health, records, archive, publish):
                return health
            time.sleep(every_s)


@contextlib.contextmanager
def _export(bootstrap: str, extra: Sequence[str], log_path: Path) -> Iterator[_Export]:
    """`offsetwatch export` with `extra` flags, its output appended to `log_path`; stopped
    (SIGTERM, reaped) on the way out, also on an error."""
    port = rb.free_port_pair()
    argv = [
        rb.OFFSETWATCH, "export", "--bootstrap-server", bootstrap, "--http-host", "127.0.0.1",
        "--http-port", str(port), "--log-level", "warning", *extra,
    ]  # fmt: skip
    with log_path.open("ab") as log:
        proc = rb._spawn(argv, log)
    try:
        yield _Export(proc, port, log_path)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(ChildProcessError):
            rb._reap(proc)


def _caught_up(health: dict[str, Any], records: int, archive: bool, publish: bool) -> bool:
    if int(health.get("records_total") or 0) < records:
        return False
    if archive and int(health.get("archive_records_total") or 0) < records:
        return False
    return not publish or int(health.get("published_total") or 0) >= records


# -- main -------------------------------------------------------------------------------------


#: Avro in Confluent's framing, the schema registered under this id (nothing reads it back)
AVRO_PUBLISH: Final = ("--publish-format", "avro", "--publish-schema-id", "1")
AVRO_ARCHIVE: Final = ("--archive-format", "avro")
#: the lighter forms of the source headers (docs/canonical-schema.md): the producer's cost
#: is per header, and the bare copy's records carry none
COMPACT: Final = ("--publish-headers", "compact")
NO_HEADERS: Final = ("--publish-headers", "none")

#: (name, archive, publish, extra flags) of the export runs
EXPORTS: tuple[tuple[str, bool, bool, tuple[str, ...]], ...] = (
    ("export, no sinks", False, False, ()),
    ("export --archive-dir (jsonl)", True, False, ()),
    ("export --archive-dir --archive-gzip", True, False, ("--archive-gzip",)),
    (
        "export --archive-dir --archive-gzip (level 1)",
        True,
        False,
        ("--archive-gzip", "--archive-gzip-level", "1"),
    ),
    ("export --archive-dir (avro)", True, False, AVRO_ARCHIVE),
    ("export --publish-topic (json)", False, True, ()),
    ("export --publish-topic (avro)", False, True, AVRO_PUBLISH),
    ("export --publish-topic --archive-dir", True, True, ()),
    ("export --publish-topic --archive-dir (avro)", True, True, AVRO_PUBLISH + AVRO_ARCHIVE),
    ("export --publish-topic (json, compact headers)", False, True, COMPACT),
    ("export --publish-topic (json, no headers)", False, True, NO_HEADERS),
    ("export --publish-topic (avro, no headers)", False, True, AVRO_PUBLISH + NO_HEADERS),
    ("export --publish-topic --archive-dir (no headers)", True, True, NO_HEADERS),
    (
        "export --publish-topic --archive-dir (avro, no headers)",
        True,
        True,
        AVRO_PUBLISH + AVRO_ARCHIVE + NO_HEADERS,
    ),
)


def bench(broker: rb.Broker, args: argparse.Namespace, workdir: Path) -> None:
    topic = "bench-data"
    groups = [f"bench-republish-{i:04d}" for i in range(args.groups)]
    rb.create_topics(broker, {topic: args.partitions})
    rb.fill_topics(broker, {topic: args.partitions}, rb.DATA_RECORDS_PER_PARTITION)
    started = time.perf_counter()
    procs = rb.write_commits(
        broker, topic, args.partitions, groups, writers=args.writers, rounds=args.rounds
    )
    written = rb.wait_writers(procs)
    records = rb.offsets_topic_records(broker)
    print(
        f"wrote {written:,} commits ({args.groups} groups x {args.partitions} partitions x "
        f"{args.rounds} rounds) in {time.perf_counter() - started:.1f} s; "
        f"__consumer_offsets holds {records:,} records ({rb.load()})",
        flush=True,
    )
    runs: dict[str, list[Result]] = {}
    for run in range(args.runs):
        print(f"-- run {run + 1} of {args.runs} ({rb.load()})", flush=True)
        wall, cpu, seen = run_bare(broker.bootstrap)
        runs.setdefault("bare consume", []).append(Result("bare consume", seen, wall, cpu))
        copy_topic = f"bench-copy-{run}"
        rb.create_topics(broker, {copy_topic: PUBLISH_PARTITIONS})
        wall, cpu, seen = run_copy(broker.bootstrap, copy_topic)
        runs.setdefault("bare copy", []).append(Result("bare copy", seen, wall, cpu))
        for index, (name, archive, publish, flags) in enumerate(EXPORTS):
            if args.only and not any(word in name for word in args.only):
                continue
            extra: list[str] = list(flags)
            archive_dir = workdir / f"archive-{run}-{index}"
            if archive:
                extra += ["--archive-dir", str(archive_dir)]
            if publish:
                out = f"bench-publish-{run}-{index}"
                rb.create_topics(broker, {out: PUBLISH_PARTITIONS})
                extra += ["--publish-topic", out]
            wall, cpu, share = run_export(
                broker.bootstrap,
                records,
                extra,
                workdir / "export.log",
                archive=archive,
                publish=publish,
            )
            runs.setdefault(name, []).append(Result(name, records, wall, cpu, share))
            shutil.rmtree(archive_dir, ignore_errors=True)
            print(f"   {name}: {records / wall:,.0f} records/s", flush=True)
    if runs:
        print_table(runs, records)
    if args.steady_s > 0:
        bench_steady(broker, args, workdir, topic, groups)


# -- steady state -----------------------------------------------------------------------------


def bench_steady(
    broker: rb.Broker, args: argparse.Namespace, workdir: Path, topic: str, groups: list[str]
) -> None:
    rate, seconds = args.steady_rate, args.steady_s
    fmt = args.steady_format
    print(
        f"\n== steady state: ~{rate:,} commits/s for {seconds:.0f} s, both sinks ({fmt}, "
        f"{args.steady_headers} headers) ({rb.load()})",
        flush=True,
    )
    out = "bench-steady-publish"
    rb.create_topics(broker, {out: PUBLISH_PARTITIONS})
    extra = ["--archive-dir", str(workdir / "steady-archive"), "--publish-topic", out]
    if fmt == "avro":
        extra += [*AVRO_PUBLISH, *AVRO_ARCHIVE]
    extra += ["--publish-headers", args.steady_headers]
    with _export(broker.bootstrap, extra, workdir / "steady.log") as export:
        # caught up with what is there, then past the first snapshots: the steady loop only
        target = rb.offsets_topic_records(broker)
        export.wait_caught_up(target, archive=True, publish=True, timeout_s=1800, every_s=0.5)
        time.sleep(6)
        health = export.health()
        assert health is not None
        cpu0, records0 = export.cpu_s(), int(health["records_total"])
        started = time.perf_counter()
        writers = rb.write_commits(
            broker, topic, args.partitions, groups, writers=args.writers, rate=rate,
            seconds=seconds,
        )  # fmt: skip
        lags: list[int] = []
        behind: list[int] = []
        print(" second  source lag (records, s of traffic)  archive / publish behind ingest")
        while any(w.poll() is None for w in writers):
            health = export.health()
            if health is not None:
                lag = int(health.get("source_lag") or 0)
                ingested = int(health.get("records_total") or 0)
                archived = ingested - int(health.get("archive_records_total") or 0)
                published = ingested - int(health.get("published_total") or 0)
                lags.append(lag)
                behind.append(max(archived, published))
                print(
                    f" {time.perf_counter() - started:6.1f}  {lag:>10,} ({lag / rate:5.2f} s)"
                    f"{'':18}{archived:>9,} / {published:,}",
                    flush=True,
                )
            time.sleep(1.0)
        written = rb.wait_writers(writers)
        write_s = time.perf_counter() - started
        target = rb.offsets_topic_records(broker)
        health = export.wait_caught_up(
            target,
            archive=True,
            publish=True,
            timeout_s=600,
            late="the exporter did not take what was written within 600 s",
        )
        drain_s = time.perf_counter() - started - write_s
        cpu = export.cpu_s() - cpu0
        records = int(health["records_total"]) - records0
    worst = max(lags, default=0)
    print(
        f"wrote {written:,} commits in {write_s:.1f} s ({written / write_s:,.0f}/s); the "
        f"exporter took {records:,} records (read, archived, delivered) with {cpu:.1f} CPU s: "
        f"{cpu / records * 1e6:.2f} us per record, {cpu / (write_s + drain_s):.0%} of a core; "
        f"source lag max {worst:,} records = {worst / rate:.2f} s of traffic; sinks behind "
        f"ingest max {max(behind, default=0):,}; everything taken {drain_s:.1f} s after the "
        f"writers stopped ({rb.load()})",
        flush=True,
    )
    # the bare copy following at the same rate
    copy_topic = "bench-steady-copy"
    rb.create_topics(broker, {copy_topic: PUBLISH_PARTITIONS})
    argv = [sys.executable, __file__, "--child", "follow", "--bootstrap", broker.bootstrap,
            "--topic", copy_topic, "--seconds", str(seconds)]  # fmt: skip
    follower = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert follower.stdout is not None
        if follower.stdout.readline().strip() != "ready":
            raise RuntimeError("the bare follower did not start")
        writers = rb.write_commits(
            broker, topic, args.partitions, groups, writers=args.writers, rate=rate,
            seconds=seconds,
        )  # fmt: skip
        copied_written = rb.wait_writers(writers)
        report, _ = follower.communicate(timeout=900)
    finally:
        if follower.poll() is None:
            follower.terminate()
            follower.wait()
    found = json.loads(report.strip().splitlines()[-1])
    bare = found["cpu_s"] / max(1, found["records"]) * 1e6
    print(
        f"bare copy at the same rate: wrote {copied_written:,}, copied {found['records']:,} "
        f"records with {found['cpu_s']:.1f} CPU s: {bare:.2f} us per record; the exporter "
        f"with both sinks {cpu / records * 1e6 / bare:.2f}x that ({rb.load()})",
        flush=True,
    )


def _median_result(results: list[Result]) -> Result:
    first = results[0]
    return Result(
        first.name,
        first.records,
        statistics.median(r.wall_s for r in results),
        statistics.median(r.cpu_s for r in results),
        None if first.fast_share is None else statistics.median(r.fast_share or 0 for r in results),
    )


def print_table(runs: dict[str, list[Result]], records: int) -> None:
    median = {name: _median_result(results) for name, results in runs.items()}
    bare, copy = median["bare consume"], median["bare copy"]
    print(f"\n{records:,} records, median of {len(runs['bare consume'])} run(s) ({rb.load()})")
    header = (
        f"{'run':<56} {'records/s':>10} {'rec/CPU s':>10}  {'ceiling':<13} "
        f"{'x rec/s':>7} {'x rec/CPU s':>11} {'fast path':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, result in median.items():
        ceiling = copy if "publish" in name else bare
        if name == "bare copy":
            ceiling = copy  # a ceiling itself (it reads as fast as a bare consume at best)
        ratio = result.rate / ceiling.rate
        cpu_ratio = result.per_cpu / ceiling.per_cpu
        share = "" if result.fast_share is None else f"{result.fast_share:.1%}"
        against = "" if result is ceiling else ceiling.name
        print(
            f"{name:<56} {result.rate:>10,.0f} {result.per_cpu:>10,.0f}  {against:<13} "
            f"{'' if result is ceiling else f'{ratio:.2f}':>7} "
            f"{'' if result is ceiling else f'{cpu_ratio:.2f}':>11} {share:>9}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=40, help="300: the issue's 1.5M commits")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--kafka", help="the Kafka release (a version or a line; default 4.4.0)")
    parser.add_argument("--only", nargs="*", help="export runs whose name has one of these words")
    parser.add_argument("--steady-rate", type=int, default=50_000, help="commits/s")
    parser.add_argument("--steady-s", type=float, default=0.0, help="0: no steady state")
    parser.add_argument("--steady-format", choices=["json", "avro"], default="json")
    parser.add_argument("--steady-headers", choices=["source", "compact", "none"], default="source")
    parser.add_argument("--child", choices=["copy", "follow"])
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic")
    parser.add_argument("--seconds", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.child == "copy":
        child_copy(args.bootstrap, args.topic)
        return 0
    if args.child == "follow":
        child_follow(args.bootstrap, args.topic, args.seconds)
        return 0
    if args.kafka:
        os.environ["OFFSETWATCH_BROKER_VERSION"] = args.kafka
    missing = rb.missing_reason()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="offsetwatch-republish-") as tmp:
        workdir = Path(tmp)
        with rb.own_broker(workdir) as broker:
            version = test_kafka().version
            print(f"Kafka {version} at {broker.bootstrap} ({rb.load()})", flush=True)
            bench(broker, args, workdir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
