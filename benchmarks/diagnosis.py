"""What the diagnosis costs the exporter, at 1,000,000 tracked partitions: before and after.

    .venv/bin/python benchmarks/diagnosis.py            # ~2-3 minutes on a 2-core box
    .venv/bin/python benchmarks/diagnosis.py --quick    # 100,000 partitions

"Before" is the tree of the commit before the diagnosis (`--before`, default dc35b15), taken
with `git archive` into a temporary directory, with this tree's built C accelerators beside
their unchanged sources, and put first on `PYTHONPATH`; "after" is this tree. (It used to be
this tree with only the three modules the diagnosis changed taken from that commit; since the
exporter's modules moved into folders of their own, old modules no longer fit the new tree.)
Each variant runs in its own child process, alternating, best of `--runs`, so both see the
same machine.

The workload: 10,000 groups x 4 topics x 25 partitions (1,000,000 tracked partitions), each
group with a classic GroupMetadata of 2 members (real consumer-protocol assignments); 4 commit
rounds a minute apart (4,000,000 commits); 1% of the groups rebalance at every round (a member
joins or leaves: the records the rebalance history reads); 10% of the groups have one member
whose partitions stall (STALL, so their snapshot runs the diagnosis rules), the rest commit
their log end. Log ends of the 5,000 topic-partitions are sampled every 30 s.

Figures (nothing is asserted; tests never time):

* ingest CPU per record: `time.process_time()` around `Ingestor.ingest` (decode + apply) of
  every batch, divided by the records; also for the GroupMetadata records alone;
* memory per tracked partition: RSS after round 0 minus RSS before, over 1,000,000 (the
  state, its group records and, after, the rebalance histories);
* snapshot build: `SnapshotBuilder.build` of the whole state at the end, best of 3, wall and
  CPU seconds (the CPU figure is the one to compare on a busy machine).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: the packages a variant is made of (the `before` one as of its commit)
PACKAGES = ("offsetwatch", "exporter", "decoder")
BASE_TS = 1_800_000_000_000
ROUND_MS = 60_000
WINDOW_MS = 120_000
TOPICS = 4
PARTITIONS = 25
BATCH = 50_000

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_COMMIT_V3 = struct.Struct(">hqihq")


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey bytes (checked against RecordFactory.commit in the child)."""
    return _I16.pack(1) + _string(group) + _string(topic) + _I32.pack(partition)


def commit_value(offset: int, commit_ts: int) -> bytes:
    return _COMMIT_V3.pack(3, offset, 5, 0, commit_ts)


class Message:
    __slots__ = ("_key", "_offset", "_partition", "_ts", "_value")

    def __init__(self, partition: int, offset: int, ts: int, key: bytes, value: bytes) -> None:
        self._partition, self._offset, self._ts = partition, offset, (1, ts)
        self._key, self._value = key, value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return self._ts

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value


def log_end(topic_index: int, partition: int, ts: int) -> int:
    """Every topic-partition grows by 100 messages a minute."""
    return 10_000 + topic_index * 7 + partition + (ts - BASE_TS) * 100 // ROUND_MS


# -- the child: one variant, one run --------------------------------------------------------


def _exporter_name(module: str, flat: str, name: str) -> Any:
    import importlib

    try:
        found = importlib.import_module(f"offsetwatch.exporter.{module}")
    except ImportError:
        found = importlib.import_module(f"offsetwatch.exporter.{flat}")
    return getattr(found, name)


