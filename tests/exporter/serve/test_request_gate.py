"""The request gate on its own: heads, deadlines, eviction, and running out of descriptors."""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from offsetwatch.exporter.serve.http_server import _Handoff, is_probe
from offsetwatch.exporter.serve.request_gate import RequestGate, head_end


@pytest.mark.parametrize(
    ("buffer", "end"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27),
        (b"GET / HTTP/1.1\nHost: x\n\n", 24),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /next", 27),
        (b"GET / HTTP/1.1\r\nHost: x\r\n", -1),
        (b"", -1),
    ],
)
def test_head_end(buffer: bytes, end: int) -> None:
    assert head_end(buffer) == end


@pytest.mark.parametrize(
    ("head", "probe"),
    [
        (b"GET /metrics HTTP/1.1\r\n\r\n", True),
        (b"GET /metrics?name[]=x HTTP/1.1\r\n\r\n", True),
        (b"GET /healthz HTTP/1.0\r\n\r\n", True),
        (b"HEAD /readyz HTTP/1.1\r\n\r\n", True),
        (b"GET /api/v1/groups HTTP/1.1\r\n\r\n", False),
        (b"GET /metricsx HTTP/1.1\r\n\r\n", False),
        (b"GARBAGE\r\n\r\n", False),
    ],
)
def test_is_probe(head: bytes, probe: bool) -> None:
    assert is_probe(head) is probe


def _request(name: str) -> Any:
    return (name, None, b"", b"")


def test_probes_have_a_lane_of_their_own_served_first() -> None:
    """A queue full of API requests refuses the next one, never a scrape, and a free worker
    takes the scrape before the requests that came earlier."""
    handoff = _Handoff(2)
    assert handoff.offer(_request("api-1")) and handoff.offer(_request("api-2"))
    assert not handoff.offer(_request("api-3"))
    assert handoff.offer(_request("metrics"), probe=True)
    assert handoff.waiting() == 3
    assert [handoff.take()[0], handoff.take()[0]] == ["metrics", "api-1"]  # type: ignore[index]


class _Gate:
    """A gate on a real listener, its loop on a thread, every handed-over head collected."""

    def __init__(self, **options: Any) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.heads: list[bytes] = []
        self.gate = RequestGate(self.listener, self._dispatch, **options)
        self.thread = threading.Thread(target=self.gate.serve, daemon=True)
        self.thread.start()

    def _dispatch(self, sock: socket.socket, _address: Any, head: bytes, _carry: bytes) -> bool:
        self.heads.append(head)
        sock.close()
        return True

    def close(self) -> None:
        self.gate.stop()
        self.thread.join(5)
        self.listener.close()


@pytest.fixture
def gate() -> Iterator[_Gate]:
    running = _Gate(request_timeout=0.5, max_connections=16)
    yield running
    running.close()


def _wait_for(condition: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within 5 s"
        time.sleep(0.01)


def test_a_head_in_pieces_is_handed_over_whole(gate: _Gate) -> None:
    with socket.create_connection(("127.0.0.1", gate.port)) as client:
        for piece in (b"GET /metrics HT", b"TP/1.1\r\nHost:", b" x\r\n", b"\r\n"):
            client.sendall(piece)
            time.sleep(0.02)
        _wait_for(lambda: gate.heads)
    assert gate.heads == [b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"]


def test_a_head_not_whole_within_the_timeout_is_closed(gate: _Gate) -> None:
    with socket.create_connection(("127.0.0.1", gate.port), timeout=5) as client:
        client.sendall(b"GET /metrics HTTP/1.1\r\n")
        assert client.recv(100) == b""  # closed by the gate, nothing handed over
    assert gate.heads == [] and gate.gate.figures.timed_out == 1


def test_past_max_connections_the_busiest_address_makes_room(gate: _Gate) -> None:
    flood = [socket.create_connection(("127.0.0.1", gate.port)) for _ in range(40)]
    try:
        _wait_for(lambda: gate.gate.figures.evicted >= 24)
        assert gate.gate.figures.waiting <= 16
    finally:
        for sock in flood:
            sock.close()


class _ExhaustedListener:
    """A listener whose accept() fails as a process out of descriptors does (EMFILE)."""

    def __init__(self) -> None:
        self._real = socket.socket()
        self._real.bind(("127.0.0.1", 0))
        self._real.listen()
        self.accepts = 0

    def fileno(self) -> int:
        return self._real.fileno()

    def setblocking(self, flag: bool) -> None:
        self._real.setblocking(flag)

    def accept(self) -> tuple[socket.socket, Any]:
        self.accepts += 1
        raise OSError(errno.EMFILE, "Too many open files")

    def close(self) -> None:
        self._real.close()


def test_out_of_descriptors_pauses_accepting_instead_of_spinning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With nothing of its own to free, the gate stops watching the listener until the next
    sweep (0.1 s): a listener that stays readable must not become a busy loop."""
    listener = _ExhaustedListener()
    gate = RequestGate(listener, lambda *_: True, request_timeout=1.0)  # type: ignore[arg-type]
    thread = threading.Thread(target=gate.serve, daemon=True)
    thread.start()
    waiting = socket.create_connection(listener._real.getsockname())
    try:
        time.sleep(1.0)
    finally:
        gate.stop()
        thread.join(5)
        waiting.close()
        listener.close()
    # once per sweep at most (10 in a second), where a spinning loop tries thousands of times
    assert 1 <= listener.accepts <= 15
    assert "raise the open-file limit (ulimit -n)" in caplog.text


class _EndlessKeptAlive(_Gate):
    """Every connection given back at once with its next request already there: a kept-alive
    client that never pauses, as `wrk` is."""

    def _dispatch(self, sock: socket.socket, address: Any, head: bytes, _carry: bytes) -> bool:
        self.heads.append(head)
        if head.startswith(b"GET /api"):
            self.gate.give_back(sock, address, b"GET /api HTTP/1.1\r\n\r\n")
        else:
            sock.close()
        return True


def test_kept_alive_clients_that_never_pause_cannot_lock_new_connections_out() -> None:
    """Connections given back while the gate takes the given-back ones wait for the next
    round: taking them too was a loop of gate and workers that never accepted again
    (a scrape waited 0.3-0.6 s under `wrk -c50` on the API)."""
    running = _EndlessKeptAlive(request_timeout=5.0)
    api = socket.create_connection(("127.0.0.1", running.port))
    try:
        api.sendall(b"GET /api HTTP/1.1\r\n\r\n")
        _wait_for(lambda: len(running.heads) > 100)
        with socket.create_connection(("127.0.0.1", running.port)) as scrape:
            scrape.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
            _wait_for(lambda: b"GET /metrics HTTP/1.1\r\n\r\n" in running.heads)
    finally:
        api.close()
        running.close()


class _FailingOnce(_Gate):
    def _dispatch(self, sock: socket.socket, address: Any, head: bytes, carry: bytes) -> bool:
        if not self.heads:
            self.heads.append(b"failed")
            raise RuntimeError("a bug in a handler")
        return super()._dispatch(sock, address, head, carry)


def test_a_failing_round_is_logged_and_the_gate_serves_on(caplog: pytest.LogCaptureFixture) -> None:
    running = _FailingOnce(request_timeout=5.0)
    try:
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", running.port)) as client:
                client.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
                _wait_for(lambda: len(running.heads) >= 1)
        _wait_for(lambda: len(running.heads) == 2)
    finally:
        running.close()
    assert "a round of the request gate failed" in caplog.text
