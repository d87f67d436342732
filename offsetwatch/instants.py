"""Points in time as operators type them (ISO 8601, epoch milliseconds) as epoch milliseconds.

One parser for every command that takes a time (decode --from, offsets reset --to-datetime,
spark offsets-at --time, spark analyze --since/--until, spark report --since) and for the
consumer helpers' datetimes (seek_to_timestamp, FromTimestamp): the same text or datetime
means the same instant everywhere. Exact to the millisecond: the difference of datetimes, not
a float product that can round 09:00:00.001 down.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from offsetwatch.durations import EXAMPLES, parse_duration_ms

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)


def datetime_epoch_ms(moment: datetime) -> int:
    """A timezone-aware datetime as epoch milliseconds (sub-millisecond parts dropped)."""
    if moment.tzinfo is None:
        raise ValueError(f"{moment.isoformat()}: give a timezone-aware datetime (e.g. tzinfo=UTC)")
    return (moment - _EPOCH) // _MILLISECOND


def iso_epoch_ms(text: str) -> int:
    """`2026-11-20T09:00:00Z`, `2026-11-20T09:00:00.250+01:00`, `2026-11-20` (UTC when no
    offset is given). Raises ValueError for anything else."""
    moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return datetime_epoch_ms(moment)


def epoch_or_iso_ms(text: str) -> int:
    """Epoch milliseconds given as digits, else `iso_epoch_ms`."""
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() else iso_epoch_ms(stripped)


def instant_or_ago_ms(text: str, now_ms: int) -> int:
    """`epoch_or_iso_ms`, or a duration before `now_ms` (`24h`, `PT30M`: offsetwatch.durations).
    Raises ValueError naming every accepted form."""
    stripped = text.strip()
    try:
        return now_ms - parse_duration_ms(stripped)
    except ValueError:
        pass
    try:
        return epoch_or_iso_ms(stripped)
    except ValueError:
        raise ValueError(
            f"{text!r}: give ISO 8601 (2026-11-24T08:00:00Z), epoch ms, or a time before now "
            f"({EXAMPLES})"
        ) from None
