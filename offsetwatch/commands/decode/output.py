"""Where `offsetwatch decode` writes: JSON lines (one write per chunk) or an Avro container,
to standard output or a file.

A file is written as `FILE.partial` and renamed to FILE once it is closed whole (also after
Ctrl-C or SIGTERM, which end the run between two chunks): a run that fails half-way (a full
disk) leaves `FILE.partial`, never a cut FILE that looks complete.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from offsetwatch.commands import UsageError
from offsetwatch.core.atomic import probe_directory, writable_target
from offsetwatch.core.paths import advice

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


def check_apart_from_inputs(path: str, inputs: list[str]) -> None:
    """Refuse, before any input is opened, an --output that is one of the inputs or inside
    an input directory: `decode in.jsonl -o in.jsonl` replaced the input by its decoding."""
    from offsetwatch.core.paths import inside

    target = Path(path)
    for given in inputs:
        if given != "-" and os.path.exists(given) and inside(target, Path(given)):
            raise UsageError(
                f"--output {path} is the input {given} or inside it: the input would be "
                "overwritten or read back; choose an --output outside the inputs"
            )


class OutputError(Exception):
    """Writing the output failed (a full disk, a closed device): one line names the file."""


class OutputFile:
    """`FILE.partial`, renamed to FILE by `complete()`; every write error is an OutputError."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            # a symlink's target gets the file; /dev/null or a FIFO is written in place
            target, in_place = writable_target(path)
        except OSError as error:
            raise UsageError(
                f"cannot write --output {path}: {error.strerror}; choose another --output"
            ) from None
        self.target = str(target)
        self.partial = self.target if in_place else f"{target}.partial"
        if not in_place:
            try:
                # a byte written and removed: a full disk is found before the decoding
                probe_directory(target.parent)
            except OSError as error:
                raise UsageError(
                    f"cannot write --output {path}: {error.strerror or error}; {advice(error)}"
                ) from None
        try:
            # closed by complete() or abandon(): the file outlives this constructor
            self._file: IO[bytes] = open(self.partial, "wb")  # noqa: SIM115
        except OSError as error:
            raise UsageError(
                f"cannot write --output {path} ({self.partial}): {error.strerror}; check "
                "that the directory exists and is writable"
            ) from None

    def write(self, data: bytes) -> int:
        try:
            return self._file.write(data)
        except OSError as error:
            raise self.failed(error) from None

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as error:
            raise self.failed(error) from None

    def tell(self) -> int:
        return self._file.tell()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def complete(self) -> None:
        """Close and rename to the final name: the file is whole."""
        try:
            self._file.close()
            if self.partial != self.target:
                os.replace(self.partial, self.target)
        except OSError as error:
            raise self.failed(error) from None

    def abandon(self) -> None:
        """Close what was written so far under its .partial name."""
        # the failure that brought us here was reported already
        with contextlib.suppress(OSError):
            self._file.close()

    @property
    def file(self) -> IO[bytes]:
        """The open file itself, for writers that need a real file object (fastavro)."""
        return self._file

    def failed(self, error: OSError) -> OutputError:
        kept = (
            f"what was written so far is in {self.partial} (incomplete)"
            if self.partial != self.target
            else "it is no regular file, so nothing was kept"
        )
        return OutputError(
            f"cannot write --output {self.path}: {error.strerror or error}; {kept}; free space or "
            "choose another --output, then run again"
        )


class StdoutOutput:
    """Standard output as bytes; a write error other than a closed pipe is an OutputError."""

    def __init__(self) -> None:
        self._out = _binary_stdout()

    def write(self, data: bytes) -> int:
        try:
            return self._out.write(data)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise self.failed(error) from None

    def flush(self) -> None:
        try:
            self._out.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise self.failed(error) from None

    def tell(self) -> int:
        return self._out.tell()

    @property
    def file(self) -> IO[bytes]:
        return self._out

    def failed(self, error: OSError) -> OutputError:
        return OutputError(f"cannot write standard output: {error.strerror or error}")


Output = OutputFile | StdoutOutput


def open_output(stack: ExitStack, path: str | None) -> Output:
    """The output; the caller completes (or abandons) a file, stdout is only flushed."""
    if not path:
        stdout = StdoutOutput()
        stack.callback(stdout.flush)
        return stdout
    output = OutputFile(path)
    # if anything raised before the caller completed it, keep what was written as .partial
    stack.callback(lambda: None if output.closed else output.abandon())
    return output


def _binary_stdout() -> IO[bytes]:
    stdout = sys.stdout
    buffer = getattr(stdout, "buffer", None)
    if buffer is None:
        raise UsageError("standard output is not a byte stream: use --output FILE")
    stdout.flush()
    return buffer  # type: ignore[no-any-return]


def write_lines(output: Output, outputs: Iterator[list[Any]], flush: bool) -> None:
    write = output.write
    for lines in outputs:
        if lines:
            lines.append("")
            # the renderers emit valid UTF-8 text; an escape beats a crash should that change
            write("\n".join(lines).encode("utf-8", "backslashreplace"))
            if flush:
                output.flush()


def write_avro(
    output: Output,
    path: str,
    outputs: Iterable[list[dict[str, Any]]],
    flush: bool,
    reporter: Reporter,
) -> None:
    """Canonical records into an Avro container; with `flush` (--follow) each chunk ends a
    block and is flushed, so the file holds every record read so far."""
    from offsetwatch.decoder.avro import AvroCodec, AvroError

    try:
        writer = AvroCodec().container_writer(output.file)
        for records in outputs:
            for record in records:
                writer.write(record)
            if flush and records:
                writer.flush()
                output.flush()
        writer.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise output.failed(error) from None
    except AvroError as error:
        reporter.failure(f"{path}: {error}; the Avro file is incomplete")
