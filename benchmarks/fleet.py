"""The fleet's figures (issue 32 item 7): catch-up, handover after SIGKILL, memory per replica.

    .venv/bin/python benchmarks/fleet.py            # the issue's sizes (~20 min, 2 loaded cores)
    .venv/bin/python benchmarks/fleet.py --parts handover,catchup   # only the broker's parts
    .venv/bin/python benchmarks/fleet.py --quick    # small sizes: a smoke run of every part
    .venv/bin/python benchmarks/fleet.py --parts memory --memory-tracked 1000000

It starts its own broker (the cached release `--kafka` names, default the tests' 4.4.0;
benchmarks/real_broker.py's `own_broker`, stopped at the end, also on Ctrl-C) and writes REAL
commits with the Admin API (`real_broker.write_commits`: the broker's group coordinator writes
them), each group committing every partition of one `--partitions` topic. Then, each figure
beside its ceiling measured in the same run:

1. **catch-up** of a fleet of 1, 2 and 4 replicas (`--replicas`) over the same
   `__consumer_offsets` (`--groups` x `--partitions` x `--rounds`, default 300 x 1,000 x 5 =
   1.5M commits, plus what the handover part wrote before: the first handover size), the
   replicas spawned at once, from the spawn until what a user waits for: the union of the
   replicas' `/api/v1/groups?local=1` lists every group exactly once with all its partitions
   (a replica serves a group only once its `__consumer_offsets` partition is read to its end,
   so its newest commit is in), polled every 0.2 s; then, untimed, every group's
   `/api/v1/groups/NAME?local=1` at its replica is compared with Kafka's OffsetFetch,
   partition by partition (`verified`), and the clock goes on if one differs. Beside it: each
   replica's first `/readyz` 200, a single exporter without `--fleet` timed the same way, and
   the ceiling, a bare confluent-kafka consume of the same `__consumer_offsets` with the
   exporter's source settings (`republish_archive.run_bare`, a child process).
2. **handover after SIGKILL** at 100,000 and 1,000,000 tracked partitions
   (`--handover-tracked`; groups are added with one round of commits until the broker holds
   that many (group, topic, partition) in all), in a fleet of `--handover-replicas` (3):
   once the union is whole and verified, the replica owning most groups is SIGKILLed; timed
   from the kill until the survivors' union is whole again, then verified against OffsetFetch
   as above. The ceilings: the member's session (`--fleet-protocol classic`: 10 s; KIP-848:
   the broker's 45 s), and the protocol's own reassignment time, the first moment the
   broker's DescribeConsumerGroups of the fleet's group (polled every 0.2 s) shows only the
   survivors, holding every `__consumer_offsets` partition between them.
3. **memory per replica** at 10,000,000 tracked partitions over 4 replicas
   (`--memory-tracked`, `--memory-replicas`), in-process, one child process per share: 10M
   real commits cannot be written to this broker in the time, so each share is what a replica
   holds when it owns a quarter of the 50 `__consumer_offsets` partitions (partition % 4 ==
   its index): `benchmarks/exporter.py`'s ingest generator (`Workload`, 100 partitions a
   group, `fake_batches` into `Ingestor`) fed only the groups hashing to those partitions,
   RSS before and after; then its snapshot (`SnapshotBuilder.build`, as
   `benchmarks/exporter.py`'s `snapshot_build`), its build time and the RSS while it is
   held. The ceiling: a single exporter's state of all 10M in one child, measured the same
   way. Kept out: the HTTP server, librdkafka's buffers and the log-end histories of the data
   partitions (the workload's 5,000), which the real replicas of parts 1 and 2 have (their
   RSS is printed there).

Replicas run the exporter's default intervals unless `--sample-interval-s` /
`--snapshot-interval-s` are given: the snapshot every 5 s bounds how soon a union can be
whole. Nothing is asserted; wall-clock figures on a shared 2-core machine are noisy (the
broker, the replicas and this script share the cores): the load average is printed with each.
Child mode (used by the script itself): `--memory-child TRACKED`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from benchmarks import exporter as bx  # noqa: E402
from benchmarks import real_broker as rb  # noqa: E402
from benchmarks import republish_archive as ra  # noqa: E402
from offsetwatch.core.topics import OFFSETS_TOPIC  # noqa: E402
from offsetwatch.decoder.codec import Codec  # noqa: E402
from offsetwatch.decoder.partitioner import partition_for  # noqa: E402
from offsetwatch.exporter.judge.snapshot import SnapshotBuilder  # noqa: E402
from offsetwatch.exporter.state.ingest import Ingestor  # noqa: E402
from offsetwatch.exporter.state.offset_state import OffsetState  # noqa: E402
from offsetwatch.exporter.stats import PipelineStats  # noqa: E402
from tests.real_broker import Broker, free_port_pair, missing_reason, test_kafka  # noqa: E402

TOPIC = "bench-data"
POLL_S = 0.2
#: the classic members' session (exporter/fleet/membership.py); KIP-848's is the broker's
SESSION_S = {"classic": 10.0, "consumer": 45.0}

Offsets = dict[tuple[str, int], int]


def say(text: str) -> None:
    print(text, flush=True)


# -- replicas as child processes --------------------------------------------------------------


@dataclass(slots=True)
class Replica:
    """`offsetwatch export` (with `--fleet`, or alone) as a child process of this script."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: IO[bytes]
    log_path: Path
    ready_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def get(self, path: str) -> tuple[int, bytes]:
        return rb.http_get(self.port, path)

    def rss_mb(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MB (10^6 bytes, as the memory part), from /proc."""
        found: dict[str, float] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024 / 1e6
        return found["VmRSS"], found["VmHWM"]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.alive():
            self.proc.send_signal(sig)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(60)
        rb._CHILDREN.discard(self.proc)
        self.log.close()


def spawn(
    bootstrap: str,
    name: str,
    workdir: Path,
    fleet: str | None,
    args: argparse.Namespace,
) -> Replica:
    port = free_port_pair()
    argv = [
        rb.OFFSETWATCH, "export", "--bootstrap-server", bootstrap, "--http-host", "127.0.0.1",
        "--http-port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    if fleet is not None:
        argv += ["--fleet", fleet, "--fleet-replica", name]
        argv += ["--fleet-url", f"http://127.0.0.1:{port}", "--fleet-protocol", args.protocol]
    if args.sample_interval_s is not None:
        argv += ["--sample-interval-s", str(args.sample_interval_s)]
    if args.snapshot_interval_s is not None:
        argv += ["--snapshot-interval-s", str(args.snapshot_interval_s)]
    # this run's own OFFSETWATCH_* variables (the broker version) are no exporter settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSETWATCH_")}
    log_path = workdir / f"{fleet or 'alone'}-{name}.log"
    log = log_path.open("ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    rb._CHILDREN.add(proc)  # killed by own_broker's exit, also on Ctrl-C
    return Replica(name, proc, port, log, log_path)


# -- what the replicas serve -------------------------------------------------------------------


@dataclass(slots=True)
class Union:
    """Which replica lists which of the expected groups, with all their partitions."""

    holder: dict[str, Replica] = field(default_factory=dict)
    missing: int = 0
    doubled: int = 0
    partial: int = 0

    @property
    def whole(self) -> bool:
        return not (self.missing or self.doubled or self.partial)

    def __str__(self) -> str:
        return f"{self.missing} missing, {self.partial} partial, {self.doubled} twice"


def union(replicas: Sequence[Replica], expected: dict[str, int]) -> Union:
    """Each replica's own `/api/v1/groups?local=1`; a replica that does not answer (200)
    lists nothing."""
    seen: dict[str, list[Replica]] = {}
    partial: set[str] = set()
    for replica in replicas:
        try:
            status, body = replica.get("/api/v1/groups?local=1")
        except OSError:
            continue
        if status != 200:
            continue
        for summary in json.loads(body):
            group = summary.get("group")
            if group in expected:
                seen.setdefault(group, []).append(replica)
                if int(summary.get("partitions") or 0) != expected[group]:
                    partial.add(group)
    found = Union()
    found.holder = {g: holders[0] for g, holders in seen.items() if len(holders) == 1}
    found.missing = len(expected) - len(seen)
    found.doubled = sum(1 for holders in seen.values() if len(holders) > 1)
    found.partial = len(partial)
    return found


def _served(replica: Replica, group: str) -> Offsets | None:
    path = f"/api/v1/groups/{quote(group, safe='')}?local=1"
    status, body = replica.get(path)
    # the server runs at most half its workers on /api at once and answers 503 "busy, retry"
    # (Retry-After) beyond: that is load shed, not a group left unserved; asked again, as a
    # client following Retry-After would
    for _ in range(100):
        if status != 503 or b"busy" not in body:
            break
        time.sleep(0.1)
        status, body = replica.get(path)
    if status != 200:
        return None
    rows = json.loads(body)["partitions"]
    return {(r["topic"], int(r["partition"])): int(r["committed"]) for r in rows}


def verify(found: Union, kafka: dict[str, Offsets]) -> list[str]:
    """The groups whose served committed offsets differ from Kafka's OffsetFetch."""

    def check(group: str) -> str | None:
        replica = found.holder.get(group)
        if replica is None:
            return f"{group}: no single replica lists it"
        try:
            served = _served(replica, group)
        except OSError as error:
            return f"{group}: {replica.name} did not answer ({error})"
        if served != kafka[group]:
            if served is None:
                return f"{group}: {replica.name} does not serve it (its answer not 200)"
            wrong = sum(1 for k, v in kafka[group].items() if served.get(k) != v)
            return f"{group}: {wrong} of {len(kafka[group])} partitions differ at {replica.name}"
        return None

    with ThreadPoolExecutor(max_workers=2) as pool:
        return [problem for problem in pool.map(check, sorted(kafka)) if problem is not None]


@dataclass(slots=True)
class Whole:
    """When a union was whole (seconds since the clock's start) and its verification."""

    #: the first poll whose union was whole (the fleet may not have settled yet)
    first_whole_s: float
    #: the first poll at which the broker described the fleet as settled (`assigned`)
    assigned_s: float | None
    #: the figure: the first poll whose union was whole, of a settled fleet, and verified
    whole_s: float
    verified_s: float
    verify_s: float
    problems: list[str]


def wait_whole(
    replicas: Sequence[Replica],
    workload: Workload,
    started: float,
    timeout_s: float,
    fleet: str | None,
) -> Whole:
    """Poll the union every POLL_S until it is whole while the broker describes `fleet` as
    settled (only `replicas` as members, every partition held, none empty-handed), and then
    equal to Kafka; a verification that fails puts the clock on."""
    deadline = started + timeout_s
    failed: list[str] = []
    first_whole: float | None = None
    assigned_at: float | None = None
    while True:
        for replica in replicas:
            if replica.ready_s is None:
                with contextlib.suppress(OSError):
                    if replica.get("/readyz")[0] == 200:
                        replica.ready_s = time.perf_counter() - started
            if not replica.alive():
                raise RuntimeError(
                    f"{replica.name} exited {replica.proc.returncode}:\n{replica.tail()}"
                )
        settled = fleet is None or workload.assigned(fleet, replicas)
        now = time.perf_counter()
        if settled and assigned_at is None and fleet is not None:
            assigned_at = now - started
        found = union(replicas, workload.expected)
        if found.whole and first_whole is None:
            first_whole = now - started
        if found.whole and settled:
            problems = verify(found, workload.kafka)
            done = time.perf_counter()
            if not problems:
                return Whole(
                    first_whole if first_whole is not None else now - started,
                    assigned_at,
                    now - started,
                    done - started,
                    done - now,
                    failed,
                )
            failed = problems
            say(f"   not equal to Kafka at {now - started:.1f} s: {problems[:3]} (going on)")
        if now > deadline:
            raise RuntimeError(
                f"the union not whole and settled after {timeout_s:.0f} s: {found}, "
                f"settled {settled}"
            )
        time.sleep(POLL_S)


# -- Kafka's side -------------------------------------------------------------------------------


def kafka_committed(admin: AdminClient, groups: Iterable[str]) -> dict[str, Offsets]:
    """OffsetFetch of every group (Admin API, 50 requests in flight)."""
    out: dict[str, Offsets] = {}
    names = list(groups)
    for start in range(0, len(names), 50):
        futures = {
            g: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g)], request_timeout=60
            )[g]
            for g in names[start : start + 50]
        }
        for group, future in futures.items():
            answer = future.result(timeout=120)
            out[group] = {
                (tp.topic, tp.partition): tp.offset
                for tp in answer.topic_partitions
                if tp.offset >= 0
            }
    return out


