"""Keeps a failing cluster from flooding the log: the same message at most once per interval.

While brokers are down, librdkafka and the source report the same connection failure over and
over. The first occurrence is logged; repeats within `interval_s` are counted and the next one
let through afterwards says how many were held back. "The same" is the same cause: the text
with its numbers taken out (librdkafka's lines differ by milliseconds, ports and counts).

librdkafka's own lines (loggers named `*.librdkafka`) come at most as WARNING: it reports at
ERROR every connection it loses, also those the exporter rides through (a broker restarting);
what the exporter could not ride through it says itself (source down, stale, a failing sink).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

_NUMBERS = re.compile(r"\d+")


class RepeatFilter(logging.Filter):
    """A logging filter that lets an identical message through at most once per interval."""

    def __init__(
        self, interval_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        # (logger, level, text) -> (last time let through, repeats held back since)
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING and record.name.endswith(".librdkafka"):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        text = record.getMessage()
        key = (record.name, record.levelno, _NUMBERS.sub("#", text))
        now = self._clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._seen[key] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:
            record.msg = f"{text} (and {last[1]} more times in the last {self.interval_s:.0f} s)"
            record.args = None
        if len(self._seen) > 10_000:
            # a bounded memory: forget everything rather than grow with unique messages
            self._seen.clear()
        self._seen[key] = (now, 0)
        return True
