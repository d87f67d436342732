"""`python -m offsetwatch.dashboards [--check]`: write (or check) the generated files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from offsetwatch.dashboards.outputs import render, stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m offsetwatch.dashboards",
        description="Generate the Grafana dashboards, the Grafana-managed alert rules and the "
        "Kubernetes PrometheusRule from code and from grafana/prometheus/offsetwatch-rules.yml.",
        epilog="examples:\n  python -m offsetwatch.dashboards          # rewrite the files\n"
        "  python -m offsetwatch.dashboards --check  # exit 1 if any is out of date",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (default .)")
    parser.add_argument("--check", action="store_true", help="only report out-of-date files")
    args = parser.parse_args(argv)
    if not (args.root / "grafana").is_dir():
        parser.error(f"{args.root.resolve()} has no grafana/ folder; run from the repository root")
    if args.check:
        outdated = stale(args.root)
        for path in outdated:
            print(f"out of date: {path} (run python -m offsetwatch.dashboards)", file=sys.stderr)
        return 1 if outdated else 0
    for path, text in render(args.root).items():
        target = args.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