# -- the workload -------------------------------------------------------------------------------


@dataclass(slots=True)
class Workload:
    """The groups written so far; each commits every partition of TOPIC."""

    broker: Broker
    partitions: int
    writers: int
    #: one client for the whole run, quiet (a client per request would log its purged
    #: events at every destruction)
    admin: AdminClient
    groups: list[str] = field(default_factory=list)
    kafka: dict[str, Offsets] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    offsets_count: int = 0

    @classmethod
    def of(cls, broker: Broker, partitions: int, writers: int) -> Workload:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
        return cls(broker, partitions, writers, admin)

    @property
    def tracked(self) -> int:
        return len(self.groups) * self.partitions

    def offsets_partitions(self) -> int:
        if not self.offsets_count:  # asked once: the topic exists after the first commit
            topics = self.admin.list_topics(OFFSETS_TOPIC, timeout=30).topics
            self.offsets_count = len(topics[OFFSETS_TOPIC].partitions)
        return self.offsets_count

    def assigned(self, fleet: str, replicas: Sequence[Replica]) -> bool:
        """The broker describes exactly `replicas` in the fleet's group, holding every
        `__consumer_offsets` partition between them, each at least one (where there are
        enough): the protocol's assignment done."""
        try:
            described = self.admin.describe_consumer_groups([fleet])[fleet].result(10)
        except Exception:  # a coordinator busy rebalancing may not answer: not yet
            return False
        # the client id is offsetwatch-fleet|NAME|URL|FINGERPRINT
        urls = sorted(str(m.client_id).split("|")[2:3][0] for m in described.members)
        if urls != sorted(r.url for r in replicas):
            return False
        held = [
            sorted(tp.partition for tp in (m.assignment.topic_partitions or []))
            for m in described.members
        ]
        partitions = self.offsets_partitions()
        if len(replicas) <= partitions and not all(held):
            return False
        return sorted(p for each in held for p in each) == list(range(partitions))

    def write(self, names: list[str], rounds: int) -> None:
        started = time.perf_counter()
        procs = rb.write_commits(
            self.broker, TOPIC, self.partitions, names, writers=self.writers, rounds=rounds
        )
        written = rb.wait_writers(procs)
        took = time.perf_counter() - started
        self.groups += names
        self.expected.update(dict.fromkeys(names, self.partitions))
        self.kafka.update(kafka_committed(self.admin, names))
        records = rb.offsets_topic_records(self.broker)
        say(
            f"wrote {written:,} commits ({len(names)} groups x {self.partitions} partitions x "
            f"{rounds} rounds) in {took:.1f} s; now {self.tracked:,} tracked partitions, "
            f"__consumer_offsets holds {records:,} records ({rb.load()})"
        )

    def grow_to(self, tracked: int) -> None:
        more = -(-(tracked - self.tracked) // self.partitions)
        if more <= 0:
            say(f"  ({self.tracked:,} tracked already, more than {tracked:,})")
            return
        first = len(self.groups)
        self.write([f"bench-fleet-h{first + i:05d}" for i in range(more)], 1)


# -- 1. catch-up ------------------------------------------------------------------------------


@dataclass(slots=True)
class CatchUp:
    name: str
    whole: Whole
    ready_s: list[float | None]
    rss_mb: list[tuple[float, float]]
    cpu_s: list[float]
    groups: list[int]


def catch_up(
    workload: Workload, count: int, fleet: str | None, args: argparse.Namespace, workdir: Path
) -> CatchUp:
    started = time.perf_counter()
    replicas = [
        spawn(workload.broker.bootstrap, f"r{i}", workdir, fleet, args) for i in range(count)
    ]
    try:
        whole = wait_whole(replicas, workload, started, args.timeout_s, fleet)
        found = union(replicas, workload.expected)
        held = [sum(1 for r in found.holder.values() if r is replica) for replica in replicas]
        rss = [r.rss_mb() for r in replicas]
        cpu = [rb.proc_cpu_s(r.proc.pid) for r in replicas]
        # a replica may serve every group of its partitions before its /readyz says ready
        # (that waits for the log ends of its tracked partitions too): when, at most 60 s on
        deadline = time.perf_counter() + 60
        while any(r.ready_s is None for r in replicas) and time.perf_counter() < deadline:
            for replica in replicas:
                if replica.ready_s is None:
                    with contextlib.suppress(OSError):
                        if replica.get("/readyz")[0] == 200:
                            replica.ready_s = time.perf_counter() - started
            time.sleep(POLL_S)
        return CatchUp(
            f"fleet of {count}" if fleet else "export alone (no --fleet)",
            whole,
            [r.ready_s for r in replicas],
            rss,
            cpu,
            held,
        )
    finally:
        for replica in replicas:
            replica.stop()


def _when(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}"


def bench_catch_up(workload: Workload, args: argparse.Namespace, workdir: Path) -> list[str]:
    names = [f"bench-fleet-c{i:04d}" for i in range(args.groups)]
    workload.write(names, args.rounds)
    records = rb.offsets_topic_records(workload.broker)
    lines = []
    for run in range(args.runs):
        say(f"-- catch-up, run {run + 1} of {args.runs} ({rb.load()})")
        wall, cpu, seen = ra.run_bare(workload.broker.bootstrap)
        line = (
            f"catch-up ceiling, bare consume of {seen:,} records: {wall:.1f} s wall, "
            f"{cpu:.1f} CPU s ({rb.load()})"
        )
        say("   " + line)
        lines.append(line)
        stamp = int(time.time())
        runs: list[tuple[int, str | None]] = [
            (n, f"offsetwatch-bench-{n}-{run}-{stamp}") for n in args.replicas
        ]
        if args.alone:
            runs.append((1, None))
        for count, fleet in runs:
            result = catch_up(workload, count, fleet, args, workdir)
            w = result.whole
            ready = ", ".join(_when(s) for s in result.ready_s)
            rss = ", ".join(f"{now:.0f}/{peak:.0f}" for now, peak in result.rss_mb)
            cpus = ", ".join(f"{c:.1f}" for c in result.cpu_s)
            line = (
                f"catch-up, {result.name}, {records:,} records, {workload.tracked:,} tracked: "
                f"{w.whole_s:.1f} s ({w.whole_s / wall:.1f}x the bare consume) until the "
                f"union was whole"
                + ("" if fleet is None else " with the fleet settled")
                + f", then = OffsetFetch (its pass {w.verify_s:.1f} s); first whole union "
                f"{w.first_whole_s:.1f} s"
                + (
                    ""
                    if fleet is None
                    else f", the broker's assignment settled {_when(w.assigned_s)} s"
                )
                + f"; /readyz 200 per replica {ready} s ('-': not within 60 s after); groups "
                f"per replica {result.groups}; "
                f"RSS now/peak MB {rss}; CPU s {cpus} ({rb.load()})"
            )
            if w.problems:
                line += f"; an earlier whole union differed: {w.problems[:2]}"
            say("   " + line)
            lines.append(line)
    return lines


# -- 2. handover after SIGKILL -----------------------------------------------------------------


def handover(workload: Workload, args: argparse.Namespace, workdir: Path) -> str:
    broker = workload.broker
    fleet = f"offsetwatch-bench-k{workload.tracked}-{int(time.time())}"
    started = time.perf_counter()
    replicas = [
        spawn(broker.bootstrap, f"r{i}", workdir, fleet, args)
        for i in range(args.handover_replicas)
    ]
    try:
        first = wait_whole(replicas, workload, started, args.timeout_s, fleet)
        found = union(replicas, workload.expected)
        held = {r.name: sum(1 for h in found.holder.values() if h is r) for r in replicas}
        victim = max(replicas, key=lambda r: held[r.name])
        survivors = [r for r in replicas if r is not victim]
        rss = [f"{r.rss_mb()[0]:.0f}" for r in replicas]
        say(
            f"   fleet of {len(replicas)} settled and whole at {first.whole_s:.1f} s (verified "
            f"{first.verified_s:.1f} s); groups per replica {held}, RSS MB {rss}; SIGKILL "
            f"{victim.name}"
        )
        killed = time.perf_counter()
        victim.proc.send_signal(signal.SIGKILL)
        after = wait_whole(survivors, workload, killed, args.timeout_s, fleet)
        rss = [f"{r.rss_mb()[0]:.0f}" for r in survivors]
        session = SESSION_S[args.protocol]
        kafka_s = after.assigned_s
        own = "" if kafka_s is None else f", {after.whole_s - kafka_s:.1f} s of the exporters' own"
        line = (
            f"handover after SIGKILL, {workload.tracked:,} tracked, fleet of {len(replicas)} "
            f"({args.protocol}, its {session:.0f} s session; the victim held "
            f"{held[victim.name]} of {len(workload.expected)} groups): the survivors' "
            f"union whole again {after.whole_s:.1f} s after the kill, then = OffsetFetch (its "
            f"pass {after.verify_s:.1f} s); ceiling: the broker's describe showed the "
            f"partitions reassigned to the survivors {_when(kafka_s)} s after the kill{own}; "
            f"survivors' RSS MB {rss} ({rb.load()})"
        )
        if after.problems:
            line += f"; an earlier whole union differed: {after.problems[:2]}"
        say("   " + line)
        return line
    finally:
        for replica in replicas:
            replica.stop()


# -- 3. memory per replica ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareWorkload(bx.Workload):
    """benchmarks/exporter.py's workload, of the groups `chosen` (indices into the whole)."""

    chosen: tuple[int, ...] = ()

    def group(self, g: int) -> str:
        return bx.Workload.group(self, self.chosen[g])

    def topic(self, g: int, t: int) -> str:
        return bx.Workload.topic(self, self.chosen[g], t)


def memory_child(tracked: int, share: int, of: int) -> None:
    """Ingest one commit per partition of the groups of share `share` of `of` (share -1:
    all), then build and hold a snapshot; print RSS figures as JSON."""
    whole = bx.Workload(groups=tracked // bx.Workload().keys_per_group)
    chosen = tuple(
        g
        for g in range(whole.groups)
        if share < 0 or partition_for(whole.group(g), whole.offsets_partitions) % of == share
    )
    workload = ShareWorkload(groups=len(chosen), chosen=chosen)
    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), Codec())
    gc.collect()
    before = bx._rss_bytes()
    started = time.perf_counter()
    for batch in bx.fake_batches(workload.records(rounds=1)):
        ingestor.ingest(batch)
    del batch
    ingest_s = time.perf_counter() - started
    gc.collect()
    after = bx._rss_bytes()
    started = time.perf_counter()
    snapshot = SnapshotBuilder().build(state, {}, bx.BASE_TS, ready=True)
    build_s = time.perf_counter() - started
    gc.collect()
    held = bx._rss_bytes()
    peak = rb.proc_peak_rss_mb(os.getpid()) * 1024 * 1024  # VmHWM, in bytes as the others
    report = {
        "groups": len(chosen),
        "tracked": state.tracked_count(),
        "before": before,
        "after": after,
        "with_snapshot": held,
        "peak": peak,
        "ingest_s": ingest_s,
        "build_s": build_s,
        "snapshot_groups": len(snapshot.groups),
    }
    print(json.dumps(report))


