"""Log-end samples in the canonical envelope (docs/canonical-schema.md, "Log-end samples").

A sample is no `__consumer_offsets` record, yet it travels with them (archive files,
republished topic) so that history jobs see commits and log ends in one stream. The envelope
marks it three ways so that no reader takes it for a decoded record: `type` `log_end`,
`key_type` -1 (Kafka key types are >= 0) and `partition` -1. Its `offset` is the sample's own
id (`SampleIds`), unique and increasing, so the usual dedupe on `(partition, offset)` drops a
sample written twice but never merges two different samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from offsetwatch.decoder import contract as c
from offsetwatch.decoder.canonical import dumps
from offsetwatch.decoder.registry import LOG_END_KEY_TYPE

LOG_END_TYPE: Final = c.LOG_END_TYPE
#: the envelope `partition` of every sample: no partition of `__consumer_offsets`
SAMPLE_PARTITION: Final = -1
#: ids per millisecond: a sample id is `sampled_at_ms * IDS_PER_MS + n`, which fits an int64
#: until the year 2262
IDS_PER_MS: Final = 1_000_000


@dataclass(slots=True)
class SampleIds:
    """Hands out sample ids: `sampled_at_ms * IDS_PER_MS`, then the next free one.

    Ids only grow within a process. Across a restart they stay unique as long as the wall
    clock did not step back and the previous run took fewer than a million ids per
    millisecond on average (a round of a million partitions every millisecond).
    """

    next_id: int = 0

    def take(self, sampled_at_ms: int) -> int:
        sample_id = max(self.next_id, sampled_at_ms * IDS_PER_MS)
        self.next_id = sample_id + 1
        return sample_id


def log_end_record(
    topic: str, partition: int, log_end_offset: int, sampled_at_ms: int, sample_id: int
) -> dict[str, Any]:
    """The canonical dict of one log-end sample (same fields as every canonical record)."""
    return {
        c.TYPE: LOG_END_TYPE,
        c.KEY_TYPE: LOG_END_KEY_TYPE,
        c.VALUE_VERSION: 0,
        c.TOMBSTONE: False,
        c.NEWER_VERSION: False,
        c.PARTITION: SAMPLE_PARTITION,
        c.OFFSET: sample_id,
        c.TIMESTAMP: sampled_at_ms,
        c.GROUP: None,
        c.KEY: {"topic": topic, "partition": partition},
        c.VALUE: {"log_end_offset": log_end_offset, "sampled_at_ms": sampled_at_ms},
        c.TRANSACTION: None,
        c.SCHEMA: c.SCHEMA_VERSION,
    }


def log_end_identity_key(topic: str, partition: int) -> bytes:
    """The republished sample's Kafka key, shaped like `canonical.identity_key`: a compacted
    output topic keeps the latest sample of each data partition."""
    return dumps({c.TYPE: LOG_END_TYPE, "topic": topic, "partition": partition}).encode()
