"""The progress bar of `offsetwatch decode` on stderr, for file input."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from typing import Any

from offsetwatch.decode_inputs import Source


class ProgressBar:
    """A rich progress bar on stderr (bytes when the total is known, records always)."""

    def __init__(self, total: int | None, force: bool) -> None:
        # rich is imported only when a bar is drawn, which most runs (pipes, files) never do
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        console = Console(stderr=True, force_terminal=force or None)
        columns: list[Any] = [TextColumn("decoding")]
        if total is not None:
            columns += [BarColumn(), DownloadColumn(), TransferSpeedColumn()]
        columns += [TextColumn("{task.fields[records]:,} records"), TimeElapsedColumn()]
        if total is not None:
            columns.append(TimeRemainingColumn())
        self._progress = Progress(*columns, console=console, transient=True, redirect_stdout=False)
        self._task = self._progress.add_task("decode", total=total, records=0)
        self._records = 0
        self._bytes = 0
        self._next_update = 0.0

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._flush()
        self._progress.stop()

    def advance(self, nbytes: int, records: int) -> None:
        # the bar redraws ~10 times a second: pass it the counts at about that rate
        self._records += records
        self._bytes += nbytes
        now = time.monotonic()
        if now >= self._next_update:
            self._next_update = now + 0.1
            self._flush()

    def _flush(self) -> None:
        self._progress.update(self._task, advance=self._bytes, records=self._records)
        self._bytes = 0


def start_bar(
    stack: ExitStack, args: argparse.Namespace, source: Source, output_is_stdout: bool
) -> ProgressBar | None:
    """A running bar when one is wanted (the stack stops it), else None."""
    if not want_progress(args, source, output_is_stdout):
        return None
    return stack.enter_context(ProgressBar(source.total_bytes, force=bool(args.progress)))


def want_progress(args: argparse.Namespace, source: Source, output_is_stdout: bool) -> bool:
    if source.flush_each_chunk:  # the live topic: no end to measure
        return False
    if args.progress is not None:
        return bool(args.progress)
    if not _isatty(sys.stderr):
        return False
    # records printed to the same terminal would tear the bar
    return not (output_is_stdout and _isatty(sys.stdout))


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
