"""How fresh the state of each partition of a topic the exporter reads is, as the cluster
confirms it: one instance for `__consumer_offsets`, one for `__share_group_state` (the share
groups' state; the same rules, its own sampler rounds and ends of partition).

A partition's state is confirmed as of time T when the log-end sampler asked the partition's
leader for its end at T (ListOffsets, read_committed as the source reads) and the records
applied since reach that end: everything committed before T is in the state. A fetch that
ends at the partition's end (an end-of-partition event, taken by the main loop at T) confirms
it too; idle partitions get no such event again, so the sampler's rounds are what keeps them
confirmed. A reader that stops getting answers (no leader, brokers down, Read revoked)
leaves its last batches looking as good as new ones; only a round trip to the leader that
the reader then catches up with tells the two apart.

Pure: the main loop hands in the sampler's rounds (`on_log_ends`), the positions after each
batch (`on_positions`) and the ends of partition a batch reached (`on_ends`: the log end is
often past trailing transaction markers that no record stands for); `view` gives the
immutable `Freshness` that readiness, the API and the metrics read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final

from offsetwatch.exporter.stats import Freshness

#: log ends of one partition kept while the reader has not reached them: past this many, the
#: oldest go (a later end that is reached confirms a later time, which is only conservative)
PENDING_KEPT: Final = 16


@dataclass(slots=True)
class SourceFreshness:
    """Per partition: the last time confirmed, the sampled ends not reached yet, and why the
    last round could not confirm it."""

    #: partition -> epoch ms the cluster last confirmed the state complete up to
    confirmed_ms: dict[int, int] = field(default_factory=dict)
    #: partition -> next offset to read, as far as the batches applied reached
    positions: dict[int, int] = field(default_factory=dict)
    #: partition -> (sample time, log end) the position has not reached yet, oldest first
    pending: dict[int, deque[tuple[int, int]]] = field(default_factory=dict)
    #: partition -> the last round's error for it (no answer for its log end)
    unanswered: dict[int, str] = field(default_factory=dict)
    #: epoch ms since which the partitions are tracked (start, or the last rebuild)
    since_ms: int = 0
    #: partition -> epoch ms it was first tracked after `since_ms`, for partitions that
    #: appear later (`track`): `__share_group_state` is created with the first share group
    tracked_since: dict[int, int] = field(default_factory=dict)

    def on_log_ends(
        self,
        time_ms: int,
        ends: Mapping[int, int],
        failed: Mapping[int, str],
    ) -> None:
        """One sampler round: the log end the leader answered at `time_ms` per partition, and
        the error of each partition it did not answer for."""
        for partition, error in failed.items():
            self.unanswered[partition] = error
        positions = self.positions
        for partition, end in ends.items():
            self.unanswered.pop(partition, None)
            if positions.get(partition, 0) >= end:
                self._confirm(partition, time_ms)
                continue
            waiting = self.pending.get(partition)
            if waiting is None:
                waiting = self.pending[partition] = deque(maxlen=PENDING_KEPT)
            waiting.append((time_ms, end))

    def on_ends(self, ends: Mapping[int, int], now_ms: int) -> None:
        """Partitions a fetch read to their end (the offset of the end), taken at `now_ms`."""
        self.on_positions(ends)
        for partition in ends:
            self._confirm(partition, now_ms)

    def on_positions(self, positions: Mapping[int, int]) -> None:
        """The next offset per partition after a batch was applied (its partitions only)."""
        reached = self.positions
        for partition, position in positions.items():
            if position > reached.get(partition, -1):
                reached[partition] = position
        if not self.pending:
            return
        for partition in [p for p in positions if p in self.pending]:
            position = reached[partition]
            waiting = self.pending[partition]
            confirmed_at = None
            while waiting and waiting[0][1] <= position:
                confirmed_at = waiting.popleft()[0]
            if confirmed_at is not None:
                self._confirm(partition, confirmed_at)
            if not waiting:
                del self.pending[partition]

    def _confirm(self, partition: int, time_ms: int) -> None:
        if time_ms > self.confirmed_ms.get(partition, 0):
            self.confirmed_ms[partition] = time_ms

    def track(self, partitions: Collection[int], now_ms: int) -> None:
        """`partitions` are read now: one not seen before is aged from `now_ms`, not from
        `since_ms` (a topic created hours after the start is not stale the moment it appears,
        before a round could confirm it)."""
        since = self.tracked_since
        for partition in partitions:
            if partition not in since:
                since[partition] = max(now_ms, self.since_ms)

    def forget(self, partition: int) -> None:
        """The partition's state left this exporter (or is read again from its start)."""
        self.confirmed_ms.pop(partition, None)
        self.tracked_since.pop(partition, None)
        self.positions.pop(partition, None)
        self.pending.pop(partition, None)
        self.unanswered.pop(partition, None)

    def reset(self, now_ms: int) -> None:
        """Everything is read again from the start: nothing is confirmed any more."""
        self.confirmed_ms.clear()
        self.positions.clear()
        self.pending.clear()
        self.unanswered.clear()
        self.tracked_since.clear()
        self.since_ms = now_ms

    def view(
        self,
        partitions: Collection[int],
        partition_count: int,
        stale_after_ms: int,
        reader_error: str | None = None,
    ) -> Freshness:
        """The immutable view of `partitions` (the assigned ones, of `partition_count`) for
        readiness, the API and the metrics; `reader_error` is the source's last error, named where
        the reader is behind what the leader answered."""
        confirmed = {p: self.confirmed_ms[p] for p in partitions if p in self.confirmed_ms}
        causes: dict[int, str] = {}
        for partition in partitions:
            unanswered = self.unanswered.get(partition)
            waiting = self.pending.get(partition)
            if unanswered is not None:
                causes[partition] = f"its leader did not answer for its log end: {unanswered}"
            elif waiting:
                behind = f"read up to offset {self.positions.get(partition, 0)}"
                cause = (
                    f"not read up to the log end its leader answered ({waiting[-1][1]}; {behind})"
                )
                if reader_error:
                    cause += f"; the reader's last error: {reader_error}"
                causes[partition] = cause
            elif partition not in confirmed:
                causes[partition] = "no log end answered yet"
        return Freshness(
            tracked=tuple(sorted(partitions)),
            partition_count=partition_count,
            confirmed_ms=confirmed,
            causes=causes,
            stale_after_ms=stale_after_ms,
            since_ms=self.since_ms,
            tracked_since_ms={
                p: self.tracked_since[p] for p in partitions if p in self.tracked_since
            },
        )
