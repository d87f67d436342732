"""offsetwatch on a real Apache Kafka 4.0.0 broker: catch-up, steady state, describe, reset.

    .venv/bin/python benchmarks/real_broker.py            # full run (~15-20 min, loaded 2 cores)
    .venv/bin/python benchmarks/real_broker.py --quick    # small shapes, one run each
    .venv/bin/python benchmarks/real_broker.py --parts 1 --runs 0 --steady-s 0 \
        --profile /tmp/catchup.folded --profile-native    # only a py-spy profile of a catch-up
    .venv/bin/python benchmarks/real_broker.py --summarize /tmp/catchup.folded

It starts its own broker (`../shared/kafka/broker start` in a temporary directory, free
ports; stopped at the end, also on Ctrl-C or SIGTERM) and prints:

1. Catch-up over `__consumer_offsets` holding >= 1.5M REAL commits (default 300 groups x
   1,000 partitions x 5 rounds), written by the broker's group coordinator from Admin API
   OffsetCommits (`alter_consumer_group_offsets`, 1,000 partitions per request, several writer
   processes in parallel). The commits name a real 1,000-partition topic holding 100 records
   per partition: the broker refuses (retries until timeout) commits to unknown topics, while
   offsets past the log end are accepted. Measured, each as a CHILD PROCESS so that its CPU
   seconds and peak RSS are its own (`os.wait4`, `/proc/PID`), median of N runs, alternating:
   (a) `bare`: a confluent-kafka consumer with the exporter's source settings that assigns
       every partition and reads to the end with `consume(num_messages=10000)`, no decode:
       the ceiling;
   (b) `offsetwatch export` (the real daemon, default settings): from spawn to `/readyz`
       answering 200, which the daemon gives once every partition reached its end AND the
       log ends of the tracked partitions were sampled (`Exporter._check_ready`, checked once
       per second). "at end" is the first `/readyz` poll (every 0.1 s) whose body says no
       partition is behind. CPU and peak RSS are read from /proc at ready, before SIGTERM.
   With --profile, one more catch-up under py-spy and its CPU broken down by category
   (docs/performance.md). Then a steady state: writer processes commit ~50k commits/s for a
   while as the exporter follows; the exporter's CPU per record, and its source lag (the sum
   of `offsetwatch_source_lag`, read from /api/v1/health every second) during and after.
2. `offsetwatch groups describe` of 1,000 groups x 100 partitions beside Kafka's
   `kafka-consumer-groups.sh --describe --group G1 ... --group G1000` (a JVM; its start-up
   is shown by describing one group).
3. `offsetwatch offsets reset --all-topics --execute` of one group over 10,000 partitions
   (10 topics x 1,000) beside `kafka-consumer-groups.sh --reset-offsets --all-topics
   --execute` of a second group of the same shape; both groups get non-zero commits again
   before each run, which alternates --to-latest / --to-earliest; after each pair the two
   groups' committed offsets (OffsetFetch) must be equal.

Wall-clock figures on a shared 2-core machine are noisy: the load average is printed with
each part. The writers, the broker and the measured process share those cores.
Child modes (used by the script itself): `--child bare|write`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import json
import linecache
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: E402
    AdminClient,
    NewTopic,
    OffsetSpec,
)

from offsetwatch.core.topics import OFFSETS_TOPIC  # noqa: E402
from offsetwatch.exporter.sources.kafka_source import consumer_config  # noqa: E402
from tests.real_broker import (  # noqa: E402
    Broker,
    free_port_pair,
    missing_reason,
    retry,
    start_broker,
    stop_broker,
)

OFFSETWATCH = str(Path(sys.executable).parent / "offsetwatch")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
DATA_RECORDS_PER_PARTITION = 100


# -- child processes ------------------------------------------------------------------------


def child_bare(bootstrap: str) -> None:
    """(a): read every partition of __consumer_offsets to its end, count, decode nothing."""
    started = time.perf_counter()
    # the exporter source's own settings (big fetches, read_committed, EOF events)
    config = consumer_config({"bootstrap.servers": bootstrap})
    config.pop("statistics.interval.ms", None)  # the exporter's stats callback is not measured
    consumer = Consumer(config)
    partitions = consumer.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC].partitions
    consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
    at_end: set[int] = set()
    records = 0
    while len(at_end) < len(partitions):
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            error = message.error()
            if error is None:
                records += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(int(message.partition() or 0))
            else:
                raise SystemExit(f"bare consumer: {error}")
    consumer.close()
    print(json.dumps({"records": records, "seconds": time.perf_counter() - started}))


def _commit_request(
    admin: AdminClient, group: str, topic: str, partitions: int, base: int
) -> Future[ConsumerGroupTopicPartitions]:
    offsets = [
        TopicPartition(topic, p, (base + p) % (DATA_RECORDS_PER_PARTITION + 1))
        for p in range(partitions)
    ]
    request = ConsumerGroupTopicPartitions(group, offsets)
    return admin.alter_consumer_group_offsets([request], request_timeout=120)[group]


def child_write(
    bootstrap: str,
    topic: str,
    partitions: int,
    groups: Sequence[str],
    rounds: int,
    rate: float,
    seconds: float,
) -> None:
    """Commit `partitions` offsets per request for each group, round after round: `rounds`
    rounds, or (rate > 0) paced at `rate` commits/s for `seconds`. Prints what it wrote."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until futures answer
    pending: deque[tuple[Future[ConsumerGroupTopicPartitions], str, int]] = deque()
    started = time.perf_counter()
    written = requests = retried = 0
    errors: dict[str, int] = {}

    def settle() -> None:
        """Wait for the oldest request. Per-partition errors (e.g. UNKNOWN_TOPIC_OR_PARTITION
        while a new topic reaches the coordinator) come only inside the result: resend."""
        nonlocal written, retried
        future, group, base = pending.popleft()
        try:
            answer = future.result()
        except KafkaException as error:  # e.g. _TIMED_OUT on a broker too busy to answer
            failed = [error.args[0]]
        else:
            failed = [tp.error for tp in answer.topic_partitions or () if tp.error is not None]
        if not failed:
            written += partitions
            return
        name = failed[0].name()
        errors[name] = errors.get(name, 0) + 1
        if errors[name] > 1000:
            raise SystemExit(f"commit writer: {failed[0]} on {len(failed)} partitions")
        retried += 1
        time.sleep(0.1)
        pending.append((_commit_request(admin, group, topic, partitions, base), group, base))

    round_no = 0
    while rate > 0 or round_no < rounds:
        for group in groups:
            if rate > 0:
                if time.perf_counter() - started >= seconds:
                    break
                delay = started + requests * partitions / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            # a bounded number of requests in flight: the coordinator answers in order
            while len(pending) >= 64:
                settle()
            base = round_no * 7
            pending.append((_commit_request(admin, group, topic, partitions, base), group, base))
            requests += 1
        else:
            round_no += 1
            continue
        break
    while pending:
        settle()
    elapsed = time.perf_counter() - started
    report = {"commits": written, "requests": requests, "seconds": elapsed}
    print(json.dumps(report | {"retried": retried, "errors": errors}))


