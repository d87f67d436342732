"""seek_to_timestamp's pure parts: the lookup answer to a start offset, and the instant a
datetime stands for. Members starting at the time, on real record timestamps and for every
group protocol, are tested on the real broker (test_real_broker.py); a failing lookup on the
mock (test_assignment.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from offsetwatch.consumer_helpers import NOT_FOUND, seek_to_timestamp
from offsetwatch.consumer_helpers.seek import epoch_ms, start_offset
from offsetwatch.instants import iso_epoch_ms

BASE = 1_700_000_000_000


def test_lookup_answer_to_start_offset() -> None:
    assert start_offset(7, log_end=9) == 7
    assert start_offset(0, log_end=9) == 0
    # Not the symbolic OFFSET_END (-1), resolved only when fetching starts: the end as read
    # before the lookup, so nothing written in between is skipped.
    assert start_offset(NOT_FOUND, log_end=9) == 9
    assert epoch_ms(datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)) == BASE
    with pytest.raises(ValueError, match="timezone-aware"):
        epoch_ms(datetime(2023, 11, 14))


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        # a float product, round(timestamp() * 1000), said ...565 and 09:00:00.000
        (datetime(6353, 2, 27, 11, 31, 51, 564_500, tzinfo=UTC), 138_319_097_511_564),
        (datetime(2026, 11, 20, 8, 59, 59, 999_999, tzinfo=UTC), 1_795_165_199_999),
        (datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC), 253_402_300_799_999),
    ],
)
def test_a_datetime_becomes_the_millisecond_the_cli_reads_for_it(
    moment: datetime, expected: int
) -> None:
    # seek_to_timestamp(T) and `offsets reset --to-datetime T` start at the same instant
    assert epoch_ms(moment) == iso_epoch_ms(moment.isoformat()) == expected
    assert seek_to_timestamp(moment).timestamp_ms == expected
