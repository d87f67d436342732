"""Consumer-side offset helpers for confluent-kafka consumers that subscribe to topics.

- `seek_to_timestamp`: an on_assign callback that starts newly assigned partitions at a time;
- `ReplayController`: replays a group's input from the beginning, a time or a snapshot,
  once per replay id, across rebalances and members joining later;
- `ExternalOffsets` with `FileOffsetStore` (or any `OffsetStore`): offsets kept outside
  Kafka, saved atomically with the application's state.

Every helper works with classic eager and cooperative groups and with KIP-848 groups
(`group.protocol=consumer`). See docs/consumer-helpers.md.
"""

from offsetwatch.consumer_helpers.assignment import PartitionKey
from offsetwatch.consumer_helpers.errors import ConsumerHelperError
from offsetwatch.consumer_helpers.external_offsets import ExternalOffsets, OutOfRange
from offsetwatch.consumer_helpers.file_store import FileOffsetStore
from offsetwatch.consumer_helpers.offset_store import OffsetStore, StoredPartition
from offsetwatch.consumer_helpers.replay import (
    FromBeginning,
    FromSnapshot,
    FromTimestamp,
    ReplayController,
    ReplayStart,
    replay_id_of,
    replay_metadata,
)
from offsetwatch.consumer_helpers.seek import (
    NOT_FOUND,
    OffsetsForTimes,
    SeekToTimestamp,
    broker_offsets_for_times,
    seek_to_timestamp,
)

__all__ = [
    "NOT_FOUND",
    "ConsumerHelperError",
    "ExternalOffsets",
    "FileOffsetStore",
    "FromBeginning",
    "FromSnapshot",
    "FromTimestamp",
    "OffsetStore",
    "OffsetsForTimes",
    "OutOfRange",
    "PartitionKey",
    "ReplayController",
    "ReplayStart",
    "SeekToTimestamp",
    "StoredPartition",
    "broker_offsets_for_times",
    "replay_id_of",
    "replay_metadata",
    "seek_to_timestamp",
]
