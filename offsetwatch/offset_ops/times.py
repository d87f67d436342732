"""Times for --to-datetime (ISO 8601) and --by-duration (ISO 8601 durations, as Java's
Duration.parse reads them: PnDTnHnMn.nS, plus weeks)."""

from __future__ import annotations

import re
from typing import Final

from offsetwatch.instants import iso_epoch_ms
from offsetwatch.offset_ops.model import OffsetOpsError

_DURATION: Final = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,9})?)S)?)?",
    re.IGNORECASE,
)
_UNIT_MS: Final = {"w": 604_800_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000}


def parse_datetime_ms(text: str) -> int:
    """`2026-11-20T09:00:00Z`, `2026-11-20T09:00:00.250+01:00`; UTC when no offset is given."""
    try:
        return iso_epoch_ms(text)
    except ValueError:
        raise OffsetOpsError(
            f"--to-datetime {text!r}: expected an ISO 8601 time like 2026-11-20T09:00:00Z"
        ) from None


def parse_duration_ms(text: str) -> int:
    """`PT30M`, `P1DT2H`, `-PT15M`; a duration before now, so the sign is ignored (Kafka's tool
    takes `-PT15M` and `PT15M` alike)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(unit) for unit in ("w", "d", "h", "m", "s")):
        raise OffsetOpsError(
            f"--by-duration {text!r}: expected an ISO 8601 duration like PT30M or P1DT2H"
        )
    total = sum(int(match.group(unit) or 0) * size for unit, size in _UNIT_MS.items())
    total += round(float(match.group("s") or 0) * 1000)
    return total
