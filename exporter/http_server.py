"""The exporter's HTTP endpoints, on the standard library's threading HTTP server.

=====================  =====================================================================
``/metrics``           Prometheus text exposition (format 0.0.4), gzip when accepted
``/healthz``           200 while the process serves requests
``/readyz``            200 once the source is up and the first pass is done, else 503 + why
``/api/v1/groups``     JSON list of groups (kind, state, members, status, lag, last commit)
``/api/v1/groups/ID``  JSON description of one group (URL-encoded id), 404 when unknown
=====================  =====================================================================

Every request only reads the latest snapshot and stats (see `SnapshotCollector`); nothing here
talks to Kafka, so a slow or frequent scraper cannot slow down ingestion beyond its CPU share.
Access logging goes to the `offsetwatch.exporter.http_server` logger at DEBUG, never to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import unquote

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from offsetwatch.exporter import api
from offsetwatch.exporter.metrics import SnapshotCollector
from offsetwatch.exporter.snapshot import Snapshot
from offsetwatch.exporter.stats import PipelineStats

__all__ = ["DEFAULT_PORT", "METRICS_CONTENT_TYPE", "ExporterHttpServer", "accepts_gzip"]

log = logging.getLogger(__name__)

DEFAULT_PORT: Final = 9380
#: what /metrics serves: the 0.0.4 text format. prometheus_client's CONTENT_TYPE_LATEST names
#: version 1.0.0 since 0.21, which would misdescribe the body; its own handlers also answer
#: 0.0.4 unless a scraper asks for more.
METRICS_CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
_JSON: Final = "application/json; charset=utf-8"
_TEXT: Final = "text/plain; charset=utf-8"
_GROUPS: Final = "/api/v1/groups"
_INDEX: Final = (
    b"offsetwatch exporter\n\n"
    b"/metrics              Prometheus metrics\n"
    b"/healthz              liveness\n"
    b"/readyz               readiness (JSON)\n"
    b"/api/v1/groups        groups (JSON)\n"
    b"/api/v1/groups/{id}   one group, like kafka-consumer-groups --describe (JSON)\n"
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: ExporterHttpServer) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.app = app
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    #: idle keep-alive connections are closed after this many seconds
    timeout = 60
    server_version = "offsetwatch"

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _dispatch(self, head: bool) -> None:
        app = self.server.app
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        try:
            if path == "/metrics":
                self._metrics(app, head)
            elif path == "/healthz":
                self._send(200, _TEXT, [b"ok\n"], head)
            elif path == "/readyz":
                ready, body = api.readiness(app.stats())
                self._json(200 if ready else 503, body, head)
            elif path in (_GROUPS, _GROUPS + "/"):
                self._json(200, api.groups_list(app.snapshot()), head)
            elif path.startswith(_GROUPS + "/"):
                group_id = unquote(path[len(_GROUPS) + 1 :], errors="strict")
                detail = api.group_detail(app.snapshot(), group_id)
                if detail is None:
                    self._json(404, {"error": "unknown group", "group": group_id}, head)
                else:
                    self._json(200, detail, head)
            elif path == "/":
                self._send(200, _TEXT, [_INDEX], head)
            else:
                self._json(404, {"error": "not found", "path": path}, head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except UnicodeDecodeError:
            self._json(400, {"error": "path is not valid UTF-8 once URL-decoded"}, head)
        except Exception:
            log.exception("error serving %s", self.path)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._json(500, {"error": "internal error"}, head)

    def _metrics(self, app: ExporterHttpServer, head: bool) -> None:
        gzip = accepts_gzip(self.headers.get("Accept-Encoding"))
        extra = generate_latest(app.extra_registry) if app.extra_registry is not None else b""
        exposition = app.collector.render(gzip=gzip, extra=extra)
        headers = {"Vary": "Accept-Encoding"}
        if exposition.gzipped:
            headers["Content-Encoding"] = "gzip"
        self._send(200, METRICS_CONTENT_TYPE, exposition.chunks, head, headers)

    def _json(self, code: int, body: Any, head: bool) -> None:
        self._send(code, _JSON, [api.to_json(body)], head)

    def _send(
        self,
        code: int,
        content_type: str,
        chunks: list[bytes] | tuple[bytes, ...],
        head: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(sum(len(c) for c in chunks)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            for chunk in chunks:
                self.wfile.write(chunk)


class ExporterHttpServer:
    """Serves /metrics, /healthz, /readyz and the JSON API from a background thread.

    `port=0` binds a free port; `port` then tells which one. `extra_registry` (e.g. one with
    prometheus_client's process collector) is appended to /metrics, uncached.
    """

    def __init__(
        self,
        collector: SnapshotCollector,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        extra_registry: CollectorRegistry | None = None,
    ) -> None:
        self.collector = collector
        self.host = host
        self.requested_port = port
        self.extra_registry = extra_registry
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def snapshot(self) -> Snapshot:
        return self.collector.source()[0]

    def stats(self) -> PipelineStats:
        return self.collector.source()[1]

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
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("server already started")
        self._server = _Server((self.host, self.requested_port), self)
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
