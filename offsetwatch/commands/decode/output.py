"""Where `offsetwatch decode` writes: JSON lines (one write per chunk) or an Avro container,
to standard output or a file."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from typing import IO, TYPE_CHECKING, Any

from offsetwatch.commands import UsageError

if TYPE_CHECKING:
    from offsetwatch.commands.decode.loop import Reporter


def check_avro(path: str | None) -> None:
    """--format avro's usage errors, raised before any input is opened."""
    if not path:
        raise UsageError("--format avro writes a binary container file: give --output FILE")
    try:
        # fastavro is loaded only for this format, and checked before decoding starts
        importlib.import_module("offsetwatch.decoder.avro")
    except ImportError as error:
        raise UsageError(f"--format avro is not available here: {error}") from None


def open_output(stack: ExitStack, path: str | None) -> IO[bytes]:
    """The file at `path`, closed by the stack; or standard output, only flushed."""
    if not path:
        stdout = _binary_stdout()
        stack.callback(stdout.flush)
        return stdout
    return stack.enter_context(_open_file(path))


def _binary_stdout() -> IO[bytes]:
    stdout = sys.stdout
    buffer = getattr(stdout, "buffer", None)
    if buffer is None:
        raise UsageError("standard output is not a byte stream: use --output FILE")
    stdout.flush()
    return buffer  # type: ignore[no-any-return]


def _open_file(path: str) -> IO[bytes]:
    try:
        return open(path, "wb")
    except OSError as error:
        raise UsageError(
            f"cannot write {path}: {error.strerror}; check that the directory exists and is "
            "writable"
        ) from None


def write_lines(output: IO[bytes], outputs: Iterator[list[Any]], flush: bool) -> None:
    write = output.write
    for lines in outputs:
        if lines:
            lines.append("")
            # the renderers emit valid UTF-8 text; an escape beats a crash should that change
            write("\n".join(lines).encode("utf-8", "backslashreplace"))
            if flush:
                output.flush()


def write_avro(
    output: IO[bytes], path: str, records: Iterable[dict[str, Any]], reporter: Reporter
) -> None:
    from offsetwatch.decoder.avro import AvroCodec, AvroError

    try:
        AvroCodec().write_container(output, records)
    except AvroError as error:
        reporter.failure(f"{path}: {error}; the Avro file is incomplete")
