"""seek_to_timestamp on the mock cluster, for eager, cooperative and KIP-848 groups.

What the mock cannot show: librdkafka 2.16's mock answers every ListOffsets-by-timestamp with
-1 (pinned below), so the positions are checked through the injectable lookup answering as a
Kafka broker does (first offset with timestamp >= T, -1 when none: `KafkaTimeAnswers`). The
assignment, the seek and the consumption are the real client's on the mock.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka import TopicPartition

from offsetwatch.consumer_helpers import NOT_FOUND, broker_offsets_for_times, seek_to_timestamp
from offsetwatch.consumer_helpers.seek import epoch_ms, start_offset
from offsetwatch.instants import iso_epoch_ms
from offsetwatch.mock_cluster import MockCluster
from tests.kafka_fixtures import kafka_cluster  # noqa: F401
from tests.offsetwatch.consumer_helpers.clients import (
    PROTOCOLS,
    KafkaTimeAnswers,
    Reader,
    make_consumer,
    poll_until,
    produce_timed,
)

pytestmark = pytest.mark.kafka

TOPIC = "events"
BASE = 1_700_000_000_000
T = BASE + 5_000
# partition 0: 10 messages one second apart -> T is offset 5; partition 1: every message is
# older than T -> -1, the log end; partition 2: every message is newer -> offset 0.
TIMESTAMPS = {
    0: [BASE + i * 1000 for i in range(10)],
    1: [BASE - 10_000 + i for i in range(8)],
    2: [BASE + 60_000 + i for i in range(6)],
}


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


def test_mock_answers_minus_one_to_timestamp_lookups(kafka_cluster: MockCluster) -> None:  # noqa: F811
    """Pins the mock's limit: why the other tests inject the lookup."""
    kafka_cluster.create_topic(TOPIC, 3)
    produce_timed(kafka_cluster.bootstrap_servers, TOPIC, TIMESTAMPS)
    consumer = make_consumer(kafka_cluster.bootstrap_servers, "pin", "eager")
    try:
        found = broker_offsets_for_times(consumer, [(TOPIC, 0), (TOPIC, 2)], T, 10.0)
    finally:
        consumer.close()
    assert found == {(TOPIC, 0): NOT_FOUND, (TOPIC, 2): NOT_FOUND}  # Kafka: 5 and 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_newly_assigned_partitions_start_at_the_time(
    kafka_cluster: MockCluster,  # noqa: F811
    protocol: str,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(TOPIC, 3)
    produce_timed(bootstrap, TOPIC, TIMESTAMPS)
    answers = KafkaTimeAnswers(TIMESTAMPS, TOPIC)
    reader = Reader(make_consumer(bootstrap, f"seek-{uuid.uuid4().hex}", protocol))
    reader.consumer.subscribe([TOPIC], on_assign=seek_to_timestamp(T, lookup=answers))
    try:
        # Partition 1 starts at its log end (8), as read before the lookup: messages written
        # once it is assigned are read.
        poll_until([reader], lambda: reader.assigned() == {0, 1, 2})
        produce_timed(bootstrap, TOPIC, {1: [T + 1, T + 2]})
        expected = {(0, o) for o in range(5, 10)} | {(1, 8), (1, 9)} | {(2, o) for o in range(6)}
        poll_until([reader], lambda: set(reader.read) >= expected)
    finally:
        reader.consumer.close()
    assert sorted(reader.read) == sorted(expected)
    assert sorted(answers.calls[0]) == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_only_uncommitted_leaves_committed_partitions_alone(
    kafka_cluster: MockCluster,  # noqa: F811
    protocol: str,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(TOPIC, 3)
    produce_timed(bootstrap, TOPIC, TIMESTAMPS)
    group = f"seek-{uuid.uuid4().hex}"
    committer = make_consumer(bootstrap, group, protocol)
    committer.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
    committer.close()
    answers = KafkaTimeAnswers(TIMESTAMPS, TOPIC)
    reader = Reader(make_consumer(bootstrap, group, protocol))
    reader.consumer.subscribe(
        [TOPIC], on_assign=seek_to_timestamp(T, only_uncommitted=True, lookup=answers)
    )
    expected = {(0, o) for o in range(2, 10)} | {(2, o) for o in range(6)}
    try:
        poll_until([reader], lambda: set(reader.read) >= expected)
        produce_timed(bootstrap, TOPIC, {1: [T + 1]})
        expected.add((1, 8))
        poll_until([reader], lambda: set(reader.read) >= expected)
    finally:
        reader.consumer.close()
    assert sorted(reader.read) == sorted(expected)
    # Partition 0 had a commit: it was not even looked up.
    assert sorted(answers.calls[0]) == [(TOPIC, 1), (TOPIC, 2)]


def test_a_partition_given_back_by_an_eager_rebalance_is_not_sought_again(
    kafka_cluster: MockCluster,  # noqa: F811
) -> None:
    """Eager groups hand the whole assignment over at every rebalance: partitions this
    consumer already had go on from their committed offsets instead of jumping back to T."""
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(TOPIC, 3)
    produce_timed(bootstrap, TOPIC, TIMESTAMPS)
    group = f"seek-{uuid.uuid4().hex}"
    answers = KafkaTimeAnswers(TIMESTAMPS, TOPIC)
    first = Reader(make_consumer(bootstrap, group, "eager"))
    first.on_message = lambda m: first.consumer.commit(message=m, asynchronous=False)
    first.consumer.subscribe([TOPIC], on_assign=seek_to_timestamp(T, lookup=answers))
    second = Reader(make_consumer(bootstrap, group, "eager"))
    try:
        poll_until([first], lambda: len(first.read) == 11)  # 5 + 0 + 6: all it should read
        second.consumer.subscribe([TOPIC])
        poll_until(
            [first, second],
            lambda: (
                second.assigned() | first.assigned() == {0, 1, 2}
                and not second.assigned() & first.assigned()
                and bool(second.assigned())
            ),
        )
        # One new message per partition: a partition sought again would deliver its older
        # messages first.
        produce_timed(bootstrap, TOPIC, {0: [T + 10], 1: [T + 10], 2: [T + 10]})
        poll_until([first, second], lambda: len(first.read) + len(second.read) == 14)
    finally:
        first.consumer.close()
        second.consumer.close()
    # Only the first assignment looked anything up: `first` had seen every partition, and
    # `second` is not using the helper (it goes on from the commits, including the one of
    # partition 1 at its log end, where nothing had been read).
    assert len(answers.calls) == 1
    read = sorted(first.read + second.read)
    assert read == sorted({(0, o) for o in range(5, 11)} | {(1, 8)} | {(2, o) for o in range(7)})
