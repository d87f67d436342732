"""One parser of typed durations for every command (spark analyze/report, offsets reset)."""

from __future__ import annotations

import pytest

from offsetwatch.durations import parse_duration_ms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", 86_400_000),
        ("24H", 86_400_000),  # spark analyze took it, spark report refused it
        ("24 h", 86_400_000),
        (" 90m ", 5_400_000),
        ("7d", 604_800_000),
        ("2w", 1_209_600_000),
        ("30s", 30_000),
        ("PT30M", 1_800_000),
        ("pt30m", 1_800_000),
        ("P1DT2H", 93_600_000),
        ("-PT15M", 900_000),  # counted back from now either way, as Kafka's --by-duration
        ("P1W", 604_800_000),
        ("PT0.001S", 1),
        ("PT1.0005S", 1_000),  # half a millisecond: half-even, exactly (no float product)
        ("PT1.0015S", 1_002),
        ("PT123456789.123456789S", 123_456_789_123),
    ],
)
def test_short_and_iso_8601(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize("text", ["", "24", "h", "24x", "P", "PT", "P1M", "1.5h", "-24h"])
def test_anything_else_is_a_value_error_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="PT30M"):
        parse_duration_ms(text)
