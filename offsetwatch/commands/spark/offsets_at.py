"""`offsetwatch spark offsets-at`: the offsets a group had committed at a point in time."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.commands import UsageError, apply_env_defaults
from offsetwatch.commands.spark._common import add_spark_options, input_path, session_from_args

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers

DESCRIPTION = """\
Print the offsets group G had committed at time T, after the offset deletions, expiries and
group deletions up to T, as `topic,partition,offset` lines: exactly what
`kafka-consumer-groups.sh --reset-offsets --from-file FILE` reads (no header).

--input is the lake (offsetwatch spark compact), the exporter's archive directory, or any
file / directory of canonical JSON lines (offsetwatch decode --format json).
"""

EPILOG = """\
examples:
  # where was billing yesterday at 10:00 UTC? then put it back there
  offsetwatch spark offsets-at --input /data/lake --group billing --time 2026-11-24T10:00:00Z \\
      > billing.csv
  kafka-consumer-groups.sh --bootstrap-server kafka:9092 --group billing \\
      --reset-offsets --from-file billing.csv --execute

  # straight from a decode of the live topic, as JSON
  offsetwatch decode --bootstrap-server kafka:9092 --format json > history.json
  offsetwatch spark offsets-at --input history.json --group billing --time 1795291757128 \\
      --format json
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "offsets-at",
        help="the offsets a group had committed at a point in time (CSV for --reset-offsets)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--input", type=Path, required=True, metavar="PATH", help="lake, archive or JSON lines"
    )
    parser.add_argument("--group", required=True, metavar="G", help="the consumer group")
    parser.add_argument(
        "--time", required=True, metavar="T", help="ISO 8601 (2026-11-24T10:00:00Z) or epoch ms"
    )
    parser.add_argument(
        "--format", choices=("csv", "json"), default="csv", help="output format (default: csv)"
    )
    add_spark_options(parser)
    apply_env_defaults(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from offsetwatch.spark_jobs.offsets_at import (
        UnknownGroupError,
        offsets_at_from_path,
        parse_time,
    )
    from offsetwatch.spark_jobs.sources import InputError

    try:
        time_ms = parse_time(args.time)
    except ValueError as error:
        raise UsageError(f"--time: {error}") from None
    if not args.input.exists() and not args.input.is_symlink():
        raise UsageError(f"--input {args.input} does not exist: give the lake or an archive")
    input_path(args.input, "--input")
    try:
        spark = session_from_args(args, "offsets-at")
        offsets = offsets_at_from_path(args.input, args.group, time_ms, spark)
    except (UnknownGroupError, InputError) as error:
        raise UsageError(str(error.args[0])) from None
    ordered = sorted(offsets.items())
    if args.format == "json":
        rows = [{"topic": t, "partition": p, "offset": o} for (t, p), o in ordered]
        print(json.dumps({"group": args.group, "time_ms": time_ms, "offsets": rows}))
    else:
        for (topic, partition), offset in ordered:
            print(f"{topic},{partition},{offset}")
    if not offsets:
        print(
            f"offsetwatch: group {args.group!r} had no committed offsets at {args.time}",
            file=sys.stderr,
        )
    return 0
