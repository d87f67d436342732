"""The log-end history per topic-partition: reach, size, cost of `record` and accuracy.

    .venv/bin/python benchmarks/lag_history.py            # 96 h of 10 s samples
    .venv/bin/python benchmarks/lag_history.py --hours 6  # shorter

A busy partition (its log end moves at every sample: a producer whose rate changes every
minute, 1 to 20 messages/s; samples every 10 s with up to 0.5 s of jitter) is fed to a
default `LogEndHistory` for `--hours`. Printed:

* reach: how far back the oldest sample is (the least seen over the second half of the run,
  when the history is full, and at the end), and the samples held;
* memory: bytes of one history (the object and its array, as `sys.getsizeof` counts them)
  and, as a check, the traced allocations of 1,000 such histories divided by 1,000;
* `record` cost per sample, best of 3 (thinning passes included), beside the same stream
  recorded into a history too large to ever thin;
* accuracy: lag in seconds of a consumer stopped 10 min, 30 min, 1 h, 6 h and 24 h ago,
  against the truth, when the history reaches that far.

Nothing here is asserted; tests never time.
"""

from __future__ import annotations

import argparse
import bisect
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from offsetwatch.exporter.state.lag import LogEndHistory, lag_seconds  # noqa: E402

INTERVAL_MS = 10_000


class Producer:
    """Messages appended per second, at a random rate (1..20/s) that changes every minute."""

    def __init__(self, hours: float, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.appended: list[int] = [0]  # messages appended before each second
        rate = 1
        for second in range(int(hours * 3_600) + 2):
            if second % 60 == 0:
                rate = rng.randint(1, 20)
            self.appended.append(self.appended[-1] + rate)

    def log_end(self, t_ms: int) -> int:
        return self.appended[t_ms // 1000]

    def append_time_s(self, offset: int) -> float:
        """When the message at `offset` was appended (spread evenly inside its second)."""
        second = bisect.bisect_right(self.appended, offset) - 1
        count = self.appended[second + 1] - self.appended[second]
        return second + (offset - self.appended[second] + 1) / (count + 1)


def stream(producer: Producer, hours: float, seed: int = 7) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    times = [k * INTERVAL_MS + rng.randint(0, 500) for k in range(int(hours * 360))]
    return [(t, producer.log_end(t)) for t in times]


def fill(samples: list[tuple[int, int]], max_samples: int | None = None) -> LogEndHistory:
    history = LogEndHistory() if max_samples is None else LogEndHistory(max_samples)
    record = history.record
    for t, end in samples:
        record(t, end)
    return history


def reach(samples: list[tuple[int, int]]) -> tuple[float, float, int]:
    """(least reach over the second half, reach at the end) in hours, and samples held."""
    history = LogEndHistory()
    least = float("inf")
    half = len(samples) // 2
    for i, (t, end) in enumerate(samples):
        history.record(t, end)
        first = history.first()
        if first is not None and i >= half and i % 7 == 0:
            least = min(least, (t - first[0]) / 3_600_000)
    first = history.first()
    assert first is not None
    return least, (samples[-1][0] - first[0]) / 3_600_000, len(history)


def record_cost(samples: list[tuple[int, int]]) -> tuple[float, float]:
    """Microseconds per sample: the default history, and one too large to ever thin."""

    def timed(action: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            action()
            best = min(best, time.perf_counter() - started)
        return best * 1e6 / len(samples)

    return timed(lambda: fill(samples)), timed(lambda: fill(samples, len(samples) + 2))


def memory(samples: list[tuple[int, int]]) -> tuple[int, float]:
    one = fill(samples)
    size = sys.getsizeof(one) + sys.getsizeof(one._buf)
    tail = samples[-2_000:]  # enough to fill and thin a history; ages do not change its size
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    many = [fill(tail) for _ in range(1_000)]
    traced = (tracemalloc.get_traced_memory()[0] - base) / len(many)
    tracemalloc.stop()
    return size, traced


def accuracy(
    producer: Producer, samples: list[tuple[int, int]]
) -> list[tuple[float, float, float, bool]]:
    history = fill(samples)
    now = samples[-1][0] + 1_000
    rows = []
    for minutes in (10, 30, 60, 360, 1_440, 2_640):
        appended = now - minutes * 60_000
        if appended <= 0:
            continue
        committed = producer.log_end(appended)
        truth = now / 1000 - producer.append_time_s(committed)
        lag = lag_seconds(history, committed, now)
        rows.append((minutes / 60, truth, lag.seconds, lag.is_lower_bound))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--hours", type=float, default=96.0, help="hours of samples (96)")
    args = parser.parse_args()
    producer = Producer(args.hours)
    samples = stream(producer, args.hours)
    probe = LogEndHistory()
    print(
        f"LogEndHistory defaults: {probe.max_samples} samples at most, the newest "
        f"{probe.recent_samples} as sampled; {len(samples):,} samples over {args.hours:g} h"
    )
    least, final, held = reach(samples)
    print(
        f"reach: at least {least:.1f} h over the second half of the run, {final:.1f} h at the "
        f"end; {held} samples held"
    )
    size, traced = memory(samples)
    print(f"memory per busy topic-partition: {size:,} B (getsizeof), {traced:,.0f} B (traced)")
    new_us, plain_us = record_cost(samples)
    print(f"record: {new_us:.2f} us per sample (never thinned: {plain_us:.2f} us)")
    for hours, truth, seconds, bound in accuracy(producer, samples):
        error = 100 * (seconds - truth) / truth
        flag = " (lower bound)" if bound else ""
        print(
            f"stopped {hours:5.2f} h ago: true lag {truth:9.1f} s, estimate {seconds:9.1f} s, "
            f"error {error:+.2f}%{flag}"
        )


if __name__ == "__main__":
    main()
