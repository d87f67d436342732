"""Which sampled log ends become `log_end` records in the archive and the republished topic.

Writing every partition every round would make samples outnumber commits on a cluster with
many idle partitions; writing only changes would leave an idle partition's last sample
arbitrarily old, and a history job could not tell "idle" from "no longer sampled". So a round
writes the partitions whose log end changed since the last written sample, and a full round
every `full_round_ms` writes all of them (docs/archive-format.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from offsetwatch.decoder.log_end import SampleIds, log_end_record

TopicPartitionKey = tuple[str, int]


@dataclass(slots=True)
class LogEndRecords:
    """Turns sampling rounds into canonical `log_end` dicts (one instance per exporter)."""

    full_round_ms: int
    _written: dict[TopicPartitionKey, int] = field(default_factory=dict)
    _next_full_ms: int | None = None
    _ids: SampleIds = field(default_factory=SampleIds)

    def records(
        self, time_ms: int, offsets: Mapping[TopicPartitionKey, int | None]
    ) -> list[dict[str, Any]]:
        """The records of one round (`LogEndSampler`'s `on_sample` arguments), sorted by
        topic and partition; None (topic deleted) and absent (not learned) write nothing."""
        full = self._next_full_ms is None or time_ms >= self._next_full_ms
        if full:
            self._next_full_ms = time_ms + self.full_round_ms
            # partitions no longer tracked are forgotten here rather than kept forever
            self._written = {}
        out: list[dict[str, Any]] = []
        for key in sorted(offsets):
            end = offsets[key]
            if end is None:
                self._written.pop(key, None)
                continue
            if self._written.get(key) == end:
                continue
            self._written[key] = end
            topic, partition = key
            out.append(log_end_record(topic, partition, end, time_ms, self._ids.take(time_ms)))
        return out
