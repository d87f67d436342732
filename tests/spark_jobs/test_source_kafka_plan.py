"""Options and offset planning of the kafka source: pure rules, no cluster, no Spark."""

from __future__ import annotations

from itertools import pairwise

import pytest

from offsetwatch.spark_jobs.sources import InputError
from offsetwatch.spark_jobs.sources.kafka_options import (
    EARLIEST,
    LATEST,
    KafkaOptionError,
    PositionSpec,
    parse_options,
)
from offsetwatch.spark_jobs.sources.kafka_ranges import (
    DataLossError,
    OffsetRange,
    Watermarks,
    from_stream_offset,
    limit_ends,
    offset_for_timestamp,
    plan_ranges,
    resolve,
    split_ranges,
    timestamps_to_look_up,
    to_stream_offset,
)

BOOT = {"kafka.bootstrap.servers": "b:9092"}


def test_defaults_read_consumer_offsets_raw_from_earliest() -> None:
    options = parse_options(BOOT)
    assert options.topic == "__consumer_offsets"
    assert options.format == "raw"
    assert options.starting.kind == "earliest"
    assert not options.starting_given
    assert options.ending is None
    assert options.fail_on_data_loss


def test_republished_topic_defaults_to_json() -> None:
    assert parse_options({**BOOT, "topic": "offsetwatch.records"}).format == "json"
    avro = parse_options({**BOOT, "topic": "offsetwatch.records", "format": "AVRO"})
    assert avro.format == "avro"


def test_option_names_are_case_insensitive_like_spark() -> None:
    options = parse_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "b:1",
            "StartingOffsets": "latest",
            "maxOffsetsPerTrigger": "7",
            "FAILONDATALOSS": "false",
        }
    )
    assert options.bootstrap_servers == "b:1"
    assert options.starting.kind == "latest"
    assert options.max_offsets_per_trigger == 7
    assert not options.fail_on_data_loss


def test_per_partition_json_offsets() -> None:
    options = parse_options(
        {
            **BOOT,
            "startingOffsets": '{"__consumer_offsets": {"0": 23, "3": -2}}',
            "endingOffsets": '{"__consumer_offsets": {"0": 50, "3": -1}}',
        }
    )
    assert options.starting == PositionSpec("offsets", {0: 23, 3: EARLIEST})
    assert options.ending == PositionSpec("offsets", {0: 50, 3: LATEST})


def test_timestamp_options_win_over_offsets_as_in_spark() -> None:
    options = parse_options(
        {
            **BOOT,
            "startingOffsets": "latest",
            "startingTimestamp": "1700000000000",
            "endingOffsetsByTimestamp": '{"__consumer_offsets": {"1": 1700000001000}}',
        }
    )
    assert options.starting == PositionSpec("timestamp", everywhere=1_700_000_000_000)
    assert options.ending == PositionSpec("timestamp", per_partition={1: 1_700_000_001_000})


def test_kafka_properties_pass_through_but_not_the_reserved_ones() -> None:
    options = parse_options({**BOOT, "kafka.security.protocol": "SASL_SSL", "kafka.x.y": "z"})
    config = options.consumer_config("g")
    assert config["security.protocol"] == "SASL_SSL"
    assert config["x.y"] == "z"
    assert config["isolation.level"] == "read_committed"
    assert config["enable.auto.commit"] is False
    assert config["auto.offset.reset"] == "error"
    override = parse_options({**BOOT, "kafka.isolation.level": "read_uncommitted"})
    assert override.consumer_config("g")["isolation.level"] == "read_uncommitted"
    with pytest.raises(KafkaOptionError, match=r"kafka\.group\.id.*not allowed"):
        parse_options({**BOOT, "kafka.group.id": "mine"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs option 'kafka.bootstrap.servers'"),
        ({**BOOT, "format": "xml"}, "'format' must be one of raw, json, avro"),
        ({**BOOT, "endingOffsets": "earliest"}, "cannot be 'earliest'"),
        ({**BOOT, "startingOffsets": "soon"}, "must be earliest, latest or JSON"),
        ({**BOOT, "startingOffsets": '{"other": {"0": 1}}'}, "names topic 'other'"),
        ({**BOOT, "startingOffsets": '{"__consumer_offsets": {"0": -3}}'}, "offset -3"),
        ({**BOOT, "endingOffsets": '{"__consumer_offsets": {"0": -2}}'}, "offset -2"),
        ({**BOOT, "startingTimestamp": "yesterday"}, "'startingTimestamp' must be an integer"),
        ({**BOOT, "maxOffsetsPerTrigger": "0"}, "'maxOffsetsPerTrigger' must be positive"),
        ({**BOOT, "failOnDataLoss": "maybe"}, "'failOnDataLoss' must be true or false"),
        ({**BOOT, "output": "both"}, "option output="),
    ],
)
def test_bad_options_say_which_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_options(options)


