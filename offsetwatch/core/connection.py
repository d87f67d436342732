"""The Kafka connection options of every command: one definition, one resolution.

`--bootstrap-server` is the spelling of Kafka's own tools (kafka-consumer-groups,
kafka-console-consumer); `--bootstrap-servers` is accepted as well, and so are both
environment variables, `OFFSETWATCH_BOOTSTRAP_SERVER` and `OFFSETWATCH_BOOTSTRAP_SERVERS`.
Both variables set to different values is refused: which one a deployment meant cannot be
guessed. Any librdkafka property passes through with `-X KEY=VALUE` or an
`OFFSETWATCH_KAFKA_<PROPERTY>` variable (`_` for `.`, `__` for a literal `_`, lower-cased:
OFFSETWATCH_KAFKA_SASL_PASSWORD is sasl.password).

Precedence, lowest first: `OFFSETWATCH_KAFKA_*` properties, the bootstrap variable, `-X`
properties, the `--bootstrap-server` flag. So the command line wins over the environment, and
the dedicated flag over `-X bootstrap.servers`.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping, Sequence
from typing import Final

__all__ = [
    "BOOTSTRAP_DEST",
    "BOOTSTRAP_ENV",
    "BOOTSTRAP_FLAGS",
    "CONNECTION_DESTS",
    "ENV_KAFKA_PREFIX",
    "PROPERTIES_DEST",
    "ConnectionOptionError",
    "add_connection_options",
    "bootstrap_from_env",
    "kafka_config",
    "kafka_properties_from_env",
    "kafka_property_name",
    "parse_property",
]

#: Kafka's spelling first: help and usage lines show the first one
BOOTSTRAP_FLAGS: Final = ("--bootstrap-server", "--bootstrap-servers")
BOOTSTRAP_ENV: Final = ("OFFSETWATCH_BOOTSTRAP_SERVER", "OFFSETWATCH_BOOTSTRAP_SERVERS")
ENV_KAFKA_PREFIX: Final = "OFFSETWATCH_KAFKA_"
BOOTSTRAP_DEST: Final = "bootstrap_server"
PROPERTIES_DEST: Final = "kafka_properties"
#: resolved by `kafka_config`, never by a generic option-from-environment mapping (which would
#: read OFFSETWATCH_KAFKA_PROPERTY as the -X option instead of a librdkafka property)
CONNECTION_DESTS: Final = frozenset({BOOTSTRAP_DEST, PROPERTIES_DEST})
BOOTSTRAP_METAVAR: Final = "HOST:PORT[,...]"


class ConnectionOptionError(ValueError):
    """The connection settings contradict each other; the message says what to change."""


def parse_property(text: str) -> tuple[str, str]:
    """`-X KEY=VALUE` -> (key, value); only the first `=` splits (values may hold `=`)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        # never echo the argument: it may be a secret typed with the wrong separator
        raise argparse.ArgumentTypeError(
            "expected KEY=VALUE (a librdkafka property), e.g. -X security.protocol=SASL_SSL"
        )
    return key.strip(), value


def add_connection_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    bootstrap_help: str = "Kafka brokers",
    more_bootstrap_flags: Sequence[str] = (),
    property_help: str = "",
) -> None:
    """`--bootstrap-server`/`--bootstrap-servers` (plus `more_bootstrap_flags`, a command's
    older name) and `-X/--kafka-property KEY=VALUE` (repeatable), into `args.bootstrap_server`
    (None when not given) and `args.kafka_properties` (a list of (key, value))."""
    parser.add_argument(
        *BOOTSTRAP_FLAGS,
        *more_bootstrap_flags,
        dest=BOOTSTRAP_DEST,
        metavar=BOOTSTRAP_METAVAR,
        default=None,
        help=f"{bootstrap_help} (env {' or '.join(BOOTSTRAP_ENV)})",
    )
    parser.add_argument(
        "-X",
        "--kafka-property",
        dest=PROPERTIES_DEST,
        action="append",
        type=parse_property,
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka client property, e.g. -X security.protocol=SASL_SSL (repeatable; "
        f"also {ENV_KAFKA_PREFIX}<PROPERTY> variables: {ENV_KAFKA_PREFIX}SASL_PASSWORD is "
        "sasl.password; -X wins)" + (f"; {property_help}" if property_help else ""),
    )


def bootstrap_from_env(environ: Mapping[str, str]) -> str | None:
    """The brokers from OFFSETWATCH_BOOTSTRAP_SERVER or ..._SERVERS (empty = unset); both set
    to different values is an error, both set alike is fine."""
    given = {name: environ[name].strip() for name in BOOTSTRAP_ENV if environ.get(name, "").strip()}
    if len(set(given.values())) > 1:
        raise ConnectionOptionError(
            " and ".join(f"{name}={value}" for name, value in given.items())
            + " differ: set only one of them"
        )
    return next(iter(given.values()), None)


def kafka_property_name(rest: str) -> str:
    """SASL_MECHANISM -> sasl.mechanism; a double underscore stands for a literal '_'."""
    return ".".join(part.lower() for part in rest.replace("__", "\0").split("_")).replace("\0", "_")


def kafka_properties_from_env(
    environ: Mapping[str, str], reserved: Collection[str] = ()
) -> list[tuple[str, str]]:
    """librdkafka properties from `OFFSETWATCH_KAFKA_<NAME>` variables, sorted by name.

    Variables in `reserved` are options of some command (OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES
    is `export --kafka-lag-exporter-aliases`), not properties.
    """
    return [
        (kafka_property_name(key[len(ENV_KAFKA_PREFIX) :]), environ[key])
        for key in sorted(environ)
        if key.startswith(ENV_KAFKA_PREFIX)
        and len(key) > len(ENV_KAFKA_PREFIX)
        and key not in reserved
    ]


def kafka_config(
    args: argparse.Namespace, environ: Mapping[str, str], reserved: Collection[str] = ()
) -> dict[str, str]:
    """The librdkafka configuration of a command line made by `add_connection_options`:
    environment properties < bootstrap variable < -X < --bootstrap-server. Raises
    ConnectionOptionError when the two bootstrap variables disagree."""
    config = dict(kafka_properties_from_env(environ, reserved))
    from_env = bootstrap_from_env(environ)
    if from_env is not None:
        config["bootstrap.servers"] = from_env
    config.update(getattr(args, PROPERTIES_DEST, None) or [])
    flag = getattr(args, BOOTSTRAP_DEST, None)
    if flag:
        config["bootstrap.servers"] = flag
    return config
