"""Finds the names of topic ids from topic metadata: Metadata plus DescribeTopics, which
answers each topic's id. Runs on the log-end sampler's thread (blocking calls); the names go
to the main loop through `exporter/state/topic_names.py`, which says where ids come from.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Collection
from typing import Any

from confluent_kafka import KafkaException, TopicCollection

log = logging.getLogger(__name__)

_MASK64 = (1 << 64) - 1


def kafka_topic_id(uuid: Any) -> str:
    """A confluent-kafka `Uuid` as Kafka and our decoder print topic ids (URL-safe base64,
    no padding; librdkafka's own str() uses the standard alphabet, '+' and '/')."""
    raw = (uuid.get_most_significant_bits() & _MASK64).to_bytes(8, "big") + (
        uuid.get_least_significant_bits() & _MASK64
    ).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class TopicIdResolver:
    """Finds the names of topic ids from topic metadata (sampler thread; blocking calls).

    DescribeTopics answers ids by topic name, so names are described and the answers cached:
    topics not described yet when an id is unknown, and every topic once more when a new
    unknown id is still not found among them (a topic deleted and created again under the
    same name has a new id). An id that stays unknown (its topic was deleted) costs nothing
    more until the cluster has topics not described yet.
    """

    def __init__(self, admin: Any, timeout_s: float, chunk_size: int = 1000) -> None:
        self._admin = admin
        self._timeout_s = timeout_s
        self._chunk_size = chunk_size
        self._by_id: dict[str, str] = {}
        self._described: set[str] = set()
        self._attempted: set[str] = set()

    def use(self, admin: Any) -> None:
        """Ask through another client from now on (the sampler replaced its own)."""
        self._admin = admin

    def resolve(self, unknown: Collection[str]) -> dict[str, str]:
        """id -> name for the ids of `unknown` that topic metadata names."""
        wanted = set(unknown)
        found = {i: self._by_id[i] for i in wanted if i in self._by_id}
        missing = wanted - found.keys()
        if not missing:
            return found
        metadata = self._admin.list_topics(timeout=self._timeout_s)
        topics = set(metadata.topics)
        new_ids = missing - self._attempted
        self._describe(topics - self._described)
        if new_ids and not new_ids <= self._by_id.keys():
            self._describe(topics)
        self._attempted |= missing
        found.update({i: self._by_id[i] for i in missing if i in self._by_id})
        return found

    def _describe(self, names: Collection[str]) -> None:
        ordered = sorted(names)
        for start in range(0, len(ordered), self._chunk_size):
            chunk = ordered[start : start + self._chunk_size]
            futures = self._admin.describe_topics(
                TopicCollection(chunk), request_timeout=self._timeout_s
            )
            for name, future in futures.items():
                try:
                    description = future.result(timeout=self._timeout_s + 5)
                except KafkaException:
                    continue  # deleted between the listing and the description
                self._by_id[kafka_topic_id(description.topic_id)] = name
                self._described.add(name)
