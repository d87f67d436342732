"""Options every `offsetwatch spark` job shares, and the session they describe."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from offsetwatch.commands import INT32_MAX, Repeat, UsageError, integer
from offsetwatch.core.paths import Kind, PathProblem, check_input, check_output_dir, inside

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from offsetwatch.spark_jobs.session import SparkSettings


def add_spark_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Spark")
    group.add_argument(
        "--master",
        default="local[*]",
        help="Spark master: local[*] (default), local-cluster[2,1,1024], spark://HOST:7077, "
        "yarn, k8s://https://HOST:443",
    )
    group.add_argument(
        "--conf",
        action=Repeat,
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property, repeatable (e.g. --conf spark.executor.memory=4g)",
    )
    group.add_argument(
        "--shuffle-partitions",
        type=integer(1, INT32_MAX),
        default=None,
        metavar="N",
        help="spark.sql.shuffle.partitions (default: 2 x cores in local mode, Spark's otherwise)",
    )
    group.add_argument(
        "--ship-package",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="zip offsetwatch and send it to the executors (default: on unless local mode)",
    )
    group.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's start-up messages (log4j profile, hostname and native library "
        "warnings), hidden by default",
    )


#: the Spark property of extra jars (comma-separated)
JARS = "spark.jars"
#: --kafka-reader: who reads a Kafka topic for the job
KAFKA_READERS = ("python", "connector")


def add_kafka_reader_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--kafka-reader",
        choices=KAFKA_READERS,
        default="python",
        help="who reads the topic: python (default: offsetwatch's data source, confluent-kafka "
        "in the executors; the faster of the two here, benchmarks/spark_kafka_readers.py) or "
        "connector (Spark's own spark-sql-kafka, Kafka's Java client: fetched once from "
        "Maven Central into ~/.cache/offsetwatch/spark-kafka, or the jars in the directory "
        "OFFSETWATCH_SPARK_KAFKA_JARS names)",
    )


def kafka_reader(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """(the kafka source's `reader` option, the Spark properties it needs) for
    --kafka-reader; the connector's jars are resolved here, before the session starts."""
    import sys

    from offsetwatch.spark_jobs.connector_jars import ConnectorUnavailable, resolve

    if args.kafka_reader == "python":
        return "python", {}
    try:
        connector = resolve()
    except ConnectorUnavailable as error:
        raise UsageError(
            f"--kafka-reader connector: {error}; or use --kafka-reader python"
        ) from None
    if connector.note:
        print(f"note: {connector.note}", file=sys.stderr)
    return "connector", {JARS: connector.spark_jars}


def settings_from_args(
    args: argparse.Namespace, app_name: str, extra_conf: dict[str, str] | None = None
) -> SparkSettings:
    from offsetwatch.spark_jobs.session import SparkSettings

    conf: dict[str, str] = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {item!r}: expected KEY=VALUE, e.g. spark.executor.memory=4g")
        conf[key.strip()] = value
    for key, value in (extra_conf or {}).items():
        # a list property (the connector's jars) joins the operator's; anything else is theirs
        if key == JARS and conf.get(JARS):
            conf[JARS] = f"{conf[JARS]},{value}"
        else:
            conf.setdefault(key, value)
    shuffle = args.shuffle_partitions
    if shuffle is not None and shuffle < 1:
        raise UsageError("--shuffle-partitions must be at least 1")
    if shuffle is None and args.master.startswith("local"):
        import os

        shuffle = 2 * (os.cpu_count() or 1)
    return SparkSettings(
        master=args.master,
        app_name=f"offsetwatch-{app_name}",
        conf=conf,
        ship_package=args.ship_package,
        shuffle_partitions=shuffle,
        quiet=not args.verbose,
    )


def session_from_args(
    args: argparse.Namespace, app_name: str, extra_conf: dict[str, str] | None = None
) -> SparkSession:
    """The job's session; `extra_conf` (what --kafka-reader needs) beside --conf: jars are
    added to the operator's, anything else --conf sets stays theirs."""
    from offsetwatch.spark_jobs.session import SparkStartError, get_session

    if not args.verbose:
        logging.getLogger().addFilter(_py4j_connection_noise)
    try:
        return get_session(settings_from_args(args, app_name, extra_conf))
    except SparkStartError as error:
        raise UsageError(
            f"Spark did not start with --master {args.master}: {error}; check --master "
            "(local[*], local[N], spark://HOST:PORT, yarn, k8s://https://HOST:PORT) and "
            "--conf (--verbose shows Spark's own output)"
        ) from None


#: what py4j logs (to the root logger, with a traceback) when Ctrl-C cuts a call to the JVM
_PY4J_NOISE: Final = (
    "Exception while sending command.",
    "KeyboardInterrupt while sending command.",
)


def _py4j_connection_noise(record: logging.LogRecord) -> bool:
    """False for py4j's traceback of a call that Ctrl-C cut: the command ends with 130 and
    the lake is safe (a commit point), so 50 lines of py4j internals tell the operator
    nothing; a JVM that really died still ends the command with its own error."""
    return not (record.getMessage() in _PY4J_NOISE and f"{os.sep}py4j{os.sep}" in record.pathname)


def output_directory(path: Path, flag: str = "--out") -> None:
    """Check, before a Spark job of minutes, that its results can be written under `path`
    (created when missing): a file given as the directory was found only when the job was
    done, and its result lost."""
    try:
        check_output_dir(path, flag)
    except PathProblem as error:
        raise UsageError(str(error)) from None


def input_path(path: Path, flag: str, kind: Kind = "any") -> None:
    """Check, before a Spark session starts, that the input can be read: a missing or
    unreadable path was found by Spark, as a Java stack or as "no input"."""
    try:
        check_input(path, flag, kind)
    except PathProblem as error:
        raise UsageError(str(error)) from None


def not_inside(output: Path, output_flag: str, source: Path, source_flag: str) -> None:
    """Refuse, before any work, an output inside an input (or the input inside the output):
    what the job writes would be read back as input next time, or the input overwritten."""
    if inside(output, source) or inside(source, output):
        raise UsageError(
            f"{output_flag} {output} and {source_flag} {source} overlap: what is written "
            f"there would be read back as input; give a {output_flag} outside {source_flag}"
        )
