"""`offsetwatch spark analyze`: episodes, group statistics and windows from the history lake."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from offsetwatch.commands import UsageError, apply_env_defaults, seconds
from offsetwatch.commands.spark._common import (
    add_spark_options,
    input_path,
    output_directory,
    session_from_args,
)
from offsetwatch.durations import parse_duration_ms
from offsetwatch.instants import instant_or_ago_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from offsetwatch.commands import Subparsers
    from offsetwatch.spark_jobs.analytics import AnalyticsResult

DESCRIPTION = """\
Analyse the history lake (offsetwatch spark compact) with the exporter's status rules:

  episodes     stalls, stops, rewinds, lag-SLO breaches, commit-rate anomalies and rebalance
               storms, each with its start, end (empty: still going) and size
  groups       per group: rebalances, storms, member churn, time spent in each status
  windows      per group/topic/partition and 1 min / 5 min / 1 h window: commits, offsets,
               progress, consumption rate, commit intervals, lag at the window's end
  timeline     (--out only) every partition's status, lag and lag seconds at every minute

Statuses are evaluated every minute over the exporter's 10-minute window
(docs/status-rules.md), so the history says what the live exporter said, or would have.
--since only trims the output: the state before it (last commits, samples) still counts.
"""

EPILOG = """\
examples:
  # what went wrong in the last day, as tables on the terminal
  offsetwatch spark analyze --lake /data/lake --since 24h

  # one incident window, as JSON lines for jq
  offsetwatch spark analyze --lake /data/lake --since 2026-11-24T08:00:00Z \\
      --until 2026-11-24T12:00:00Z --format json | jq 'select(.table == "episodes")'

  # everything as Parquet for a notebook or the alert job, stricter lag SLO (2 min)
  offsetwatch spark analyze --lake /data/lake --out /data/analytics --format parquet \\
      --lag-slo 120
