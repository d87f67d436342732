"""Points in time as operators type them (ISO 8601, epoch milliseconds) as epoch milliseconds.

One parser for every command that takes a time (decode --from, offsets reset --to-datetime,
spark offsets-at --time, spark analyze --since/--until, spark report --since) and for the
consumer helpers' datetimes (seek_to_timestamp, FromTimestamp): the same text or datetime
means the same instant everywhere. Exact to the millisecond: the difference of datetimes, not
a float product that can round 09:00:00.001 down.

Every parsed time is checked against the range Kafka's timestamps can mean: not before
1970-01-01 (Kafka's lookups take a negative timestamp for "earliest"/"latest", and a broker
refuses other negative ones as an unsupported API version) and not after the year 9999 (epoch
micro- or nanoseconds typed for milliseconds; past int64, librdkafka overflows). Such a time
raises `InstantRangeError`, a ValueError whose message says what to give instead.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from offsetwatch.durations import EXAMPLES, parse_duration_ms

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)
#: 9999-12-31T23:59:59.999Z, the last instant a datetime holds
MAX_EPOCH_MS: Final = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // (
    _MILLISECOND
)
ISO_EXAMPLE: Final = "2026-11-20T09:00:00Z"


class InstantRangeError(ValueError):
    """A well-formed time outside 1970-01-01 .. 9999-12-31: the message says what to give."""


def check_epoch_ms(epoch_ms: int, text: str) -> int:
    """`epoch_ms` when it lies in 1970..9999, else InstantRangeError naming `text`."""
    if epoch_ms < 0:
        raise InstantRangeError(
            f"{text!r} is before 1970-01-01T00:00:00Z, where Kafka's timestamps start: "
            "give a later time"
        )
    if epoch_ms > MAX_EPOCH_MS:
        raise InstantRangeError(
            f"{text!r} is after the year 9999: give epoch milliseconds (13 digits for "
            f"today's dates, not micro- or nanoseconds) or an ISO 8601 time like {ISO_EXAMPLE}"
        )
    return epoch_ms


def datetime_epoch_ms(moment: datetime) -> int:
    """A timezone-aware datetime as epoch milliseconds (sub-millisecond parts dropped)."""
    if moment.tzinfo is None:
        raise ValueError(f"{moment.isoformat()}: give a timezone-aware datetime (e.g. tzinfo=UTC)")
    return (moment - _EPOCH) // _MILLISECOND


def iso_epoch_ms(text: str) -> int:
    """`2026-11-20T09:00:00Z`, `2026-11-20T09:00:00.250+01:00`, `2026-11-20` (UTC when no
    offset is given). Raises ValueError for anything else, InstantRangeError for a time
    outside 1970..9999."""
    moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        epoch_ms = datetime_epoch_ms(moment)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before datetime's first instant
        epoch_ms = -1
    return check_epoch_ms(epoch_ms, text)


def epoch_or_iso_ms(text: str) -> int:
    """Epoch milliseconds given as digits, else `iso_epoch_ms`."""
    stripped = text.strip()
    return check_epoch_ms(int(stripped), text) if stripped.isdigit() else iso_epoch_ms(stripped)


def instant_or_ago_ms(text: str, now_ms: int) -> int:
    """`epoch_or_iso_ms`, or a duration before `now_ms` (`24h`, `PT30M`: offsetwatch.durations).
    Raises ValueError naming every accepted form."""
    stripped = text.strip()
    try:
        ago_ms = parse_duration_ms(stripped)
    except ValueError:
        pass
    else:
        return check_epoch_ms(now_ms - ago_ms, text)
    try:
        return epoch_or_iso_ms(stripped)
    except InstantRangeError:
        raise
    except ValueError:
        raise ValueError(
            f"{text!r}: give ISO 8601 (2026-11-24T08:00:00Z), epoch ms, or a time before now "
            f"({EXAMPLES})"
        ) from None
