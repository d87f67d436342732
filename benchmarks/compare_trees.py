"""One benchmark, before and after a change, in one run: the same script of each tree, run
alternately on the same machine, its output printed side by side.

    .venv/bin/python benchmarks/compare_trees.py --before d8698a7 -- benchmarks/exporter.py --quick
    .venv/bin/python benchmarks/compare_trees.py --before d8698a7 --runs 2 -- \\
        benchmarks/real_broker.py --quick --parts 1

"Before" is the repository at `--before`, checked out with `git worktree` into a temporary
directory; its C accelerators are built from its own sources (`pip wheel`, with build
isolation, ~40 s) and put beside them, so both trees run at full speed. Each run starts the
tree's own copy of the benchmark script with that tree first on `PYTHONPATH` (the script's
imports are its tree's). Nothing is compared automatically: benchmarks print their figures
and their ceilings; this puts them next to each other.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def checkout(revision: str, into: Path) -> Path:
    tree = into / "before"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), revision],
        check=True,
    )
    # the shared material (../shared) sits beside the repository: beside the copy too
    shared = REPO.parent / "shared"
    if shared.is_dir() and not (into / "shared").exists():
        (into / "shared").symlink_to(shared)
    return tree


def build_accelerators(tree: Path, into: Path) -> list[str]:
    wheels = into / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(tree),
        ],
        check=True,
    )
    built = []
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.endswith(".so"):
                    # offsetwatch/<package>/... is a symlink into the tree's own folders
                    (tree / name).write_bytes(archive.read(name))
                    built.append(name)
    return built


def run(tree: Path, argv: list[str], label: str) -> tuple[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(tree / argv[0]), *argv[1:]],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{label}: {argv[0]} exited {done.returncode}")
    return done.stdout, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the revision before the change")
    parser.add_argument("--runs", type=int, default=1, help="runs of each tree, alternating")
    parser.add_argument("benchmark", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...]")
    args = parser.parse_args()
    argv = args.benchmark[1:] if args.benchmark[:1] == ["--"] else args.benchmark
    if not argv:
        parser.error("give the benchmark after --, e.g. -- benchmarks/exporter.py --quick")
    with tempfile.TemporaryDirectory(prefix="offsetwatch-compare-") as tmp:
        into = Path(tmp)
        before = checkout(args.before, into)
        try:
            built = build_accelerators(before, into)
            print(f"before: {args.before} ({', '.join(built) or 'no accelerators built'})")
            outputs: dict[str, list[tuple[str, float]]] = {"before": [], "after": []}
            for _ in range(args.runs):
                for label, tree in (("before", before), ("after", REPO)):
                    outputs[label].append(run(tree, argv, label))
            for label in ("before", "after"):
                for i, (text, elapsed) in enumerate(outputs[label], 1):
                    print(f"\n===== {label} (run {i}, {elapsed:.0f} s) =====")
                    print(text.rstrip())
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)],
                check=False,
            )


if __name__ == "__main__":
    main()
