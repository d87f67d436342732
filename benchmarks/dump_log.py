"""`offsetwatch decode --format dump-log` on the real 1M-record segment, against kafka-dump-log.

The reference (../shared/bench/README.md): Kafka 4.0.0's
`kafka-dump-log.sh --offsets-decoder --deep-iteration --files <segment>` prints the 1,000,000
records of `consumer-offsets-1m.log.zst` (decompressed) in 7.8 s wall, 10.6 s CPU, on a
2-core machine like ours. The goal is at least twice as fast: under 3.9 s wall.

Measured here, each the best of `--repeat` runs (wall clock and CPU time, so that a busy
shared machine shows up as a wall/CPU gap rather than as a slower decoder), output to
/dev/null:

* the installed console script, as a user runs it:
  `offsetwatch decode --format dump-log --no-progress <segment> > /dev/null`
  (a fresh process: interpreter start-up and imports included; CPU and peak RSS of the child);
* the same CLI code path in this process (`offsetwatch.cli.main`, `-o /dev/null`);
* the naive baseline, both ways: the same CLI with the dump-log renderer swapped for
  `dumps(KafkaJson().dump_log(record))` - a dict per record, then `json.dumps` (how
  dump-log lines were made before `KafkaJson.dump_log_text`).

Before measuring, both renderers write the whole segment to files that must be byte-identical.

Run: `.venv/bin/python benchmarks/dump_log.py [--repeat N] [--segment FILE.log]`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from offsetwatch import cli  # noqa: E402
from offsetwatch.commands.decode import loop as decode_cmd  # noqa: E402
from offsetwatch.decoder import KafkaJson  # noqa: E402
from offsetwatch.decoder.canonical import dumps  # noqa: E402

KAFKA_WALL = 7.8
KAFKA_CPU = 10.6
TARGET_SPEEDUP = 2.0
#: issue 22: against Kafka's tool measured beside it in the same run
TARGET_SPEEDUP_MEASURED = 5.0
SEGMENT_NAME = "00000000000000000000.log"

#: the naive renderer, for `python -c` (argv[1] is the segment)
BASELINE_SCRIPT = """
import sys
from offsetwatch.decoder import KafkaJson
from offsetwatch.decoder.canonical import dumps
from offsetwatch import cli
from offsetwatch.commands.decode import loop as decode

def naive(fmt):
    dump_log = KafkaJson().dump_log
    return lambda record, status: dumps(dump_log(record))

decode._renderer = naive
sys.exit(cli.main(["decode", "--format", "dump-log", "--no-progress", sys.argv[1]]))
"""


def bench_dir() -> Path:
    """Where consumer-offsets-1m.log.zst lives (same conventions as tests/conftest.py)."""
    explicit = os.environ.get("OFFSETWATCH_BENCH_DIR")
    if explicit:
        return Path(explicit)
    conformance = os.environ.get("OFFSETWATCH_CONFORMANCE_DIR")
    if conformance:
        return Path(conformance).parent / "bench"
    return REPO_ROOT.parent / "shared" / "bench"


def naive_renderer(fmt: str) -> Callable[[Any, str | None], Any]:
    """`decode._renderer` as it was for dump-log: a dict per record, then json.dumps."""
    assert fmt == "dump-log"
    dump_log = KafkaJson().dump_log
    return lambda record, status: dumps(dump_log(record))


@contextmanager
def naive_cli() -> Iterator[None]:
    real = decode_cmd._renderer
    decode_cmd._renderer = naive_renderer
    try:
        yield
    finally:
        decode_cmd._renderer = real


def console_script() -> list[str]:
    script = Path(sys.executable).parent / "offsetwatch"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "offsetwatch.cli"]  # pragma: no cover - not installed


@dataclass
class Result:
    name: str
    wall: float
    cpu: float
    rss_mb: float | None = None


def in_process(segment: Path, output: str = os.devnull) -> tuple[float, float]:
    argv = ["decode", "--format", "dump-log", "--no-progress", "-o", output, str(segment)]
    wall, cpu = time.perf_counter(), time.process_time()
    code = cli.main(argv)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if code != 0:
        raise SystemExit(f"offsetwatch decode exited with {code}")
    return wall, cpu


def kafka_tool() -> list[str] | None:
    """Kafka 4.0.0's own kafka-dump-log (../shared/kafka), None when it is not there."""
    script = bench_dir().parent / "kafka" / "dist" / "bin" / "kafka-dump-log.sh"
    if not script.exists() or not shutil.which("java"):
        return None
    return [str(script), "--offsets-decoder", "--deep-iteration", "--files"]


