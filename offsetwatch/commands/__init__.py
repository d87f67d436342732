"""Subcommands of the `offsetwatch` command line, one module each.

A command is a module in this package with a function

    def register(subparsers: Subparsers) -> argparse.ArgumentParser

that adds its parser (`subparsers.add_parser(...)`) and sets the function to run:
`parser.set_defaults(handler=run)` with `run(args: argparse.Namespace) -> int` (the exit
code). `offsetwatch.cli` finds the modules by itself: adding a command touches no other file.
Keep imports of heavy modules (decoder, confluent_kafka, rich) inside `run`, so that
`offsetwatch --help` stays fast.

Shared conventions, provided here:

* `UsageError`: raise it for anything the operator must fix (bad option values, missing files,
  an unreachable cluster); the CLI prints `offsetwatch: error: <message>` and exits with 2. Say
  what to do in the message.
* `apply_env_defaults(parser)`: every long option `--some-option` can also come from the
  environment variable `OFFSETWATCH_SOME_OPTION` (the command line wins).
* Kafka connection options (`--bootstrap-server`, `-X KEY=VALUE` and their environment
  variables) come from `offsetwatch.core.connection`, the one definition `offsetwatch export`
  (exporter/config.py) uses as well, so one set of flags and variables serves every command;
  `kafka_properties_from_env` is its reader of `OFFSETWATCH_KAFKA_<NAME>` variables.
* `Repeat`: the action for repeatable options whose command-line values replace (not extend) a
  list taken from the environment.
* `integer(low, high)`, `seconds(low, high)`: argparse types that range-check a number where
  it is parsed (a number librdkafka, Kafka or a thread wait cannot take is refused as a usage
  error naming the flag, never an OverflowError later); `OneLineParser`: argparse's errors as
  one `offsetwatch: error: ...` line; `listen_error`: the message for a port that cannot be
  listened on.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import math
import os
import pkgutil
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from offsetwatch.core.connection import (
    CONNECTION_DESTS,
    ENV_KAFKA_PREFIX,
    kafka_properties_from_env,
)
from offsetwatch.core.empty_values import EMPTY_VALUE, empty_means_off, takes_empty
from offsetwatch.core.environment import PREFIX
from offsetwatch.core.topics import internal_topic_problem, topic_name_problem
from offsetwatch.durations import MAX_WAIT_S

if TYPE_CHECKING:
    from typing import TypeAlias

    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = [
    "BOUNDS",
    "EMPTY_VALUE",
    "ENV_KAFKA_PREFIX",
    "ENV_PREFIX",
    "INT32_MAX",
    "INT64_MAX",
    "MAX_WAIT_S",
    "OneLineParser",
    "Repeat",
    "UsageError",
    "apply_env_defaults",
    "empty_means_off",
    "env_names",
    "integer",
    "kafka_properties_from_env",
    "listen_error",
    "option_env_names",
    "path_options",
    "registrars",
    "reserved_env",
    "seconds",
    "takes_empty",
    "topic_name",
]

ENV_PREFIX: Final = PREFIX
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off", ""})


class UsageError(Exception):
    """A usage or configuration problem: exit code 2, with a message saying what to do."""


class OneLineParser(argparse.ArgumentParser):
    """argparse's usage errors as one `offsetwatch: error: ...` line naming the option (its
    default prints the whole usage block first); subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        env_errors = self._defaults.get("env_errors")
        if env_errors:
            # a bad variable of this command comes first: it may be why the parse failed
            # (OFFSETWATCH_LAKE= leaves --lake unset, and "--lake is required" would mislead)
            self.exit(2, f"offsetwatch: error: {'; '.join(env_errors)}\n")
        self.exit(2, f"offsetwatch: error: {message} (see {self.prog} --help)\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        if (
            action.option_strings
            and action.nargs != 0
            and not takes_empty(action)
            and any(not text.strip() for text in arg_strings)
        ):
            raise argparse.ArgumentError(action, EMPTY_VALUE)
        return super()._get_values(action, arg_strings)


#: the (low, high) range of an `integer` or `seconds` type, for the generated misuse tests
BOUNDS: Final = "bounds"
INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1


def integer(low: int, high: int, what: str = "") -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (Kafka offsets are int64, partitions
    int32, ports 0-65535)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: give {what or 'an integer'} from {low} to {high}"
            )
        return value

    parse.__name__ = "integer"  # argparse names the type in "invalid <name> value" messages
    setattr(parse, BOUNDS, (low, high))
    return parse


def seconds(low: float, high: float = MAX_WAIT_S) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds in [low, high]. `1e309` (infinity), `nan`
    and a wait so short it is 0 ms to librdkafka are refused where they are typed."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: give {low:.10g} to {high:.10g} seconds"
            )
        return value

    parse.__name__ = "seconds"
    setattr(parse, BOUNDS, (low, high))
    return parse


def topic_name(*, written: bool = False) -> Callable[[str], str]:
    """An argparse type: a name Kafka allows for a topic; `written`: not one of Kafka's
    internal topics either (nothing of ours writes there)."""

    def parse(text: str) -> str:
        problem = topic_name_problem(text)
        if problem is None and written:
            problem = internal_topic_problem(text)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return text

    parse.__name__ = "topic"
    return parse