"""

OUTPUTS: Final = ("episodes", "group_stats", "windows", "timeline")


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "analyze",
        help="episodes (stalls, stops, rewinds, SLO breaches, storms), group stats, windows",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lake", type=Path, required=True, metavar="DIR", help="the lake")
    parser.add_argument("--since", metavar="T", help="output from T (ISO 8601, epoch ms, 24h)")
    parser.add_argument("--until", metavar="T", help="history up to T (default: all of it)")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="write episodes, group_stats, windows, timeline"
    )
    parser.add_argument(
        "--format",
        choices=("table", "json", "parquet"),
        default="table",
        help="table (default, terminal), json (JSON lines, to stdout or --out), parquet "
        "(needs --out)",
    )
    parser.add_argument(
        "--lag-slo",
        type=seconds(0.001),
        default=300.0,
        metavar="SECONDS",
        help="lag-SLO episodes when lag seconds exceed this (default: 300)",
    )
    parser.add_argument(
        "--storm",
        default="5/10m",
        metavar="N/SPAN",
        help="a rebalance storm: N rebalances within SPAN (default: 5/10m)",
    )
    add_spark_options(parser)
    apply_env_defaults(parser)
    parser.set_defaults(handler=run)
    return parser


def _storm(text: str) -> tuple[int, int]:
    count, sep, span = text.partition("/")
    try:
        span_ms = parse_duration_ms(span)
    except ValueError:
        sep = ""
    if not sep or not count.strip().isdigit():
        raise UsageError(f"--storm {text!r}: expected N/SPAN, e.g. 5/10m")
    return int(count), span_ms


def _read_table(spark: SparkSession, lake: Path, name: str, until_ms: int | None) -> DataFrame:
    from pyspark.sql import functions as F

    from offsetwatch.spark_jobs import lake_schema

    schema = {
        lake_schema.COMMITS: lake_schema.COMMITS_SCHEMA,
        lake_schema.LOG_ENDS: lake_schema.LOG_ENDS_SCHEMA,
        lake_schema.GROUP_EVENTS: lake_schema.GROUP_EVENTS_SCHEMA,
        lake_schema.SHARE_STATE: lake_schema.SHARE_STATE_SCHEMA,
    }[name]
    path = lake / name
    if not path.is_dir() or not any(path.rglob("*.parquet")):
        return spark.createDataFrame([], schema)
    table = spark.read.schema(schema).parquet(str(path))
    if until_ms is not None:
        # partition pruning: nothing after --until's day is read at all
        until_day = datetime.fromtimestamp(until_ms / 1000, UTC).date()
        table = table.filter(F.col("date") <= F.lit(until_day))
    return table


def run(args: argparse.Namespace) -> int:
    from offsetwatch.spark_jobs import lake_schema

    now_ms = int(time.time() * 1000)
    try:
        since = None if args.since is None else instant_or_ago_ms(args.since, now_ms)
        until = None if args.until is None else instant_or_ago_ms(args.until, now_ms)
    except ValueError as error:
        raise UsageError(f"--since/--until: {error}") from None
    storm_count, storm_span = _storm(args.storm)
    if args.format == "parquet" and args.out is None:
        raise UsageError("--format parquet writes files: add --out DIR")
    input_path(args.lake, "--lake", "dir")
    commits_dir = args.lake / lake_schema.COMMITS
    if not commits_dir.is_dir() or not any(commits_dir.rglob("*.parquet")):
        raise UsageError(
            f"--lake {args.lake}: no commits table there; build the lake first with "
            "`offsetwatch spark compact --input ARCHIVE --lake DIR`"
        )

    from offsetwatch.spark_jobs.analytics import AnalyticsSettings, analyze

    try:
        settings = AnalyticsSettings(
            lag_slo_seconds=args.lag_slo,
            storm_rebalances=storm_count,
            storm_window_ms=storm_span,
            since_ms=since,
            until_ms=until,
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.out is not None:
        _out_apart_from_lake(args.out, args.lake)
        output_directory(args.out)
    spark = session_from_args(args, "analyze")
    tables = {name: _read_table(spark, args.lake, name, until) for name in lake_schema.LAKE_TABLES}
    result = analyze(
        tables[lake_schema.COMMITS],
        tables[lake_schema.LOG_ENDS],
        tables[lake_schema.GROUP_EVENTS],
        settings,
        # share groups' episodes when the lake has share-partition state
        share_state=_read_table(spark, args.lake, lake_schema.SHARE_STATE, until)
        if (args.lake / lake_schema.SHARE_STATE).is_dir()
        else None,
    )
    if args.out is not None:
        _write(result, args.out, "parquet" if args.format == "parquet" else "json")
        print(f"offsetwatch: wrote {', '.join(OUTPUTS)} to {args.out}", file=sys.stderr)
    elif args.format == "json":
        _print_json(result)
    else:
        _print_tables(result)
    return 0


#: the directories --out gets, each replaced whole (Spark's mode "overwrite")
OUTPUT_TABLES: Final = ("episodes", "group_stats", "windows", "timeline")


def _out_apart_from_lake(out: Path, lake: Path) -> None:
    """Refuse, before the job, an --out whose tables would replace the lake (it lies under
    one of them) or land in it (--out is the lake or inside one of its tables): the lake's
    own directory is read as tables, and "overwrite" deletes what is there first. A
    directory of its own inside the lake (LAKE/analytics) is fine."""
    from offsetwatch.core.paths import inside

    for name in OUTPUT_TABLES:
        if inside(lake, out / name):
            raise UsageError(
                f"--out {out} would replace {out / name}, which holds --lake {lake}: "
                "give another --out"
            )
    from offsetwatch.spark_jobs import lake_schema
    from offsetwatch.spark_jobs.lake_store import BOOKKEEPING

    own = (
        *lake_schema.LAKE_TABLES,
        lake_schema.SHARE_STATE,
        lake_schema.QUARANTINE,
        BOOKKEEPING,
    )
    if inside(lake, out) or any(inside(out, lake / name) for name in own):
        raise UsageError(
            f"--out {out} is --lake {lake} or inside one of its tables: give a directory "
            f"outside the lake or one of its own in it (e.g. {lake / 'analytics'})"
        )


def _frames(result: AnalyticsResult) -> dict[str, DataFrame]:
    return {
        # with the cause and suspects of each episode (docs/diagnosis.md)
        "episodes": result.diagnosed_episodes.orderBy("start_ms", "group", "kind"),
        "group_stats": result.group_stats.orderBy("group"),
        "windows": result.windows.orderBy(
            "group", "topic", "partition", "window_ms", "window_start_ms"
        ),
        "timeline": result.timeline,
    }


def _write(result: AnalyticsResult, out: Path, fmt: str) -> None:
    for name, frame in _frames(result).items():
        writer = frame.write.mode("overwrite")
        target = str(out / name)
        if fmt == "parquet":
            writer.parquet(target)
        else:
            writer.json(target)


def _print_json(result: AnalyticsResult) -> None:
    for name, frame in _frames(result).items():
        if name == "timeline":
            continue
        for row in frame.toLocalIterator():
            print(json.dumps({"table": name, **row.asDict()}))


def _when(ms: Any) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _size(value: Any, unit: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.6g} {unit}"


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"{title} ({len(rows)})")
    if not rows:
        print("  none")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for line in [header, *rows]:
        print(
            "  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        )


def _print_tables(result: AnalyticsResult) -> None:
    frames = _frames(result)
    episodes = [
        [
            e.kind,
            e.group,
            e.topic or "-",
            "-" if e.partition is None else str(e.partition),
            _when(e.start_ms),
            _when(e.end_ms) if e.end_ms is not None else "ongoing",
            _size(e.size, e.unit),
            e.cause or "-",
        ]
        for e in frames["episodes"].collect()
    ]
    _table(
        "Episodes",
        ["kind", "group", "topic", "partition", "start", "end", "size", "cause"],
        episodes,
    )
    print()
    stats = [
        [
            g.group,
            str(g.rebalances),
            str(g.rebalance_storms),
            str(g.member_churn),
            _when(g.deleted_ms),
            *(
                f"{(getattr(g, f'{s}_ms') or 0) / 60_000:.0f}"
                for s in ("ok", "warn", "rewind", "stall", "stop", "err")
            ),
        ]
        for g in frames["group_stats"].collect()
    ]
    header = ["group", "rebalances", "storms", "churn", "deleted", "OK min", "WARN", "REWIND"]
    _table("Groups", [*header, "STALL", "STOP", "ERR"], stats)
    print()
    hourly = frames["windows"].filter("window_ms = 3600000").collect()
    windows = [
        [
            w.group,
            w.topic,
            str(w.partition),
            _when(w.window_start_ms),
            str(w.commits),
            str(w.offset_progress),
            f"{w.consumption_rate:.3g}/s",
            "-" if w.lag is None else str(w.lag),
            "-" if w.lag_seconds is None else f"{w.lag_seconds:.1f}",
        ]
        for w in hourly
    ]
    _table(
        "Hourly windows (1 min and 5 min ones: --out)",
        ["group", "topic", "partition", "hour", "commits", "progress", "rate", "lag", "lag s"],
        windows,
    )
