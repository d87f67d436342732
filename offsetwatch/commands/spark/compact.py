"""`offsetwatch spark compact`: archive / segments / a topic -> the Parquet history lake."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.commands import Repeat, UsageError, apply_env_defaults, reserved_env
from offsetwatch.commands.spark._common import (
    add_kafka_reader_option,
    add_spark_options,
    input_path,
    kafka_reader,
    not_inside,
    output_directory,
    session_from_args,
)
from offsetwatch.core.connection import (
    ConnectionOptionError,
    add_connection_options,
    kafka_config,
)

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers

DESCRIPTION = """\
Turn the history of __consumer_offsets into Parquet tables partitioned by date:
  commits       offset commits and deletions (group, topic, partition, offset, ...)
  group_events  rebalances, members joining and leaving, state changes, group deletions
  log_ends      the exporter's log-end samples (lag history)
  quarantine    input that could not be read, with its file and position

Incremental and idempotent: only input files not compacted before are read (their path,
size and mtime are kept in LAKE/_offsetwatch/), records already in the lake are dropped
(the archive is at-least-once), and a run is published with one atomic commit, so a rerun
is a no-op and an interrupted run leaves no duplicates.
"""

EPILOG = """\
examples:
  # the exporter's archive (offsetwatch export --archive-dir /data/archive), daily from cron
  offsetwatch spark compact --input /data/archive --lake /data/lake

  # raw segment files copied from a broker
  offsetwatch spark compact --source segments --input /backup/kafka-logs --lake /data/lake

  # the republished topic, on a Spark cluster
  offsetwatch spark compact --source kafka --lake hdfs-mounted/lake --master spark://spark:7077 \\
      --bootstrap-server kafka:9092 --option topic=offsetwatch.records
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compact",
        help="build / extend the Parquet history lake from archive, segments or a topic",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--input", type=Path, metavar="PATH", help="archive directory / file, or segment files"
    )
    parser.add_argument(
        "--source",
        choices=("archive", "segments", "kafka"),
        default="archive",
        help="what --input holds (default: archive)",
    )
    parser.add_argument("--lake", type=Path, required=True, metavar="DIR", help="the lake")
    parser.add_argument(
        "--option",
        action=Repeat,
        default=[],
        metavar="KEY=VALUE",
        help="an option of the source, repeatable (topic=..., kafka.<property>=...); it "
        "wins over the connection options",
    )
    connection = parser.add_argument_group("connection (--source kafka)")
    add_connection_options(
        connection,
        bootstrap_help="brokers of the topic (the source option kafka.bootstrap.servers)",
        property_help="the source option kafka.KEY",
    )
    add_kafka_reader_option(connection)
    add_spark_options(parser)
    apply_env_defaults(parser)
    parser.set_defaults(handler=run)
    return parser


def _options(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _source_options(args: argparse.Namespace) -> dict[str, str]:
    """--option items, over the connection's properties as kafka.* options (--source kafka)."""
    options = _options(args.option)
    if args.source != "kafka":
        if args.bootstrap_server is not None or args.kafka_properties:
            raise UsageError("--bootstrap-server and -X only apply to --source kafka")
        return options
    try:
        connection = kafka_config(args, os.environ, reserved_env(args))
    except ConnectionOptionError as error:
        raise UsageError(str(error)) from None
    return {f"kafka.{key}": value for key, value in connection.items()} | options


def run(args: argparse.Namespace) -> int:
    from offsetwatch.spark_jobs.compact import FILE_SOURCES, check_input, compact
    from offsetwatch.spark_jobs.lake_store import Lake, LakeError
    from offsetwatch.spark_jobs.sources import InputError

    options = _source_options(args)
    try:
        if args.source in FILE_SOURCES:
            if args.input is None:
                raise UsageError(f"--input PATH is required with --source {args.source}")
            input_path(args.input, "--input")
            # the lake's own files (Parquet, the manifest) are no input, and an input
            # directory under the lake would be compacted into itself
            not_inside(args.lake, "--lake", args.input, "--input")
            check_input(args.source, args.input)
        output_directory(args.lake, "--lake")
        Lake(args.lake).manifest()  # before Spark starts: a damaged one is found in a second
        conf: dict[str, str] = {}
        if args.source == "kafka":
            options["reader"], conf = kafka_reader(args)
        spark = session_from_args(args, "compact", conf)
        result = compact(spark, args.source, args.lake, args.input, options)
    except InputError as error:
        # the readers name the file, not the option it came from
        where = "--input: " if args.source in FILE_SOURCES else ""
        raise UsageError(f"{where}{error}") from None
    except LakeError as error:
        raise UsageError(str(error)) from None
    added = ", ".join(f"{table} +{rows:,}" for table, rows in result.rows.items())
    bad = sum(result.quarantined.values())
    print(
        f"compacted {result.new_files} of {result.input_files} input files into {args.lake}"
        + (f": {added}" if added else "")
        + (f"; {bad:,} bad input records quarantined" if bad else ""),
        file=sys.stderr,
    )
    return 0
