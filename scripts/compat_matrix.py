"""`make test-compat`: the real-broker scenarios that differ between Kafka releases, once per
release of the version matrix (scripts/kafka/versions.toml), on a broker of that release with
that release's own tools as the reference.

    python scripts/compat_matrix.py [VERSION ...] [--with-default] [--parallel N]

Without VERSIONs: every release of the matrix but the default (4.4.0), which `make test`
runs. Each release is one pytest run with OFFSETWATCH_BROKER_VERSION set (its own shared
broker, its own brokers for share groups), N releases at a time (default 2: a broker and
Kafka's tools are JVMs, and the machines have two cores). The logs go to .compat/VERSION.log;
the table at the end says, per release, what passed, what was skipped and why (a release
without share or streams groups skips their scenarios), and how long it took. Any failure, or
a release that could not be fetched, fails the run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "scripts" / "kafka"))

import kafka_dist  # noqa: E402
import kafka_launcher  # noqa: E402

#: the modules whose answers depend on the release: what Kafka writes (dump-log of its own
#: segments, live decoding), what its OffsetFetch / ListOffsets / DescribeGroups answer
#: (the exporter's API and metrics, `groups`, `offsets reset` plans), share and streams groups,
#: the fleet's group protocol
SCENARIOS: Final = (
    "tests/offsetwatch/test_decode_real_broker.py",
    "tests/offsetwatch/test_groups_real_broker.py",
    "tests/offsetwatch/test_offsets_real_broker.py",
    "tests/exporter/test_real_broker.py",
    "tests/decoder/test_share_state_broker.py",
    "tests/exporter/test_share_groups_real_broker.py",
    "tests/exporter/test_streams_groups_real_broker.py",
    # a fleet's membership: KIP-848 where the release has it, the classic fallback elsewhere
    "tests/exporter/sources/test_fleet_source_real.py",
)
LOG_DIR: Final = REPO_ROOT / ".compat"
#: pytest's last line: "12 passed, 3 skipped in 101.20s (0:01:41)" (-q drops the "=" rule)
SUMMARY: Final = re.compile(r"^=*\s*(\d+ \w+.* in [0-9.]+s.*?)\s*=*\s*$")


@dataclass(frozen=True, slots=True)
class Outcome:
    version: str
    code: int
    summary: str
    skipped: tuple[str, ...]
    seconds: float


def run_release(version: str, python: str) -> Outcome:
    log = LOG_DIR / f"{version}.log"
    started = time.monotonic()
    env = dict(os.environ, OFFSETWATCH_BROKER_VERSION=version)
    env.pop("OFFSETWATCH_TEST_KAFKA_HOME", None)  # the matrix runs Maven Central's releases
    env.pop("OFFSETWATCH_TEST_BROKER_RUN_DIR", None)
    with log.open("w") as out:
        done = subprocess.run(
            [python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *SCENARIOS],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    text = log.read_text(errors="replace")
    found = [SUMMARY.search(line) for line in text.splitlines()]
    summary = next((m.group(1) for m in reversed(found) if m), f"pytest exited {done.returncode}")
    skipped = tuple(
        dict.fromkeys(
            line.split(": ", 1)[-1].strip()
            for line in text.splitlines()
            if line.startswith("SKIPPED")
        )
    )
    return Outcome(version, done.returncode, summary, skipped, time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run the release-dependent real-broker tests on every Kafka of the matrix."
    )
    parser.add_argument("versions", nargs="*", help="releases or lines (default: the matrix)")
    parser.add_argument("--with-default", action="store_true", help="run the default release too")
    parser.add_argument("--parallel", type=int, default=2, help="releases at a time (2)")
    args = parser.parse_args(argv)
    books = kafka_dist.catalog()
    try:
        if args.versions:
            versions = [books.resolve(v) for v in args.versions]
        else:
            versions = [v for v in books.matrix if args.with_default or v != books.default]
        for version in versions:
            kafka_launcher.build_class_archive(kafka_dist.fetch(version))
    except kafka_dist.KafkaDistError as error:
        print(f"compat_matrix: {error}", file=sys.stderr)
        return 2
    LOG_DIR.mkdir(exist_ok=True)
    print(f"Kafka {', '.join(versions)}: {len(SCENARIOS)} modules each, logs in {LOG_DIR}")
    if not args.versions and not args.with_default:
        print(f"(Kafka {books.default}, the default, is `make test`'s)")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        outcomes = list(pool.map(lambda v: run_release(v, sys.executable), versions))
    print(f"\n{'release':<8} {'verdict':<7} {'time':>6}  summary")
    for o in outcomes:
        verdict = "ok" if o.code == 0 else "FAILED"
        print(f"{o.version:<8} {verdict:<7} {o.seconds:>5.0f}s  {o.summary}")
        for reason in o.skipped:
            print(f"{'':<24}skipped: {reason}")
    failed = [o.version for o in outcomes if o.code != 0]
    print(f"\nmatrix: {time.monotonic() - started:.0f} s wall", end="")
    if failed:
        print(f"; failed on Kafka {', '.join(failed)} (see {LOG_DIR}/<version>.log)")
        return 1
    print("; every release passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
