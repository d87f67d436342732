"""`offsetwatch spark stream`: alerts continuously from the archive directory or a Kafka topic."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.commands import (
    UsageError,
    apply_env_defaults,
    reserved_env,
    seconds,
    topic_name,
)
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
from offsetwatch.core.topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers

EXAMPLES = """\
examples:
  # alerts from the exporter's archive as files are published, to Alertmanager
  offsetwatch spark stream --archive /data/offsetwatch/archive \\
      --checkpoint /data/offsetwatch/stream-ckpt --alertmanager http://alertmanager:9093

  # from the republished topic (or the raw __consumer_offsets), alerts to a topic too
  offsetwatch spark stream --bootstrap-server broker:9092 --topic offsets-canonical \\
      --checkpoint /data/ckpt --alerts-topic offsetwatch-alerts

  # catch up on what is there and stop (e.g. from cron)
  offsetwatch spark stream --archive DIR --checkpoint CKPT --available-now

Each episode (stall, stop, rewind, lag SLO, commit-rate anomaly, rebalance storm) is one
alert: emitted once when found open, once when it ends. Restarting with the same
--checkpoint resumes exactly: no alert twice, none lost (docs/spark-alerts.md).
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "stream",
        help="Structured Streaming: alerts continuously from the archive or a topic",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_argument_group("input (one of)")
    source.add_argument("--archive", metavar="DIR", help="the exporter's archive directory")
    add_connection_options(
        source,
        bootstrap_help="brokers of a Kafka input (--kafka is the older name), also used by "
        "--alerts-topic",
        more_bootstrap_flags=("--kafka",),
        property_help="for the Kafka input and the alerts topic",
    )
    add_kafka_reader_option(source)
    source.add_argument(
        "--topic",
        default=OFFSETS_TOPIC,
        type=topic_name(),
        help="with --bootstrap-server: the raw offsets topic (default) or the republished "
        "canonical topic",
    )
    source.add_argument(
        "--starting-offsets",
        default="earliest",
        help="with --bootstrap-server, where a new stream starts: earliest (default: the "
        "history the detection needs) or latest; a restart always resumes from the checkpoint",
    )
    parser.add_argument(
        "--checkpoint",
        required=False,
        metavar="DIR",
        help="checkpoint location (Spark's and the alert state's): keep it to resume exactly",
    )
    parser.add_argument(
        "--alerts-dir",
        metavar="DIR",
        help="the emitted alerts, one JSON-lines file per batch (default: CHECKPOINT/alerts)",
    )
    parser.add_argument("--alertmanager", metavar="URL", help="Alertmanager base URL")
    parser.add_argument(
        "--resend-s",
        type=seconds(1.0),
        default=60.0,
        help="re-send active alerts to Alertmanager this often (keep below its "
        "resolve_timeout, 5 min by default) (default: 60)",
    )
    parser.add_argument(
        "--generator-base",
        default="http://localhost:9380",
        help="the exporter's URL: generatorURL is BASE/api/v1/groups/GROUP",
    )
    parser.add_argument("--runbook-base", help="runbook_url is this + '#<kind>'")
    parser.add_argument(
        "--alerts-topic",
        type=topic_name(written=True),
        help="also send alerts to this Kafka topic",
    )
    parser.add_argument(
        "--trigger-s", type=seconds(0.1), default=30.0, help="micro-batch interval (default: 30)"
    )
    parser.add_argument(
        "--watermark",
        default="1 hour",
        help="event-time lateness tolerated (Spark interval text, default: '1 hour')",
    )
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process what is there, then stop",
    )
    add_spark_options(parser)
    apply_env_defaults(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if getattr(args, "env_errors", None):
        raise UsageError(args.env_errors[0])
    try:
        kafka = kafka_config(args, os.environ, reserved_env(args))
    except ConnectionOptionError as error:
        raise UsageError(str(error)) from None
    # --archive wins over brokers from the environment (they then serve --alerts-topic only)
    if (args.archive is None and "bootstrap.servers" not in kafka) or (
        args.archive is not None and args.bootstrap_server is not None
    ):
        raise UsageError("give exactly one input: --archive DIR or --bootstrap-server HOST:PORT")
    if args.checkpoint is None:
        raise UsageError("--checkpoint DIR is required: the stream resumes from it")
    if args.archive is not None:
        input_path(Path(args.archive), "--archive", "dir")
    # before the session: Spark found a bad checkpoint only when it wrote its first batch
    outputs = [("--checkpoint", args.checkpoint), ("--alerts-dir", args.alerts_dir)]
    for flag, text in outputs:
        if not text or "://" in text:
            continue  # a URL (hdfs://...) is Spark's to check
        path = Path(text)
        if args.archive is not None:
            # the alerts are JSON lines: inside the archive they would be read as records
            not_inside(path, flag, Path(args.archive), "--archive")
        output_directory(path, flag)
    if args.trigger_s <= 0 or args.resend_s <= 0:
        raise UsageError("--trigger-s and --resend-s must be positive")
    if args.alerts_topic is not None and not kafka.get("bootstrap.servers"):
        raise UsageError(
            "--alerts-topic needs --bootstrap-server HOST:PORT (or OFFSETWATCH_BOOTSTRAP_SERVER)"
        )

    from offsetwatch.spark_jobs.alerts.alertmanager import AlertmanagerSink
    from offsetwatch.spark_jobs.alerts.build import AlertSettings
    from offsetwatch.spark_jobs.alerts.kafka import KafkaAlertSink
    from offsetwatch.spark_jobs.streaming import (
        AlertSinks,
        StreamSettings,
        archive_stream,
        kafka_stream,
        start_stream,
        warm_up,
    )

    checkpoint = Path(args.checkpoint)
    sinks = AlertSinks(
        alertmanager=None
        if args.alertmanager is None
        else AlertmanagerSink(
            args.alertmanager,
            checkpoint / "alertmanager-outbox.json",
            resend_interval_ms=int(args.resend_s * 1000),
            generator_base=args.generator_base,
        ),
        kafka=None if args.alerts_topic is None else KafkaAlertSink(kafka, args.alerts_topic),
    )
    settings = StreamSettings(
        checkpoint_dir=str(checkpoint),
        alerts_dir=args.alerts_dir or str(checkpoint / "alerts"),
        trigger_s=args.trigger_s,
        watermark=args.watermark,
        alerts=AlertSettings(runbook_base=args.runbook_base),
    )
    reader, conf = ("python", {}) if args.archive is not None else kafka_reader(args)
    spark = session_from_args(args, "stream", conf)
    if args.archive is not None:
        records = archive_stream(spark, args.archive)
    else:
        options = {f"kafka.{k}": v for k, v in kafka.items()}
        options["reader"] = reader
        options["topic"] = args.topic
        options["startingOffsets"] = args.starting_offsets
        records = kafka_stream(spark, options)
    if not args.available_now:
        print("stream: warming up (one micro-batch on a made-up history)", file=sys.stderr)
        warm_up(spark, settings)
    query = start_stream(records, settings, sinks, available_now=args.available_now)
    try:
        # batches run only when input arrives: re-send active alerts between them
        while not query.awaitTermination(args.resend_s):
            sinks.resend()
    except KeyboardInterrupt:
        query.stop()
    if query.exception() is not None:
        raise UsageError(f"the stream failed: {query.exception()}")
    sinks.resend()
    return 0
