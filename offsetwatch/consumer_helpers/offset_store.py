"""Where an application keeps its offsets outside Kafka, together with its local state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from offsetwatch.consumer_helpers.assignment import PartitionKey


@dataclass(frozen=True, slots=True)
class StoredPartition:
    """One partition's saved progress: the state built from every message before `offset`."""

    offset: int
    """The next message to process."""
    state: bytes


class OffsetStore(Protocol):
    """A store of StoredPartition per (topic, partition).

    save() must be atomic per partition: after a crash, load() gives either the new or the
    previous entry, never a state from one and an offset from the other. A database store
    saves the batch in one transaction; FileOffsetStore writes one file per partition.
    """

    def load(self, keys: Iterable[PartitionKey]) -> dict[PartitionKey, StoredPartition]:
        """The entries that exist among `keys` (a partition never saved is simply absent)."""
        ...

    def save(self, entries: Mapping[PartitionKey, StoredPartition]) -> None: ...
