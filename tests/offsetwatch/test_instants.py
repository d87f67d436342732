"""One parser of typed times for every command."""

from __future__ import annotations

import pytest

from offsetwatch.instants import epoch_or_iso_ms, iso_epoch_ms


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
