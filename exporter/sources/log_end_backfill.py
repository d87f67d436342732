"""A partition's recent log-end history, rebuilt from Kafka's own record timestamps.

Lag in seconds and the status windows need the log-end history of a group's partitions. A
fleet replica that takes a `__consumer_offsets` partition over has sampled none of its
groups' data partitions, and would otherwise need a whole status window of its own samples
before its STALL and lag seconds meant what the previous owner's did.

ListOffsets by timestamp answers the first offset whose record timestamp is at or after T:
the log end as it was at T (every record before it was appended before T, as far as the
producers' clocks tell; exact for LogAppendTime topics). No answer (-1) means no record is
that new: the log end at T is the current one. So one request per point in time, for every
new partition at once, gives the history the previous owner sampled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from confluent_kafka import TopicPartition

# re-exported by confluent_kafka.admin without __all__, which strict mypy refuses
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

TopicPartitionKey = tuple[str, int]
#: a rebuilt history: (time in ms, log end per partition), oldest first
Backfill = list[tuple[int, dict[TopicPartitionKey, int]]]

#: at most this many points per rebuilt window: requests stay few however long the window
MAX_POINTS: Final = 60
#: the most recent points, one sampling interval apart
LINEAR: Final = 10


def _at(time_ms: int) -> Any:
    return OffsetSpec.for_timestamp(time_ms)


def backfill_times(now_ms: int, window_ms: int, interval_ms: int) -> list[int]:
    """The points in time to ask, oldest first, over the window before `now_ms` (excluded):
    one sampling interval apart over the last LINEAR intervals, then spaced in proportion to
    their age, as LogEndHistory thins what it keeps, so that lag in seconds read from the
    rebuilt history is within a sampling interval when recent and a few percent when old."""
    if window_ms <= 0 or interval_ms <= 0:
        return []
    ages = {k * interval_ms for k in range(1, LINEAR + 1) if k * interval_ms <= window_ms}
    start = LINEAR * interval_ms
    if window_ms > start:
        ratio = (window_ms / start) ** (1 / (MAX_POINTS - LINEAR))
        age = float(start)
        while age < window_ms:
            age *= ratio
            ages.add(min(window_ms, round(age)))
    return sorted(now_ms - age for age in ages)


def rebuild(
    admin: Any,
    keys: Sequence[TopicPartitionKey],
    ends: Mapping[TopicPartitionKey, int],
    times: Sequence[int],
    isolation_level: Any,
    timeout_s: float,
) -> Backfill:
    """The log end of each of `keys` at each of `times` (`ends`: their log ends now). A
    point a partition got no answer for leaves that partition out of that point; nothing is
    guessed."""
    out: Backfill = []
    for time_ms in times:
        request = {TopicPartition(t, p): _at(time_ms) for t, p in keys}
        futures = admin.list_offsets(
            request, isolation_level=isolation_level, request_timeout=timeout_s
        )
        point: dict[TopicPartitionKey, int] = {}
        for tp, future in futures.items():
            key = (tp.topic, tp.partition)
            try:
                offset = int(future.result(timeout=timeout_s + 5).offset)
            except Exception:  # no answer for this partition at this point: left out
                continue
            if offset >= 0:
                point[key] = min(offset, ends[key])
            elif offset == -1:
                point[key] = ends[key]  # no record that new: the end was already reached
        if point:
            out.append((time_ms, point))
    return out
