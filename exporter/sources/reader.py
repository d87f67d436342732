"""Runs a topic source on its own thread and hands its batches to the main loop.

Before, the main loop called the source itself: a fetch, and the metadata lookups and
watermark queries the source makes between fetches, all ran on it, so a hung broker (SIGSTOP)
held every snapshot back by up to the lookup's timeout (~10 s between snapshots at
`--snapshot-interval-s 1`). Now every call of the source's client runs on the reader's
thread, and the main loop only takes finished batches from a short queue (`take`), waiting
for one no longer than it chooses.

Re-reading from the start (a rebuild) is asked for with `restart_from_beginning`: the reader
thread does it between two fetches. Batches fetched before it are from the old positions:
each batch carries the reader's epoch, the request moves the epoch on, and `take` drops
batches of an older epoch, so none of them reaches the emptied state.

The reader fetches when the main loop asks for a batch (`take`), not ahead of it: a fetch
and the ingest of the batch before it running at once on two threads cost ~25% more CPU on a
catch-up (the GIL passed back and forth every 5 ms, and every record crossing cores), for no
gain in wall time. A fetch that outlasts the main loop's wait is simply taken later; the
queue (`QUEUE_BATCHES`) bounds what waits there.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Final

from offsetwatch.exporter.sources.kafka_source import OffsetsTopicSource, SourceBatch
from offsetwatch.exporter.stats import PartHealth
from offsetwatch.exporter.supervisor import BACKOFF_MIN_S, Supervised

log = logging.getLogger(__name__)

#: batches fetched ahead of the main loop
QUEUE_BATCHES: Final = 2
#: how long the reader waits at a time for room in the queue (it then checks for a stop or
#: a restart request, which makes the batch it holds stale)
_PUT_WAIT_S: Final = 0.1


@dataclass(slots=True, frozen=True)
class _Fetched:
    epoch: int
    batch: SourceBatch
    #: the source's `caught_up()` right after this batch was fetched
    caught_up: bool


class SourceReader:
    """One `OffsetsTopicSource`, read on its own supervised thread (see the module doc).

    The main loop calls `take`, `restart_from_beginning`, `caught_up` and `end_offsets`;
    of the source itself it reads only what sits behind the source's own lock
    (`positions`, `source_up`, `assigned_partitions`, `cluster_id`). Never a call into the
    client from another thread: one that takes a librdkafka lock without releasing the GIL
    (`get_watermark_offsets`, even cached) deadlocks against a callback that the reader's
    `consume()` runs under that lock and that waits for the GIL.
    """

    def __init__(
        self,
        source: OffsetsTopicSource,
        *,
        name: str,
        max_messages: int = 50_000,
        poll_timeout_s: float = 0.2,
        backoff_min_s: float = BACKOFF_MIN_S,
    ) -> None:
        self.source = source
        self._max_messages = max_messages
        self._poll_timeout_s = poll_timeout_s
        self._queue: queue.Queue[_Fetched] = queue.Queue(maxsize=QUEUE_BATCHES)
        #: set by the main loop when it wants a batch: the reader fetches only then
        self._wanted = threading.Event()
        self._lock = threading.Lock()
        self._epoch = 0
        self._restart_requested = False
        #: caught up as of the batches the main loop took (not the ones still queued)
        self._caught_up = False
        #: the high watermarks as of the reader's last fetch (replaced, never mutated)
        self._end_offsets: dict[int, int] = {}
        self._thread = Supervised(name, self._round, backoff_min_s=backoff_min_s)

    @property
    def health(self) -> PartHealth:
        return self._thread.health

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        self._thread.request_stop()

    def stop(self, timeout_s: float = 15.0) -> bool:
        """Stop the thread after its current fetch; True if it ended within `timeout_s`.
        Only then may the source be closed (`close`): a client closed while another thread
        is inside one of its calls crashes the process in librdkafka."""
        return self._thread.stop(timeout_s)

    def close(self) -> None:
        if not self._thread.alive():
            self.source.close()

    # -- main loop side --------------------------------------------------------------------

    def take(self, timeout_s: float) -> SourceBatch | None:
        """The next batch of the current epoch, waiting at most `timeout_s` for one."""
        deadline = time.monotonic() + timeout_s
        self.want()
        while True:
            wait = deadline - time.monotonic()
            try:
                fetched = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                return None
            with self._lock:
                current = fetched.epoch == self._epoch
            if current:
                self._caught_up = fetched.caught_up
                return fetched.batch

    def want(self) -> None:
        """Ask for the next batch (`take` asks too) without waiting for it."""
        self._wanted.set()

    def restart_from_beginning(self) -> None:
        """Read every assigned partition again from its start; nothing fetched before this
        call is handed out any more."""
        with self._lock:
            self._epoch += 1
            self._restart_requested = True
        self._caught_up = False
        # what is queued is stale: room for the first batch read from the start
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break

    def caught_up(self) -> bool:
        """Every assigned partition reached its end, as of the batches taken so far."""
        return self._caught_up

    def end_offsets(self) -> dict[int, int]:
        """High watermark per partition, as the reader's last fetch left them."""
        return self._end_offsets

    # -- the reader's thread ---------------------------------------------------------------

    def _round(self) -> None:
        if not self._wanted.wait(_PUT_WAIT_S):
            return
        self._wanted.clear()
        source = self.source
        with self._lock:
            restart, self._restart_requested = self._restart_requested, False
            epoch = self._epoch
        if restart:
            source.restart_from_beginning(source.assigned_partitions())
        try:
            batch = source.poll_batch(self._max_messages, self._poll_timeout_s)
        except BaseException:
            self._wanted.set()  # still wanted: the round after the backoff fetches it
            raise
        self._end_offsets = source.end_offsets()
        if not batch.messages and not batch.events:
            self._wanted.set()  # nothing yet: the main loop still waits for a batch
            return
        fetched = _Fetched(epoch, batch, source.caught_up())
        stopping = self._thread.stopping
        while not stopping.is_set():
            with self._lock:
                if self._epoch != epoch:
                    return  # a restart was asked for meanwhile: this batch is stale
            try:
                self._queue.put(fetched, timeout=_PUT_WAIT_S)
                return
            except queue.Full:
                continue
