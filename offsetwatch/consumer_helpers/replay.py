"""Replaying a group's input once per replay, however often the group rebalances meanwhile.

Every offset the controller commits carries `offsetwatch-replay:<id>` as its metadata. When a
member is given a partition, the committed metadata tells whether the partition is already
part of this replay (go on from the committed offset) or not yet (start it at the replay's
start and commit that start, tagged, at once). So a member that joins later, or a partition
that moves after a rebalance, never goes back to the start a second time; a new replay id
starts a new replay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from confluent_kafka import OFFSET_INVALID, Consumer, Message, TopicPartition

from offsetwatch.consumer_helpers.assignment import PartitionKey, assign_at, key_of, paused_on_error
from offsetwatch.consumer_helpers.commits import commit_or_raise, commit_or_warn
from offsetwatch.consumer_helpers.errors import ConsumerHelperError
from offsetwatch.consumer_helpers.log_bounds import log_bounds
from offsetwatch.consumer_helpers.seek import (
    OffsetsForTimes,
    broker_offsets_for_times,
    epoch_ms,
    start_offset,
)

_LOG = logging.getLogger(__name__)

METADATA_PREFIX: Final = "offsetwatch-replay:"
# Kafka's default offset.metadata.max.bytes is 4096; ids stay far below it.
_MAX_ID_LENGTH: Final = 200


@dataclass(frozen=True, slots=True)
class FromBeginning:
    """Replay from each partition's log start offset."""


@dataclass(frozen=True, slots=True)
class FromTimestamp:
    """Replay from the first message at or after a time (the log end when there is none)."""

    timestamp_ms: int

    @classmethod
    def at(cls, moment: datetime | int) -> FromTimestamp:
        return cls(epoch_ms(moment))


@dataclass(frozen=True, slots=True)
class FromSnapshot:
    """Replay from given offsets (e.g. what a group had committed at a past time).

    Partitions missing from the snapshot are not replayed: they go on from their committed
    offsets, as with `kafka-consumer-groups --reset-offsets --from-file`. Offsets outside the
    log are clamped to [log start, log end] and logged.
    """

    offsets: Mapping[PartitionKey, int]


ReplayStart = FromBeginning | FromTimestamp | FromSnapshot


def replay_metadata(replay_id: str) -> str:
    """The offset-commit metadata that marks a partition as part of replay `replay_id`."""
    return METADATA_PREFIX + replay_id


def replay_id_of(metadata: str | None) -> str | None:
    """The replay id a committed offset's metadata carries, if any.

    confluent-kafka 2.16.1 sends metadata strings with their terminating NUL byte, so what
    comes back from a real broker may end in "\\x00": it is not part of the id.
    """
    if not metadata:
        return None
    text = metadata.rstrip("\x00")
    return text[len(METADATA_PREFIX) :] if text.startswith(METADATA_PREFIX) else None