#: Kafka's tools open an RMI port for JMX by default (see ../shared/kafka/README.md)
KAFKA_ENV: Final = {**os.environ, "KAFKA_JMX_OPTS": "-Dkafka.jmx.disabled=true"}


def child(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """(wall, CPU, peak RSS MB) of one child process writing to /dev/null."""
    with open(os.devnull, "wb") as devnull, tempfile.TemporaryFile() as errors:
        wall = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=devnull, stderr=errors, cwd=REPO_ROOT, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - wall
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{argv[0]} exited with {proc.returncode}: {errors.read()!r}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def best_of(name: str, repeat: int, run: Callable[[], tuple[float, ...]]) -> Result:
    runs = [run() for _ in range(repeat)]
    rss = [r[2] for r in runs if len(r) > 2]
    return Result(name, min(r[0] for r in runs), min(r[1] for r in runs), max(rss) if rss else None)


def digest(path: Path) -> tuple[str, int]:
    sha = hashlib.sha256()
    lines = 0
    with path.open("rb") as data:
        while block := data.read(1 << 22):
            sha.update(block)
            lines += block.count(b"\n")
    return sha.hexdigest(), lines


def prepare_segment(workdir: Path) -> Path:
    import cramjam

    source = bench_dir() / "consumer-offsets-1m.log.zst"
    if not source.exists():
        raise SystemExit(f"{source} not found (set OFFSETWATCH_BENCH_DIR)")
    partition_dir = workdir / "__consumer_offsets-0"  # a real partition directory name
    partition_dir.mkdir()
    segment = partition_dir / SEGMENT_NAME
    segment.write_bytes(bytes(cramjam.zstd.decompress(source.read_bytes())))
    return segment


def check_identical(segment: Path, workdir: Path) -> int:
    """Both renderers over the whole segment: byte-identical files; the number of lines."""
    fast, naive = workdir / "fast.jsonl", workdir / "naive.jsonl"
    in_process(segment, str(fast))
    with naive_cli():
        in_process(segment, str(naive))
    (fast_sha, fast_lines), (naive_sha, naive_lines) = digest(fast), digest(naive)
    fast.unlink()
    naive.unlink()
    if (fast_sha, fast_lines) != (naive_sha, naive_lines):
        raise SystemExit(
            f"outputs differ: dump_log_text {fast_sha} ({fast_lines} lines), "
            f"dicts + json.dumps {naive_sha} ({naive_lines} lines)"
        )
    print(
        f"output identical to the dict + json.dumps path: {fast_lines:,} lines, "
        f"sha256 {fast_sha[:16]}..."
    )
    return fast_lines


def side_by_side(segment: Path, script: list[str], tool: list[str], repeat: int) -> None:
    """The console script and Kafka's tool alternately (so that both see the same load):
    the medians of the wall and CPU times and their ratio, the figure issue 22 asks for."""
    ours: list[tuple[float, float, float]] = []
    theirs: list[tuple[float, float, float]] = []
    for _ in range(repeat):
        ours.append(child([*script, str(segment)]))
        theirs.append(child([*tool, str(segment)], KAFKA_ENV))
    print(
        f"\nside by side, {repeat} alternating runs each (medians), load average "
        f"{os.getloadavg()[0]:.1f} at the end:"
    )
    rows = (("kafka-dump-log --offsets-decoder (measured)", theirs), ("offsetwatch decode", ours))
    for name, runs in rows:
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        print(f"  {name:<44}{wall:>8.2f} s wall{cpu:>8.2f} s CPU{rss:>8,.0f} MB")
    wall_ratio = statistics.median(t[0] for t in theirs) / statistics.median(o[0] for o in ours)
    cpu_ratio = statistics.median(t[1] for t in theirs) / statistics.median(o[1] for o in ours)
    per_run = ", ".join(f"{t[0] / o[0]:.2f}x" for o, t in zip(ours, theirs, strict=True))
    verdict = "met" if wall_ratio >= TARGET_SPEEDUP_MEASURED else "NOT met"
    print(
        f"  offsetwatch is {wall_ratio:.2f}x faster (wall; per pair {per_run}), "
        f"{cpu_ratio:.2f}x less CPU; goal {TARGET_SPEEDUP_MEASURED:g}x wall: {verdict}"
    )


def report(results: list[Result], records: int) -> None:
    print()
    header = f"{'':<44}{'wall s':>8}{'CPU s':>8}{'records/s':>12}{'vs kafka':>10}{'RSS MB':>8}"
    print(header)
    rows = [Result("kafka-dump-log 4.0.0 (README reference)", KAFKA_WALL, KAFKA_CPU, 376), *results]
    for r in rows:
        rss = "" if r.rss_mb is None else f"{r.rss_mb:,.0f}"
        print(
            f"{r.name:<44}{r.wall:>8.2f}{r.cpu:>8.2f}{records / r.wall:>12,.0f}"
            f"{KAFKA_WALL / r.wall:>9.2f}x{rss:>8}"
        )
    target = KAFKA_WALL / TARGET_SPEEDUP
    fast = results[0]
    verdict = "met" if fast.wall < target else "NOT met"
    print(
        f"\ngoal: {TARGET_SPEEDUP:g}x kafka-dump-log = under {target:.2f} s wall for the console "
        f"script: {verdict} ({fast.wall:.2f} s wall, {KAFKA_WALL / fast.wall:.2f}x; "
        f"{fast.cpu:.2f} s CPU)"
    )
    naive = next(r for r in results if r.name.startswith("naive") and "script" in r.name)
    print(
        f"dump_log_text vs naive baseline (console script): {naive.wall / fast.wall:.2f}x wall, "
        f"{naive.cpu / fast.cpu:.2f}x CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    parser.add_argument("--baseline-repeat", type=int, default=1, help="runs of the baseline")
    parser.add_argument("--segment", type=Path, help="an already decompressed segment file")
    parser.add_argument(
        "--kafka-repeat", type=int, default=3, help="alternating runs beside Kafka's tool (0: none)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dump-log-bench-") as tmp:
        workdir = Path(tmp)
        segment = args.segment or prepare_segment(workdir)
        load_before = os.getloadavg()[0]
        records = check_identical(segment, workdir)
        script = [*console_script(), "decode", "--format", "dump-log", "--no-progress"]
        results = [
            best_of(
                "offsetwatch decode (console script)",
                args.repeat,
                lambda: child([*script, str(segment)]),
            ),
            best_of(
                "offsetwatch decode (in-process cli.main)", args.repeat, lambda: in_process(segment)
            ),
            best_of(
                "naive dicts + json.dumps (console script)",
                args.baseline_repeat,
                lambda: child([sys.executable, "-c", BASELINE_SCRIPT, str(segment)]),
            ),
        ]
        with naive_cli():
            results.append(
                best_of(
                    "naive dicts + json.dumps (in-process)",
                    args.baseline_repeat,
                    lambda: in_process(segment),
                )
            )
        tool = kafka_tool()
        if tool is None:
            print("\nKafka's kafka-dump-log (../shared/kafka) or java not found: not measured")
        elif args.kafka_repeat > 0:
            side_by_side(segment, script, tool, args.kafka_repeat)
    report(results, records)
    load = os.getloadavg()[0]
    print(
        f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{load_before:.2f} before / {load:.2f} after; a wall/CPU gap means a busy machine)"
    )


if __name__ == "__main__":
    main()