MARKS = Watermarks(low=10, high=100)


def test_resolve_sentinels_and_defaults() -> None:
    assert resolve(PositionSpec("earliest"), 0, MARKS, {}, LATEST) == 10
    assert resolve(PositionSpec("latest"), 0, MARKS, {}, EARLIEST) == 100
    spec = PositionSpec("offsets", {0: 42, 1: EARLIEST, 2: LATEST})
    assert [resolve(spec, p, MARKS, {}, EARLIEST) for p in (0, 1, 2)] == [42, 10, 100]
    # a partition the JSON does not name (e.g. added later) takes the default
    assert resolve(spec, 7, MARKS, {}, EARLIEST) == 10
    assert resolve(spec, 7, MARKS, {}, LATEST) == 100


def test_timestamp_lookups() -> None:
    everywhere = PositionSpec("timestamp", everywhere=5)
    assert timestamps_to_look_up(everywhere, [0, 1]) == {0: 5, 1: 5}
    some = PositionSpec("timestamp", per_partition={1: 9, 4: 9})
    assert timestamps_to_look_up(some, [0, 1]) == {1: 9}
    assert timestamps_to_look_up(PositionSpec("latest"), [0]) == {}
    assert resolve(everywhere, 0, MARKS, {0: 42}, EARLIEST) == 42


def test_timestamp_without_a_newer_record_means_the_end() -> None:
    # Kafka answers -1 when no record is at or after the timestamp; librdkafka's mock
    # cluster answers -1 to every lookup, so this rule is all the mock can exercise
    assert offset_for_timestamp(-1, MARKS) == 100
    assert offset_for_timestamp(42, MARKS) == 42
    assert offset_for_timestamp(3, MARKS) == 10  # below the log start: from the log start


def test_plan_ranges_skips_empty_and_cuts_at_the_log_end() -> None:
    marks = {0: Watermarks(0, 10), 1: Watermarks(0, 0), 2: Watermarks(5, 20)}
    ranges = plan_ranges({0: 0, 1: 0, 2: 5}, {0: 50, 1: 0, 2: 12}, marks, "t", True)
    assert ranges == [OffsetRange(0, 0, 10), OffsetRange(2, 5, 12)]


def test_plan_ranges_data_loss() -> None:
    marks = {0: Watermarks(30, 40)}
    with pytest.raises(DataLossError, match=r"t\[0\]: offset 20 is outside the log \[30, 40\)"):
        plan_ranges({0: 20}, {0: 40}, marks, "t", True)
    assert plan_ranges({0: 20}, {0: 40}, marks, "t", False) == [OffsetRange(0, 30, 40)]
    # a start past the log end (topic recreated smaller)
    with pytest.raises(DataLossError):
        plan_ranges({0: 50}, {0: 40}, marks, "t", True)
    assert plan_ranges({0: 50}, {0: 40}, marks, "t", False) == []


def test_split_ranges_in_proportion() -> None:
    ranges = [OffsetRange(0, 0, 90), OffsetRange(1, 0, 10)]
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 2) == ranges
    split = split_ranges(ranges, 10)
    assert [r for r in split if r.partition == 1] == [OffsetRange(1, 0, 10)]
    big = [r for r in split if r.partition == 0]
    assert len(big) == 9
    assert big[0].start == 0 and big[-1].end == 90
    assert all(a.end == b.start for a, b in pairwise(big))


def test_limit_ends_shares_in_proportion_and_always_progresses() -> None:
    latest = {0: 1000, 1: 100, 2: 0}
    assert limit_ends({0: 0, 1: 0, 2: 0}, latest, 10_000) == latest
    ends = limit_ends({0: 0, 1: 0, 2: 0}, latest, 110)
    assert ends == {0: 100, 1: 10, 2: 0}
    # a limit smaller than the partition count still moves
    tiny = limit_ends({0: 0, 1: 0, 2: 0}, latest, 1)
    assert sum(tiny.values()) == 1


def test_stream_offsets_round_trip_and_reject_another_topic() -> None:
    offset = to_stream_offset("t", {1: 5, 0: 3})
    assert offset == {"t": {"0": 3, "1": 5}}
    assert from_stream_offset("t", offset) == {0: 3, 1: 5}
    with pytest.raises(ValueError, match="another topic"):
        from_stream_offset("u", offset)
