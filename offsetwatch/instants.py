"""Points in time as operators type them (ISO 8601, epoch milliseconds) as epoch milliseconds.

One parser for every command that takes a time (decode --from, offsets reset --to-datetime,
spark offsets-at --time, spark analyze --since/--until): the same text means the same instant
everywhere. Exact to the millisecond: the difference of datetimes, not a float product that
can round 09:00:00.001 down.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)


def iso_epoch_ms(text: str) -> int:
    """`2026-11-20T09:00:00Z`, `2026-11-20T09:00:00.250+01:00`, `2026-11-20` (UTC when no
    offset is given). Raises ValueError for anything else."""
    moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MILLISECOND


def epoch_or_iso_ms(text: str) -> int:
    """Epoch milliseconds given as digits, else `iso_epoch_ms`."""
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() else iso_epoch_ms(stripped)
