"""One parser of typed times for every command."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from offsetwatch.instants import (
    MAX_EPOCH_MS,
    InstantRangeError,
    datetime_epoch_ms,
    epoch_or_iso_ms,
    instant_or_ago_ms,
    iso_epoch_ms,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-20T09:00:00Z", 1_795_165_200_000),
        ("2026-11-20T09:00:00z", 1_795_165_200_000),
        ("2026-11-20T09:00:00", 1_795_165_200_000),  # no zone: UTC
        ("2026-11-20T10:00:00+01:00", 1_795_165_200_000),
        ("2026-11-20T09:00:00.001Z", 1_795_165_200_001),  # exact: no float rounding down
        ("2026-11-20", 1_795_132_800_000),
        ("  2026-11-20T09:00:00Z ", 1_795_165_200_000),
    ],
)
def test_iso_8601(text: str, expected: int) -> None:
    assert iso_epoch_ms(text) == expected
    assert epoch_or_iso_ms(text) == expected


def test_epoch_milliseconds_pass_through() -> None:
    assert epoch_or_iso_ms("1795165200000") == 1_795_165_200_000
    with pytest.raises(ValueError):
        iso_epoch_ms("1795165200000")


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "", "-5"])
def test_anything_else_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        epoch_or_iso_ms(text)


NOW = 1_800_000_000_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1767225600000", 1_767_225_600_000),
        ("2026-01-01T00:00:00Z", 1_767_225_600_000),
        ("2026-01-01T01:00:00+01:00", 1_767_225_600_000),
        ("2026-01-01T00:00:00", 1_767_225_600_000),
        ("24h", NOW - 86_400_000),
        ("24H", NOW - 86_400_000),
        ("90m", NOW - 5_400_000),
        ("PT90M", NOW - 5_400_000),
    ],
)
def test_instant_or_duration_before_now(text: str, expected: int) -> None:
    assert instant_or_ago_ms(text, NOW) == expected


def test_instant_or_duration_names_every_form() -> None:
    with pytest.raises(ValueError, match=r"ISO 8601 .*epoch ms.*24h.*PT30M"):
        instant_or_ago_ms("yesterday", NOW)


@pytest.mark.parametrize(
    "moment",
    [
        # where round(moment.timestamp() * 1000) gives another millisecond than the text does
        datetime(2026, 11, 20, 8, 59, 59, 999_999, tzinfo=UTC),
        datetime(6353, 2, 27, 11, 31, 51, 564_500, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 11, 20, 10, 0, 0, 1_000, tzinfo=timezone(timedelta(hours=1))),
    ],
)
def test_datetimes_convert_as_their_iso_text_does(moment: datetime) -> None:
    exact = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert datetime_epoch_ms(moment) == iso_epoch_ms(moment.isoformat()) == exact


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        datetime_epoch_ms(datetime(2026, 11, 20))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("1969-12-31T23:59:59.999Z", "before 1970"),
        ("0001-01-01T00:00:00+01:00", "before 1970"),  # before datetime's first instant in UTC
        ("9223372036854775808", "after the year 9999"),  # past int64
        ("1795165200000000", "not micro- or nanoseconds"),  # epoch microseconds
    ],
)
def test_times_outside_1970_to_9999_are_refused_saying_why(text: str, words: str) -> None:
    with pytest.raises(InstantRangeError, match=words):
        epoch_or_iso_ms(text)
    with pytest.raises(InstantRangeError):
        instant_or_ago_ms(text, 1_795_165_200_000)


def test_the_edges_of_the_range_are_accepted() -> None:
    assert epoch_or_iso_ms("1970-01-01T00:00:00Z") == 0
    assert epoch_or_iso_ms("0") == 0
    assert epoch_or_iso_ms("9999-12-31T23:59:59.999Z") == MAX_EPOCH_MS
    with pytest.raises(InstantRangeError):
        epoch_or_iso_ms(str(MAX_EPOCH_MS + 1))


def test_a_duration_reaching_before_1970_is_refused() -> None:
    assert instant_or_ago_ms("1d", 86_400_000) == 0
    with pytest.raises(InstantRangeError, match="before 1970"):
        instant_or_ago_ms("99999999d", 1_795_165_200_000)
