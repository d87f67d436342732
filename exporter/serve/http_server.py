"""The exporter's HTTP endpoints, on the standard library's threading HTTP server.

==============================  ============================================================
``/metrics``                    Prometheus text exposition (format 0.0.4), gzip when accepted
``/healthz``                    200 while the process serves requests
``/readyz``                     200 once the source is up and the first pass is done, else 503
``/api/v1/groups``              JSON list of groups (kind, state, members, status, lag, ...)
``/api/v1/groups/ID``           JSON description of one group (URL-encoded id), 404 if unknown
``/api/v1/groups/ID/history``   the group's recent log end, lag and lag seconds (console)
``/api/v1/history/lag-seconds`` every group's recent lag seconds (the console's sparklines)
``/api/v1/health``              the exporter's own health (console)
``/api/v1/records/stream``      decoded records as they are ingested (Server-Sent Events)
``/api/v1/fleet``               with --fleet: which replica owns which partition (JSON)
``/``, ``/groups[/ID]``,        the operator console (HTML; ``/`` answers the plain-text index
``/live``, ``/health``          to clients that do not accept HTML), ``/static/*`` its files
==============================  ============================================================

Every request only reads the latest snapshot and stats (see `SnapshotCollector`); nothing here
talks to Kafka, so a slow or frequent scraper cannot slow down ingestion beyond its CPU share.
In a fleet, the group API of a group another replica holds asks that replica
(exporter/serve/fleet_api.py) inside the API's slots, never /metrics'.
Access logging goes to the `offsetwatch.exporter.serve.http_server` logger at DEBUG, never to
stderr.

Resources are bounded so that slow or many clients cannot exhaust the daemon:

* one thread (the request gate, `exporter/serve/request_gate.py`) holds every connection until
  its whole request head has arrived: the TLS handshake, the request line and the headers
  must arrive within `request_timeout` seconds in total, however slowly their bytes trickle in
  (slowloris), and a kept-alive connection comes back to the gate after each answer and is
  closed when its next request is not there within the same time. Idle and slow clients
  therefore never hold a worker;
* at most `max_connections` connections wait in the gate: beyond, the oldest of the client
  address holding the most is closed, so one client's flood cannot lock out another's scrape;
* a fixed pool of worker threads (`workers`) serves complete requests from a bounded queue
  (`queue_size` requests waiting while every worker is busy); when it is full the request gets
  an immediate 503 and the connection is closed;
* each write of an answer must go out within `request_timeout` (a client that does not read);
* /metrics, /healthz and /readyz have a queue lane and a capacity of their own, served first;
* `/api` requests run at most `workers // 2` at a time (503 beyond), so /metrics, /healthz and
  /readyz keep answering while the API is hammered;
* an event stream (`/api/v1/records/stream`) leaves the pool once its headers are written: it
  runs on a thread of its own, at most `max_streams` of them (see `console_stream.py`).

Large JSON answers that only change with the snapshot (the groups list, the sparklines) are
encoded (and gzipped) once per snapshot, not per request.

TLS and basic auth come from a web configuration file (`exporter/serve/web_config.py`).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Final
from urllib.parse import parse_qs, unquote

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from offsetwatch.exporter.fleet.replica import FleetPart
from offsetwatch.exporter.judge.snapshot import Snapshot
from offsetwatch.exporter.serve import api, console_api, fleet_api
from offsetwatch.exporter.serve.console_history import ConsoleHistory
from offsetwatch.exporter.serve.console_static import PAGE_HEADERS, console_page, static_file
from offsetwatch.exporter.serve.console_stream import DEFAULT_MAX_STREAMS, Streams
from offsetwatch.exporter.serve.live_records import LiveRecords, RecordFilter
from offsetwatch.exporter.serve.metrics import SnapshotCollector
from offsetwatch.exporter.serve.request_gate import (
    DEFAULT_MAX_CONNECTIONS,
    GateFigures,
    RequestGate,
)
from offsetwatch.exporter.serve.web_config import BasicAuth, WebConfig
from offsetwatch.exporter.stats import PipelineStats

__all__ = [
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_PORT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_WORKERS",
    "METRICS_CONTENT_TYPE",
    "ExporterHttpServer",
    "accepts_gzip",
]

log = logging.getLogger(__name__)

DEFAULT_PORT: Final = 9380
DEFAULT_WORKERS: Final = 8
#: seconds for a whole request to arrive (handshake, request line, headers)
DEFAULT_REQUEST_TIMEOUT: Final = 10.0
#: what /metrics serves: the 0.0.4 text format. prometheus_client's CONTENT_TYPE_LATEST names
#: version 1.0.0 since 0.21, which would misdescribe the body; its own handlers also answer
#: 0.0.4 unless a scraper asks for more.
METRICS_CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
_JSON: Final = "application/json; charset=utf-8"
_TEXT: Final = "text/plain; charset=utf-8"
_GROUPS: Final = "/api/v1/groups"
_HISTORY_SUFFIX: Final = "/history"
_STREAM: Final = "/api/v1/records/stream"
_FLEET: Final = "/api/v1/fleet"
_HTML: Final = "text/html; charset=utf-8"
#: console paths that show the console page (a group's page is checked against the snapshot)
_CONSOLE_PATHS: Final = frozenset({"/groups", "/groups/", "/live", "/health"})
#: JSON bodies at least this long are gzipped for clients that accept it
_GZIP_MIN: Final = 1024
_CHALLENGE: Final = 'Basic realm="offsetwatch", charset="UTF-8"'
_INDEX: Final = (
    b"offsetwatch exporter\n\n"
    b"/metrics              Prometheus metrics\n"
    b"/healthz              liveness\n"
    b"/readyz               readiness (JSON)\n"
    b"/api/v1/groups        groups (JSON)\n"
    b"/api/v1/groups/{id}   one group, like kafka-consumer-groups --describe (JSON)\n"
    b"/api/v1/health        the exporter's health (JSON)\n"
    b"/                     the operator console, in a browser\n"
)


class _Encoded:
    """A JSON body encoded once per key (the snapshot or history it came from): its plain
    and gzipped bytes. Several workers may miss at once; each encodes, the last one stays."""

    __slots__ = ("_entry",)

    def __init__(self) -> None:
        self._entry: tuple[object, bytes, bytes] | None = None

    def get(self, key: object, build: Callable[[], Any], want_gzip: bool) -> tuple[bytes, bool]:
        entry = self._entry
        if entry is None or entry[0] is not key:
            plain = api.to_json(build())
            entry = (key, plain, gzip.compress(plain, 5) if len(plain) >= _GZIP_MIN else b"")
            self._entry = entry
        if want_gzip and entry[2]:
            return entry[2], True
        return entry[1], False


def _wants_html(accept: str | None) -> bool:
    return accept is not None and "text/html" in accept


def _record_filter(query: str) -> RecordFilter:
    """`?group=&type=&partition=&min_offset=` of the event stream; ValueError when bad."""
    params = {k: v[-1] for k, v in parse_qs(query, strict_parsing=False).items() if v[-1]}

    def number(name: str) -> int | None:
        text = params.get(name)
        if text is None:
            return None
        value = int(text)
        if value < 0:
            raise ValueError(f"{name} must not be negative")
        return value

    return RecordFilter(
        group=params.get("group"),
        type=params.get("type"),
        partition=number("partition"),
        min_offset=number("min_offset"),
    )


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Does an Accept-Encoding header allow gzip (explicitly or through *, with q > 0)?"""
    if not accept_encoding:
        return False
    allowed: dict[str, bool] = {}
    for part in accept_encoding.split(","):
        coding, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        allowed[coding.strip().lower()] = q > 0
    if "gzip" in allowed:
        return allowed["gzip"]
    return allowed.get("*", False)


