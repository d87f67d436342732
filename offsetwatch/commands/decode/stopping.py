"""How `offsetwatch decode` ends on SIGINT or SIGTERM: between two chunks, never inside a write.

The first signal is noted; reading stops after the chunk being written, so the output gets
everything decoded so far and is closed properly (an Avro container writes its last block).
While the main thread waits for input (a consume call, a file read) the signal interrupts the
wait at once: nothing of that chunk has been handed out yet. A second signal interrupts
whatever runs.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import Any, Final, TypeVar

#: the run was stopped by a signal before the end of its input (as the shell reports SIGINT)
EXIT_INTERRUPTED: Final = 130

T = TypeVar("T")

_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class Stopping:
    """A context that owns SIGINT/SIGTERM for the run (main thread only)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._waiting = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Stopping:
        if threading.current_thread() is threading.main_thread():
            for number in _SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, _frame: FrameType | None) -> None:
        first = self.signal is None
        self.signal = number
        if self._waiting or not first:
            raise KeyboardInterrupt

    def between_chunks(self, chunks: Iterator[T]) -> Iterator[T]:
        """`chunks`, until a signal: it ends the iteration between two chunks."""
        while self.signal is None:
            self._waiting = True
            try:
                chunk = next(chunks)
            except (StopIteration, KeyboardInterrupt):
                return
            finally:
                self._waiting = False
            yield chunk