def child(groups: int) -> dict[str, Any]:
    from offsetwatch.decoder.codec import Codec
    from offsetwatch.exporter.stats import PipelineStats
    from offsetwatch.record_factory import Member, RecordFactory

    # the exporter's modules as of today, or as they were named before its parts had folders
    SnapshotBuilder = _exporter_name("judge.snapshot", "snapshot", "SnapshotBuilder")
    Status = _exporter_name("judge.status", "status", "Status")
    StatusConfig = _exporter_name("judge.status", "status", "StatusConfig")
    Ingestor = _exporter_name("state.ingest", "ingest", "Ingestor")
    LogEndHistory = _exporter_name("state.lag", "lag", "LogEndHistory")
    OffsetState = _exporter_name("state.offset_state", "state", "OffsetState")

    factory = RecordFactory()
    key, value = factory.commit("g", "t", 3, 9, 7, leader_epoch=5)
    assert (key, value) == (commit_key("g", "t", 3), commit_value(9, 7)), "layout drifted"

    def topic_index(g: int, t: int) -> int:
        return (g % 50) * TOPICS + t

    def topic(g: int, t: int) -> str:
        return f"topic-{topic_index(g, t):03d}"

    def members(g: int, extra: bool) -> list[Member]:
        half = PARTITIONS // 2
        out = [
            Member(
                f"consumer-{m}-{g}",
                f"app-{g}-{m}",
                f"/10.{g % 250}.0.{m + 1}",
                tuple((topic(g, t), tuple(span)) for t in range(TOPICS)),
            )
            for m, span in enumerate((range(half), range(half, PARTITIONS)))
        ]
        if extra:
            out.append(Member(f"extra-{g}", f"app-{g}-x", f"/10.{g % 250}.0.9", ()))
        return out

    names = [f"group-{g:06d}" for g in range(groups)]
    parts = [zlib.crc32(name.encode()) % 50 for name in names]
    keys = [
        [commit_key(names[g], topic(g, t), p) for t in range(TOPICS) for p in range(PARTITIONS)]
        for g in range(groups)
    ]
    positions: dict[int, int] = {}

    def message(part: int, ts: int, k: bytes, v: bytes) -> Message:
        offset = positions.get(part, 0)
        positions[part] = offset + 1
        return Message(part, offset, ts, k, v)

    def group_records(ts: int, generation: int, which: range | list[int]) -> list[Message]:
        out = []
        for g in which:
            k, v = factory.classic_group(names[g], generation, members(g, generation % 2 == 0), ts)
            out.append(message(parts[g], ts, k, v))  # type: ignore[arg-type]
        return out

    def commits(round_: int) -> Iterator[list[Message]]:
        ts = BASE_TS + round_ * ROUND_MS
        batch: list[Message] = []
        for g in range(groups):
            stuck = g % 10 == 0
            for i, k in enumerate(keys[g]):
                t, p = divmod(i, PARTITIONS)
                # a stuck group's first member (partitions 0-11) never moves
                offset = (
                    5_000 if stuck and p < PARTITIONS // 2 else log_end(topic_index(g, t), p, ts)
                )
                batch.append(message(parts[g], ts + g, k, commit_value(offset, ts + g)))
                if len(batch) >= BATCH:
                    yield batch
                    batch = []
        if batch:
            yield batch

    state = OffsetState()
    ingestor = Ingestor(state, PipelineStats(), Codec())
    histories: dict[tuple[str, int], Any] = {}
    cpu = 0.0
    records = 0

    def ingest(batch: list[Message]) -> None:
        nonlocal cpu, records
        started = time.process_time()
        ingestor.ingest(batch)
        cpu += time.process_time() - started
        records += len(batch)

    def sample(until: int) -> None:
        for ts in range(until - ROUND_MS + 30_000, until + 1, 30_000):
            for ti in range(50 * TOPICS):
                for p in range(PARTITIONS):
                    history = histories.setdefault((f"topic-{ti:03d}", p), LogEndHistory())
                    history.record(ts, log_end(ti, p, ts))

    gc.collect()
    rss_before = _rss()
    first = group_records(BASE_TS - 1, 1, range(groups))
    started = time.process_time()
    ingestor.ingest(first)
    group_cpu = time.process_time() - started
    group_n = len(first)
    del first
    rounds = 4
    rss_after = 0
    for round_ in range(rounds):
        now = BASE_TS + round_ * ROUND_MS
        sample(now)
        # 1% of the groups rebalance every round
        churn = group_records(now, round_ + 2, list(range(0, groups, 100)))
        started = time.process_time()
        ingestor.ingest(churn)
        group_cpu += time.process_time() - started
        group_n += len(churn)
        for batch in commits(round_):
            ingest(batch)
        del batch
        state.roll_windows(now, WINDOW_MS)
        if round_ == 0:
            gc.collect()
            rss_after = _rss()
    tracked = state.tracked_count()
    now = BASE_TS + (rounds - 1) * ROUND_MS + 5_000
    builder = SnapshotBuilder(status_config=StatusConfig(window_ms=WINDOW_MS))
    builds = []
    build_cpu = []
    snapshot = None
    for _ in range(3):
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        snapshot = builder.build(state, histories, now, ready=True)
        builds.append(time.perf_counter() - started)
        build_cpu.append(time.process_time() - cpu_started)
    assert snapshot is not None
    bad = [g for g in snapshot.groups if g.status is not Status.OK]
    causes: dict[str, int] = {}
    for g in bad:
        diagnosis = getattr(g, "diagnosis", None)
        cause = "-" if diagnosis is None or diagnosis.cause is None else diagnosis.cause.value
        causes[cause] = causes.get(cause, 0) + 1
    return {
        "tracked": tracked,
        "records": records,
        "ingest_cpu_s": cpu,
        "group_records": group_n,
        "group_cpu_s": group_cpu,
        "rss_delta": rss_after - rss_before,
        "build_s": min(builds),
        "build_cpu_s": min(build_cpu),
        "not_ok": len(bad),
        "causes": causes,
    }


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


