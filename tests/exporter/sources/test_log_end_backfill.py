"""The log-end history rebuilt from record timestamps (a fleet replica's gained partitions):
the points asked, Kafka's answers read as the log end at each time, and the sampler handing
the rebuilt history over once per partition first sampled."""

from __future__ import annotations

from concurrent.futures import Future
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

from offsetwatch.exporter.sources.log_end_backfill import MAX_POINTS, backfill_times, rebuild


def test_points_one_interval_apart_when_recent_and_in_proportion_to_age_beyond() -> None:
    assert backfill_times(100_000, 30_000, 10_000) == [70_000, 80_000, 90_000]
    now = 10**9
    many = backfill_times(now, 600_000, 1_000)
    assert len(many) <= MAX_POINTS + 1 and many[0] == now - 600_000 and many[-1] == now - 1_000
    ages = sorted(now - t for t in many)
    assert ages[:10] == [k * 1_000 for k in range(1, 11)]
    # beyond, each gap is a small fraction of its age
    assert all(b - a <= 0.15 * b for a, b in pairwise(ages[10:]))
    assert backfill_times(1000, 0, 1000) == []


class _Admin:
    """Records with timestamps 1000, 2000, ... at offsets 0, 1, ... (10 of them)."""

    def __init__(self, failing: set[int] | None = None) -> None:
        self.failing = failing or set()
        self.asked: list[int] = []

    def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        out: dict[Any, Future[Any]] = {}
        for tp, spec in request.items():
            timestamp = int(spec.timestamp)
            self.asked.append(timestamp)
            future: Future[Any] = Future()
            if timestamp in self.failing:
                future.set_exception(RuntimeError("no answer"))
            else:
                first = -(-timestamp // 1000) - 1  # first offset with a timestamp >= it
                future.set_result(SimpleNamespace(offset=first if first < 10 else -1))
            out[tp] = future
        return out


def test_each_point_is_the_log_end_at_that_time() -> None:
    key = ("orders", 0)
    points = rebuild(_Admin(), [key], {key: 10}, [500, 2500, 9999, 20_000], None, 1.0)
    # before every record: 0; after records 0-2 (ts 1000-3000): 2 ... none that new: the end
    assert points == [(500, {key: 0}), (2500, {key: 2}), (9999, {key: 9}), (20_000, {key: 10})]


def test_a_point_without_an_answer_is_left_out_never_guessed() -> None:
    key = ("orders", 0)
    points = rebuild(_Admin(failing={2500}), [key], {key: 10}, [500, 2500], None, 1.0)
    assert points == [(500, {key: 0})]
