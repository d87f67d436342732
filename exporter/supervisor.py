"""Runs one part's work on a thread of its own, and restarts it with backoff when it fails.

A part (a source reader, the log-end sampler) is a function that does one round of its work:
`Supervised` calls it again and again until stopped. A round that raises is logged with its
traceback once per outage, counted (`PartHealth.restarts_total`) and run again after a
backoff that doubles from `BACKOFF_MIN_S` to `BACKOFF_MAX_S`, so a part that keeps failing
neither spins a core nor floods the log, and the first round that works again clears its
health. Nothing a part raises reaches the main loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from offsetwatch.exporter.stats import PartHealth

log = logging.getLogger(__name__)

BACKOFF_MIN_S: Final = 0.5
BACKOFF_MAX_S: Final = 30.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Supervised:
    """A daemon thread that calls `round()` until `stop()`; see the module doc."""

    def __init__(
        self,
        name: str,
        round_: Callable[[], None],
        *,
        health: PartHealth | None = None,
        clock_ms: Callable[[], int] = _now_ms,
        backoff_min_s: float = BACKOFF_MIN_S,
        backoff_max_s: float = BACKOFF_MAX_S,
    ) -> None:
        self.name = name
        self.health = health if health is not None else PartHealth(name)
        self._round = round_
        self._clock_ms = clock_ms
        self._backoff_min_s = backoff_min_s
        self._backoff_max_s = backoff_max_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> threading.Event:
        """Set once `stop()` was called: a round that waits should wait on this."""
        return self._stop

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to stop after its current round, without waiting for it: parts
        are asked together, then joined, so their current rounds end at the same time."""
        self._stop.set()

    def stop(self, timeout_s: float = 15.0) -> bool:
        """Stop after the current round; True if the thread ended within `timeout_s`."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        backoff = self._backoff_min_s
        health = self.health
        while not self._stop.is_set():
            try:
                self._round()
            except Exception as error:
                first = not health.failing_since_ms
                health.last_error = f"{type(error).__name__}: {error}"
                health.restarts_total += 1
                if first:
                    health.failing_since_ms = self._clock_ms()
                    log.exception(
                        "%s failed; restarting it in %g s (then with a backoff up to %g s)",
                        self.name,
                        backoff,
                        self._backoff_max_s,
                    )
                else:
                    log.debug("%s failed again: %s", self.name, health.last_error)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)
                continue
            if health.failing_since_ms:
                log.warning("%s works again after %d restarts", self.name, health.restarts_total)
                health.failing_since_ms = 0
            backoff = self._backoff_min_s
