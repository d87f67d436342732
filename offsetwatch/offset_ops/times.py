"""Times for --to-datetime (ISO 8601) and --by-duration (ISO 8601 durations, as Java's
Duration.parse reads them: PnDTnHnMn.nS, plus weeks; or 30m, 1d as the other commands take
them): offsetwatch's one parser of each, with the option named in the error."""

from __future__ import annotations

from offsetwatch.durations import EXAMPLES, parse_duration_ms
from offsetwatch.instants import InstantRangeError, iso_epoch_ms
from offsetwatch.offset_ops.model import OffsetOpsError


def parse_datetime_ms(text: str, flag: str = "--to-datetime") -> int:
    """`2026-11-20T09:00:00Z`, `2026-11-20T09:00:00.250+01:00`; UTC when no offset is given.
    Errors name `flag`, the option the text came from."""
    try:
        return iso_epoch_ms(text)
    except InstantRangeError as error:
        raise OffsetOpsError(f"{flag} {error}") from None
    except ValueError:
        raise OffsetOpsError(
            f"{flag} {text!r}: expected an ISO 8601 time like 2026-11-20T09:00:00Z"
        ) from None


def by_duration_ms(text: str) -> int:
    """`PT30M`, `P1DT2H`, `-PT15M`, `30m`; a duration before now, so the sign is ignored
    (Kafka's tool takes `-PT15M` and `PT15M` alike)."""
    try:
        return parse_duration_ms(text)
    except ValueError:
        raise OffsetOpsError(f"--by-duration {text!r}: expected a duration: {EXAMPLES}") from None


def duration_before_ms(text: str, now_ms: int) -> int:
    """The instant `--by-duration text` before `now_ms`; one before 1970 is refused (a
    negative timestamp means "latest" or "earliest" to Kafka's lookup, not a time)."""
    start_ms = now_ms - by_duration_ms(text)
    if start_ms < 0:
        raise OffsetOpsError(
            f"--by-duration {text!r} reaches before 1970-01-01: give a shorter duration, "
            "or --to-earliest"
        )
    return start_ms