def listen_error(host: str, port: int, error: OSError, flag: str = "--http-port") -> str:
    """What to do when a server cannot listen on host:port, by the reason."""
    where = f"cannot listen on {host}:{port}: {error.strerror or error}"
    if error.errno == errno.EADDRINUSE:
        held = f"another process holds port {port}"
        return f"{where} ({held}): choose another {flag} (0 picks a free one)"
    if error.errno == errno.EACCES:
        return f"{where}: ports below 1024 need privileges, choose another {flag}"
    return f"{where}: check --http-host (an address of this host) and {flag}"


def registrars() -> Iterator[Callable[[Subparsers], argparse.ArgumentParser]]:
    """The `register` functions of every command module of this package, by module name."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            yield register


class Repeat(argparse.Action):
    """Like action="append", but the first command-line use replaces the default list (the
    value from the environment) instead of adding to it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        current = getattr(namespace, self.dest, None)
        items = [] if current is None or current is self.default else list(current)
        items.append(values)
        setattr(namespace, self.dest, items)


def env_names(action: argparse.Action) -> list[str]:
    """`--bootstrap-server` -> `OFFSETWATCH_BOOTSTRAP_SERVER`: one name per long option."""
    return [
        ENV_PREFIX + option[2:].upper().replace("-", "_")
        for option in action.option_strings
        if option.startswith("--")
    ]


def option_env_names(parsers: Iterable[argparse.ArgumentParser]) -> set[str]:
    """The environment variables of every option of these parsers and their subcommands."""
    names: set[str] = set()
    for parser in parsers:
        for action in parser._actions:
            names.update(env_names(action))
            if isinstance(action, argparse._SubParsersAction):
                names |= option_env_names(action.choices.values())
    return names


#: metavars that say an option (or a positional) takes a file system path
PATH_METAVARS: Final = frozenset({"FILE", "DIR", "PATH", "CSV"})


def path_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options (and positionals) of `parser` that take a path: a Path type, or a
    metavar naming a file or directory. The CLI names the option of a file error by them,
    and the generated misuse tests give each one every kind of bad path."""
    return [
        action
        for action in parser._actions
        if action.nargs != 0
        and not isinstance(action, argparse._SubParsersAction)
        and (action.type is Path or action.metavar in PATH_METAVARS)
    ]


RESERVED_ENV_DEST: Final = "reserved_env"


def reserved_env(args: argparse.Namespace) -> frozenset[str]:
    """Every OFFSETWATCH_* variable of an option of any command (offsetwatch.cli sets them):
    such a variable (OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES) is an option of some command,
    never a librdkafka property of another."""
    names: frozenset[str] = getattr(args, RESERVED_ENV_DEST, frozenset())
    return names


def _split(text: str) -> list[str]:
    separator = "\n" if "\n" in text else ","
    return [part.strip() for part in text.split(separator) if part.strip()]


def _convert(action: argparse.Action, text: str) -> Any:
    value: Any = action.type(text) if callable(action.type) else text
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise ValueError(f"invalid choice {text!r} (choose from {choices})")
    return value


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected one of {', '.join(sorted(_TRUE | _FALSE - {''}))}")


def apply_env_defaults(
    parser: argparse.ArgumentParser,
    environ: Mapping[str, str] | None = None,
    exclude: Collection[str] = (),
) -> None:
    """Take option defaults from `OFFSETWATCH_<OPTION>` environment variables.

    An option with several long names reads the first of their variables that is set. The
    connection options are left to `offsetwatch.core.connection.kafka_config`, which also
    refuses two bootstrap variables that disagree. Flags take 1/true/yes/on or 0/false/no/off;
    repeatable options take several values separated by commas (or by newlines, when a value
    itself holds commas). Options whose dest is in `exclude` are left alone. A bad value is
    not an error at once: it is stored as `args.env_errors` and the command reports it (exit
    2), so that a variable meant for one command never breaks another.
    """
    env = os.environ if environ is None else environ
    errors: list[str] = []
    for action in parser._actions:
        if (
            action.dest in exclude
            or action.dest in CONNECTION_DESTS
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
        ):
            continue
        name = next((n for n in env_names(action) if n in env), None)
        if name is None:
            continue
        text = env[name]
        try:
            if (
                not text.strip()
                and action.nargs is None
                and not isinstance(action, Repeat | argparse._AppendAction)
                and not takes_empty(action)
            ):
                raise ValueError("must not be empty: unset it, or give a value")
            if isinstance(action, argparse.BooleanOptionalAction):
                value: Any = _flag(text)
            elif action.nargs == 0:
                value = action.const if _flag(text) else action.default
            elif isinstance(action, Repeat | argparse._AppendAction) or action.nargs in ("*", "+"):
                value = [_convert(action, part) for part in _split(text)]
                if not value:
                    continue  # an empty list is no filter at all: the same as unset
            else:
                value = _convert(action, text)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
            errors.append(f"environment variable {name}: {error}")
            continue
        action.default = value
        action.required = False
    parser.set_defaults(env_errors=errors)