# -- measuring children -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float


@dataclass(frozen=True, slots=True)
class Finished:
    usage: Usage
    output: str


_CHILDREN: set[subprocess.Popen[bytes]] = set()


def _child_env() -> dict[str, str]:
    """The environment of the measured children."""
    return dict(os.environ)


def _spawn(argv: Sequence[str], out: int | object) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        list(argv),
        stdout=out,  # type: ignore[arg-type]
        stderr=subprocess.STDOUT,
        env=_child_env(),
    )
    _CHILDREN.add(proc)
    return proc


def _reap(proc: subprocess.Popen[bytes]) -> tuple[int, resource.struct_rusage]:
    """Wait for `proc` with wait4, which gives the rusage of that child alone (Popen.wait
    would reap it and lose it; RUSAGE_CHILDREN mixes in every earlier child's peak RSS)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    _CHILDREN.discard(proc)
    return proc.returncode, usage


def run_measured(argv: Sequence[str], check: bool = True) -> Finished:
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = _spawn(argv, out)
        code, usage = _reap(proc)
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode(errors="replace")
    if check and code != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... exited {code}: {text[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return Finished(Usage(wall, cpu, usage.ru_maxrss / 1024), text)


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def proc_peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def http_get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@dataclass(slots=True)
class Exporter:
    """`offsetwatch export` as a child process."""

    proc: subprocess.Popen[bytes]
    port: int
    started: float
    log: object
    log_path: Path

    @classmethod
    def start(cls, bootstrap: str, log_path: Path, wrapper: Sequence[str] = ()) -> Exporter:
        port = free_port_pair()
        argv = [
            *wrapper,
            OFFSETWATCH,
            "export",
            "--bootstrap-server",
            bootstrap,
            "--http-host",
            "127.0.0.1",
            "--http-port",
            str(port),
            "--log-level",
            "warning",
        ]
        log = log_path.open("ab")
        started = time.perf_counter()
        return cls(_spawn(argv, log), port, started, log, log_path)

    def wait_ready(self, timeout_s: float = 900.0) -> tuple[float, float]:
        """(seconds to 'no partition behind', seconds to ready) since spawn."""
        deadline = time.perf_counter() + timeout_s
        at_end: float | None = None
        while time.perf_counter() < deadline:
            if self.exited() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"offsetwatch export exited {self.proc.returncode}:\n{tail}")
            with contextlib.suppress(OSError):
                status, body = http_get(self.port, "/readyz")
                now = time.perf_counter() - self.started
                state = json.loads(body)
                if at_end is None and state.get("partitions") and not state["partitions_behind"]:
                    at_end = now
                if status == 200:
                    return (at_end if at_end is not None else now), now
            time.sleep(0.1)
        raise RuntimeError("offsetwatch export not ready in time")

    def health(self) -> dict[str, Any]:
        """/api/v1/health: records read, source lag, snapshot duration from the stats, cheap
        (a /metrics scrape of 300k partitions renders millions of series: seconds of CPU)."""
        status, body = http_get(self.port, "/api/v1/health")
        if status != 200:
            raise RuntimeError(f"/api/v1/health answered {status}")
        found: dict[str, Any] = json.loads(body)
        return found

    def exited(self) -> int | None:
        """The exit code once the process ended (reaped here, with wait4), else None."""
        if self.proc.returncode is None:
            pid, status, _usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                _CHILDREN.discard(self.proc)
        return self.proc.returncode

    def stop(self) -> Usage:
        if self.exited() is not None:
            raise RuntimeError(f"offsetwatch export had exited {self.proc.returncode}")
        self.proc.send_signal(signal.SIGTERM)
        code, usage = _reap(self.proc)
        self.log.close()  # type: ignore[attr-defined]
        if code != 0:
            raise RuntimeError(f"offsetwatch export exited {code} on SIGTERM")
        cpu = usage.ru_utime + usage.ru_stime
        return Usage(time.perf_counter() - self.started, cpu, usage.ru_maxrss / 1024)


# -- broker set-up ------------------------------------------------------------------------------


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def create_topics(broker: Broker, topics: dict[str, int]) -> None:
    admin = broker.admin()  # referenced until its futures answer
    # one topic per request: 10 x 1,000 partitions in one CreateTopics exceed KRaft's batch
    # limit (POLICY_VIOLATION "Unable to perform excessively large batch operation")
    for name, count in topics.items():
        futures = admin.create_topics([NewTopic(name, count, 1)], operation_timeout=120)
        for future in futures.values():
            future.result(timeout=300)
    # CreateTopics answers once the controller committed; the broker's own metadata, which
    # the group coordinator checks commits against, may follow later
    # (a loaded broker made ~60 new partitions per second leader here: minutes for 10,000)
    started = time.perf_counter()
    deadline = started + 900
    while True:
        known = admin.list_topics(timeout=30).topics
        if all(
            name in known
            and len(known[name].partitions) == count
            and all(p.error is None and p.leader >= 0 for p in known[name].partitions.values())
            and _serving(admin, name, count)
            for name, count in topics.items()
        ):
            if topics:
                waited = time.perf_counter() - started
                print(f"  ({len(topics)} new topics served {waited:.0f} s after their creation)")
            return
        if time.perf_counter() > deadline:
            raise RuntimeError(f"topics not served 900 s after their creation: {topics}")
        time.sleep(0.5)


def _serving(admin: AdminClient, topic: str, count: int) -> bool:
    """Whether every partition answers ListOffsets: a leader in the metadata may still answer
    NOT_LEADER_FOR_PARTITION for a moment, and `offsets reset` does not retry that."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets(
        {TopicPartition(topic, p): latest for p in range(count)}, request_timeout=30
    )
    try:
        for future in futures.values():
            future.result()
    except KafkaException:
        return False
    return True


