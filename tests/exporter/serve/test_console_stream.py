"""The console's event streams (exporter/serve/console_stream.py): a server shutdown that
arrives while a stream is starting waits for it, and never joins a thread not yet started."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from offsetwatch.exporter.serve.console_stream import Streams
from offsetwatch.exporter.serve.live_records import LiveRecords, RecordFilter


def test_a_stop_while_a_stream_starts_waits_for_its_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`stop` lands between the stream's thread being listed and being started: the moment a
    clean-clone `make test` once hit (RuntimeError: cannot join thread before it is started).
    The stop runs on another thread from inside the start, and must finish without error."""
    streams = Streams(LiveRecords(), heartbeat_s=0.05, interval_s=0.01)
    ours, theirs = socket.socketpair()
    failures: list[BaseException] = []
    stopper_started = threading.Event()
    real_start = threading.Thread.start

    def stop_now() -> None:
        stopper_started.set()
        try:
            streams.stop(timeout_s=5.0)
        except BaseException as error:  # the test reports whatever stop raised
            failures.append(error)

    stopper = threading.Thread(target=stop_now, name="stopper")

    def start_after_a_stop(thread: threading.Thread, *args: Any, **kwargs: Any) -> None:
        if thread.name.startswith("offsetwatch-sse-") and not stopper.is_alive():
            real_start(stopper)
            stopper_started.wait(5.0)
            # give the stop every chance to take the thread list before this start: with the
            # start outside the lock it took it at once and joined the unstarted thread
            stopper.join(0.2)
        real_start(thread, *args, **kwargs)

    monkeypatch.setattr(threading.Thread, "start", start_after_a_stop)
    try:
        assert streams.start(ours, RecordFilter())
        stopper.join(10.0)
        assert not stopper.is_alive()
        assert failures == []
    finally:
        monkeypatch.undo()
        streams.stop(timeout_s=5.0)
        ours.close()
        theirs.close()
