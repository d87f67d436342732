"""Keeps a failing sink (archive, publish topic) from stopping ingestion or losing records.

A sink that raises (a full disk under the archive, a publish topic that cannot exist) used to
abort the batch being ingested: the main loop logged a traceback, the rest of the batch was
never applied, and /readyz blamed the source. Now each sink is guarded:

* a record the sink refuses is kept, in order, in a bounded backlog that is retried every
  second (the first retry that succeeds drains it), so a disk that frees up loses nothing;
* beyond the bound (`MAX_BACKLOG` records) new records are counted as dropped instead of
  growing memory without end; the checkpoint positions stay below the first record the sink
  has not taken, so a restart reads those records again and the sink gets them then (the
  archive and the lake dedupe on the record's position);
* the failure is logged once, then at most once per `LOG_INTERVAL_S` with the count, and is
  visible as `SinkHealth` (metrics, /readyz) until the sink takes records again.

A sink with `write_encoded` also takes the ingest's encoded batches (commits the C loop
encoded, exporter/state/ingest.py) in one call. It raises `PartialWrite` saying how many of
the batch it took before it failed; the rest are decoded on the Python path and kept as above,
so a failure costs the fast path nothing in guarantees. While records are kept, a batch is
kept whole, behind them.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from offsetwatch.decoder.records import AnyRecord
from offsetwatch.exporter.state.ingest import EncodedBatch
from offsetwatch.exporter.stats import SinkHealth

log = logging.getLogger(__name__)

#: records kept for a failing sink before new ones are dropped (each is one decoded record:
#: ~1 KB, so the bound keeps a failing sink under ~100 MB)
MAX_BACKLOG: Final = 100_000
LOG_INTERVAL_S: Final = 60.0


def describe(error: Exception) -> str:
    """One readable line: Kafka's error name and text rather than a KafkaError repr."""
    kafka_error = error.args[0] if error.args else None
    text = getattr(kafka_error, "str", None)
    name = getattr(kafka_error, "name", None)
    if callable(text) and callable(name):
        return f"{name()}: {text()}"
    return f"{type(error).__name__}: {error}"


class PartialWrite(Exception):
    """A batch write that failed after `taken` of its records were written (`error`)."""

    def __init__(self, taken: int, error: Exception) -> None:
        super().__init__(taken, error)
        self.taken = taken
        self.error = error


@dataclass(slots=True)
class GuardedSink:
    """Calls `write(record)` for every record; never raises (see the module doc)."""

    name: str
    write: Callable[[AnyRecord], None]
    #: what to do with the failure, for the message ("free space in /var/archive", ...)
    advice: str = ""
    clock_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    #: a sink that buffers (the archive) works again only once `note_success` says its
    #: buffered bytes were really written, not when `write` returned
    recovered_by_flush: bool = False
    #: writes a whole encoded batch, raising PartialWrite when it took only part of it;
    #: None: the sink takes records one by one only
    write_encoded: Callable[[EncodedBatch], None] | None = None
    health: SinkHealth = field(init=False)
    _backlog: deque[AnyRecord] = field(default_factory=deque)
    #: per source partition, the offset of the first record not taken (kept or dropped)
    _first_missing: dict[int, int] = field(default_factory=dict)
    _next_log: float = 0.0
    _held_back: int = 0

    def __post_init__(self) -> None:
        self.health = SinkHealth(self.name)

    def __call__(self, record: AnyRecord) -> None:
        if self._backlog:
            # failing: keep the order, the retry drains the backlog first
            self._keep(record)
            return
        try:
            self.write(record)
        except Exception as error:
            self._failed(error)
            self._keep(record)
            return
        if self.health.failing_since_ms and not self.recovered_by_flush:
            self._recovered()

    @property
    def takes_encoded(self) -> bool:
        return self.write_encoded is not None

    def take_encoded(self, batch: EncodedBatch) -> None:
        """`__call__` for every record of the batch, in one call to the sink."""
        write = self.write_encoded
        assert write is not None
        if self._backlog:
            for k in range(len(batch)):
                self._keep(batch.record(k))
            return
        try:
            write(batch)
        except PartialWrite as failure:
            self._failed(failure.error)
            for k in range(failure.taken, len(batch)):
                self._keep(batch.record(k))
            return
        except Exception as error:  # a writer that does not say: nothing counts as taken
            self._failed(error)
            for k in range(len(batch)):
                self._keep(batch.record(k))
            return
        if self.health.failing_since_ms and not self.recovered_by_flush:
            self._recovered()

    def retry(self) -> None:
        """Hand the kept records to the sink again, oldest first (once a second)."""
        backlog = self._backlog
        if not backlog:
            return
        while backlog:
            try:
                self.write(backlog[0])
            except Exception as error:
                self._failed(error)
                break
            backlog.popleft()
        self.health.backlog = len(backlog)
        if not backlog and self.health.failing_since_ms and not self.recovered_by_flush:
            self._recovered()

    def cap_positions(self, positions: dict[int, int]) -> dict[int, int]:
        """Checkpoint positions no further than the first record this sink has not taken."""
        missing = self._first_missing
        if not missing:
            return positions
        return {p: min(pos, missing.get(p, pos)) for p, pos in positions.items()}

    def note_failure(self, error: Exception, count: int = 1) -> None:
        """Failures of the sink outside a record call (a roll, a log-end sample, deliveries
        the brokers refused later), counted and logged like the others."""
        self._failed(error, count)

    def note_success(self) -> None:
        """The sink really wrote again (a delivery the brokers acknowledged, the archive's
        bytes given to the OS)."""
        if self.health.failing_since_ms and not self._backlog:
            self._recovered()

    def forget(self) -> None:
        """The state is rebuilt from the start of the topic: the records will come again."""
        self._backlog.clear()
        self._first_missing.clear()
        self.health.backlog = 0

    # -- internals -------------------------------------------------------------------------

    def _keep(self, record: AnyRecord) -> None:
        partition, offset = record.partition, record.offset
        if partition >= 0 and partition not in self._first_missing:
            self._first_missing[partition] = offset
        if len(self._backlog) < MAX_BACKLOG:
            self._backlog.append(record)
        else:
            self.health.dropped_total += 1
        self.health.backlog = len(self._backlog)

    def _failed(self, error: Exception, count: int = 1) -> None:
        health = self.health
        health.errors_total += count
        health.last_error = describe(error)
        first = health.failing_since_ms == 0
        if first:
            health.failing_since_ms = self.clock_ms()
        now = time.monotonic()
        if first or now >= self._next_log:
            held = f" ({self._held_back} more failures since the last message)"
            log.error(
                "%s sink failing: %s; its records are kept (up to %d) and retried every "
                "second, ingestion goes on%s%s",
                self.name,
                health.last_error,
                MAX_BACKLOG,
                f"; {self.advice}" if self.advice else "",
                held if self._held_back else "",
            )
            self._next_log = now + LOG_INTERVAL_S
            self._held_back = 0
        else:
            self._held_back += 1

    def _recovered(self) -> None:
        health = self.health
        dropped = health.dropped_total
        log.warning(
            "%s sink works again after %.0f s%s",
            self.name,
            (self.clock_ms() - health.failing_since_ms) / 1000,
            (
                f"; {dropped} records were dropped meanwhile: the checkpoint stays before "
                "them, so a restart of the exporter hands them to the sink"
            )
            if dropped
            else "; every kept record was written",
        )
        health.failing_since_ms = 0
        if not dropped:
            self._first_missing.clear()
