"""What `groups` and `offsets` share: the connection options and the broker they open."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from offsetwatch.commands import OneLineParser, UsageError, apply_env_defaults, reserved_env
from offsetwatch.core.connection import (
    ConnectionOptionError,
    add_connection_options,
    kafka_config_origins,
    probe_cluster,
)

if TYPE_CHECKING:
    from offsetwatch.offset_ops.broker import OffsetBroker

#: how long the first contact with the cluster may take (the Admin calls' own timeout)
PROBE_TIMEOUT_S = 30.0

CONNECTION_HELP = """\
connection:
  --bootstrap-server (or --bootstrap-servers), or OFFSETWATCH_BOOTSTRAP_SERVER (or
  OFFSETWATCH_BOOTSTRAP_SERVERS; both set must agree); any librdkafka property with
  -X KEY=VALUE or OFFSETWATCH_KAFKA_<PROPERTY> (OFFSETWATCH_KAFKA_SASL_PASSWORD -> sasl.password).
  The command line wins over the environment."""


class OneLineErrors(OneLineParser):
    """Usage errors in one line that names the option (argparse prints the whole usage): the
    same `offsetwatch: error: ...` line as every command's (kept as a name for the nested
    parsers that ask for it)."""


def broker_from_args(args: argparse.Namespace) -> OffsetBroker:
    """The broker for a parsed command line (tests replace this function)."""
    return open_broker(args)


def env_defaults(parser: argparse.ArgumentParser, keep: frozenset[str] = frozenset()) -> None:
    """Only the connection (read by `kafka_config`) and `keep` come from OFFSETWATCH_*
    variables: a group, a topic or a --format meant for another command must never steer an
    offset change."""
    apply_env_defaults(parser, exclude={a.dest for a in parser._actions} - keep)


def add_connection(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser.add_argument_group("connection"))


def open_broker(args: argparse.Namespace) -> OffsetBroker:
    from offsetwatch.offset_ops.admin import AdminBroker

    try:
        properties, origins = kafka_config_origins(args, os.environ, reserved_env(args))
        if "bootstrap.servers" not in properties:
            raise UsageError("no cluster: give --bootstrap-server HOST:PORT")
        # bad settings and an unreachable cluster are told apart here, in one line naming the
        # flag or the address: the Admin calls after this would report them as a failure of
        # whatever they were doing (describing a group, listing offsets)
        probe_cluster(properties, origins, PROBE_TIMEOUT_S)
    except ConnectionOptionError as error:
        raise UsageError(str(error)) from None
    return AdminBroker(properties)
