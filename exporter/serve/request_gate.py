"""Every connection of the HTTP server until a whole request head has arrived, on one thread.

A worker thread only ever gets a request whose request line and headers are all there, so
no client can hold a worker by being slow or idle:

* a connection that sends nothing, or trickles its head byte by byte (slowloris), or finishes
  its TLS handshake slowly, waits here; it is closed when its head is not complete within
  `request_timeout` of its arrival;
* a kept-alive connection comes back here after each answer, and is closed when its next
  request does not begin to arrive, and end, within `request_timeout`;
* at most `max_connections` wait here at once: beyond, the oldest connection of the client
  address holding the most is closed to make room, so that one client with many connections
  cannot lock out another one (Prometheus) that opens a single connection;
* a head longer than `MAX_HEAD_BYTES` gets 431 and is closed.

The thread is the selector loop (`serve`); `dispatch` hands a complete head to the workers and
says False when they cannot take it (the answer is then a 503 and the connection closes).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

log = logging.getLogger(__name__)

#: request line and headers together; http.server refuses a line past 65,536 bytes, and no
#: client of this server sends headers anywhere near this
MAX_HEAD_BYTES: Final = 65_536
DEFAULT_MAX_CONNECTIONS: Final = 1024
#: how often waiting connections are checked against their deadlines
_SWEEP_S: Final = 0.1
#: within a busy round, new connections are accepted after every this many ready ones
_ACCEPT_EVERY: Final = 8
_TOO_LARGE: Final = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n"
)
BUSY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n"
)

#: (connection, client address, the request head, bytes that came after it)
Dispatch = Callable[[socket.socket, Any, bytes, bytes], bool]


@dataclass(slots=True)
class _Waiting:
    sock: socket.socket
    address: Any
    deadline: float
    handshaking: bool = False
    buffer: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class GateFigures:
    """What the gate did, for /api/v1/health."""

    waiting: int = 0
    timed_out: int = 0
    evicted: int = 0
    too_large: int = 0
    tls_failures: int = 0


def head_end(buffer: bytes | bytearray) -> int:
    """Where the head ends (just past its empty line), or -1 while it has not."""
    found = [
        at + width
        for at, width in ((buffer.find(b"\n\r\n"), 3), (buffer.find(b"\n\n"), 2))
        if at >= 0
    ]
    return min(found) if found else -1


class RequestGate:
    """The selector loop in front of the workers (see the module docstring)."""

    def __init__(
        self,
        listener: socket.socket,
        dispatch: Dispatch,
        *,
        request_timeout: float,
        tls_context: ssl.SSLContext | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listener = listener
        self._dispatch = dispatch
        self._timeout = request_timeout
        self._tls = tls_context
        self._max = max_connections
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        self._waiting: dict[int, _Waiting] = {}
        self._returned: deque[tuple[socket.socket, Any, bytes]] = deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._accepting = True
        self.figures = GateFigures()

    # -- other threads -------------------------------------------------------------------

    def give_back(self, sock: socket.socket, address: Any, carry: bytes) -> None:
        """A kept-alive connection after its answer (from a worker): wait for its next head."""
        self._returned.append((sock, address, carry))
        self._wake()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake()
        self._stopped.wait(timeout_s)

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self._wake_w.send(b"\0")

    # -- the loop ------------------------------------------------------------------------

    def serve(self) -> None:
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        next_sweep = self._clock() + _SWEEP_S
        try:
            while not self._stop.is_set():
                events = self._selector.select(timeout=_SWEEP_S)
                try:
                    self._round(events)
                except Exception:
                    # a bug here must not take the whole HTTP server down (metrics, health)
                    log.exception("HTTP server: a round of the request gate failed")
                now = self._clock()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + _SWEEP_S
        finally:
            for waiting in list(self._waiting.values()):
                self._close(waiting)
            while self._returned:
                _close_socket(self._returned.popleft()[0])
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()
            self._stopped.set()

    def _round(self, events: list[tuple[selectors.SelectorKey, int]]) -> None:
        ready = [key.data for key, _mask in events if key.data is not None]
        if any(key.fileobj is self._listener for key, _mask in events):
            self._accept()
        if any(key.fileobj is self._wake_r for key, _mask in events):
            with contextlib.suppress(BlockingIOError, OSError):
                self._wake_r.recv(4096)
            self._take_returned()
        for done, waiting in enumerate(ready, 1):
            self._progress(waiting)
            if done % _ACCEPT_EVERY == 0 and self._accepting:
                # a round can hold hundreds of kept-alive connections, each a few syscalls
                # that wait for the GIL while workers run: a new connection (a scrape) is
                # let in between them, not after all of them
                self._accept()

    def _accept(self) -> None:
        for _ in range(64):  # a burst is taken in one go, without starving the others
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors: the listener stays readable, so free one of ours,
                    # or (none held here) stop accepting until the next sweep instead of
                    # spinning on it
                    log.warning(
                        "HTTP server: cannot accept a connection (%s): raise the open-file "
                        "limit (ulimit -n) or lower --http-max-connections",
                        error,
                    )
                    if self._waiting:
                        self._evict()
                    else:
                        self._pause_accepting()
                    return
                log.debug("accept failed: %s", error)
                return
            self._admit(sock, address)

    def _pause_accepting(self) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(self._listener)
        self._accepting = False

    def _resume_accepting(self) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.register(self._listener, selectors.EVENT_READ)
        self._accepting = True

    def _admit(self, sock: socket.socket, address: Any) -> None:
        if len(self._waiting) >= self._max:
            self._evict()
        sock.setblocking(False)
        handshaking = False
        if self._tls is not None:
            try:
                sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            except (ssl.SSLError, OSError):
                self.figures.tls_failures += 1
                _close_socket(sock)
                return
            handshaking = True
        waiting = _Waiting(sock, address, self._clock() + self._timeout, handshaking)
        self._hold(waiting)
        self._progress(waiting)

    def _take_returned(self) -> None:
        # only those given back before now: workers give connections back while this runs
        # (a kept-alive client's next request is often there already), and taking those too
        # closes a loop of gate and workers that never comes back to accept anyone new
        for done in range(1, len(self._returned) + 1):
            if done % _ACCEPT_EVERY == 0 and self._accepting:
                self._accept()  # as in `serve`: new connections between the kept-alive ones
            sock, address, carry = self._returned.popleft()
            try:
                sock.setblocking(False)
            except OSError:
                _close_socket(sock)
                continue
            if len(self._waiting) >= self._max:
                self._evict()
            waiting = _Waiting(sock, address, self._clock() + self._timeout)
            waiting.buffer += carry
            self._hold(waiting)
            self._progress(waiting)

    def _hold(self, waiting: _Waiting) -> None:
        self._waiting[id(waiting)] = waiting
        try:
            self._selector.register(waiting.sock, selectors.EVENT_READ, waiting)
        except (ValueError, OSError):
            self._close(waiting)
        self.figures.waiting = len(self._waiting)

    def _progress(self, waiting: _Waiting) -> None:
        """Whatever the connection allows now: handshake, read, hand over."""
        if id(waiting) not in self._waiting:
            return
        sock = waiting.sock
        if waiting.handshaking:
            assert isinstance(sock, ssl.SSLSocket)
            try:
                sock.do_handshake()
            except ssl.SSLWantReadError:
                self._want(waiting, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._want(waiting, selectors.EVENT_WRITE)
                return
            except (ssl.SSLError, OSError) as error:
                self.figures.tls_failures += 1
                log.debug("TLS handshake failed: %s", error)
                self._close(waiting)
                return
            waiting.handshaking = False
            self._want(waiting, selectors.EVENT_READ)
        while head_end(waiting.buffer) < 0:
            try:
                data = sock.recv(65_536)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                break
            except ssl.SSLWantWriteError:
                self._want(waiting, selectors.EVENT_WRITE)
                return
            except OSError:
                self._close(waiting)
                return
            if not data:
                self._close(waiting)  # the client closed (or an idle keep-alive ended)
                return
            waiting.buffer += data
            if len(waiting.buffer) > MAX_HEAD_BYTES and head_end(waiting.buffer) < 0:
                self.figures.too_large += 1
                _send_quietly(sock, _TOO_LARGE)
                self._close(waiting)
                return
            if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                break
        end = head_end(waiting.buffer)
        if end >= 0:
            self._hand_over(waiting, end)

    def _want(self, waiting: _Waiting, events: int) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.modify(waiting.sock, events, waiting)

    def _hand_over(self, waiting: _Waiting, end: int) -> None:
        self._release(waiting)
        head, carry = bytes(waiting.buffer[:end]), bytes(waiting.buffer[end:])
        try:
            taken = self._dispatch(waiting.sock, waiting.address, head, carry)
        except BaseException:
            _close_socket(waiting.sock)
            raise
        if not taken:
            _send_quietly(waiting.sock, BUSY)
            _close_socket(waiting.sock)

    def _sweep(self, now: float) -> None:
        if not self._accepting:
            self._resume_accepting()
        for waiting in [w for w in self._waiting.values() if w.deadline <= now]:
            self.figures.timed_out += 1
            self._close(waiting)

    def _evict(self) -> None:
        """Close the oldest waiting connection of the client address holding the most."""
        if not self._waiting:
            return
        hosts = Counter(_host(w.address) for w in self._waiting.values())
        busiest = hosts.most_common(1)[0][0]
        oldest = min(
            (w for w in self._waiting.values() if _host(w.address) == busiest),
            key=lambda w: w.deadline,
        )
        self.figures.evicted += 1
        self._close(oldest)

    def _release(self, waiting: _Waiting) -> None:
        """Out of the gate, the socket left open (it goes to a worker, or is closed next)."""
        self._waiting.pop(id(waiting), None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(waiting.sock)
        self.figures.waiting = len(self._waiting)

    def _close(self, waiting: _Waiting) -> None:
        self._release(waiting)
        _close_socket(waiting.sock)


def _host(address: Any) -> object:
    return address[0] if isinstance(address, tuple) and address else address


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.send(data)


def _close_socket(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
