"""Decoded records as they are ingested, for the console's live stream (Server-Sent Events).

The main loop hands every decoded record to `LiveRecords.append` - but only while someone
watches: the daemon installs that sink when the first stream opens and removes it when the
last one closes, so an unwatched exporter pays nothing per record.

`append` is two stores into a fixed ring of `capacity` slots, whatever the number of
watchers. Each watcher (`Cursor`) reads the ring from its own position, on its own thread:
that is its bounded queue. A watcher that falls more than `capacity` records behind (a slow
browser, or more records than it may take) loses the oldest ones, and counts them in
`dropped`; the exporter never waits for a watcher. Records are immutable, so sharing them
between the main loop and the stream threads needs no lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Final

from offsetwatch.decoder.canonical import group_of
from offsetwatch.decoder.records import AnyRecord, Record
from offsetwatch.decoder.registry import RECORD_TYPES

__all__ = ["DEFAULT_CAPACITY", "Cursor", "LiveRecords", "RecordFilter", "type_name"]

DEFAULT_CAPACITY: Final = 4096


def type_name(record: AnyRecord) -> str:
    """The canonical `type` of a record without building its canonical dict."""
    if type(record) is Record:
        return RECORD_TYPES[record.key_type].name
    return "unknown"


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """What a watcher wants: a group (substring), a record type, a partition of
    `__consumer_offsets`, offsets from `min_offset`; None matches anything."""

    group: str | None = None
    type: str | None = None
    partition: int | None = None
    min_offset: int | None = None

    def matches(self, record: AnyRecord) -> bool:
        if self.partition is not None and record.partition != self.partition:
            return False
        if self.min_offset is not None and record.offset < self.min_offset:
            return False
        if self.type is not None and type_name(record) != self.type:
            return False
        if self.group is not None:
            group = group_of(record)
            return group is not None and self.group in group
        return True


@dataclass(slots=True, eq=False)
class Cursor:
    """One watcher's position in the ring, and what it lost."""

    hub: LiveRecords
    position: int
    dropped: int = 0
    delivered: int = 0
    closed: bool = False

    def take(self, limit: int) -> list[AnyRecord]:
        """Records since the last call, oldest first, at most `limit` (the newest ones:
        what does not fit is dropped and counted, as is what the ring overwrote)."""
        hub = self.hub
        head = hub.head
        start = self.position
        if head - start > hub.capacity:
            self.dropped += head - hub.capacity - start
            start = head - hub.capacity
        if head - start > limit:
            self.dropped += head - limit - start
            start = head - limit
        ring = hub.ring
        capacity = hub.capacity
        out: list[AnyRecord] = []
        for seq in range(start, head):
            item = ring[seq % capacity]
            if item is None or item[0] != seq:
                self.dropped += 1  # overwritten while we read
                continue
            out.append(item[1])
        self.position = head
        self.delivered += len(out)
        return out

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.hub.unsubscribe(self)


@dataclass(slots=True)
class LiveRecords:
    capacity: int = DEFAULT_CAPACITY
    ring: list[tuple[int, AnyRecord] | None] = field(init=False)
    #: sequence number of the next record appended
    head: int = 0
    #: records dropped by watchers that have gone (the live ones count in their cursors)
    dropped_closed: int = 0
    _cursors: set[Cursor] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"capacity must be positive, got {self.capacity}")
        self.ring = [None] * self.capacity

    def append(self, record: AnyRecord) -> None:
        """The main loop's sink: never blocks, never waits for a watcher."""
        seq = self.head
        self.ring[seq % self.capacity] = (seq, record)
        self.head = seq + 1

    def watched(self) -> bool:
        return bool(self._cursors)

    def subscribe(self) -> Cursor:
        """A watcher from now on (it sees records appended after this call)."""
        cursor = Cursor(self, self.head)
        with self._lock:
            self._cursors.add(cursor)
        return cursor

    def unsubscribe(self, cursor: Cursor) -> None:
        with self._lock:
            if cursor not in self._cursors:
                return
            self._cursors.discard(cursor)
            self.dropped_closed += cursor.dropped

    @property
    def watchers(self) -> int:
        return len(self._cursors)

    @property
    def dropped_total(self) -> int:
        """Records any watcher lost, since start (gone watchers included)."""
        with self._lock:
            return self.dropped_closed + sum(c.dropped for c in self._cursors)