class _Handoff:
    """Complete requests on their way to the workers: one is refused only when `size`
    requests already wait for a busy worker. A plain bounded queue would also count the
    requests that idle workers have not picked up yet, and refuse one while a worker is
    idle whenever requests arrive faster than workers wake up (a burst, a loaded CPU).

    Probes (/metrics, /healthz, /readyz) have a lane and a capacity of their own, taken
    first: a burst of API or console requests filling the queue cannot turn a scrape away."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: deque[_Request | None] = deque()
        self._probes: deque[_Request] = deque()
        self._idle = 0
        self._ready = threading.Condition()

    def offer(self, item: _Request, probe: bool = False) -> bool:
        with self._ready:
            lane: deque[Any] = self._probes if probe else self._items
            if len(lane) >= self._size + self._idle:
                return False
            lane.append(item)
            self._ready.notify()
            return True

    def take(self) -> _Request | None:
        """The next request, waiting while there is none; None: the worker should stop."""
        with self._ready:
            self._idle += 1
            while not self._items and not self._probes:
                self._ready.wait()
            self._idle -= 1
            return self._probes.popleft() if self._probes else self._items.popleft()

    def waiting(self) -> int:
        """Requests that no idle worker is about to take."""
        with self._ready:
            return max(0, len(self._items) + len(self._probes) - self._idle)

    def stop(self, workers: int) -> None:
        """Each worker stops once the requests already handed over are served."""
        with self._ready:
            self._items.extend([None] * workers)
            self._ready.notify_all()


#: the paths whose requests take the probes' lane of `_Handoff`
_PROBE_PATHS: Final = frozenset({b"/metrics", b"/healthz", b"/readyz"})


def is_probe(head: bytes) -> bool:
    """Whether a request head asks for /metrics, /healthz or /readyz (any query)."""
    parts = head[: head.find(b"\n")].split(b" ")
    return len(parts) >= 2 and parts[1].split(b"?", 1)[0] in _PROBE_PATHS


#: (connection, client address, its request head, bytes that came after the head)
_Request = tuple[socket.socket, Any, bytes, bytes]


class _Server(HTTPServer):
    """HTTPServer's binding, with the request gate (exporter/serve/request_gate.py) in front
    of a fixed worker pool: a worker only ever gets a request whose head has arrived."""

    allow_reuse_address = True
    #: the listen backlog: socketserver's 5 drops SYNs (a 1 s client retry) under bursts
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: ExporterHttpServer) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.app = app
        self.pending: _Handoff = _Handoff(app.queue_size)
        #: ids of connections handed over to event-stream threads
        self.detached: set[int] = set()
        self.detached_lock = threading.Lock()
        # before binding: a failed bind (port in use) calls server_close(), which stops them
        self.workers: list[threading.Thread] = []
        self.gate: RequestGate | None = None
        # the handler class is never used by socketserver: the workers make each _Handler
        super().__init__(address, BaseHTTPRequestHandler)
        self.gate = RequestGate(
            self.socket,
            self._dispatch,
            request_timeout=app.request_timeout,
            tls_context=app.tls_context,
            max_connections=app.max_connections,
        )
        self.workers = [
            threading.Thread(target=self._work, name=f"offsetwatch-http-worker-{i}", daemon=True)
            for i in range(app.workers)
        ]
        for worker in self.workers:
            worker.start()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        assert self.gate is not None
        self.gate.serve()

    def shutdown(self) -> None:
        if self.gate is not None:
            self.gate.stop()

    def _dispatch(self, sock: socket.socket, address: Any, head: bytes, carry: bytes) -> bool:
        if self.pending.offer((sock, address, head, carry), probe=is_probe(head)):
            return True
        self.app.rejected += 1
        return False

    def _work(self) -> None:
        while True:
            item = self.pending.take()
            if item is None:
                return
            sock, address, head, carry = item
            keep = False
            try:
                # blocking, each write within the request timeout (_Handler._send)
                sock.settimeout(self.app.request_timeout)
                keep = not _Handler(sock, address, self, head).close_connection
            except Exception:
                log.debug("connection from %s failed", address, exc_info=True)
            with self.detached_lock:
                detached = id(sock) in self.detached
                self.detached.discard(id(sock))
            if detached:
                continue
            if keep and self.gate is not None:
                self.gate.give_back(sock, address, carry)
            else:
                self.shutdown_request(sock)

    def detach(self, connection: socket.socket) -> None:
        """The connection now belongs to an event-stream thread: the worker must not close it."""
        with self.detached_lock:
            self.detached.add(id(connection))

    def server_close(self) -> None:
        super().server_close()
        self.pending.stop(len(self.workers))
        for worker in self.workers:
            worker.join(1.0)


class _Handler(BaseHTTPRequestHandler):
    """One request, whose head the gate has read whole; the connection goes back to the gate
    after the answer unless `close_connection`."""

    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "offsetwatch"

    def __init__(self, sock: socket.socket, address: Any, server: _Server, head: bytes) -> None:
        self._head = head
        super().__init__(sock, address, server)

    def setup(self) -> None:
        self.connection = self.request
        # headers and body leave in separate writes: with Nagle's algorithm the body of a
        # kept-alive connection's next answer waits for the client's delayed ACK (~40 ms)
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = io.BytesIO(self._head)
        self.wfile = self.connection.makefile("wb", 0)

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            self.wfile.flush()
        # the file holds a reference to the socket: open, it would keep a closed connection's
        # descriptor (an event stream's, closed by its own thread) until collected
        with contextlib.suppress(OSError):
            self.wfile.close()
        self.rfile.close()

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _dispatch(self, head: bool) -> None:
        app = self.server.app
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if app.auth and not app.auth.check(self.headers.get("Authorization")):
            app.unauthorized += 1
            self._json(401, {"error": "unauthorized"}, head, {"WWW-Authenticate": _CHALLENGE})
            return
        if path == _STREAM:
            # outside the API's slots: a stream lasts as long as the browser tab
            self._stream(app, head)
        elif path.startswith("/api/"):
            if not app.api_slots.acquire(blocking=False):
                self._json(503, {"error": "busy, retry"}, head, {"Retry-After": "1"})
                return
            try:
                self._route(app, path, head)
            finally:
                app.api_slots.release()
        else:
            self._route(app, path, head)

    def _route(self, app: ExporterHttpServer, path: str, head: bool) -> None:
        try:
            if path == "/metrics":
                self._metrics(app, head)
            elif path == "/healthz":
                self._send(200, _TEXT, [b"ok\n"], head)
            elif path == "/readyz":
                ready, body = api.readiness(app.stats())
                self._json(200 if ready else 503, body, head)
            elif path in (_GROUPS, _GROUPS + "/"):
                snapshot = app.snapshot()
                if app.fleet is not None and not self._local():
                    self._fleet_groups(app, app.fleet, snapshot, head)
                else:
                    self._cached(app.groups_json, snapshot, lambda: api.groups_list(snapshot), head)
            elif path == _FLEET:
                if app.fleet is None:
                    self._json(404, {"error": "not a fleet replica (no --fleet)"}, head)
                else:
                    fleet = app.fleet
                    self._json(200, fleet_api.fleet_json(fleet.view, fleet.identity), head)
            elif path.startswith(_GROUPS + "/"):
                self._group(app, path[len(_GROUPS) + 1 :], head)
            elif path == "/api/v1/history/lag-seconds":
                history = app.history
                only = parse_qs(self.path.partition("?")[2]).get("group")
                if only:  # a page of groups: cheap, not cached
                    self._json(200, console_api.lag_seconds_history(history, only[:1000]), head)
                else:
                    self._cached(
                        app.sparklines_json,
                        history.version,
                        lambda: console_api.lag_seconds_history(history),
                        head,
                    )
            elif path == "/api/v1/health":
                self._json(200, app.health(), head)
            elif path == "/":
                if _wants_html(self.headers.get("Accept")):
                    self._page(200, console_page(), head)
                else:
                    self._send(200, _TEXT, [_INDEX], head)
            elif path in _CONSOLE_PATHS:
                self._page(200, console_page(), head)
            elif path.startswith("/groups/"):
                group_id = unquote(path[len("/groups/") :], errors="strict")
                snapshot = app.snapshot()
                # in a fleet the page's API calls reach the group's owner, wherever it is
                if snapshot.group(group_id) is None and app.fleet is None:
                    page = console_page(missing_group=group_id, warming_up=not snapshot.ready)
                    self._page(404, page, head)
                else:
                    self._page(200, console_page(), head)
            elif path.startswith("/static/"):
                self._static(path[len("/static/") :], head)
            else:
                self._json(404, {"error": "not found", "path": path}, head)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError, TimeoutError):
            # the client went away (or stopped reading) during the answer: nothing to tell
            self.close_connection = True
        except UnicodeDecodeError:
            self._json(400, {"error": "path is not valid UTF-8 once URL-decoded"}, head)
        except Exception:
            log.exception("error serving %s", self.path)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._json(500, {"error": "internal error"}, head)

    def _group(self, app: ExporterHttpServer, rest: str, head: bool) -> None:
        """`/api/v1/groups/ID` and `/api/v1/groups/ID/history` (ID percent-encoded).

        A group whose id holds a raw "/" was always served from the unquoted rest of the
        path; it still is, before `/history` is considered."""
        snapshot = app.snapshot()
        group_id = unquote(rest, errors="strict")
        detail = api.group_detail(snapshot, group_id)
        if detail is not None:
            self._json(200, detail, head)
            return
        if rest.endswith(_HISTORY_SUFFIX):
            encoded = rest[: -len(_HISTORY_SUFFIX)]
            if "/" not in encoded:
                history_of = unquote(encoded, errors="strict")
                if snapshot.group(history_of) is not None:
                    self._json(200, console_api.group_history(app.history, history_of), head)
                    return
                group_id = history_of
        fleet = app.fleet
        if fleet is not None and not self._local():
            answer = fleet_api.forward_group(
                fleet.view, fleet.identity, group_id, rest, self.headers.get("Authorization")
            )
            if answer is not None:
                headers = {fleet_api.SERVED_BY: answer.served_by} if answer.served_by else {}
                self._send(answer.status, _JSON, [answer.body], head, headers)
                return
        self._json(404, {"error": "unknown group", "group": group_id}, head)

    def _local(self) -> bool:
        """`?local=1`: this replica's own answer only (what a replica asks another for)."""
        return parse_qs(self.path.partition("?")[2]).get("local") == ["1"]

    def _fleet_groups(
        self, app: ExporterHttpServer, fleet: FleetPart, snapshot: Snapshot, head: bool
    ) -> None:
        """Every group of the fleet, from any replica (exporter/serve/fleet_api.py)."""
        own = api.groups_list(snapshot)
        groups, missing = fleet_api.merged_groups(
            fleet.view, fleet.identity, own, self.headers.get("Authorization")
        )
        headers = {fleet_api.INCOMPLETE: missing} if missing else None
        self._json(200, groups, head, headers)

    def _cached(self, cache: _Encoded, key: object, build: Callable[[], Any], head: bool) -> None:
        body, gzipped = cache.get(key, build, accepts_gzip(self.headers.get("Accept-Encoding")))
        headers = {"Vary": "Accept-Encoding"}
        if gzipped:
            headers["Content-Encoding"] = "gzip"
        self._send(200, _JSON, [body], head, headers)

    def _page(self, code: int, body: bytes, head: bool) -> None:
        self._send(code, _HTML, [body], head, PAGE_HEADERS)

    def _static(self, name: str, head: bool) -> None:
        found = static_file(name)
        if found is None:
            self._json(404, {"error": "not found", "path": "/static/" + name}, head)
            return
        headers = {"ETag": found.etag, "Cache-Control": "no-cache", **PAGE_HEADERS}
        if self.headers.get("If-None-Match") == found.etag:
            self._send(304, found.content_type, [], head, headers, length=False)
        else:
            self._send(200, found.content_type, [found.body], head, headers)

    def _stream(self, app: ExporterHttpServer, head: bool) -> None:
        try:
            wanted = _record_filter(self.path.partition("?")[2])
        except ValueError as error:
            self._json(400, {"error": f"bad filter: {error}"}, head)
            return
        if head:
            self._send(200, "text/event-stream", [], head, length=False)
            return
        if not app.streams.reserve():
            self._json(503, {"error": "too many event streams, retry"}, False, {"Retry-After": "5"})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")
        self.send_header("Connection", "close")
        for name, value in app.web_config.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        connection = self.connection
        self.server.detach(connection)
        if not app.streams.start(connection, wanted):
            # the last slot went to another stream meanwhile: end this one (the browser retries)
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _metrics(self, app: ExporterHttpServer, head: bool) -> None:
        gzip = accepts_gzip(self.headers.get("Accept-Encoding"))
        extra = generate_latest(app.extra_registry) if app.extra_registry is not None else b""
        exposition = app.collector.render(gzip=gzip, extra=extra)
        headers = {"Vary": "Accept-Encoding"}
        if exposition.gzipped:
            headers["Content-Encoding"] = "gzip"
        self._send(200, METRICS_CONTENT_TYPE, exposition.chunks, head, headers)

    def _json(
        self, code: int, body: Any, head: bool, headers: dict[str, str] | None = None
    ) -> None:
        encoded = api.to_json(body)
        if len(encoded) >= _GZIP_MIN and accepts_gzip(self.headers.get("Accept-Encoding")):
            headers = {**(headers or {}), "Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
            encoded = gzip.compress(encoded, 5)
        self._send(code, _JSON, [encoded], head, headers)

    def _send(
        self,
        code: int,
        content_type: str,
        chunks: list[bytes] | tuple[bytes, ...],
        head: bool,
        headers: dict[str, str] | None = None,
        length: bool = True,
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        if length:
            self.send_header("Content-Length", str(sum(len(c) for c in chunks)))
        extra = headers or {}
        if "Cache-Control" not in extra:
            self.send_header("Cache-Control", "no-store")
        for name, value in extra.items():
            self.send_header(name, value)
        for name, value in self.server.app.web_config.headers.items():
            self.send_header(name, value)
        # each write gets the request timeout: a client that does not read is cut off
        self.connection.settimeout(self.server.app.request_timeout)
        self.end_headers()
        if not head:
            for chunk in chunks:
                # sendall: with a timeout set, a socket's send() (and so the unbuffered
                # wfile.write) may write part of a large chunk and drop the rest
                self.connection.sendall(chunk)


class ExporterHttpServer:
    """Serves /metrics, /healthz, /readyz and the JSON API from a background thread.

    `port=0` binds a free port; `port` then tells which one. `extra_registry` (e.g. one with
    prometheus_client's process collector) is appended to /metrics, uncached. `web_config`
    adds TLS and basic auth (see `exporter.web_config`); `workers`, `queue_size` and
    `request_timeout` bound what clients can take (see the module docstring).

    The console reads `history` (filled by the main loop after each snapshot) and streams
    what the main loop appends to `live`; without them it shows no history and no records.
    `max_streams` bounds the live event streams open at once.
    """

    def __init__(
        self,
        collector: SnapshotCollector,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        extra_registry: CollectorRegistry | None = None,
        web_config: WebConfig | None = None,
        workers: int = DEFAULT_WORKERS,
        queue_size: int | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        history: ConsoleHistory | None = None,
        live: LiveRecords | None = None,
        max_streams: int = DEFAULT_MAX_STREAMS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        fleet: FleetPart | None = None,
    ) -> None:
        if workers < 2:
            raise ValueError("the HTTP server needs at least 2 workers")
        self.collector = collector
        self.host = host
        self.requested_port = port
        self.extra_registry = extra_registry
        self.web_config = web_config or WebConfig()
        self.tls_context = self.web_config.tls.context() if self.web_config.tls else None
        self.auth = BasicAuth(self.web_config.basic_auth_users)
        self.workers = workers
        self.queue_size = queue_size if queue_size is not None else 8 * workers
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self.api_slots = threading.BoundedSemaphore(max(1, workers // 2))
        self.history = history if history is not None else ConsoleHistory()
        self.live = live if live is not None else LiveRecords()
        self.streams = Streams(self.live, limit=max_streams, write_timeout_s=request_timeout)
        #: this replica's fleet (--fleet): groups it does not hold are asked of their owner
        self.fleet = fleet
        self.groups_json = _Encoded()
        self.sparklines_json = _Encoded()
        #: requests refused because the queue was full, 401s
        self.rejected = 0
        self.unauthorized = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._last_gate = GateFigures()

    def snapshot(self) -> Snapshot:
        return self.collector.source()[0]

    def stats(self) -> PipelineStats:
        return self.collector.source()[1]

    def health(self) -> dict[str, Any]:
        """The body of /api/v1/health."""
        snapshot, stats = self.collector.source()
        gate = self._gate_figures()
        http = {
            "workers": self.workers,
            "queued": self.queued,
            "rejected": self.rejected,
            "unauthorized": self.unauthorized,
            "tls_failures": gate.tls_failures,
            "waiting_connections": gate.waiting,
            "timed_out": gate.timed_out,
            "evicted": gate.evicted,
        }
        now_ms = time.time_ns() // 1_000_000
        return console_api.health(stats, snapshot, now_ms, self.streams.figures(), http)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        scheme = "https" if self.tls_context is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    @property
    def queued(self) -> int:
        """Requests (their heads arrived) waiting for a worker."""
        return 0 if self._server is None else self._server.pending.waiting()

    @property
    def tls_failures(self) -> int:
        return self._gate_figures().tls_failures

    def _gate_figures(self) -> GateFigures:
        server = self._server
        if server is None or server.gate is None:
            return self._last_gate
        self._last_gate = server.gate.figures
        return self._last_gate

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("server already started")
        self._server = _Server((self.host, self.requested_port), self)
        # a stopped server's streams stay stopped: a restarted one gets a fresh budget
        self.streams = Streams(self.live, self.streams.limit, write_timeout_s=self.request_timeout)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.25},
            name=f"offsetwatch-http-{self.port}",
            daemon=True,
        )
        self._thread.start()
        log.info("serving metrics and API on %s", self.url)

    def stop(self, timeout: float = 5.0) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        self.streams.stop(timeout)
        server.server_close()
        if thread is not None:
            thread.join(timeout)
        self._server = None
        self._thread = None

    def __enter__(self) -> ExporterHttpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
