"""The Kafka connection options of every command: one definition, one resolution.

`--bootstrap-server` is the spelling of Kafka's own tools (kafka-consumer-groups,
kafka-console-consumer); `--bootstrap-servers` is accepted as well, and so are both
environment variables, `OFFSETWATCH_BOOTSTRAP_SERVER` and `OFFSETWATCH_BOOTSTRAP_SERVERS`.
Both variables set to different values is refused: which one a deployment meant cannot be
guessed. Any librdkafka property passes through with `-X KEY=VALUE` or an
`OFFSETWATCH_KAFKA_<PROPERTY>` variable (`_` for `.`, `__` for a literal `_`, lower-cased:
OFFSETWATCH_KAFKA_SASL_PASSWORD is sasl.password). `<property>.file=PATH` reads a property
from a file (`-X sasl.password.file=/run/secrets/kafka`: offsetwatch/core/secret_files.py).

Precedence, lowest first: `OFFSETWATCH_KAFKA_*` properties, the bootstrap variable, `-X`
properties, the `--bootstrap-server` flag. So the command line wins over the environment, and
the dedicated flag over `-X bootstrap.servers`.
"""

from __future__ import annotations

import argparse
import logging
import re
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, Literal

from offsetwatch.core.secret_files import (
    FILE_SUFFIX,
    SecretFileError,
    is_file_setting,
    resolve_secret_files,
)

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
    "check_client_config",
    "kafka_config",
    "kafka_config_origins",
    "kafka_error_text",
    "kafka_properties_from_env",
    "kafka_property_name",
    "parse_property",
    "probe_cluster",
    "put_property",
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
    return kafka_config_origins(args, environ, reserved)[0]


