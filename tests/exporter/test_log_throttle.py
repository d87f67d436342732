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


def test_one_line_per_cause_whatever_its_numbers() -> None:
    now = [0.0]
    throttle = RepeatFilter(interval_s=30, clock=lambda: now[0])
    line = "127.0.0.1:{}/1: Connect to ipv4#127.0.0.1:{} failed: Connection refused (after {}ms)"
    assert throttle.filter(_record(line.format(9092, 9092, 0)))
    for attempt in range(50):
        now[0] += 0.5
        assert not throttle.filter(_record(line.format(9094, 9094, attempt)))
    now[0] += 30
    again = _record(line.format(9092, 9092, 3))
    assert throttle.filter(again)
    assert again.getMessage().endswith("(and 50 more times in the last 30 s)")


def test_librdkafka_errors_come_as_warnings() -> None:
    throttle = RepeatFilter(interval_s=30, clock=lambda: 0.0)
    record = logging.LogRecord(
        "offsetwatch.exporter.sources.kafka_source.librdkafka", logging.ERROR, __file__, 1,
        "FAIL [rdkafka#consumer-1] Connection refused", None, None,
    )  # fmt: skip
    assert throttle.filter(record)
    assert (record.levelno, record.levelname) == (logging.WARNING, "WARNING")
    own = _record("the exporter's own error", logging.ERROR)
    assert throttle.filter(own) and own.levelno == logging.ERROR
