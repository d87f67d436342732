"""What `groups` and `offsets` share: the connection options and the broker they open."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, NoReturn

from offsetwatch.commands import (
    UsageError,
    apply_env_defaults,
    kafka_properties_from_env,
    option_env_names,
)

if TYPE_CHECKING:
    from offsetwatch.offset_ops.broker import OffsetBroker

CONNECTION_HELP = """\
connection:
  --bootstrap-server or OFFSETWATCH_BOOTSTRAP_SERVER; any librdkafka property with -X KEY=VALUE
  or OFFSETWATCH_KAFKA_<PROPERTY> (OFFSETWATCH_KAFKA_SASL_PASSWORD -> sasl.password)."""


class OneLineErrors(argparse.ArgumentParser):
    """Usage errors in one line that names the option (argparse prints the whole usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def broker_from_args(args: argparse.Namespace) -> OffsetBroker:
    """The broker for a parsed command line (tests replace this function)."""
    return open_broker(args, args.command_parser)


def env_defaults(parser: argparse.ArgumentParser, keep: frozenset[str] = frozenset()) -> None:
    """Only the connection (and `keep`) come from OFFSETWATCH_* variables: a group, a topic or
    a --format meant for another command must never steer an offset change."""
    allowed = keep | {"bootstrap_server"}
    apply_env_defaults(parser, exclude={a.dest for a in parser._actions} - allowed)


def add_connection(parser: argparse.ArgumentParser) -> None:
    from offsetwatch.commands.decode import parse_property

    group = parser.add_argument_group("connection")
    group.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        help="Kafka brokers",
    )
    group.add_argument(
        "-X",
        "--kafka-property",
        dest="properties",
        action="append",
        type=parse_property,
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka client property, e.g. -X security.protocol=SASL_SSL (repeatable)",
    )


def open_broker(args: argparse.Namespace, parser: argparse.ArgumentParser) -> OffsetBroker:
    from offsetwatch.offset_ops.admin import AdminBroker

    reserved = option_env_names([parser])
    properties = dict(kafka_properties_from_env(os.environ, reserved))
    properties.update(dict(args.properties or []))
    if args.bootstrap_server:
        properties["bootstrap.servers"] = args.bootstrap_server
    if "bootstrap.servers" not in properties:
        raise UsageError("no cluster: give --bootstrap-server HOST:PORT")
    return AdminBroker(properties)
