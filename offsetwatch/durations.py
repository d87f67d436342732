"""Lengths of time as operators type them, in milliseconds: one parser for every command.

Two spellings, both case-insensitive:

* short: a number and a unit, `24h`, `90m`, `7d`, `30s`, `2w` (`24H` and `24 h` too), as
  `spark analyze --since`, `spark report --since` and `spark analyze --storm 5/10m` take them;
* ISO 8601, as Java's Duration.parse reads them (plus weeks): `PT30M`, `P1DT2H`, `PT0.5S`, as
  Kafka's `kafka-consumer-groups --by-duration` and `offsets reset --by-duration` take them. A
  leading sign is accepted and ignored: every command counts the duration back from now, and
  Kafka's tool takes `-PT15M` and `PT15M` alike.

Exact to the millisecond: fractions of seconds are decimal arithmetic, never a float product.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final

_UNIT_MS: Final = {"w": 604_800_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000}
_SHORT: Final = re.compile(r"(?P<count>\d+)\s*(?P<unit>[smhdw])", re.IGNORECASE)
_ISO: Final = re.compile(
    r"[-+]?P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,9})?)S)?)?",
    re.IGNORECASE,
)
EXAMPLES: Final = "24h, 90m, 7d or ISO 8601 like PT30M, P1DT2H"
#: the longest wait, in seconds, any command or the exporter takes (about 24.8 days):
#: librdkafka's timeouts are int32 milliseconds, and a thread wait beyond it is never meant
MAX_WAIT_S: Final = (2**31 - 1) // 1000


def parse_duration_ms(text: str) -> int:
    """`24h` or `PT30M` -> milliseconds (>= 0). Raises ValueError for anything else."""
    stripped = text.strip()
    short = _SHORT.fullmatch(stripped)
    if short is not None:
        return int(short["count"]) * _UNIT_MS[short["unit"].lower()]
    iso = _ISO.fullmatch(stripped)
    if iso is None or not any(iso[unit] for unit in _UNIT_MS):
        raise ValueError(f"{text!r} is not a duration: give {EXAMPLES}")
    whole = sum(int(iso[unit] or 0) * size for unit, size in _UNIT_MS.items() if unit != "s")
    seconds = Decimal(iso["s"] or 0) * 1000
    return whole + int(seconds.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