# -- the parent -----------------------------------------------------------------------------


def before_tree(commit: str, into: Path) -> Path:
    """The packages as of `commit`, with this tree's built accelerators beside the C sources
    of the same name (each checks it was built from the source beside it, else stays off)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit, *PACKAGES],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="fully_trusted")
    built = {so.name.split(".")[0]: so for so in REPO.glob("*/**/_*speedups*.so")}
    for source in into.glob("*/**/_*speedups.c"):
        so = built.get(source.stem)
        if so is not None:
            shutil.copy2(so, source.with_name(so.name))
    return into


def run_child(groups: int, pythonpath: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(groups)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),  # not the repo: `offsetwatch` must come from PYTHONPATH
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 partitions, 1 run")
    parser.add_argument("--runs", type=int, default=2, help="runs per variant (best of)")
    parser.add_argument("--before", default="dc35b15", help="the commit before the diagnosis")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    groups = 1_000 if args.quick else 10_000
    runs = 1 if args.quick else args.runs
    with tempfile.TemporaryDirectory(prefix="ow-before-") as tmp:
        base = before_tree(args.before, Path(tmp))
        results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for _ in range(runs):
            results["before"].append(run_child(groups, base))
            results["after"].append(run_child(groups, None))
    best = {
        name: {
            "tracked": rs[0]["tracked"],
            "records": rs[0]["records"],
            "ingest_us": min(r["ingest_cpu_s"] / r["records"] for r in rs) * 1e6,
            "group_us": min(r["group_cpu_s"] / r["group_records"] for r in rs) * 1e6,
            "bytes": min(r["rss_delta"] for r in rs) / rs[0]["tracked"],
            "build_s": min(r["build_s"] for r in rs),
            "build_cpu_s": min(r["build_cpu_s"] for r in rs),
            "not_ok": rs[0]["not_ok"],
            "causes": rs[0]["causes"],
        }
        for name, rs in results.items()
    }
    b, a = best["before"], best["after"]
    print(
        f"tracked partitions: {a['tracked']:,}; commits ingested: {a['records']:,}; best of {runs}"
    )
    rows = [
        ("ingest CPU per record (us)", b["ingest_us"], a["ingest_us"], 10.0),
        ("GroupMetadata record CPU (us)", b["group_us"], a["group_us"], None),
        ("memory per tracked partition (B)", b["bytes"], a["bytes"], 20.0),
        ("snapshot build, wall (s)", b["build_s"], a["build_s"], None),
        ("snapshot build, CPU (s)", b["build_cpu_s"], a["build_cpu_s"], None),
    ]
    print(f"{'figure':<36}{'before':>12}{'after':>12}{'change':>10}  target")
    for name, before, after, target in rows:
        change = (after - before) / before * 100 if before else 0.0
        goal = f"<= +{target:.0f}% {'met' if change <= target else 'NOT met'}" if target else ""
        print(f"{name:<36}{before:>12.3f}{after:>12.3f}{change:>+9.1f}%  {goal}")
    print(f"groups not OK: {a['not_ok']:,}; their causes: {a['causes']}")


if __name__ == "__main__":
    main()