def bench_memory(args: argparse.Namespace) -> list[str]:
    lines = []
    shares = [*range(args.memory_replicas), -1]
    for share in shares:
        argv = [sys.executable, __file__, "--memory-child", str(args.memory_tracked)]
        argv += ["--share", str(share), "--of", str(args.memory_replicas)]
        done = rb.run_measured(argv)
        m = json.loads(done.output.strip().splitlines()[-1])
        state_mb = (m["after"] - m["before"]) / 1e6
        per = (m["after"] - m["before"]) / max(1, m["tracked"])
        who = (
            f"replica {share} of {args.memory_replicas} (partitions % {args.memory_replicas} == "
            f"{share})"
            if share >= 0
            else "single exporter (ceiling)"
        )
        line = (
            f"memory, {who}: {m['groups']:,} groups, {m['tracked']:,} tracked; RSS "
            f"{m['before'] / 1e6:.0f} MB before, {m['after'] / 1e6:.0f} MB after ingest "
            f"(state {state_mb:,.0f} MB, {per:.0f} B per partition), "
            f"{m['with_snapshot'] / 1e6:,.0f} MB "
            f"holding its snapshot (built in {m['build_s']:.1f} s; ingest {m['ingest_s']:.1f} s), "
            f"peak {m['peak'] / 1e6:,.0f} MB (the generator's keys included) ({rb.load()})"
        )
        say("   " + line)
        lines.append(line)
    return lines


