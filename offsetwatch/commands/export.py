"""`offsetwatch export`: the long-running lag exporter daemon."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.commands import UsageError, listen_error

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers
    from offsetwatch.exporter.config import ExporterConfig

DESCRIPTION = """\
Run the consumer-lag exporter: read every partition of __consumer_offsets from the
beginning (or from the last checkpoint), keep the committed offsets and group metadata of
every group (classic, KIP-848 consumer, share, streams), sample the log-end offsets of the
partitions they consume, and serve:

  /metrics               Prometheus metrics (offsetwatch_* and optional kafka-lag-exporter names)
  /healthz, /readyz      liveness; readiness once the first pass reached the end of the topic
  /api/v1/groups[/NAME]  groups with per-partition lag, lag in seconds, status and members

Lag and status series appear only once the exporter is ready, so a restart never shows a
lag spike from replayed history. SIGTERM flushes, checkpoints and exits 0; SIGUSR1 prints
every thread's stack to stderr (a daemon that seems stuck).
"""

EPILOG = """\
examples:
  # a plain cluster, metrics on :9380
  offsetwatch export --bootstrap-server kafka-1:9092,kafka-2:9092

  # SASL/SSL: any librdkafka property passes through (passwords better from the environment)
  OFFSETWATCH_KAFKA_SASL_PASSWORD=... offsetwatch export --bootstrap-server kafka:9093 \\
      -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=monitor

  # restart without replaying the topic, republish every record as JSON, archive for Spark
  offsetwatch export --bootstrap-server kafka:9092 --checkpoint-path /var/lib/offsetwatch/state \\
      --publish-topic offsets-decoded --publish-dlq-topic offsets-decoded-dlq \\
      --archive-dir /data/offsetwatch/archive

  # fewer series on a big cluster: per-topic sums only, some groups left out
  offsetwatch export --bootstrap-server kafka:9092 --granularity topic \\
      --group-deny '^console-consumer-'

  # try it without Kafka: offsetwatch demo
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    from offsetwatch.exporter.config import add_arguments

    parser = subparsers.add_parser(
        "export",
        help="run the lag exporter daemon (Prometheus metrics, JSON API, republishing)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from offsetwatch.exporter.config import ConfigError, load_config

    try:
        config = load_config(args, os.environ)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    _check_outputs(config)
    logging.basicConfig(
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from offsetwatch.exporter.log_throttle import RepeatFilter

    # one throttle per handler (a shared one would hold back the second handler's copy),
    # taken off again at the end: the handlers are the process's, not this run's (a caller
    # running the command in-process, pytest among them, keeps its handlers for later)
    throttles = [(handler, RepeatFilter()) for handler in logging.getLogger().handlers]
    for handler, throttle in throttles:
        handler.addFilter(throttle)
    try:
        return _serve(config)
    finally:
        for handler, throttle in throttles:
            handler.removeFilter(throttle)


def _check_outputs(config: ExporterConfig) -> None:
    """The files the exporter writes, checked before it logs its start: the exporter checks
    them again when it opens, but there after a log line, as a second line on stderr."""
    from offsetwatch.core.paths import PathProblem, check_output_dir, check_output_file

    try:
        if config.checkpoint_path is not None:
            # its directory is made, as the exporter makes it
            check_output_file(
                Path(config.checkpoint_path), "--checkpoint-path", regular=True, make_directory=True
            )
        if config.archive_dir is not None:
            check_output_dir(Path(config.archive_dir), "--archive-dir")
    except PathProblem as error:
        raise UsageError(str(error)) from None


def _serve(config: ExporterConfig) -> int:
    from offsetwatch.exporter.config import ConfigError
    from offsetwatch.exporter.service import ExporterService

    logging.getLogger(__name__).info("starting with %s", config.redacted())
    try:
        service = ExporterService(config)
    except OSError as error:
        raise UsageError(f"cannot start the exporter: {error}") from None
    except ConfigError as error:
        # a setting only Kafka can refuse (a --fleet name an application's group has): the
        # same one line and exit 2 as a setting refused before the start
        raise UsageError(str(error)) from None
    try:
        service.start()
    except OSError as error:
        service.shutdown()
        raise UsageError(listen_error(config.http_host, config.http_port, error)) from None
    service.run()
    # a final checkpoint or flush that failed was logged as an ERROR saying what it costs;
    # a supervisor must see it in the exit status too
    return 1 if service.exporter.close_failed else 0