def kafka_config_origins(
    args: argparse.Namespace, environ: Mapping[str, str], reserved: Collection[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """`kafka_config`, and for each property where it came from (`-X sasl.mechanism`,
    `OFFSETWATCH_KAFKA_SASL_MECHANISM`, `--bootstrap-server`): the words an error message
    names, so that the operator knows what to fix. Never the value: it may be a secret."""
    config: dict[str, str] = {}
    origins: dict[str, str] = {}
    for key in sorted(environ):
        if key.startswith(ENV_KAFKA_PREFIX) and len(key) > len(ENV_KAFKA_PREFIX):
            if key in reserved:
                continue
            name = kafka_property_name(key[len(ENV_KAFKA_PREFIX) :])
            put_property(config, origins, name, environ[key], key)
    from_env = bootstrap_from_env(environ)
    if from_env is not None:
        config["bootstrap.servers"] = from_env
        origins["bootstrap.servers"] = " / ".join(n for n in BOOTSTRAP_ENV if environ.get(n))
    for name, value in getattr(args, PROPERTIES_DEST, None) or []:
        put_property(config, origins, name, value, f"-X {name}")
    flag = getattr(args, BOOTSTRAP_DEST, None)
    if flag:
        config["bootstrap.servers"], origins["bootstrap.servers"] = flag, BOOTSTRAP_FLAGS[0]
    try:
        resolved = resolve_secret_files(config, origins)
    except SecretFileError as error:
        raise ConnectionOptionError(str(error)) from None
    for key in [k for k in origins if is_file_setting(k)]:
        origins[key[: -len(FILE_SUFFIX)]] = origins.pop(key)
    return resolved, origins


def put_property(
    config: dict[str, str], origins: dict[str, str], name: str, value: str, origin: str
) -> None:
    """Set a property from a layer that wins over those before it: `sasl.password.file` from
    -X replaces an OFFSETWATCH_KAFKA_SASL_PASSWORD, and the other way round."""
    other = name[: -len(FILE_SUFFIX)] if is_file_setting(name) else name + FILE_SUFFIX
    config.pop(other, None)
    origins.pop(other, None)
    config[name], origins[name] = value, origin


# -- errors of librdkafka, in the operator's words --------------------------------------------

#: properties whose values never reach a message (librdkafka echoes a value it refuses)
_SECRET_WORDS: Final = ("password", "secret", "jaas", "token", "pem", "ssl.key", "oauthbearer")
#: how librdkafka names the property it refuses
_NAMED: Final = (
    re.compile(r'[Cc]onfiguration property:? "([A-Za-z0-9._-]+)"'),
    re.compile(r"^([A-Za-z0-9._-]+) failed: "),
    re.compile(r"^expected ([A-Za-z0-9._-]+) property"),
)
_REPR: Final = re.compile(r'KafkaError\{code=(\w+),val=-?\d+,str="(.*)"\}', re.DOTALL)
#: librdkafka's prefix for errors of rd_kafka_new: the client kind is our business, not theirs
_CREATE: Final = re.compile(r"^Failed to create (?:consumer|producer|admin client): ")
#: error_cb codes after which a probe cannot succeed: waiting longer only delays the message
_FATAL: Final = frozenset({"_ALL_BROKERS_DOWN", "_AUTHENTICATION"})
ClientKind = Literal["consumer", "producer", "admin"]
#: a probe's metadata call waits at most this long before error_cb is looked at again
_PROBE_STEP_S: Final = 0.5
#: after "every broker down", how long a probe still waits for librdkafka's reason
_REASON_WAIT_S: Final = 2.0


def _redact(text: str, config: Mapping[str, Any]) -> str:
    for key, value in config.items():
        if isinstance(value, str) and value and any(w in key.lower() for w in _SECRET_WORDS):
            text = text.replace(value, "***")
    return text


def kafka_error_text(error: BaseException) -> str:
    """The words of a KafkaException (its KafkaError's text), never the `KafkaError{...}` repr
    that str() gives; any other exception as str()."""
    first = error.args[0] if error.args else None
    text = getattr(first, "str", None)
    if callable(text):
        return str(text()).strip()
    raw = str(error)
    match = _REPR.search(raw)
    return match[2].strip() if match else raw.strip()


def _property_named(text: str, config: Mapping[str, Any]) -> str | None:
    """The property librdkafka's message is about, when it says so: `configuration property
    "x"`, `x failed: ...` (an SSL file), `expected x property`. A message that only mentions
    properties ("sasl.username and sasl.password must be set") names none: the one given may
    not be the one to fix."""
    for pattern in _NAMED:
        match = pattern.search(text)
        if match and match[1] in config:
            return match[1]
    return None


def _client_error(
    error: BaseException, config: Mapping[str, Any], origins: Mapping[str, str]
) -> ConnectionOptionError:
    text = _CREATE.sub("", _redact(kafka_error_text(error), config)).rstrip(". ")
    name = _property_named(text, config)
    if name is not None:
        origin = origins.get(name, name)
        return ConnectionOptionError(
            f"Kafka client setting {origin}: {text}; fix or remove it "
            "(librdkafka's CONFIGURATION.md lists every property and its values)"
        )
    given = ", ".join(sorted(set(origins.values()))) or "none given"
    return ConnectionOptionError(
        f"the Kafka client settings cannot work: {text}; check the properties ({given})"
    )


def _new_client(kind: ClientKind, config: dict[str, Any]) -> Any:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    if kind == "consumer":
        config.setdefault("group.id", "offsetwatch-check")
        return Consumer(config)
    return Producer(config) if kind == "producer" else AdminClient(config)


def check_client_config(
    config: Mapping[str, Any], origins: Mapping[str, str], kind: ClientKind = "consumer"
) -> None:
    """Refuse, before anything runs, settings librdkafka can never work with (an unknown
    property, a bad value, SSL files it cannot load, a SASL mechanism it lacks): it checks
    them all when a client handle is made, so one is made and dropped. The error names the
    flag, variable or file key the bad property came from (`origins`)."""
    from confluent_kafka import KafkaException

    try:
        client = _new_client(kind, _quiet(config))
    except (KafkaException, TypeError, ValueError) as error:
        raise _client_error(error, config, origins) from None
    if kind == "consumer":
        client.close()


def _quiet(config: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(config)
    # librdkafka's own log lines (one per failed connection attempt) would bury our message;
    # the operator's log_level stays (and is checked like any other property)
    out.setdefault("log_level", 0)
    return out


class _FailLines(logging.Handler):
    """librdkafka's FAIL lines (lost and refused connections) of one probe."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def logger(self) -> logging.Logger:
        own = logging.Logger("offsetwatch.probe.librdkafka")  # outside the registry
        own.propagate = False
        own.addHandler(self)
        return own

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith("FAIL"):
            self.texts.append(text)


def _protocol_hint(lines: _FailLines, config: Mapping[str, Any]) -> str:
    """What the broker's way of closing connections tells about the listener, when it does."""
    protocol = str(config.get("security.protocol", "plaintext")).lower()
    closed_at_first_request = any("in state APIVERSION_QUERY" in t for t in lines.texts)
    if closed_at_first_request and protocol in ("plaintext", "sasl_plaintext"):
        return (
            " (the broker closed every connection at its first request, as a TLS listener does "
            f"with a client that does not speak TLS: -X security.protocol is {protocol}; try "
            "SSL or SASL_SSL)"
        )
    handshake_failed = any("SSL handshake failed" in t for t in lines.texts)
    if handshake_failed and protocol in ("ssl", "sasl_ssl"):
        last = next(t for t in reversed(lines.texts) if "SSL handshake failed" in t)
        return f" (TLS handshake failed: {_redact(last.split(': ', 2)[-1], config)})"
    return ""


def probe_cluster(config: Mapping[str, Any], origins: Mapping[str, str], timeout_s: float) -> None:
    """Check the settings (as `check_client_config`) and that the cluster answers within
    `timeout_s`; else one ConnectionOptionError naming the bootstrap address, where it came
    from, librdkafka's reason and what to check. Stops as soon as librdkafka reports every
    broker down or a failed authentication: waiting longer changes nothing."""
    seen: list[tuple[str, str]] = []

    def on_error(error: Any) -> None:
        seen.append((str(error.name()), _redact(str(error.str()), config)))

    from confluent_kafka import KafkaException

    settings = _quiet(config)
    settings["error_cb"] = on_error
    lines = _FailLines()
    if "logger" not in config:
        # librdkafka's lines of this short-lived client go to this list, never to stderr:
        # the closed connections it only logs tell a TLS listener spoken to in plaintext
        settings["logger"] = lines.logger()
        settings["log_level"] = 6
        settings["log.connection.close"] = True
    try:
        admin = _new_client("admin", settings)
    except (KafkaException, TypeError, ValueError) as error:
        raise _client_error(error, config, origins) from None
    # metadata in short steps, serving error_cb between them: librdkafka reports refused
    # connections and failed logins there at once, while a metadata call would wait its
    # whole timeout (every client answers metadata, librdkafka's mock cluster included)
    deadline = time.monotonic() + timeout_s
    failure: BaseException | None = None
    hopeless_at: float | None = None
    while True:
        step = max(0.001, min(_PROBE_STEP_S, deadline - time.monotonic()))
        try:
            admin.list_topics(timeout=step)
            return
        except KafkaException as error:
            failure = error
        admin.poll(0)
        now = time.monotonic()
        if hopeless_at is None and any(name in _FATAL for name, _ in seen):
            hopeless_at = now
        specific = any(name != "_ALL_BROKERS_DOWN" for name, _ in seen)
        # "every broker down" can come before the reason it is down for (a TLS listener
        # spoken to in plaintext says so a moment later): that reason is worth a short wait
        if hopeless_at is not None and (specific or now - hopeless_at >= _REASON_WAIT_S):
            break
        if now >= deadline:
            break
    reasons = [text for name, text in seen if name != "_ALL_BROKERS_DOWN"]
    if reasons:
        reason = reasons[-1]
    elif seen:
        # librdkafka's "N/M brokers are down" counts its own connection states, and can read
        # "0/2" while nothing answers: not quoted
        reason = "no connection to any broker could be made" + _protocol_hint(lines, config)
    else:
        reason = f"no answer within {timeout_s:g}s ({_redact(kafka_error_text(failure), config)})"
    bootstrap = config.get("bootstrap.servers", "?")
    origin = origins.get("bootstrap.servers", BOOTSTRAP_FLAGS[0])
    raise ConnectionOptionError(
        f"cannot reach Kafka at {bootstrap} (from {origin}): {reason}; check that it names "
        "a running broker's listener (host:port) and that the security settings "
        "(-X security.protocol, sasl.*, ssl.*) match that listener"
    )
