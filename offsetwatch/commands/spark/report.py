"""`offsetwatch spark report`: one group's recent history as text and a PNG chart."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.commands import UsageError, apply_env_defaults
from offsetwatch.commands.spark._common import (
    add_spark_options,
    input_path,
    output_directory,
    session_from_args,
)
from offsetwatch.instants import instant_or_ago_ms

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers

DESCRIPTION = """\
Summarise a consumer group's history from the lake (offsetwatch spark compact): stalls,
stops, rewinds, lag-SLO breaches and rebalance storms with their start, end and size,
rebalances and member churn, lag percentiles; with --out, also a PNG chart of the committed
offset against the log end and of the lag in seconds over time.
"""

EPILOG = """\
examples:
  offsetwatch spark report --lake /data/lake --group billing --since 24h --out reports/
  offsetwatch spark report --lake /data/lake --group billing --since 2026-11-24T00:00:00Z
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report",
        help="a consumer group's history: episodes, rebalances, lag percentiles, PNG chart",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lake", type=Path, required=True, metavar="DIR", help="the lake")
    parser.add_argument("--group", required=True, metavar="G", help="the consumer group")
    parser.add_argument(
        "--since",
        default="24h",
        metavar="WHEN",
        help="a duration back from now (24h, 30m, 7d) or an instant (default: 24h)",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="write the chart <group>.png here")
    add_spark_options(parser)
    apply_env_defaults(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from offsetwatch.spark_jobs.offsets_at import UnknownGroupError
    from offsetwatch.spark_jobs.report import build_report

    try:
        start = instant_or_ago_ms(args.since, int(time.time() * 1000))
    except ValueError as error:
        raise UsageError(f"--since: {error}") from None
    input_path(args.lake, "--lake", "dir")
    if not (args.lake / "commits").is_dir() and not (args.lake / "group_events").is_dir():
        raise UsageError(
            f"--lake {args.lake} holds no lake: build it with offsetwatch spark compact"
        )
    if args.out is not None:
        output_directory(args.out)
    try:
        spark = session_from_args(args, "report")
        report = build_report(spark, args.lake, args.group, start, args.out)
    except UnknownGroupError as error:
        raise UsageError(str(error.args[0])) from None
    print(report.summary)
    if report.chart is not None:
        print(f"chart: {report.chart}")
    return 0
