"""Executor side of the `kafka` source: read one offset range, yield Arrow batches.

Each task builds its own confluent-kafka consumer, assigns its one partition at the range's
start and reads until the range's end: no group membership, no commits (the stream's offsets
live in Spark's checkpoint). The end is recognised by offset, or by librdkafka's EOF event
when the last offsets of the range are transaction markers, which the client never delivers.
Undecodable messages are skipped in the records and become rows of the quarantine output
(`option("output", "quarantine")`, see spark_jobs/sources/__init__.py), located by
`file` = `<topic>-<partition>` and `position` = the message's offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Final, cast

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from offsetwatch.decoder.codec import Message as RawMessage
from offsetwatch.spark_jobs.schema import CanonicalRows
from offsetwatch.spark_jobs.sources import Collector
from offsetwatch.spark_jobs.sources.kafka_decode import MessageDecoder
from offsetwatch.spark_jobs.sources.kafka_options import KafkaSourceOptions
from offsetwatch.spark_jobs.sources.kafka_ranges import DataLossError, OffsetRange

SOURCE: Final = "kafka"
#: messages per consume() call
_CONSUME_BATCH: Final = 10_000
_POLL_S: Final = 0.5
#: the `group.id` librdkafka demands; nothing joins or commits with it
READER_GROUP_ID: Final = "offsetwatch-spark-kafka-source"

_DATA_LOSS_CODES: Final = frozenset({KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET})

#: errors librdkafka reports and then recovers from by itself (reconnects, leader moves)
_TRANSIENT: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._TIMED_OUT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
    }
)


class KafkaReadError(RuntimeError):
    """A range could not be read (the broker failed, or kept silent for too long)."""


def collect(
    decoder: MessageDecoder, collector: Collector, topic: str, messages: list[RawMessage]
) -> pa.RecordBatch | None:
    """Decode `messages`: the offset commits come back as a ready Arrow batch (None if
    none), the other good ones go to `collector` as records, the bad ones as bad input."""
    decoded = decoder.decode(messages)
    for rejected in decoded.rejected:
        collector.bad_input(
            f"{topic}-{rejected.partition}",
            rejected.offset,
            rejected.reason,
            rejected.error,
            rejected.raw_text(),
        )
    if decoded.records:
        file = f"{topic}-{messages[0][2]}"
        for offset, canonical in decoded.records:
            collector.add(canonical, file, offset)
    return None if collector.quarantine else decoded.commits


def read_range(
    options: KafkaSourceOptions, rows: CanonicalRows, offsets: OffsetRange
) -> Iterator[Any]:
    """The canonical rows of `offsets` as Arrow batches (or quarantine rows, per `output`)."""
    decoder = MessageDecoder(options.format, rows)
    collector = Collector(rows, SOURCE, options.quarantine_output)
    consumer = Consumer(options.consumer_config(READER_GROUP_ID))
    try:
        consumer.assign([TopicPartition(options.topic, offsets.partition, offsets.start)])
        for messages in _fetch(consumer, options, offsets):
            commits = collect(decoder, collector, options.topic, messages)
            if commits is not None:
                yield commits
            if collector.full:
                yield from collector.drain()
        yield from collector.drain()
    finally:
        consumer.close()


def _fetch(
    consumer: Consumer, options: KafkaSourceOptions, offsets: OffsetRange
) -> Iterator[list[RawMessage]]:
    """Messages of the range in consume() batches, stopping at the range's end."""
    topic, partition, end = options.topic, offsets.partition, offsets.end
    next_offset = offsets.start
    quiet_since = time.monotonic()
    while next_offset < end:
        messages = consumer.consume(num_messages=_CONSUME_BATCH, timeout=_POLL_S)
        if messages and _all_before(messages, end):
            # the usual consume() result: in one comprehension, no per-message branches
            # (messages without an error have offsets)
            batch = cast(
                list[RawMessage],
                [(m.key(), m.value(), partition, m.offset(), m.timestamp()[1]) for m in messages],
            )
            quiet_since = time.monotonic()
            next_offset = batch[-1][3] + 1
            yield batch
            continue
        batch = []
        for message in messages:
            error = message.error()
            if error is not None:
                next_offset = _on_error(consumer, options, offsets, message, error, next_offset)
                if next_offset >= end:
                    break
                continue
            offset = cast(int, message.offset())  # a message without error has one
            if offset >= end:
                next_offset = end
                break
            timestamp = message.timestamp()[1]
            batch.append((message.key(), message.value(), partition, offset, timestamp))
            next_offset = offset + 1
        if batch:
            quiet_since = time.monotonic()
            yield batch
        elif time.monotonic() - quiet_since > options.poll_timeout_ms / 1000:
            raise KafkaReadError(
                f"{topic}[{partition}]: nothing received for "
                f"{options.poll_timeout_ms} ms at offset {next_offset} (range ends at {end}); "
                "is the cluster reachable? (option kafkaConsumer.pollTimeoutMs)"
            )


def _all_before(messages: list[Message], end: int) -> bool:
    """No error event among the messages, and the last (so every one) before `end`."""
    return all(m.error() is None for m in messages) and cast(int, messages[-1].offset()) < end


def _on_error(
    consumer: Consumer,
    options: KafkaSourceOptions,
    offsets: OffsetRange,
    message: Message,
    error: KafkaError,
    next_offset: int,
) -> int:
    """The next offset to expect after an error event (the end when the range is done)."""
    code = error.code()
    where = f"{options.topic}[{offsets.partition}]"
    if code == KafkaError._PARTITION_EOF:
        reached = message.offset()
        if reached is None or reached >= offsets.end:
            return offsets.end
        # the log ends before the planned end: it was truncated after planning
        if options.fail_on_data_loss:
            raise DataLossError(
                f"{where}: the log ends at {reached}, before the planned end {offsets.end} "
                "(truncated?); set option failOnDataLoss=false to read what is left"
            )
        return offsets.end
    if code in _DATA_LOSS_CODES:
        if options.fail_on_data_loss:
            raise DataLossError(
                f"{where}: offset {next_offset} is no longer in the log ({error.str()}); "
                "set option failOnDataLoss=false to read what is left"
            )
        low, _high = consumer.get_watermark_offsets(
            TopicPartition(options.topic, offsets.partition), timeout=10
        )
        if low <= next_offset or low >= offsets.end:
            # not removed from the front: the log was cut at the end, nothing more to read
            return offsets.end
        consumer.assign([TopicPartition(options.topic, offsets.partition, low)])
        return low
    if error.fatal() or (not error.retriable() and code not in _TRANSIENT):
        raise KafkaReadError(f"{where}: {error.str()}") from KafkaException(error)
    return next_offset
