"""The `offsetwatch` command: one entry point, one subcommand per job (see `offsetwatch.commands`).

Exit codes shared by every subcommand: 0 success, 1 the job ran but some input failed (e.g. a
record that could not be decoded), 2 usage or configuration error (nothing useful was done),
3 a change sent to the broker whose outcome is unknown (no answer came: it may or may not have
been applied), 130 interrupted. A closed output pipe (`offsetwatch decode ... | head`) ends the
run quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version

from offsetwatch.commands import (
    RESERVED_ENV_DEST,
    OneLineParser,
    UsageError,
    option_env_names,
    path_options,
    registrars,
    reserved_env,
)
from offsetwatch.core.environment import stray_variable_error, stray_variables
from offsetwatch.offset_ops.model import OutcomeUnknown

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2
#: its own code: a script must not retry as after a failure (a --shift-by would shift twice)
EXIT_OUTCOME_UNKNOWN = 3
EXIT_INTERRUPTED = 130

DESCRIPTION = """\
Decode Kafka's internal __consumer_offsets topic (offset commits, classic and KIP-848
consumer groups, share groups) and turn it into consumer-lag monitoring.

Run `offsetwatch COMMAND --help` for the options and examples of a command.

exit codes:
  0    done
  1    the job ran but something was missed (a record not decoded, a file not read)
  2    a mistake to fix, nothing useful done (the `offsetwatch: error:` line says what)
  3    offsets reset/migrate --execute sent the commit but no answer came: it may or may not
       have been applied; check with `offsetwatch offsets export --group G` before retrying
  130  interrupted
"""


def _version() -> str:
    try:
        return version("offsetwatch")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    # every subcommand's parser is of the root's class: usage errors are one line everywhere
    parser = OneLineParser(
        prog="offsetwatch",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        title="commands", metavar="COMMAND", dest="command", parser_class=OneLineParser
    )
    for register in registrars():
        register(subparsers)
    parser.set_defaults(**{RESERVED_ENV_DEST: frozenset(option_env_names([parser]))})
    _record_path_options(parser)
    return parser


#: where each command's parser leaves {dest: option} of its path options, for _last_resort
PATH_OPTIONS_DEST = "path_options"


def _record_path_options(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _record_path_options(child)
    named = {
        action.dest: max(action.option_strings, key=len) if action.option_strings else ""
        for action in path_options(parser)
    }
    if named:
        parser.set_defaults(**{PATH_OPTIONS_DEST: named})


def _silence_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file descriptor (tests capturing stdout)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt while a command runs, whatever was inherited.

    Python installs that handler only when SIGINT is not ignored at start, and a shell without
    job control starts background commands (`cmd &` in a script) with SIGINT ignored:
    `decode --follow`, `demo` and `spark stream` would then only stop when killed. A handler
    set by a program that calls main() in-process is left alone.
    """
    inherited = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or inherited not in (
        signal.SIG_IGN,
        signal.SIG_DFL,
    ):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


def main(argv: list[str] | None = None) -> int:
    with _interruptible():
        try:
            return _main(argv)
        except KeyboardInterrupt:
            # Ctrl-C while the commands load and the options are parsed (~0.1 s of every
            # start, before a command runs) ended in a traceback of argparse or an import
            return EXIT_INTERRUPTED


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or an argparse usage error
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    env_errors = getattr(args, "env_errors", [])
    try:
        if env_errors:
            raise UsageError("; ".join(env_errors))
        options = reserved_env(args)
        stray = stray_variables(os.environ, options)
        if stray:
            raise UsageError(stray_variable_error(stray, options))
        code: int = handler(args)
        return code
    except UsageError as error:
        print(f"offsetwatch: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OutcomeUnknown as error:
        print(f"offsetwatch: error: {error}", file=sys.stderr)
        return EXIT_OUTCOME_UNKNOWN
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as error:
        message = _last_resort(error, args)
        if message is None:
            raise  # a bug: its traceback is what a report needs
        print(f"offsetwatch: error: {message}", file=sys.stderr)
        return EXIT_USAGE


def _last_resort(error: Exception, args: argparse.Namespace) -> str | None:
    """One line for a file or Kafka client error that no command turned into a UsageError
    (each should: this is the net under them, so the operator never gets a traceback for
    what the environment did). A file is named by the option that gave it."""
    if isinstance(error, OSError):
        return _file_error(error, args)
    if type(error).__name__ == "KafkaException":
        from offsetwatch.core.connection import kafka_error_text

        return (
            f"Kafka: {kafka_error_text(error)}; check --bootstrap-server and the -X / "
            "OFFSETWATCH_KAFKA_* settings"
        )
    return None


def _file_error(error: OSError, args: argparse.Namespace) -> str:
    from offsetwatch.core.paths import os_error_text

    reason = os_error_text(error)
    if not error.filename:
        return f"{reason}; check the paths given and their permissions"
    failed = os.path.abspath(os.fsdecode(error.filename))
    for dest, flag in getattr(args, PATH_OPTIONS_DEST, {}).items():
        value = getattr(args, dest, None)
        for given in value if isinstance(value, list) else [value]:
            if given is None:
                continue
            base = os.path.abspath(os.fsdecode(given))
            # the file itself, a file under the directory, or a temporary name beside it
            if (
                failed == base
                or failed.startswith((base + os.sep, base + "."))
                or (
                    os.path.dirname(failed) == os.path.dirname(base)
                    and os.path.basename(failed).startswith(f".{os.path.basename(base)}.")
                )
            ):
                option = f"{flag} {given}" if flag else str(given)
                where = "" if failed == base else f" ({error.filename})"
                return f"{option}{where}: {reason}; check the path, its permissions and free space"
    return f"{error.filename}: {reason}; check the path, its permissions and free space"


if __name__ == "__main__":
    sys.exit(main())
