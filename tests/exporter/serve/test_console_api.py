"""The console over real sockets: pages, static files, the new API, the live event stream.

No browser here (see test_console_browser.py): HTTP answers, the event stream's bounds
(its own thread budget, no leak after 100 connects and disconnects, /metrics unaffected),
and basic auth on every console path.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import pytest
import trustme

from offsetwatch.decoder.records import Record
from offsetwatch.exporter.serve.console_history import ConsoleHistory
from offsetwatch.exporter.serve.http_server import ExporterHttpServer
from offsetwatch.exporter.serve.live_records import LiveRecords
from offsetwatch.exporter.serve.metrics import SnapshotCollector
from offsetwatch.exporter.serve.web_config import load_web_config
from tests.exporter.daemon_helpers import wait_for
from tests.exporter.serve.test_http_server import get, ready_stats
from tests.exporter.serve.test_live_records import positioned
from tests.exporter.serve.test_metrics import NOW, Holder, build, commit, sample_state

PASSWORD = "console-secret"


@pytest.fixture
def holder() -> Holder:
    return Holder(build(sample_state()), ready_stats())


@pytest.fixture
def history(holder: Holder) -> ConsoleHistory:
    history = ConsoleHistory(min_step_ms=1)
    for i in range(3):
        history.record(build(sample_state(), now=NOW + i * 1_000))
    return history


@pytest.fixture
def live() -> LiveRecords:
    return LiveRecords(capacity=64)


@pytest.fixture
def server(
    holder: Holder, history: ConsoleHistory, live: LiveRecords
) -> Iterator[ExporterHttpServer]:
    srv = ExporterHttpServer(
        SnapshotCollector(holder), "127.0.0.1", 0, history=history, live=live, max_streams=4
    )
    srv.streams.interval_s = 0.05
    with srv:
        yield srv


# -------------------------------------------------------------------------------- pages


def test_root_is_the_console_for_browsers_and_the_index_for_the_rest(
    server: ExporterHttpServer,
) -> None:
    page = get(server, "/", Accept="text/html,application/xhtml+xml")
    assert page.status == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert b'<script type="module" src="/static/app.js">' in page.body
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    plain = get(server, "/", Accept="*/*")
    assert plain.headers["Content-Type"].startswith("text/plain")
    assert b"/api/v1/groups" in plain.body


@pytest.mark.parametrize("path", ["/groups", "/groups/", "/live", "/health", "/groups/live"])
def test_console_paths_serve_the_page(server: ExporterHttpServer, path: str) -> None:
    page = get(server, path)
    assert page.status == 200
    assert page.headers["Content-Type"].startswith("text/html")


def test_unknown_group_page_is_a_404_that_says_so(server: ExporterHttpServer) -> None:
    page = get(server, "/groups/%3Cscript%3Enope")
    assert page.status == 404
    assert page.headers["Content-Type"].startswith("text/html")
    assert b"No such group" in page.body
    assert b"&lt;script&gt;nope" in page.body and b"<script>nope" not in page.body
    odd = get(server, "/groups/" + "odd%20%22group%22%20%5C%20with%0Anewline%20%E2%9C%93")
    assert odd.status == 200
    assert b"deleted" in page.body


def test_unknown_group_while_catching_up_says_why(holder: Holder) -> None:
    holder.snapshot = build(sample_state(), ready=False)
    with ExporterHttpServer(SnapshotCollector(holder), "127.0.0.1", 0) as srv:
        page = get(srv, "/groups/nope")
        assert page.status == 404
        assert b"still reading __consumer_offsets" in page.body


def test_static_files_have_types_and_etags(server: ExporterHttpServer) -> None:
    for name, kind in (("app.js", "text/javascript"), ("console.css", "text/css")):
        answer = get(server, f"/static/{name}")
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith(kind)
        etag = answer.headers["ETag"]
        again = get(server, f"/static/{name}", **{"If-None-Match": etag})
        assert again.status == 304 and again.body == b""
    for bad in ("/static/nope.js", "/static/..%2Fhttp_server.py", "/static/"):
        assert get(server, bad).status == 404


def test_every_script_the_page_imports_is_served(server: ExporterHttpServer) -> None:
    static = Path(__file__).resolve().parents[3] / "exporter" / "serve" / "static"
    for script in static.glob("*.js"):
        for line in script.read_text().splitlines():
            if line.startswith("import") and 'from "./' in line:
                name = line.split('from "./', 1)[1].split('"', 1)[0]
                assert get(server, f"/static/{name}").status == 200, (script.name, name)


# -------------------------------------------------------------------------------- API


def test_group_history(server: ExporterHttpServer) -> None:
    answer = get(server, "/api/v1/groups/live/history")
    assert answer.status == 200
    body = answer.json()
    assert body["times_ms"] == [NOW, NOW + 1_000, NOW + 2_000]
    assert body["log_end"] == [260] * 3
    assert body["lag"] == [47] * 3
    assert body["consumed"] == [213] * 3
    assert len(body["lag_seconds"]) == 3
    missing = get(server, "/api/v1/groups/nope/history")
    assert missing.status == 404
    assert missing.json() == {"error": "unknown group", "group": "nope"}


def test_a_group_named_like_a_history_path_keeps_its_detail(holder: Holder) -> None:
    state = sample_state()
    state.apply(commit("live/history", "orders", 0, 1))
    holder.snapshot = build(state)
    with ExporterHttpServer(SnapshotCollector(holder), "127.0.0.1", 0) as srv:
        assert get(srv, "/api/v1/groups/live/history").json()["group"] == "live/history"
        assert "times_ms" in get(srv, "/api/v1/groups/live%2Fhistory/history").json()


def test_lag_seconds_history_for_sparklines(server: ExporterHttpServer) -> None:
    body = get(server, "/api/v1/history/lag-seconds").json()
    assert body["times_ms"] == [NOW, NOW + 1_000, NOW + 2_000]
    assert set(body["groups"]) >= {"live", "stopped"}
    assert all(len(v) == 3 for v in body["groups"].values())
    page = get(server, "/api/v1/history/lag-seconds?group=live&group=nope&group=stopped").json()
    assert set(page["groups"]) == {"live", "stopped"}
    assert page["times_ms"] == body["times_ms"]


def test_groups_list_is_encoded_once_per_snapshot_and_gzipped(
    server: ExporterHttpServer, holder: Holder
) -> None:
    state = sample_state()
    for i in range(20):  # a list long enough to be worth gzipping
        state.apply(commit(f"group-{i}", "orders", 0, 1))
    holder.snapshot = build(state)
    plain = get(server, "/api/v1/groups")
    zipped = get(server, "/api/v1/groups", **{"Accept-Encoding": "gzip"})
    assert json.loads(gzip.decompress(zipped.body)) == plain.json()
    assert zipped.headers["Content-Encoding"] == "gzip"
    state = sample_state()
    state.apply(commit("new-group", "orders", 0, 1))
    holder.snapshot = build(state)
    assert "new-group" in {g["group"] for g in get(server, "/api/v1/groups").json()}


def test_health(server: ExporterHttpServer) -> None:
    body = get(server, "/api/v1/health").json()
    assert body["ready"] is True and body["source_up"] is True
    assert body["source_lag"] == 0
    assert body["decode_errors_total"] == 0
    assert body["records_by_type"] == {"offset_commit": 100}
    assert body["checkpoint_age_seconds"] is None  # never checkpointed
    assert body["groups"] == 3
    assert body["live_stream"]["open"] == 0 and body["live_stream"]["limit"] == 4


# ------------------------------------------------------------------------- event stream


class EventStream:
    """A raw-socket EventSource: the request, then events parsed as they arrive."""

    def __init__(
        self,
        server: ExporterHttpServer,
        query: str = "",
        auth: str | None = None,
        tls: ssl.SSLContext | None = None,
    ):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname="127.0.0.1")
        headers = f"Authorization: {auth}\r\n" if auth else ""
        self.sock.sendall(
            f"GET /api/v1/records/stream{query} HTTP/1.1\r\nHost: x\r\n"
            f"Accept: text/event-stream\r\n{headers}\r\n".encode()
        )
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1])
        self.head = head.decode()
        self.events: list[tuple[str, str]] = []

    def until(self, predicate: Callable[[list[tuple[str, str]]], bool], timeout_s: float = 30):
        deadline = time.monotonic() + timeout_s
        self._parse()  # what came with the headers
        while not predicate(self.events):
            assert time.monotonic() < deadline, f"events so far: {self.events}"
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            assert chunk, f"stream closed; events so far: {self.events}"
            self.buffer += chunk
            self._parse()
        return self.events

    def _parse(self) -> None:
        while b"\n\n" in self.buffer:
            block, _, self.buffer = self.buffer.partition(b"\n\n")
            name, data = "message", []
            for line in block.decode().split("\n"):
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
            if data:
                self.events.append((name, "\n".join(data)))

    def records(self) -> list[dict[str, object]]:
        return [r for name, data in self.events if name == "records" for r in json.loads(data)]

    def close(self) -> None:
        self.sock.close()


def feed(live: LiveRecords, records: list[Record]) -> None:
    for record in records:
        live.append(record)


def test_the_stream_delivers_records_as_they_arrive(
    server: ExporterHttpServer, live: LiveRecords
) -> None:
    stream = EventStream(server, "?group=billing")
    try:
        assert stream.status == 200
        assert "text/event-stream" in stream.head
        hello = stream.until(lambda events: bool(events))[0]
        assert hello[0] == "hello" and "offset_commit" in json.loads(hello[1])["types"]
        wait_for(lambda: live.watchers == 1, "the stream to subscribe")
        feed(live, [positioned(commit(g, "orders", 0, i), 3, i) for i, g in
                    enumerate(["billing-a", "payments", "billing-b"])])  # fmt: skip
        stream.until(lambda _: len(stream.records()) == 2)
        assert [(r["group"], r["offset"]) for r in stream.records()] == [
            ("billing-a", 0),
            ("billing-b", 2),
        ]
    finally:
        stream.close()
    wait_for(lambda: server.streams.open == 0 and live.watchers == 0, "the stream to end")


def test_a_flood_is_cut_to_the_per_stream_budget_and_counted(
    server: ExporterHttpServer, live: LiveRecords
) -> None:
    server.streams.max_per_flush = 5
    stream = EventStream(server)
    try:
        stream.until(lambda events: bool(events))
        wait_for(lambda: live.watchers == 1, "the stream to subscribe")
        feed(live, [positioned(commit("g", "t", 0, i), 0, i) for i in range(50)])
        stream.until(lambda events: any(name == "dropped" for name, _ in events))
        dropped = [int(data) for name, data in stream.events if name == "dropped"]
        assert dropped[-1] == 45
        assert [r["offset"] for r in stream.records()] == list(range(45, 50))
    finally:
        stream.close()


def test_bad_filter_is_a_400(server: ExporterHttpServer) -> None:
    answer = get(server, "/api/v1/records/stream?partition=x")
    assert answer.status == 400


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_100_connects_and_disconnects_leak_nothing(
    server: ExporterHttpServer, live: LiveRecords
) -> None:
    get(server, "/healthz")  # the pool's threads exist before the baseline
    threads, fds = threading.active_count(), open_fds()
    for i in range(100):
        stream = EventStream(server)
        # refused (503) only if earlier streams outlived their browsers: the server allows 4
        assert stream.status == 200, f"connect {i} refused: {server.streams.open} still open"
        stream.until(lambda events: bool(events))
        if i % 2:
            stream.sock.shutdown(socket.SHUT_RDWR)  # half of them end abruptly
        stream.close()
        # each closed browser ends its stream (noticed within the stream's poll interval);
        # without this wait a loaded machine reconnects faster than the server notices, and
        # the budget of 4 open streams refuses the next connect
        wait_for(lambda: server.streams.open == 0, f"stream {i} to end after its close")
    wait_for(
        lambda: (
            server.streams.open == 0
            and live.watchers == 0
            and threading.active_count() <= threads
            # not above: the /healthz connection may close only after the baseline
            and open_fds() <= fds
        ),
        "stream threads and connections back to the baseline",
        describe=lambda: (server.streams.open, threading.active_count(), threads, open_fds(), fds),
    )
    assert server.streams.started_total == 100


def test_streams_have_their_own_budget_and_metrics_keep_answering(
    server: ExporterHttpServer,
) -> None:
    streams = [EventStream(server) for _ in range(4)]
    try:
        for stream in streams:
            assert stream.status == 200
        wait_for(lambda: server.streams.open == 4, "four open streams")
        refused = EventStream(server)
        assert refused.status == 503
        refused.close()
        assert server.streams.refused == 1
        # eight HTTP workers are all free: the streams left the pool
        for _ in range(20):
            assert get(server, "/metrics").status == 200
        assert get(server, "/api/v1/groups").status == 200
    finally:
        for stream in streams:
            stream.close()
    wait_for(lambda: server.streams.open == 0, "the streams to end")


def test_server_stop_ends_open_streams(holder: Holder) -> None:
    srv = ExporterHttpServer(SnapshotCollector(holder), "127.0.0.1", 0)
    srv.start()
    stream = EventStream(srv)
    stream.until(lambda events: bool(events))
    srv.stop()
    assert srv.streams.open == 0
    stream.close()


# ------------------------------------------------------------------------------ auth


def test_basic_auth_covers_the_console_and_the_stream(holder: Holder, tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  operator: {hashed}\n")
    srv = ExporterHttpServer(
        SnapshotCollector(holder), "127.0.0.1", 0, web_config=load_web_config(config)
    )
    good = "Basic " + base64.b64encode(f"operator:{PASSWORD}".encode()).decode()
    with srv:
        for path in ("/", "/groups", "/groups/live", "/static/app.js", "/api/v1/health",
                     "/api/v1/groups/live/history", "/api/v1/history/lag-seconds"):  # fmt: skip
            refused = get(srv, path, Accept="text/html")
            assert refused.status == 401, path
            assert refused.headers["WWW-Authenticate"].startswith("Basic")
            assert get(srv, path, Authorization=good).status == 200, path
        refused_stream = EventStream(srv)
        assert refused_stream.status == 401
        refused_stream.close()
        stream = EventStream(srv, auth=good)
        assert stream.status == 200
        stream.close()


def test_streams_over_tls_end_when_the_browser_goes(holder: Holder, tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "server.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    config = tmp_path / "web.yml"
    config.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    live = LiveRecords()
    srv = ExporterHttpServer(
        SnapshotCollector(holder), "127.0.0.1", 0, web_config=load_web_config(config), live=live
    )
    client = ssl.create_default_context()
    ca.configure_trust(client)
    with srv:
        threads = threading.active_count()
        for _ in range(10):
            stream = EventStream(srv, "?group=g", tls=client)
            assert stream.status == 200
            stream.until(lambda events: bool(events))
            wait_for(lambda: live.watchers == 1, "the stream to subscribe")
            live.append(positioned(commit("g", "t", 0, 5), 1, 2))
            events = stream.until(lambda seen: any(name == "records" for name, _ in seen))
            assert json.loads(events[-1][1])[0]["offset"] == 2
            stream.close()
            wait_for(lambda: srv.streams.open == 0, "the TLS stream to end")
        wait_for(lambda: threading.active_count() <= threads, "no stream thread left")
