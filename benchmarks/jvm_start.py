"""What the launcher's class-data-sharing archive saves: a Kafka tool's and a broker's start.

For one release (the tests' default, or OFFSETWATCH_BROKER_VERSION), in the same run:

* ceiling: `java -Xshare:auto -version`, a JVM that starts and loads almost nothing;
* a tool (`kafka-topics.sh --version`) as `scripts/kafka/broker tool` runs it, with the
  release's archive (`-XX:SharedArchiveFile`) and without;
* a broker formatted, started until it serves, and stopped (SIGTERM), with the archive and
  without, the JVM options as the tests give them (C1 only, serial collector).

CPU seconds are the children's (getrusage, each child reaped); wall seconds are for the tool
and for the broker's start to serving. Median of RUNS runs each. The broker figures come from
the JVM options the tests use (tests/conftest.py sets KAFKA_JVM_PERFORMANCE_OPTS), not
Kafka's G1 defaults.

Run: `.venv/bin/python benchmarks/jvm_start.py [runs]`.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "scripts" / "kafka"))

import kafka_dist  # noqa: E402
import kafka_launcher  # noqa: E402

RUNS = 5
#: the tests' broker JVM (tests/conftest.py)
TEST_BROKER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(action: Callable[[], float]) -> tuple[float, float]:
    """(wall seconds `action` reports, children's CPU seconds it used)."""
    cpu = children_cpu_s()
    wall = action()
    return wall, children_cpu_s() - cpu


def bare_jvm() -> float:
    start = time.perf_counter()
    subprocess.run(
        [kafka_launcher.java_or_fail(), "-Xshare:auto", "-version"],
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - start


def tool(kafka: kafka_dist.Release, sharing: bool) -> Callable[[], float]:
    def run() -> float:
        command = kafka_launcher.tool_command(kafka, "kafka-topics.sh", ["--version"])
        if not sharing:
            command = [c for c in command if not c.startswith("-XX:SharedArchiveFile=")]
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        return time.perf_counter() - start

    return run


def broker(kafka: kafka_dist.Release, sharing: bool) -> Callable[[], float]:
    def run() -> float:
        with tempfile.TemporaryDirectory(prefix="offsetwatch-jvm-start-") as work:
            port = kafka_launcher.free_port_pair()
            voters = f"1@{kafka_launcher.HOST}:{port + 1}"
            node = kafka_launcher.prepare(Path(work) / "node", kafka, 1, port, voters, 1, [])
            kafka_launcher.format_node(node, kafka, kafka_launcher.cluster_id(), [])
            original = kafka_launcher.sharing_options
            if not sharing:
                kafka_launcher.sharing_options = lambda _kafka: []  # type: ignore[assignment]
            try:
                start = time.perf_counter()
                pid = kafka_launcher.launch(node)
                kafka_launcher.wait_started(node, pid)
                wall = time.perf_counter() - start
            finally:
                kafka_launcher.sharing_options = original
            kafka_launcher._stop_child(pid)
            return wall

    return run


def median_of(action: Callable[[], float], runs: int) -> tuple[float, float]:
    results = [measured(action) for _ in range(runs)]
    return (
        statistics.median(wall for wall, _ in results),
        statistics.median(cpu for _, cpu in results),
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    os.environ.setdefault("KAFKA_JVM_PERFORMANCE_OPTS", TEST_BROKER_JVM)
    kafka = kafka_dist.release(kafka_launcher._default())
    archive = kafka_launcher.build_class_archive(kafka)
    if archive is None:
        raise SystemExit("no class archive could be written: nothing to compare")
    print(
        f"JVM start-up, Kafka {kafka.version}, {kafka_launcher.java_or_fail()}, "
        f"median of {runs}; load average {os.getloadavg()[0]:.1f}"
    )
    rows = [("java -version (ceiling)", *median_of(bare_jvm, runs))]
    for sharing in (True, False):
        label = "with the archive" if sharing else "without"
        rows.append(
            (f"tool kafka-topics.sh --version, {label}", *median_of(tool(kafka, sharing), runs))
        )
    for sharing in (True, False):
        label = "with the archive" if sharing else "without"
        rows.append((f"broker start to serving, {label}", *median_of(broker(kafka, sharing), runs)))
    print(f"{'':<50} {'wall s':>7} {'CPU s':>7}")
    for name, wall, cpu in rows:
        print(f"{name:<50} {wall:7.2f} {cpu:7.2f}")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
