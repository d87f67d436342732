"""Exactly-once sinks across a fleet: how far each `__consumer_offsets` partition reached the
sinks, kept where its next owner can read it - as the fleet's own committed offsets.

A replica that owns a partition commits, to the fleet's consumer group, the position below
which every record of that partition is in the sinks (published and delivered, archived and
fsynced: `RecordSinks.checkpoint_positions`), with the resume bound of that position in the
commit's metadata (`SINCE_PREFIX`, a wall-clock lower bound for when any record at or after
it could have reached the sinks, exporter/sinks/resume_dedup.py). It commits every
`COMMIT_INTERVAL_S`, when the group revokes the partition (after the sinks delivered what
they had of it: `RevokeHandshake`) and at a graceful exit.

The next owner reads the partition from its log start anyway (its state needs every record),
but writes none of the records below the committed position, and reads the publish topic and
the archive back from the bound to skip what the previous owner wrote after it (the same scan
as after a crash). A partition gained with no commit of ours is committed at once (position
0, bound "now") before any of its records reaches the sinks, so that an owner dying before
its first periodic commit still leaves a bound to its successor.

The commit is the member's own (`Consumer.commit` from the reader thread), so the group's
coordinator refuses it from a member that lost the partition (a stale generation or member
epoch): a zombie cannot move the position back. Its deliveries still queued in its producer
are not fenced (docs/fleet.md, "Zombies").
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

#: the metadata of a fleet's sink commit: it says the commit is ours (a fleet's name check
#: refuses a group with other commits) and holds the resume bound
SINCE_PREFIX: Final = "offsetwatch-sinks/1 since_ms="
#: periodic commits: what a crashed owner's successor may have to read back is at most this
#: much older than the crash (plus the delivery time of what was in flight)
COMMIT_INTERVAL_S: Final = 5.0
#: how long a revocation waits for the main loop to deliver the partition's records; past it
#: the partition goes with its last periodic commit (the successor's scan covers the rest)
REVOKE_WAIT_S: Final = 15.0


@dataclass(slots=True, frozen=True)
class SinkCommit:
    """Every record of `partition` below `offset` is in the sinks; none at or after it
    reached them before `since_ms` (epoch ms)."""

    partition: int
    offset: int
    since_ms: int

    def metadata(self) -> str:
        return f"{SINCE_PREFIX}{self.since_ms}"


def parse_commit(partition: int, offset: int, metadata: str | None) -> SinkCommit | None:
    """The sink commit a committed offset is, or None when it is none of ours."""
    if offset < 0 or not metadata or not metadata.startswith(SINCE_PREFIX):
        return None
    try:
        since_ms = int(metadata[len(SINCE_PREFIX) :])
    except ValueError:
        return None
    return SinkCommit(partition, offset, since_ms)


def is_sink_commit(metadata: str | None) -> bool:
    """Whether a committed offset's metadata is a fleet's sink commit."""
    return bool(metadata) and str(metadata).startswith(SINCE_PREFIX)


@dataclass(slots=True)
class RevokeHandshake:
    """The reader thread's revocation, answered by the main loop, which alone knows what the
    sinks delivered.

    The group's revoke callback runs inside the reader's consume(); it `ask`s and waits (at
    most `wait_s`) while the main loop, between two batches, stops writing the partitions,
    waits for their deliveries and answers the commits (`pending`, `answer`). A lost
    partition (session expired: no commit is accepted any more) is only `note_lost`: the
    main loop stops writing it before the next batch, without waiting for the event."""

    wait_s: float = REVOKE_WAIT_S
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _asked: tuple[int, ...] | None = None
    _answer: list[SinkCommit] | None = None
    _answered: threading.Event = field(default_factory=threading.Event)
    _lost: set[int] = field(default_factory=set)
    _enabled: bool = True
    #: revocations the main loop did not answer in time
    timeouts_total: int = 0

    def ask(self, partitions: Iterable[int]) -> list[SinkCommit]:
        """Reader thread: the commits for `partitions`, once the main loop answered; [] when
        it did not in time or the handshake is off (the exit commits by itself)."""
        asked = tuple(sorted(partitions))
        with self._lock:
            if not self._enabled or not asked:
                return []
            self._asked, self._answer = asked, None
            self._answered.clear()
        answered = self._answered.wait(self.wait_s)
        with self._lock:
            self._asked = None
            answer, self._answer = self._answer, None
            if not answered or answer is None:
                self.timeouts_total += 1
                return []
        return answer

    def pending(self) -> tuple[int, ...] | None:
        """Main loop: the partitions a revocation waits for, if one does."""
        with self._lock:
            return None if self._answer is not None else self._asked

    def answer(self, commits: list[SinkCommit]) -> None:
        with self._lock:
            if self._asked is None:
                return  # the reader gave up waiting meanwhile
            self._answer = commits
        self._answered.set()

    def note_lost(self, partitions: Iterable[int]) -> None:
        with self._lock:
            self._lost.update(partitions)

    def settled(self, partitions: Iterable[int]) -> None:
        """Main loop: the event of these partitions' loss or gain was handled; a loss noted
        before it must not close them afterwards (a partition lost and gained again within
        one consume would stay closed)."""
        with self._lock:
            self._lost.difference_update(partitions)

    def take_lost(self) -> set[int]:
        with self._lock:
            lost, self._lost = self._lost, set()
            return lost

    def disable(self) -> None:
        """The exit: the main loop answers no more (a revocation inside close() runs on its
        own thread); pending asks return at once."""
        with self._lock:
            self._enabled = False
            if self._asked is not None:
                self._answer = []
        self._answered.set()