class ReplayController:
    """Rebalance callbacks and commit helpers for one replay of a consumer group.

        controller = ReplayController("fix-1234", FromBeginning())
        controller.subscribe(consumer, ["orders"])
        while running:
            message = consumer.poll(1.0)
            ...  # process it
            controller.commit(consumer, message)

    Every commit of the application must go through `commit()` or `store()` (with
    enable.auto.offset.store=false): an untagged commit erases the mark, and the next owner
    of that partition would start the replay again. On revoke the controller commits the
    positions of the partitions it gives up (what poll() has returned so far), tagged, so the
    next owner goes on exactly there.
    """

    __slots__ = ("_lookup", "_metadata", "_timeout_s", "replay_id", "start")

    def __init__(
        self,
        replay_id: str,
        start: ReplayStart,
        *,
        lookup: OffsetsForTimes = broker_offsets_for_times,
        timeout_s: float = 10.0,
    ) -> None:
        if not replay_id or len(replay_id) > _MAX_ID_LENGTH or "\x00" in replay_id:
            raise ValueError(
                f"replay id {replay_id!r}: give 1 to {_MAX_ID_LENGTH} characters without NUL"
            )
        self.replay_id = replay_id
        self.start = start
        self._metadata = replay_metadata(replay_id)
        self._lookup = lookup
        self._timeout_s = timeout_s

    def subscribe(self, consumer: Consumer, topics: list[str]) -> None:
        consumer.subscribe(
            topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost
        )

    # ---- rebalance callbacks ----------------------------------------------------------------

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with paused_on_error(consumer, partitions):
            if not partitions:
                assign_at(consumer, [])
                return
            committed = consumer.committed(
                [TopicPartition(p.topic, p.partition) for p in partitions], timeout=self._timeout_s
            )
            for item in committed:
                if item.error is not None:
                    raise ConsumerHelperError(
                        f"committed offset of {item.topic}[{item.partition}]: {item.error}"
                    )
            fresh = [
                key_of(item)
                for item in committed
                if replay_id_of(item.metadata) != self.replay_id and self._replays(key_of(item))
            ]
            starts = self._start_offsets(consumer, fresh)
            if starts:
                self._mark_started(consumer, starts)
            # Partitions already in the replay (and ones the snapshot leaves out) go on from the
            # committed offset: OFFSET_INVALID.
            assign_at(
                consumer,
                [
                    TopicPartition(
                        item.topic, item.partition, starts.get(key_of(item), OFFSET_INVALID)
                    )
                    for item in committed
                ],
            )

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        positions = consumer.position([TopicPartition(p.topic, p.partition) for p in partitions])
        commit_or_warn(
            consumer,
            self._retag(p for p in positions if p.offset >= 0),
            f"replay {self.replay_id}: the next owner goes on from the last commit",
        )

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Lost partitions may already belong to another member: nothing is committed (the
        broker would fence the commit anyway); their next owner goes on from the last commit."""

    # ---- the application's commits ------------------------------------------------------------

    def tagged(self, topic: str, partition: int, next_offset: int) -> TopicPartition:
        """An offset to commit (the next message to read), marked as part of this replay."""
        return TopicPartition(topic, partition, next_offset, self._metadata)

    def commit(self, consumer: Consumer, message: Message | None = None) -> None:
        """Commit (synchronously) past `message`, or the positions of every assigned partition."""
        if message is not None:
            offsets = [self._after(message)]
        else:
            offsets = [p for p in consumer.position(consumer.assignment()) if p.offset >= 0]
        commit_or_raise(consumer, self._retag(offsets))

    def store(self, consumer: Consumer, message: Message) -> None:
        """For auto-commit: store past `message` with the mark (needs
        enable.auto.offset.store=false, or librdkafka stores untagged offsets itself)."""
        consumer.store_offsets(offsets=[self._after(message)])

    # ---- internals ---------------------------------------------------------------------------

    def _replays(self, key: PartitionKey) -> bool:
        return not isinstance(self.start, FromSnapshot) or key in self.start.offsets

    def _after(self, message: Message) -> TopicPartition:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            raise ValueError("commit a message returned by poll(), not an error event")
        return self.tagged(topic, partition, offset + 1)

    def _retag(self, offsets: Iterable[TopicPartition]) -> list[TopicPartition]:
        return [self.tagged(p.topic, p.partition, p.offset) for p in offsets]

    def _start_offsets(
        self, consumer: Consumer, keys: list[PartitionKey]
    ) -> dict[PartitionKey, int]:
        """Concrete start offsets (they are committed as the replay's mark)."""
        # Bounds first: a log end read before the lookup is safe for NOT_FOUND.
        bounds = log_bounds(consumer, keys, self._timeout_s)
        found: Mapping[PartitionKey, int] = {}
        if isinstance(self.start, FromTimestamp) and keys:
            found = self._lookup(consumer, keys, self.start.timestamp_ms, self._timeout_s)
        starts: dict[PartitionKey, int] = {}
        for key in keys:
            low, high = bounds[key]
            if isinstance(self.start, FromBeginning):
                wanted = low
            elif isinstance(self.start, FromTimestamp):
                if key not in found:
                    raise ConsumerHelperError(
                        f"offsets for time {self.start.timestamp_ms}: no answer for {key}"
                    )
                wanted = start_offset(found[key], high)
            else:
                wanted = self.start.offsets[key]
            starts[key] = min(max(wanted, low), high)
            if starts[key] != wanted:
                _LOG.warning(
                    "replay %s: %s[%d] offset %d is outside the log [%d, %d]: starting at %d",
                    self.replay_id,
                    key[0],
                    key[1],
                    wanted,
                    low,
                    high,
                    starts[key],
                )
        return starts

    def _mark_started(self, consumer: Consumer, starts: Mapping[PartitionKey, int]) -> None:
        """Commit the start offsets, tagged, before reading: from now on every member sees
        these partitions as part of the replay, and so does `offsetwatch groups describe`.

        A failed commit is not fatal: a later owner that finds no mark starts the partition
        at the same start offset, which is where this replay stands until the first commit.
        """
        commit_or_warn(
            consumer,
            [
                self.tagged(topic, partition, offset)
                for (topic, partition), offset in starts.items()
            ],
            f"replay {self.replay_id}: a later owner finds no mark and starts at the same place",
        )
