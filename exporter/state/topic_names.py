"""Topic id -> name, for the records that name topics by id: share partitions
(`__share_group_state` keys hold topic ids) and KIP-848 assignments (Kafka 4.1 and later no
longer write the ConsumerGroupPartitionMetadata record that named them).

A share group's ShareGroupPartitionMetadata record (`__consumer_offsets` key type 9) names the
topics its members subscribe to, but Kafka 4.0 rewrites it with `topics: []` as soon as the
last member leaves (checked with kafka-dump-log on a real 4.0 broker): an idle queue with a
backlog - the case that matters most - would show its topic as an id and get no log end,
hence no lag. So names come from two places:

* every group record ever read names its topics while members are there (`learn`): a topic id
  is unique for the life of the cluster, so a name once learned stays right;
* topic metadata for the ids still unknown (`exporter/sources/topic_id_resolver.py`, on the
  log-end sampler's thread; never on the main loop).

The main loop publishes the unknown ids (`unknown`), the sampler thread hands names back
through a queue (`offer`), and the main loop takes them (`take_offered`). Until a name is
known the partition shows as its id and counts as unnamed.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable
from dataclasses import dataclass, field

from offsetwatch.decoder.records import ShareGroupPartitionMetadataValue
from offsetwatch.exporter.state.offset_state import GroupState


@dataclass(slots=True)
class TopicIdNames:
    """Topic id -> name for the exporter's share partitions and assignments (main loop side)."""

    names: dict[str, str] = field(default_factory=dict)
    #: ids of share partitions without a name, published for the sampler thread (immutable)
    unknown: frozenset[str] = frozenset()
    #: ids of members' assignments without a name (group views), published likewise
    unknown_assigned: frozenset[str] = frozenset()
    _offered: queue.SimpleQueue[dict[str, str]] = field(default_factory=queue.SimpleQueue)

    def learn(self, names: dict[str, str]) -> None:
        self.names.update(names)

    def take_offered(self) -> None:
        """Apply what the sampler thread found (main loop)."""
        while True:
            try:
                found = self._offered.get_nowait()
            except queue.Empty:
                return
            self.names.update(found)

    def publish_unknown(self, topic_ids: Iterable[str]) -> None:
        names = self.names
        self.unknown = frozenset(t for t in topic_ids if t not in names)

    def publish_unknown_assigned(self, topic_ids: Iterable[str]) -> None:
        names = self.names
        self.unknown_assigned = frozenset(t for t in topic_ids if t not in names)

    # -- called on the sampler thread ----------------------------------------------------

    def unknown_ids(self) -> frozenset[str]:
        return self.unknown | self.unknown_assigned

    def offer(self, found: dict[str, str]) -> None:
        if found:
            self._offered.put(found)


def share_topic_names(group: GroupState) -> dict[str, str]:
    """Topic id -> name from the group's ShareGroupPartitionMetadata record."""
    record = group.record(9)
    if record is None or not isinstance(record.value, ShareGroupPartitionMetadataValue):
        return {}
    return {topic.topic_id: topic.topic_name for topic in record.value.topics}
