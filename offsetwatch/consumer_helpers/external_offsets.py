"""Offsets kept outside Kafka, next to the application's state, for a subscribing consumer.

The state of a partition and the offset of the next message to process are saved together,
so after a restart (or when the partition moves to another member) processing resumes at
exactly the message after the last one the saved state includes: no message counted twice,
none skipped, without Kafka transactions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from offsetwatch.consumer_helpers.assignment import PartitionKey, assign_at, key_of, paused_on_error
from offsetwatch.consumer_helpers.errors import ConsumerHelperError
from offsetwatch.consumer_helpers.log_bounds import log_bounds
from offsetwatch.consumer_helpers.offset_store import OffsetStore, StoredPartition

_LOG = logging.getLogger(__name__)

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class OutOfRange:
    """A stored offset that is no longer in the log: below its start (retention, deleted
    records) or above its end (topic recreated, truncated after an unclean election)."""

    topic: str
    partition: int
    stored_offset: int
    log_start: int
    log_end: int


@dataclass(slots=True)
class _Held(Generic[S]):
    state: S
    next_offset: int | None
    """None until the first message when the partition starts from the log start."""
    dirty: bool


class ExternalOffsets(Generic[S]):
    """Rebalance callbacks and per-partition state of a consumer whose offsets live in an
    OffsetStore (commit nothing to Kafka: enable.auto.commit=false).

        offsets = ExternalOffsets(FileOffsetStore(path), initial=int, encode=..., decode=...)
        offsets.subscribe(consumer, ["clicks"])
        while running:
            message = consumer.poll(1.0)
            ...
            offsets.update(message, offsets.state(message.topic(), message.partition()) + 1)
            offsets.save()  # as often as losing work since the last save is acceptable

    On assign: each partition's state is loaded and the partition starts at its stored offset;
    a partition never saved starts at the log start with `initial()`. A stored offset outside
    [log start, log end] (the watermarks, asked for all partitions in one ListOffsets round)
    restarts the partition at the log start, with `on_out_of_range(event, stored_state)`
    (default: a fresh `initial()`) as its state.
    On revoke: dirty partitions are saved, then dropped. On lost: dropped without saving
    (another member may own them already, and its saves must not be overwritten).
    """

    __slots__ = (
        "_decode",
        "_encode",
        "_held",
        "_initial",
        "_on_out_of_range",
        "_store",
        "_timeout_s",
    )

    def __init__(
        self,
        store: OffsetStore,
        *,
        initial: Callable[[], S],
        encode: Callable[[S], bytes],
        decode: Callable[[bytes], S],
        on_out_of_range: Callable[[OutOfRange, S], S] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self._store = store
        self._initial = initial
        self._encode = encode
        self._decode = decode
        self._on_out_of_range = on_out_of_range
        self._timeout_s = timeout_s
        self._held: dict[PartitionKey, _Held[S]] = {}

    def subscribe(self, consumer: Consumer, topics: list[str]) -> None:
        consumer.subscribe(
            topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost
        )

    @property
    def partitions(self) -> list[PartitionKey]:
        """The partitions whose state this consumer holds now."""
        return sorted(self._held)

    def state(self, topic: str, partition: int) -> S:
        try:
            return self._held[(topic, partition)].state
        except KeyError:
            raise ConsumerHelperError(
                f"{topic}[{partition}] is not assigned to this consumer"
            ) from None

    def update(self, message: Message, state: S) -> None:
        """`state` now includes `message`: both are saved together by the next save()."""
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            raise ValueError("update with a message returned by poll(), not an error event")
        held = self._held.get((topic, partition))
        if held is None:
            raise ConsumerHelperError(f"{topic}[{partition}] is not assigned to this consumer")
        held.state, held.next_offset, held.dirty = state, offset + 1, True

    def save(self, keys: Iterable[PartitionKey] | None = None) -> None:
        """Persist the changed partitions (all held ones, or `keys`)."""
        chosen = self._held.keys() if keys is None else keys
        entries: dict[PartitionKey, StoredPartition] = {}
        for key in chosen:
            held = self._held.get(key)
            if held is not None and held.dirty and held.next_offset is not None:
                entries[key] = StoredPartition(held.next_offset, self._encode(held.state))
        self._store.save(entries)
        for key in entries:
            self._held[key].dirty = False

    # ---- rebalance callbacks ----------------------------------------------------------------

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with paused_on_error(consumer, partitions):
            keys = [key_of(p) for p in partitions]
            stored = self._store.load(keys)
            bounds = log_bounds(consumer, list(stored), self._timeout_s)
            taken = {
                key: self._restore(key, stored[key], bounds[key])
                if key in stored
                else _Held(self._initial(), None, dirty=False)
                for key in keys
            }
            assign_at(
                consumer,
                [
                    TopicPartition(
                        *key, OFFSET_BEGINNING if held.next_offset is None else held.next_offset
                    )
                    for key, held in taken.items()
                ],
            )
            # Held only once assigned: after a failure there is no state of a partition the
            # application cannot read.
            self._held.update(taken)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [key_of(p) for p in partitions]
        try:
            self.save(keys)
        finally:
            self._drop(keys)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drop(key_of(p) for p in partitions)

    # ---- internals ---------------------------------------------------------------------------

    def _restore(
        self, key: PartitionKey, entry: StoredPartition, bounds: tuple[int, int]
    ) -> _Held[S]:
        """The held state for a stored entry, at the log start when it is out of range."""
        low, high = bounds
        state = self._decode(entry.state)
        if low <= entry.offset <= high:
            return _Held(state, entry.offset, dirty=False)
        event = OutOfRange(key[0], key[1], entry.offset, low, high)
        _LOG.warning(
            "%s[%d]: stored offset %d is outside the log [%d, %d]; starting at the log start %d",
            key[0],
            key[1],
            entry.offset,
            low,
            high,
            low,
        )
        state = (
            self._initial()
            if self._on_out_of_range is None
            else self._on_out_of_range(event, state)
        )
        # Dirty: the reset is saved with the first save(), even before a message arrives.
        return _Held(state, low, dirty=True)

    def _drop(self, keys: Iterable[PartitionKey]) -> None:
        for key in keys:
            self._held.pop(key, None)
