"""The source reader: batches in fetch order, none fetched before a restart, never a wait
of the main loop on the source."""

from __future__ import annotations

import threading
from typing import Any

from offsetwatch.exporter.sources.kafka_source import PartitionEof, SourceBatch
from offsetwatch.exporter.sources.reader import SourceReader
from tests.exporter.daemon_helpers import wait_for


class FakeSource:
    """Hands out scripted batches; `hang` makes poll_batch block (a hung broker)."""

    def __init__(self, batches: list[SourceBatch]) -> None:
        self.batches = list(batches)
        self.restarts: list[set[int]] = []
        self.polls = 0
        self.hang = threading.Event()
        self.release = threading.Event()
        self.closed = False
        self._caught_up = False

    def poll_batch(self, max_messages: int, timeout_s: float) -> SourceBatch:
        self.polls += 1
        if self.hang.is_set():
            self.release.wait(30)
        if not self.batches:
            self.release.wait(timeout_s)
            return SourceBatch()
        batch = self.batches.pop(0)
        if any(isinstance(e, PartitionEof) for e in batch.events):
            self._caught_up = True
        return batch

    def caught_up(self) -> bool:
        return self._caught_up

    def end_offsets(self) -> dict[int, int]:
        return {0: 100}

    def assigned_partitions(self) -> set[int]:
        return {0, 1}

    def restart_from_beginning(self, partitions: set[int]) -> None:
        self.restarts.append(set(partitions))
        self._caught_up = False

    def close(self) -> None:
        self.closed = True


def batch(tag: str, eof: bool = False) -> SourceBatch:
    return SourceBatch([tag], [PartitionEof(0, 5)] if eof else [])  # type: ignore[list-item]


def reader_of(source: FakeSource) -> SourceReader:
    return SourceReader(source, name="test-reader", poll_timeout_s=0.01)  # type: ignore[arg-type]


def test_batches_come_in_fetch_order_and_caught_up_follows_the_batches_taken() -> None:
    source = FakeSource([batch("a"), batch("b", eof=True), batch("c")])
    reader = reader_of(source)
    reader.start()
    try:
        taken: list[Any] = []
        first = reader.take(5)
        assert first is not None
        taken.extend(first.messages)
        # the source may have fetched "b" (its end) already: not caught up before it is taken
        assert not reader.caught_up()
        second = reader.take(5)
        assert second is not None
        taken.extend(second.messages)
        assert reader.caught_up()
        third = reader.take(5)
        assert third is not None
        taken.extend(third.messages)
        assert taken == ["a", "b", "c"]
        assert reader.end_offsets() == {0: 100}
    finally:
        assert reader.stop(5)
    reader.close()
    assert source.closed


def test_nothing_fetched_before_a_restart_is_handed_out_after_it() -> None:
    source = FakeSource([batch("old-1"), batch("old-2"), batch("old-3")])
    reader = reader_of(source)
    reader.start()
    try:
        first = reader.take(5)
        assert first is not None and first.messages == ["old-1"]
        # asked for and not taken yet: "old-2" waits in the queue
        reader.want()
        wait_for(lambda: source.polls >= 2, "the reader fetching the next batch")
        reader.restart_from_beginning()
        source.batches.insert(0, batch("new", eof=True))
        fresh = reader.take(5)
        assert fresh is not None and fresh.messages == ["new"]
        assert source.restarts == [{0, 1}]
        assert reader.caught_up()
    finally:
        assert reader.stop(5)


def test_a_hung_source_never_holds_the_main_loop() -> None:
    source = FakeSource([])
    source.hang.set()
    reader = reader_of(source)
    reader.start()
    try:
        reader.want()
        wait_for(lambda: source.polls >= 1, "the reader inside a fetch that hangs")
        # the main loop's side returns once its own wait is over, whatever the source does
        assert reader.take(0.05) is None
        assert reader.take(0) is None
    finally:
        source.release.set()
        assert reader.stop(5)


def test_a_failing_fetch_is_retried_and_shows_in_the_health() -> None:
    class Failing(FakeSource):
        def poll_batch(self, max_messages: int, timeout_s: float) -> SourceBatch:
            self.polls += 1
            if self.polls <= 2:
                raise RuntimeError("client crashed")
            return super().poll_batch(max_messages, timeout_s)

    source = Failing([batch("after")])
    reader = SourceReader(
        source,  # type: ignore[arg-type]
        name="test-reader",
        poll_timeout_s=0.01,
        backoff_min_s=0.01,
    )
    reader.start()
    try:
        got = reader.take(10)
        assert got is not None and got.messages == ["after"]
        assert reader.health.restarts_total == 2
        wait_for(lambda: reader.health.up, "the reader's health cleared")
    finally:
        assert reader.stop(5)
