"""The live record stream (Server-Sent Events), each on a thread of its own, outside the pool.

An event stream lasts as long as the browser tab. Served by the HTTP worker pool, a few tabs
would hold every worker and /metrics would stop answering, so the worker that accepted the
request only writes the response headers and hands the connection over to a `Streams`
thread. Streams have their own budget (`limit`, 503 beyond it); the pool never waits for them.

Each stream thread, every `interval_s`:

* notices a closed browser (the socket turns readable: EOF, or anything at all - a browser
  sends nothing after an EventSource request) and ends, closing the connection;
* takes at most `max_per_flush` new records from its `Cursor` (what does not fit is dropped
  and counted: the CPU one browser costs the exporter is bounded), renders the ones its
  filter keeps and writes them as one `records` event; then a `dropped` event if it lost any;
* writes a comment line when it has been silent for `heartbeat_s`, so proxies keep the
  connection open and a dead peer is noticed by the failing write.

A write that cannot complete within `write_timeout_s` (a browser that stopped reading) ends
the stream too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Final

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.registry import RECORD_TYPES
from offsetwatch.exporter.serve.console_api import record_event
from offsetwatch.exporter.serve.live_records import Cursor, LiveRecords, RecordFilter

__all__ = ["DEFAULT_MAX_STREAMS", "RECORD_TYPE_NAMES", "Streams"]

log = logging.getLogger(__name__)

DEFAULT_MAX_STREAMS: Final = 16
DEFAULT_INTERVAL_S: Final = 0.2
#: records per flush per stream: with 5 flushes a second, 1,000 records/s per browser at most
DEFAULT_MAX_PER_FLUSH: Final = 200
DEFAULT_HEARTBEAT_S: Final = 15.0
RECORD_TYPE_NAMES: Final = sorted({t.name for t in RECORD_TYPES.values()} | {"unknown"})
#: the browser reconnects after this many ms when the stream ends
_RETRY_MS: Final = 3000


@dataclass(slots=True)
class Streams:
    """The running event streams, their budget and their figures."""

    hub: LiveRecords
    limit: int = DEFAULT_MAX_STREAMS
    interval_s: float = DEFAULT_INTERVAL_S
    max_per_flush: int = DEFAULT_MAX_PER_FLUSH
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    write_timeout_s: float = 10.0
    #: streams refused because `limit` were open
    refused: int = 0
    started_total: int = 0
    _threads: set[threading.Thread] = field(default_factory=set)
    _sockets: set[socket.socket] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def open(self) -> int:
        return len(self._threads)

    def reserve(self) -> bool:
        """Room for one more stream? Counts a refusal when there is none."""
        with self._lock:
            if len(self._threads) >= self.limit or self._stopping.is_set():
                self.refused += 1
                return False
            return True

    def start(self, connection: socket.socket, wanted: RecordFilter) -> bool:
        """Serve `connection` (headers already sent) from a new thread; False when full."""
        cursor = self.hub.subscribe()
        with self._lock:
            if len(self._threads) >= self.limit or self._stopping.is_set():
                self.refused += 1
                cursor.close()
                return False
            self.started_total += 1
            thread = threading.Thread(
                target=self._serve,
                args=(connection, cursor, wanted),
                name=f"offsetwatch-sse-{self.started_total}",
                daemon=True,
            )
            self._threads.add(thread)
            self._sockets.add(connection)
            # started under the lock: `stop` takes its list of threads under it, and joining
            # one that was listed but not yet started raised (a clean-clone make test failed
            # test_console_api that way once, 2026-12-07)
            thread.start()
        return True

    def figures(self) -> dict[str, int]:
        return {
            "open": self.open,
            "limit": self.limit,
            "refused": self.refused,
            "started_total": self.started_total,
            "records_dropped_total": self.hub.dropped_total,
            "max_records_per_second": int(self.max_per_flush / self.interval_s),
        }

    def stop(self, timeout_s: float = 5.0) -> None:
        """End every stream (server shutdown) and wait for their threads."""
        self._stopping.set()
        with self._lock:
            threads = list(self._threads)
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- one stream ------------------------------------------------------------------------

    def _serve(self, connection: socket.socket, cursor: Cursor, wanted: RecordFilter) -> None:
        canonical = Canonical()
        # poll(), not select(): select cannot watch descriptors above FD_SETSIZE (1024)
        watch = select.poll()
        watch.register(connection, select.POLLIN | select.POLLERR | select.POLLHUP)
        try:
            connection.settimeout(self.write_timeout_s)
            hello = {"types": RECORD_TYPE_NAMES, **self.figures()}
            self._write(
                connection, f"retry: {_RETRY_MS}\nevent: hello\ndata: {json.dumps(hello)}\n\n"
            )
            last_write = time.monotonic()
            reported_drops = 0
            while not self._stopping.is_set():
                if self._peer_gone(connection, watch):
                    return
                records = cursor.take(self.max_per_flush)
                parts = []
                kept = [record_event(canonical, r) for r in records if wanted.matches(r)]
                if kept:
                    parts.append(f"event: records\ndata: [{','.join(kept)}]\n\n")
                if cursor.dropped != reported_drops:
                    reported_drops = cursor.dropped
                    parts.append(f"event: dropped\ndata: {reported_drops}\n\n")
                now = time.monotonic()
                if not parts and now - last_write >= self.heartbeat_s:
                    parts.append(": keep-alive\n\n")
                if parts:
                    self._write(connection, "".join(parts))
                    last_write = now
        except OSError as error:
            log.debug("event stream ended: %s", error)
        except Exception:
            log.exception("event stream failed")
        finally:
            cursor.close()
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                connection.close()
            with self._lock:
                self._sockets.discard(connection)
                self._threads.discard(threading.current_thread())

    def _peer_gone(self, connection: socket.socket, watch: select.poll) -> bool:
        """Waits up to one interval; True when the browser closed (or sent anything)."""
        if not watch.poll(self.interval_s * 1000):
            return False
        with contextlib.suppress(OSError, ValueError):
            connection.setblocking(False)
            try:
                connection.recv(1)
            finally:
                connection.settimeout(self.write_timeout_s)
        return True

    @staticmethod
    def _write(connection: socket.socket, text: str) -> None:
        connection.sendall(text.encode("utf-8"))