# -- main -------------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--parts", default="handover,catchup,memory")
    parser.add_argument("--groups", type=int, default=300, help="catch-up groups (300: 1.5M)")
    parser.add_argument("--partitions", type=int, default=1000, help="partitions a group commits")
    parser.add_argument("--rounds", type=int, default=5, help="catch-up commit rounds")
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--replicas", type=_sizes, default=[1, 2, 4], help="catch-up fleets")
    parser.add_argument("--no-alone", dest="alone", action="store_false",
                        help="no single exporter without --fleet in the catch-up")  # fmt: skip
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--handover-tracked", type=_sizes, default=[100_000, 1_000_000])
    parser.add_argument("--handover-replicas", type=int, default=3)
    parser.add_argument("--protocol", choices=sorted(SESSION_S), default="classic")
    parser.add_argument("--memory-tracked", type=int, default=10_000_000)
    parser.add_argument("--memory-replicas", type=int, default=4)
    parser.add_argument("--sample-interval-s", type=float)
    parser.add_argument("--snapshot-interval-s", type=float)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--kafka", help="the Kafka release (a version or a line; default 4.4.0)")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--share", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--of", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child is not None:
        memory_child(args.memory_child, args.share, args.of)
        return 0
    if args.quick:
        args.groups, args.partitions, args.rounds = 20, 200, 2
        args.handover_tracked = [2_000, 10_000]
        args.memory_tracked = 200_000
    parts = set(args.parts.split(","))
    say(
        f"benchmarks/fleet.py {' '.join(sys.argv[1:])} on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
        f"({rb.load()})"
    )
    lines: list[str] = []
    if parts & {"catchup", "handover"}:
        if args.kafka:
            os.environ["OFFSETWATCH_BROKER_VERSION"] = args.kafka
        missing = missing_reason()
        if missing:
            print(f"cannot run: {missing}", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="offsetwatch-fleet-") as tmp:
            workdir = Path(tmp)
            with rb.own_broker(workdir) as broker:
                say(f"Kafka {test_kafka().version} at {broker.bootstrap} ({rb.load()})")
                rb.create_topics(broker, {TOPIC: args.partitions})
                rb.fill_topics(broker, {TOPIC: args.partitions}, rb.DATA_RECORDS_PER_PARTITION)
                workload = Workload.of(broker, args.partitions, args.writers)
                sizes = sorted(args.handover_tracked) if "handover" in parts else []
                if sizes:  # the smallest before the catch-up's groups make it impossible
                    say(f"-- handover at {sizes[0]:,} tracked ({rb.load()})")
                    workload.grow_to(sizes[0])
                    lines.append(handover(workload, args, workdir))
                if "catchup" in parts:
                    lines += bench_catch_up(workload, args, workdir)
                for size in sizes[1:]:
                    say(f"-- handover at {size:,} tracked ({rb.load()})")
                    workload.grow_to(size)
                    lines.append(handover(workload, args, workdir))
                # its Admin client would go on reconnecting to the stopped broker
                del workload
                gc.collect()
    if "memory" in parts:
        say(
            f"-- memory at {args.memory_tracked:,} tracked over {args.memory_replicas} "
            f"({rb.load()})"
        )
        lines += bench_memory(args)
    say(f"\nsummary ({rb.load()})")
    for line in lines:
        say("* " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