def fill_topics(broker: Broker, topics: dict[str, int], per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "log_level": 4})
    for topic, partitions in topics.items():
        for partition in range(partitions):
            for i in range(per_partition):
                producer.produce(topic, value=b"%d" % i, partition=partition)
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} data records not delivered")


def write_commits(
    broker: Broker,
    topic: str,
    partitions: int,
    groups: Sequence[str],
    *,
    writers: int,
    rounds: int = 1,
    rate: float = 0.0,
    seconds: float = 0.0,
) -> list[subprocess.Popen[bytes]]:
    """Start `writers` child writers over disjoint slices of `groups` (not waited for)."""
    procs = []
    for w in range(writers):
        mine = groups[w::writers]
        argv = [
            sys.executable,
            __file__,
            "--child",
            "write",
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            topic,
            "--topic-partitions",
            str(partitions),
            "--rounds",
            str(rounds),
            "--rate",
            str(rate / writers),
            "--seconds",
            str(seconds),
            "--group-names",
            ",".join(mine),
        ]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE))
        _CHILDREN.add(procs[-1])
    return procs


def wait_writers(procs: Sequence[subprocess.Popen[bytes]]) -> int:
    written = 0
    for proc in procs:
        out, _ = proc.communicate()
        _CHILDREN.discard(proc)
        if proc.returncode != 0:
            raise RuntimeError(f"commit writer exited {proc.returncode}")
        report = json.loads(out)
        written += int(report["commits"])
        if report["retried"]:
            print(f"  (a writer resent {report['retried']} requests: {report['errors']})")
    return written


