"""Log start and log end offsets of many partitions in one ListOffsets round each.

get_watermark_offsets() asks one partition per request; a rebalance can hand over hundreds.
offsets_for_times() with Kafka's special timestamps -2 (earliest) and -1 (latest) sends the
same ListOffsets queries, batched per leader, through the consumer's own connection (and its
isolation level: read_committed consumers get the last stable offset as the end).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from confluent_kafka import Consumer, TopicPartition

from offsetwatch.consumer_helpers.assignment import PartitionKey, key_of
from offsetwatch.consumer_helpers.errors import ConsumerHelperError

EARLIEST: Final = -2
LATEST: Final = -1


def _list_offsets(
    consumer: Consumer, keys: Sequence[PartitionKey], spec: int, timeout_s: float
) -> dict[PartitionKey, int]:
    if not keys:
        return {}
    answer = consumer.offsets_for_times(
        [TopicPartition(topic, partition, spec) for topic, partition in keys], timeout=timeout_s
    )
    found: dict[PartitionKey, int] = {}
    for item in answer:
        if item.error is not None or item.offset < 0:
            what = "start" if spec == EARLIEST else "end"
            raise ConsumerHelperError(
                f"log {what} offset of {item.topic}[{item.partition}]: {item.error or 'no answer'}"
            )
        found[key_of(item)] = item.offset
    return found


def log_ends(
    consumer: Consumer, keys: Sequence[PartitionKey], timeout_s: float
) -> dict[PartitionKey, int]:
    return _list_offsets(consumer, keys, LATEST, timeout_s)


def log_bounds(
    consumer: Consumer, keys: Sequence[PartitionKey], timeout_s: float
) -> dict[PartitionKey, tuple[int, int]]:
    """(log start, log end) per partition: the range a consumer can be positioned in."""
    starts = _list_offsets(consumer, keys, EARLIEST, timeout_s)
    ends = log_ends(consumer, keys, timeout_s)
    return {key: (starts[key], ends[key]) for key in keys}
