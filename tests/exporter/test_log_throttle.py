"""RepeatFilter: a broker outage must not flood the log."""

from __future__ import annotations

import logging

from offsetwatch.exporter.log_throttle import RepeatFilter


def _record(text: str, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("exporter", level, __file__, 1, text, None, None)


def test_repeats_are_held_back_and_counted() -> None:
    now = [0.0]
    throttle = RepeatFilter(interval_s=30, clock=lambda: now[0])
    assert throttle.filter(_record("connect failed"))
    for _ in range(100):
        now[0] += 0.1
        assert not throttle.filter(_record("connect failed"))
    now[0] += 30
    again = _record("connect failed")
    assert throttle.filter(again)
    assert again.getMessage() == "connect failed (and 100 more times in the last 30 s)"


def test_different_messages_and_levels_pass() -> None:
    throttle = RepeatFilter(interval_s=30, clock=lambda: 0.0)
    assert throttle.filter(_record("a"))
    assert throttle.filter(_record("b"))
    assert throttle.filter(_record("a", logging.ERROR))
    assert not throttle.filter(_record("a"))