def offsets_topic_records(broker: Broker) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-watermarks"})
    try:
        meta = consumer.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC]

        def log_end(partition: int) -> int:
            found = consumer.get_watermark_offsets(
                TopicPartition(OFFSETS_TOPIC, partition), timeout=30
            )
            return int(found[1])

        # retried: right after the topic's creation a partition may answer NOT_LEADER
        total = 0
        for partition in meta.partitions:
            total += retry(lambda partition=partition: log_end(partition))  # type: ignore[misc]
        return total
    finally:
        consumer.close()


# -- 1. catch-up and steady state ---------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def bench_catch_up(broker: Broker, args: argparse.Namespace, workdir: Path) -> None:
    topic = "bench-data"
    groups = [f"bench-catchup-{i:04d}" for i in range(args.groups)]
    print(f"\n== 1. catch-up ({load()})", flush=True)
    create_topics(broker, {topic: args.partitions})
    fill_topics(broker, {topic: args.partitions}, DATA_RECORDS_PER_PARTITION)
    started = time.perf_counter()
    procs = write_commits(
        broker, topic, args.partitions, groups, writers=args.writers, rounds=args.rounds
    )
    written = wait_writers(procs)
    seconds = time.perf_counter() - started
    records = offsets_topic_records(broker)
    print(
        f"wrote {written:,} commits ({args.groups} groups x {args.partitions} partitions x "
        f"{args.rounds} rounds, {args.writers} writer processes) in {seconds:.1f} s "
        f"({written / seconds:,.0f}/s); __consumer_offsets holds {records:,} records",
        flush=True,
    )

    bare: list[tuple[Usage, int]] = []
    exporter: list[tuple[Usage, float, float]] = []
    for run in range(args.runs):
        done = run_measured(
            [sys.executable, __file__, "--child", "bare", "--bootstrap", broker.bootstrap]
        )
        count = int(json.loads(done.output.strip().splitlines()[-1])["records"])
        bare.append((done.usage, count))
        daemon = Exporter.start(broker.bootstrap, workdir / "exporter.log")
        try:
            at_end, ready = daemon.wait_ready()
            cpu, rss = proc_cpu_s(daemon.proc.pid), proc_peak_rss_mb(daemon.proc.pid)
            health = daemon.health()
            seen = health["records_total"]
            fast = health.get("fast_path_records_total")
        finally:
            daemon.stop()
        if int(seen) != records:
            print(f"  (!) exporter counted {seen:,.0f} records, the topic holds {records:,}")
        if fast is not None and seen:
            print(f"  the C ingest loop applied {fast:,} of {seen:,} records ({fast / seen:.1%})")
        exporter.append((Usage(ready, cpu, rss), at_end, seen))
        print(
            f"  run {run + 1}: bare {done.usage.wall_s:.1f} s wall {done.usage.cpu_s:.1f} cpu-s "
            f"({count:,} records); exporter at end {at_end:.1f} s, ready {ready:.1f} s, "
            f"{cpu:.1f} cpu-s ({load()})",
            flush=True,
        )

    if bare:
        print_catch_up(bare, exporter, records)
    if args.profile is not None:
        profile_catch_up(broker, args.profile, workdir, native=args.profile_native)
    if args.steady_s > 0:
        bench_steady(broker, args, workdir, topic, groups)


