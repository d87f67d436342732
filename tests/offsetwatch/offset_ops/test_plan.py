"""Reset planning, times, scopes and CSV: the pure rules, with recorded broker answers."""

from __future__ import annotations

import pytest

from offsetwatch.offset_ops import plan
from offsetwatch.offset_ops.csv_io import offsets_csv, parse_offsets_csv
from offsetwatch.offset_ops.model import Committed, OffsetOpsError
from offsetwatch.offset_ops.scope import TopicScope, parse_topic_scope, resolve_scope
from offsetwatch.offset_ops.times import by_duration_ms, parse_datetime_ms
from tests.offsetwatch.offset_ops.doubles import kafka_offset_for_time

A0, A1 = ("a", 0), ("a", 1)
START = {A0: 0, A1: 100}
END = {A0: 50, A1: 300}
CURRENT = {A0: Committed(10), A1: Committed(250)}


def _plan(mode: plan.Mode, by_time: dict[tuple[str, int], int] | None = None) -> list[plan.PlanRow]:
    return plan.build_plan(mode, [A0, A1], CURRENT, START, END, by_time)


def _targets(rows: list[plan.PlanRow]) -> list[int]:
    return [row.target for row in rows]


def test_simple_modes() -> None:
    assert _targets(_plan(plan.ToEarliest())) == [0, 100]
    assert _targets(_plan(plan.ToLatest())) == [50, 300]
    rows = _plan(plan.ShiftBy(-20))
    assert _targets(rows) == [0, 230]
    assert rows[0].note == "clamped to log start (asked -10)"
    assert (rows[1].delta, rows[1].effect) == (-20, "re-read 20")


def test_to_offset_is_clamped_into_the_log_and_reported() -> None:
    rows = _plan(plan.ToOffset(120))
    assert _targets(rows) == [50, 120]
    assert rows[0].note == "clamped to log end (asked 120)"
    assert (rows[0].delta, rows[0].effect) == (40, "skip 40")
    assert rows[1].note == ""


def test_shift_needs_a_committed_offset() -> None:
    with pytest.raises(OffsetOpsError, match=r"cannot shift a:1: the group has no committed"):
        plan.build_plan(plan.ShiftBy(1), [A0, A1], {A0: Committed(1)}, START, END)


def test_time_lands_on_kafkas_answer() -> None:
    # Recorded semantics of a Kafka 4.x ListOffsets by timestamp: the first offset whose
    # timestamp is >= T. Partition a:0 has records at t=1000+10*i; a:1 has none after T.
    stamps = [1000 + 10 * i for i in range(50)]
    by_time = {A0: kafka_offset_for_time(stamps, 0, 1_095), A1: -1}
    assert by_time[A0] == 10  # 1095 falls between offset 9 (1090) and offset 10 (1100)
    rows = _plan(plan.ToTime(1_095, "--to-datetime X"), by_time)
    assert _targets(rows) == [10, 300]
    assert rows[1].note == "no record at or after the time: log end"


def test_time_before_the_log_start_is_refused() -> None:
    # a:1 kept offsets from 100 on: Kafka answers the log start for any older time.
    with pytest.raises(OffsetOpsError, match=r"X is before the log start of a:1 \(first kept"):
        _plan(plan.ToTime(5, "X"), {A0: 0, A1: 100})


def test_future_time_is_refused() -> None:
    with pytest.raises(OffsetOpsError, match="in the future"):
        plan.check_time(2_000, 1_000, "--to-datetime T")


def test_file_offsets_beyond_the_log_end_are_refused_below_start_clamped() -> None:
    mode = plan.ToOffsets({A0: 60, A1: 5}, "p.csv", refuse_past_end=True)
    with pytest.raises(OffsetOpsError, match=r"p.csv: offset 60 of a:0 is beyond the log end 50"):
        _plan(mode)
    rows = _plan(plan.ToOffsets({A0: 5, A1: 5}, "p.csv", refuse_past_end=True))
    assert _targets(rows) == [5, 100]
    history = plan.ToOffsets({A0: 60, A1: 200}, "history", refuse_past_end=False)
    assert _targets(_plan(history)) == [50, 200]


def test_empty_scope_is_refused() -> None:
    with pytest.raises(OffsetOpsError, match="no partitions in scope"):
        plan.build_plan(plan.ToLatest(), [], {}, {}, {})


def test_changes_commit_every_row() -> None:
    assert plan.changes(_plan(plan.ToEarliest())) == {A0: Committed(0), A1: Committed(100)}


def test_times() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01Z") == 1000
    assert parse_datetime_ms("1970-01-01T01:00:01.5+01:00") == 1500
    assert parse_datetime_ms("1970-01-01T00:00:02") == 2000  # UTC without an offset
    assert by_duration_ms("PT30M") == 1_800_000
    assert by_duration_ms("-P1DT2H0.5S") == 93_600_500
    assert by_duration_ms("P1W") == 604_800_000
    assert by_duration_ms("30m") == 1_800_000  # the other commands' spelling (durations.py)
    for bad in ("30", "P", "PT", "PT30X"):
        with pytest.raises(OffsetOpsError, match="--by-duration"):
            by_duration_ms(bad)
    with pytest.raises(OffsetOpsError, match="--to-datetime 'yesterday'"):
        parse_datetime_ms("yesterday")


def test_scopes() -> None:
    assert parse_topic_scope("t") == TopicScope("t", None)
    assert parse_topic_scope("t:2,0,2") == TopicScope("t", (2, 0))
    for bad in ("t:", "t:x", ":1", "t:-1"):
        with pytest.raises(OffsetOpsError, match="--topic"):
            parse_topic_scope(bad)
    counts = {"t": 3, "u": 1}
    assert resolve_scope([TopicScope("t", (2,)), TopicScope("u", None)], counts, [], False) == [
        ("t", 2),
        ("u", 0),
    ]
    assert resolve_scope([], counts, [("u", 0)], True) == [("u", 0)]
    with pytest.raises(OffsetOpsError, match="unknown topic 'v'"):
        resolve_scope([TopicScope("v", None)], counts, [], False)
    with pytest.raises(OffsetOpsError, match=r"unknown partition t:3 \(topic 't' has 3 partitions"):
        resolve_scope([TopicScope("t", (3,))], counts, [], False)


def test_csv_round_trip_and_errors() -> None:
    text = offsets_csv({("b", 1): 7, ("a", 0): 3})
    assert text == "a,0,3\nb,1,7\n"
    assert parse_offsets_csv(text + "\n", "f") == {("a", 0): 3, ("b", 1): 7}
    bad = {
        "a,0\n": "f line 1: expected topic,partition,offset",
        "a,0,1\na,x,2\n": "f line 2: expected",
        "a,0,-1\n": "f line 1: expected",
        "a,0,1\nb,0,1\na,0,2\n": "f line 3: a:0 repeats line 1",
        "\n": "f: no topic,partition,offset rows",
    }
    for content, message in bad.items():
        with pytest.raises(OffsetOpsError, match=message):
            parse_offsets_csv(content, "f")