def print_catch_up(
    bare: Sequence[tuple[Usage, int]], exporter: Sequence[tuple[Usage, float, float]], records: int
) -> None:
    def row(name: str, usage: Usage, count: float) -> str:
        return (
            f"{name:<22}{usage.wall_s:>8.1f}{usage.cpu_s:>9.1f}{count / usage.wall_s:>14,.0f}"
            f"{count / usage.cpu_s:>14,.0f}{usage.peak_rss_mb:>12.0f}"
        )

    bare_usage = Usage(
        _median([u.wall_s for u, _ in bare]),
        _median([u.cpu_s for u, _ in bare]),
        max(u.peak_rss_mb for u, _ in bare),
    )
    ready_usage = Usage(
        _median([u.wall_s for u, _, _ in exporter]),
        _median([u.cpu_s for u, _, _ in exporter]),
        max(u.peak_rss_mb for u, _, _ in exporter),
    )
    at_end_s = _median([e for _, e, _ in exporter])
    print(f"\nmedian of {len(bare)} runs, {records:,} records:")
    print(f"{'':<22}{'wall s':>8}{'cpu s':>9}{'records/s':>14}{'rec/cpu-s':>14}{'peak RSS MB':>12}")
    print(row("bare consumer", bare_usage, records))
    print(row("exporter to ready", ready_usage, records))
    print(
        f"exporter/bare: wall {ready_usage.wall_s / bare_usage.wall_s:.2f}x, "
        f"cpu {ready_usage.cpu_s / bare_usage.cpu_s:.2f}x; exporter at end of every partition "
        f"after {at_end_s:.1f} s (ready = at end + log-end sample, checked once a second; "
        "wall includes process start-up for both)",
        flush=True,
    )


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name: librdkafka names its threads (rdk:main, rdk:broker1...);
    Python 3.11 threads keep the process name. py-spy sees only the Python threads."""
    found: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            text = (task / "stat").read_text()
            name = text[text.index("(") + 1 : text.rindex(")")]
            fields = text.rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
            name = "rdk:broker" if name.startswith("rdk:broker") else name
            found[name] = found.get(name, 0.0) + cpu
    return found


def profile_catch_up(broker: Broker, output: Path, workdir: Path, *, native: bool) -> None:
    """One more exporter catch-up under py-spy (on-CPU samples of the Python threads, folded
    stacks in `output`), with the CPU of every thread of the process read at ready."""
    pyspy = Path(sys.executable).parent / "py-spy"
    if not pyspy.exists():
        print("(no profile: `.venv/bin/pip install py-spy` first)")
        return
    wrapper = [str(pyspy), "record", "--format", "raw", "--rate", "100", "--threads"]
    wrapper += ["--native"] if native else ["--nonblocking"]
    wrapper += ["-o", str(output), "--"]
    daemon = Exporter.start(broker.bootstrap, workdir / "exporter.log", wrapper)
    spy = daemon.proc
    try:
        _at_end, ready = daemon.wait_ready()
        children = Path(f"/proc/{spy.pid}/task/{spy.pid}/children").read_text().split()
        pid = int(children[0])
        threads = thread_cpu(pid)
        total = proc_cpu_s(pid)
        os.kill(pid, signal.SIGTERM)
        code, _usage = _reap(spy)
        daemon.log.close()  # type: ignore[attr-defined]
    finally:
        if spy.returncode is None:
            spy.kill()
            _reap(spy)
    shares = ", ".join(
        f"{name} {cpu:.1f} s ({cpu / total:.0%})"
        for name, cpu in sorted(threads.items(), key=lambda item: -item[1])
    )
    print(f"profile: ready after {ready:.1f} s under py-spy, {total:.1f} cpu-s; threads: {shares}")
    print(f"profile: folded stacks in {output} (py-spy exited {code})", flush=True)
    python_cpu = sum(cpu for name, cpu in threads.items() if not name.startswith("rdk:"))
    print_profile(output, python_cpu)


def bench_steady(
    broker: Broker, args: argparse.Namespace, workdir: Path, topic: str, groups: Sequence[str]
) -> None:
    print(f"\n== 1b. steady state: ~{args.steady_rate:,} commits/s for {args.steady_s:.0f} s")
    daemon = Exporter.start(broker.bootstrap, workdir / "exporter.log")
    try:
        daemon.wait_ready()
        time.sleep(6)  # past the first snapshot after ready: measure the steady loop only
        pid = daemon.proc.pid
        cpu0, records0 = proc_cpu_s(pid), daemon.health()["records_total"]
        started = time.perf_counter()
        procs = write_commits(
            broker,
            topic,
            args.partitions,
            groups,
            writers=args.writers,
            rate=args.steady_rate,
            seconds=args.steady_s,
        )
        lags: list[int] = []
        snapshot_s: list[float] = []
        while any(proc.poll() is None for proc in procs):
            health = daemon.health()
            lags.append(health["source_lag"] or 0)
            snapshot_s.append(health["snapshot_duration_seconds"] or 0.0)
            time.sleep(1.0)
        written = wait_writers(procs)
        write_s = time.perf_counter() - started
        lag_at_stop = daemon.health()["source_lag"] or 0
        # drain: until the exporter read everything written
        target = offsets_topic_records(broker)
        deadline = time.perf_counter() + 300
        while (health := daemon.health())["records_total"] < target:
            if time.perf_counter() > deadline:
                raise RuntimeError("the exporter did not read what was written within 300 s")
            time.sleep(0.2)
        drain_s = time.perf_counter() - started - write_s
        cpu = proc_cpu_s(pid) - cpu0
        records = health["records_total"] - records0
    finally:
        daemon.stop()
    print(
        f"wrote {written:,} commits in {write_s:.1f} s ({written / write_s:,.0f}/s, "
        f"{args.writers} writers); exporter read {records:,.0f} records with {cpu:.1f} cpu-s: "
        f"{cpu / records * 1e6:.1f} us/record, {cpu / (write_s + drain_s) * 100:.0f}% of a core "
        f"({load()})"
    )
    samples = ", ".join(f"{lag:,.0f}" for lag in lags)
    print(
        f"source lag (records, sum over partitions, every ~1 s while writing): {samples}; "
        f"max {max(lags, default=0):,}, at the writers' end {lag_at_stop:,}; all read "
        f"{drain_s:.1f} s after the writers stopped; snapshot build "
        f"{max(snapshot_s, default=0.0):.1f} s (the longest seen)",
        flush=True,
    )


# -- profile breakdown --------------------------------------------------------------------------

_SNAPSHOT = "snapshot builds"
_CATEGORIES = (
    "client consume (librdkafka queue + confluent-kafka Message objects, in C)",
    "per-message Python objects (Message accessors, source loop)",
    "decode (C accelerator, builds the Record objects)",
    "apply/state (OffsetState.apply_many, PartitionTable)",
    "ingest bookkeeping (counts, positions)",
    f"{_SNAPSHOT}: lag seconds (LogEndHistory)",
    f"{_SNAPSHOT}: diagnosis",
    f"{_SNAPSHOT}: rows, lag, status",
    "ready check (tracked_partitions every 1 s)",
    "log-end sampling (sampler thread)",
    "HTTP threads (the benchmark polls /readyz every 0.1 s)",
    "start-up and shutdown (imports, config, connect, close)",
    "other",
    "cyclic garbage collector (gc passes, seen with --profile-native)",
)


#: py-spy (--native above all) counts some blocked threads as active: a stack ending in one
#: of these is a wait (the sampler's and HTTP threads' condition waits, select), not CPU
_WAITS = (
    "pthread_cond_",
    "PyThread_acquire_lock",
    "lock_PyThread_acquire_lock",
    "Condition.wait",
    "_PollLikeSelector.select",
    "cnd_timedwait",
    "epoll_wait",
    "__GI___poll",
)
_WAITING = "waiting (blocked threads py-spy counted as active)"


def _source_line(frame: str) -> str:
    """The source text of a py-spy frame `function (path:line)`."""
    location = frame.rsplit(" (", 1)[-1].rstrip(")")
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return ""
    full = Path(path) if Path(path).is_absolute() else REPO_ROOT / path
    return linecache.getline(str(full), int(line))


def categorize(frames: Sequence[str]) -> str:
    """The cost category of one folded stack (root first; py-spy --threads puts the thread
    first). Decided by the innermost frame of our code that says what the work is for."""
    thread, names = frames[0], [frame.split(" (", 1)[0] for frame in frames[1:]]
    if any(n.startswith(_WAITS) for n in names[-4:]):
        return _WAITING
    if "log-end-sampler" in thread or "LogEndSampler._run" in names:
        return _CATEGORIES[9]
    if "offsetwatch-http" in thread:
        return _CATEGORIES[10]
    if "Exporter.step" not in names:
        return _CATEGORIES[11] if "Thread.run" not in names else _CATEGORIES[12]
    if any(n.startswith("gc_collect") for n in names):
        return _CATEGORIES[13]
    if "Exporter.build_snapshot" in names:
        if any(n.startswith(("lag_seconds", "LogEndHistory")) for n in names):
            return _CATEGORIES[5]
        if any("diagnos" in n for n in names):
            return _CATEGORIES[6]
        return _CATEGORIES[7]
    if "OffsetsTopicSource.poll_batch" in names:
        at = names.index("OffsetsTopicSource.poll_batch")
        below = names[at + 1 :]
        if not below:  # a C call made on a line of poll_batch (without --native)
            consuming = "consume(" in _source_line(frames[at + 1])
            return _CATEGORIES[0] if consuming else _CATEGORIES[1]
        if any(n.startswith(("Message_", "PyBytes", "_PyObject", "PyObject")) for n in below):
            return _CATEGORIES[1]
        if any(n.startswith(("rd_kafka", "Consumer_consume")) for n in below):
            return _CATEGORIES[0]
        return _CATEGORIES[1]
    if "Codec.decode" in names:
        return _CATEGORIES[2]
    decoded = "Ingestor.ingest.<locals>.decoded"
    if decoded in names:
        at = len(names) - 1 - names[::-1].index(decoded)
        accessor = at == len(names) - 1 or names[at + 1].startswith("Message")
        if accessor and "message." in _source_line(frames[at + 1]):
            return _CATEGORIES[1]
        return _CATEGORIES[4]
    if "OffsetState.apply_many" in names or "Ingestor.ingest" in names:
        return _CATEGORIES[3]
    if any(
        n.startswith(("OffsetState.tracked_partitions", "Exporter._check_ready")) for n in names
    ):
        return _CATEGORIES[8]
    return _CATEGORIES[12]


def summarize_profile(path: Path) -> dict[str, int]:
    """Samples per category of a py-spy `--format raw --threads` file."""
    found = dict.fromkeys((*_CATEGORIES, _WAITING), 0)
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            found[categorize(stack.split(";"))] += int(count)
    return found


def print_profile(path: Path, cpu_s: float) -> None:
    """Shares of the samples, without the HTTP threads: they serve the benchmark's /readyz
    polls, and py-spy counts their wake-ups from Condition.wait as runnable under load."""
    found = summarize_profile(path)
    http, waits = found.pop(_CATEGORIES[10]), found.pop(_WAITING)
    total = sum(found.values())
    print(
        f"profile breakdown: {total:,} samples of the Python threads (on CPU or runnable; "
        f"left out: {http:,} in the HTTP threads, {waits:,} more of blocked threads), "
        f"cpu-s = share x {cpu_s:.1f} s:"
    )
    for name, count in sorted(found.items(), key=lambda item: -item[1]):
        share = count / total if total else 0.0
        print(f"  {share:6.1%}  {share * cpu_s:5.1f} cpu-s  {name}")


# -- 2. groups describe ---------------------------------------------------------------------------


def bench_describe(broker: Broker, args: argparse.Namespace) -> None:
    topic, partitions = "bench-describe", 100
    groups = [f"bench-describe-{i:04d}" for i in range(args.describe_groups)]
    print(f"\n== 2. groups describe: {len(groups):,} groups x {partitions} partitions ({load()})")
    create_topics(broker, {topic: partitions})
    fill_topics(broker, {topic: partitions}, 20)
    wait_writers(write_commits(broker, topic, partitions, groups, writers=args.writers))
    ours: list[Usage] = []
    theirs: list[Usage] = []
    rows = (0, 0)
    kafka_args = ["--describe"] + [arg for group in groups for arg in ("--group", group)]
    connect = ("--bootstrap-server", broker.bootstrap)
    for _ in range(args.runs):
        mine = run_measured(
            [OFFSETWATCH, "groups", "describe", *groups, "--format", "csv", *connect]
        )
        kafka = run_measured(_tool(broker, "kafka-consumer-groups.sh", *kafka_args))
        ours.append(mine.usage)
        theirs.append(kafka.usage)
        rows = (
            sum(1 for line in mine.output.splitlines() if line.startswith("bench-describe-")),
            sum(1 for line in kafka.output.splitlines() if line.startswith("bench-describe-")),
        )
    one = run_measured(_tool(broker, "kafka-consumer-groups.sh", *kafka_args[:3]))
    print(
        f"offsetwatch groups describe: {_median([u.wall_s for u in ours]):.1f} s wall, "
        f"{_median([u.cpu_s for u in ours]):.1f} cpu-s, {max(u.peak_rss_mb for u in ours):.0f} MB "
        f"(median of {args.runs}; {rows[0]:,} partition rows)"
    )
    print(
        f"kafka-consumer-groups.sh --describe: {_median([u.wall_s for u in theirs]):.1f} s wall, "
        f"{_median([u.cpu_s for u in theirs]):.1f} cpu-s, "
        f"{max(u.peak_rss_mb for u in theirs):.0f} MB ({rows[1]:,} partition rows); the same "
        f"tool on one group (JVM start-up): {one.usage.wall_s:.1f} s ({load()})",
        flush=True,
    )


def _tool(broker: Broker, name: str, *args: str) -> list[str]:
    from tests.real_broker import broker_script

    return [str(broker_script()), "tool", name, "--bootstrap-server", broker.bootstrap, *args]


# -- 3. offsets reset -----------------------------------------------------------------------------


def committed(broker: Broker, group: str) -> dict[tuple[str, int], int]:
    admin = broker.admin()  # referenced until its future answers
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=60
    )[group]
    answer = future.result(timeout=120)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}


def bench_reset(broker: Broker, args: argparse.Namespace) -> None:
    per_topic = args.partitions
    count = max(1, args.reset_partitions // per_topic)
    topics = {"bench-data": per_topic} | {f"bench-reset-{i}": per_topic for i in range(1, count)}
    print(
        f"\n== 3. offsets reset --execute: one group over {count * per_topic:,} partitions "
        f"({count} topics x {per_topic}) ({load()})"
    )
    # bench-data exists when part 1 ran (its 100 records per partition are kept); the other
    # topics stay empty: producing 5 records into each of 9,000 new partitions timed out on
    # this loaded machine (the partitions took minutes to get a leader). Commits past the log
    # end are accepted, so before each run both groups get non-zero offsets again and every
    # run moves ~99% of them.
    existing = broker.admin().list_topics(timeout=30).topics
    create_topics(broker, {name: n for name, n in topics.items() if name not in existing})
    ours_group, kafka_group = "bench-reset-offsetwatch", "bench-reset-kafka"
    ours: list[Usage] = []
    theirs: list[Usage] = []
    connect = ["--execute", "--bootstrap-server", broker.bootstrap]
    for run in range(args.runs):
        for topic in topics:
            both = [ours_group, kafka_group]
            wait_writers(write_commits(broker, topic, per_topic, both, writers=1))
        to = "--to-latest" if run % 2 == 0 else "--to-earliest"
        where = [to, *connect]
        mine = run_measured(
            [OFFSETWATCH, "offsets", "reset", "--group", ours_group, "--all-topics", *where]
        )
        kafka = run_measured(
            _tool(
                broker,
                "kafka-consumer-groups.sh",
                "--reset-offsets",
                "--group",
                kafka_group,
                "--all-topics",
                to,
                "--execute",
            )
        )
        ours.append(mine.usage)
        theirs.append(kafka.usage)
        a, b = committed(broker, ours_group), committed(broker, kafka_group)
        if a != b or len(a) != count * per_topic:
            raise RuntimeError(
                f"after {to}: offsetwatch's group has {len(a)} offsets, Kafka's {len(b)}, "
                f"{sum(1 for k in a if a[k] != b.get(k))} differ"
            )
    print(
        f"offsetwatch offsets reset --execute: {_median([u.wall_s for u in ours]):.1f} s wall, "
        f"{_median([u.cpu_s for u in ours]):.1f} cpu-s, {max(u.peak_rss_mb for u in ours):.0f} MB"
    )
    print(
        f"kafka-consumer-groups.sh --reset-offsets --execute: "
        f"{_median([u.wall_s for u in theirs]):.1f} s wall, "
        f"{_median([u.cpu_s for u in theirs]):.1f} cpu-s, "
        f"{max(u.peak_rss_mb for u in theirs):.0f} MB (median of {args.runs}; after each pair "
        f"both groups' {count * per_topic:,} committed offsets were equal) ({load()})",
        flush=True,
    )


# -- main ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def own_broker(root: Path) -> Iterator[Broker]:
    started = time.perf_counter()
    try:  # also an interrupted start-up stops the broker (start_broker waits for it)
        # a larger heap than the default 768m (10,000+ partitions, 1.5M commits of state), for
        # the broker only: Kafka's tools, measured beside offsetwatch, keep their own default
        previous = os.environ.get("KAFKA_HEAP_OPTS")
        os.environ["KAFKA_HEAP_OPTS"] = previous or "-Xmx1g -Xms512m"
        try:
            broker = start_broker(root / "broker")
        finally:
            if previous is None:
                del os.environ["KAFKA_HEAP_OPTS"]
        retry(lambda: broker.admin().list_topics(timeout=10))
        print(f"broker {broker.bootstrap} up in {time.perf_counter() - started:.1f} s", flush=True)
        yield broker
    finally:
        for proc in list(_CHILDREN):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        stop_broker(root / "broker")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, one run each")
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steady-rate", type=int, default=50_000)
    parser.add_argument("--steady-s", type=float, default=30.0)
    parser.add_argument("--describe-groups", type=int, default=1000)
    parser.add_argument("--reset-partitions", type=int, default=10_000)
    parser.add_argument("--parts", default="1,2,3", help="which parts to run (1,2,3)")
    parser.add_argument("--keep", type=Path, help="broker directory to keep (default: temporary)")
    parser.add_argument(
        "--profile", type=Path, help="also profile one exporter catch-up with py-spy into FILE"
    )
    parser.add_argument(
        "--profile-native",
        action="store_true",
        help="py-spy --native: C frames too (confluent-kafka's Message objects, the decoder's C "
        "accelerator), at the cost of pausing the process for each sample",
    )
    parser.add_argument("--summarize", type=Path, help="only print the breakdown of a profile")
    # child modes
    parser.add_argument("--child", choices=("bare", "write"), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--topic-partitions", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--group-names", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.summarize is not None:
        print_profile(args.summarize, 0.0)
        return 0
    if args.child == "bare":
        child_bare(args.bootstrap)
        return 0
    if args.child == "write":
        child_write(
            args.bootstrap,
            args.topic,
            args.topic_partitions,
            args.group_names.split(","),
            args.rounds,
            args.rate,
            args.seconds,
        )
        return 0
    if args.quick:
        args.groups, args.partitions, args.rounds, args.runs = 20, 200, 2, 1
        args.steady_rate, args.steady_s = 10_000, 5.0
        args.describe_groups, args.reset_partitions = 50, 1000
    reason = missing_reason()
    if reason is not None:
        print(f"real_broker: {reason}", file=sys.stderr)
        return 2

    def on_term(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    parts = set(args.parts.split(","))
    print(f"offsetwatch on a real Kafka 4.0.0 broker ({load()})", flush=True)
    with tempfile.TemporaryDirectory(prefix="offsetwatch-bench-") as scratch:
        root = args.keep or Path(scratch)
        try:
            with own_broker(root) as broker:
                if "1" in parts:
                    bench_catch_up(broker, args, root)
                if "2" in parts:
                    bench_describe(broker, args)
                if "3" in parts:
                    bench_reset(broker, args)
                # clients the parts left in reference cycles (an AdminClient and its futures)
                # would go on reconnecting to the stopped broker until the interpreter exits
                gc.collect()
        except KeyboardInterrupt:
            print("\ninterrupted: broker stopped", file=sys.stderr)
            return 130
    print(f"\ndone ({load()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
