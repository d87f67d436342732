"""Offset lag, the log-end history, and lag in seconds checked against a simulated cluster."""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetwatch.exporter.state.lag import (
    DEFAULT_MAX_SAMPLES,
    DEFAULT_RECENT_SAMPLES,
    DEFAULT_SAMPLE_INTERVAL_MS,
    THINNING_DIVISOR,
    LagSeconds,
    LogEndHistory,
    ProduceTime,
    lag_seconds,
    offset_lag,
)

# --------------------------------------------------------------------------- offset_lag


@pytest.mark.parametrize(
    ("log_end", "committed", "expected"),
    [(100, 40, 60), (100, 100, 0), (100, 120, 0), (0, 0, 0)],
)
def test_offset_lag(log_end: int, committed: int, expected: int) -> None:
    assert offset_lag(log_end, committed) == expected


# --------------------------------------------------------------------------- history units


def history(
    *samples: tuple[int, int],
    max_samples: int = DEFAULT_MAX_SAMPLES,
    recent_samples: int = DEFAULT_RECENT_SAMPLES,
) -> LogEndHistory:
    h = LogEndHistory(max_samples, recent_samples)
    for t, end in samples:
        h.record(t, end)
    return h


def test_empty_history_knows_nothing() -> None:
    h = LogEndHistory()
    assert h.latest() is None
    assert h.first() is None
    assert h.produce_time_ms(0) is None
    assert h.unchanged_since_ms() is None
    assert h.log_end_at(123) is None
    # Nothing known: 0 is only a lower bound, but still a number (never NaN).
    assert lag_seconds(h, 0, 10_000) == LagSeconds(0.0, is_lower_bound=True)


def test_idle_partition_costs_one_sample_and_idle_since_stays_exact() -> None:
    h = LogEndHistory()
    for i in range(10_000):
        assert h.record(1_000 + i * 10_000, 500)
    assert len(h) == 1
    assert h.first() == (1_000, 500)
    assert h.latest() == (1_000 + 9_999 * 10_000, 500)
    assert h.unchanged_since_ms() == 1_000


def test_flat_run_end_is_kept_when_the_log_end_moves_again() -> None:
    h = history((0, 100), (10_000, 100), (500_000, 100), (510_000, 102))
    assert h.samples() == [(0, 100), (500_000, 100), (510_000, 102)]
    # Offsets 100 and 101 arrived after the partition was last seen still at 500 s, not
    # somewhere in the 510 s since the run began (kafka-lag-exporter #121).
    first = h.produce_time_ms(100)
    second = h.produce_time_ms(101)
    assert first is not None and second is not None
    assert 500_000 < first.time_ms < second.time_ms < 510_000
    assert not first.is_lower_bound
    assert h.unchanged_since_ms() is None  # the latest sample moved the log end


def test_unchanged_since_after_a_move() -> None:
    h = history((0, 1), (10_000, 5), (20_000, 5), (30_000, 5))
    assert h.unchanged_since_ms() == 10_000


def test_out_of_order_and_duplicate_times_are_ignored() -> None:
    h = history((10_000, 100), (20_000, 200))
    assert not h.record(20_000, 300)  # duplicate time
    assert not h.record(15_000, 150)  # late sample
    assert not h.record(5_000, 0)  # late sample that would otherwise look like a reset
    assert h.samples() == [(10_000, 100), (20_000, 200)]
    assert h.resets == 0


def test_falling_log_end_means_recreated_topic_and_resets_history() -> None:
    h = history((0, 1_000), (10_000, 2_000), (20_000, 3_000))
    assert h.record(30_000, 10)
    assert h.resets == 1
    assert h.samples() == [(30_000, 10)]
    # Old offsets mean nothing for the new topic: the consumer at 2_500 points past the end,
    # which lag_seconds reports as caught up and the status rules report as ERR.
    assert lag_seconds(h, 2_500, 40_000) == LagSeconds(0.0, is_lower_bound=False)
    assert lag_seconds(h, 5, 40_000) == LagSeconds(10.0, is_lower_bound=True)


def test_negative_log_end_is_rejected() -> None:
    with pytest.raises(ValueError):
        LogEndHistory().record(0, -1)


@pytest.mark.parametrize(("max_samples", "recent_samples"), [(1, 1), (5, 4), (10, 0)])
def test_room_for_a_run_end_and_a_run_start_beside_the_recent_samples(
    max_samples: int, recent_samples: int
) -> None:
    with pytest.raises(ValueError, match="recent_samples"):
        LogEndHistory(max_samples, recent_samples)


def _busy(hours: float, max_samples: int = DEFAULT_MAX_SAMPLES) -> LogEndHistory:
    """A partition receiving 10 messages per second, sampled every 10 s for `hours`."""
    h = LogEndHistory(max_samples)
    for i in range(int(hours * 360)):
        h.record(i * 10_000, 100 * i)
    return h


def test_busy_partition_history_reaches_back_two_days_in_bounded_samples() -> None:
    h = _busy(50)
    latest = h.latest()
    first = h.first()
    assert latest is not None and first is not None
    assert len(h) <= DEFAULT_MAX_SAMPLES
    assert latest[0] - first[0] >= 40 * 3_600_000
    # the recent range is exactly what was sampled
    newest = [(i * 10_000, 100 * i) for i in range(50 * 360 - DEFAULT_RECENT_SAMPLES, 50 * 360)]
    assert h.samples()[-DEFAULT_RECENT_SAMPLES:] == newest


def test_thinned_gaps_stay_within_a_tenth_of_their_age() -> None:
    h = _busy(30)
    samples = h.samples()
    now = samples[-1][0]
    older = samples[: -DEFAULT_RECENT_SAMPLES + 1]
    assert len(older) > 50
    for (t_old, _), (t_young, _) in pairwise(older):
        gap = t_young - t_old
        assert gap == 10_000 or THINNING_DIVISOR * gap <= now - t_young


def test_stopped_consumer_lag_keeps_growing_for_a_day() -> None:
    h = _busy(26)
    now = 26 * 3_600_000 - 10_000
    for hours_ago in (0.5, 1, 6, 24):
        appended = now - int(hours_ago * 3_600_000)
        committed = appended // 100  # 10 messages per second since 0
        lag = lag_seconds(h, committed, now)
        assert not lag.is_lower_bound
        truth = hours_ago * 3_600
        assert abs(lag.seconds - truth) <= truth / THINNING_DIVISOR, (hours_ago, lag)


def test_past_the_room_the_oldest_samples_go_and_older_messages_are_lower_bounds() -> None:
    h = LogEndHistory(max_samples=8, recent_samples=4)
    for i in range(10_000):
        h.record(i * 10_000, i * 7)
    assert len(h) <= 8
    assert h.samples()[-4:] == [(i * 10_000, i * 7) for i in range(9_996, 10_000)]
    first = h.first()
    assert first is not None and first[0] > 0
    lag = lag_seconds(h, 0, 10_000 * 10_000)
    assert lag.is_lower_bound
    assert lag.seconds == (10_000 * 10_000 - first[0]) / 1000


def test_produce_time_interpolates_between_bracketing_samples() -> None:
    h = history((0, 0), (10_000, 9), (20_000, 18))
    # Nine messages in (0, 10 s]: the k-th lands at k/10 of the gap.
    assert h.produce_time_ms(0) == ProduceTime(1_000, is_lower_bound=False)
    assert h.produce_time_ms(8) == ProduceTime(9_000, is_lower_bound=False)
    assert h.produce_time_ms(9) == ProduceTime(11_000, is_lower_bound=False)
    assert h.produce_time_ms(18) is None  # at the log end: nothing to wait for


def test_message_older_than_history_is_flagged_as_a_bound() -> None:
    h = history((50_000, 1_000), (60_000, 1_100))
    assert h.produce_time_ms(10) == ProduceTime(50_000, is_lower_bound=True)
    lag = lag_seconds(h, 10, 70_000)
    assert lag == LagSeconds(20.0, is_lower_bound=True)


def test_log_end_at_returns_last_sample_at_or_before() -> None:
    h = history((10_000, 5), (20_000, 5), (30_000, 8), (40_000, 12))
    assert h.log_end_at(9_999) is None
    assert h.log_end_at(10_000) == 5
    assert h.log_end_at(29_999) == 5
    assert h.log_end_at(30_000) == 8
    assert h.log_end_at(99_000) == 12


def test_lag_at_before_the_history_is_bounded_by_the_oldest_sample() -> None:
    h = history((10_000, 5), (20_000, 5), (30_000, 8))
    assert h.lag_at(30_000, 6) == 2
    assert h.lag_at(30_000, 9) == 0  # never negative
    # before the history: the log end was at most 5 then (it never goes down)
    assert h.lag_at(9_999, 5) == 0
    assert h.lag_at(9_999, 7) == 0
    assert h.lag_at(9_999, 4) is None  # somewhere in 0..1
    assert LogEndHistory().lag_at(0, 0) is None
    # a recreated topic's history says nothing about the old topic's log end
    h.record(40_000, 2)
    assert h.log_end_at(39_999) is None
    assert h.lag_at(39_999, 10) is None
    assert h.lag_at(40_000, 1) == 1


def test_caught_up_consumer_has_zero_lag_even_on_a_long_idle_topic() -> None:
    h = history(*[(i * 10_000, 42) for i in range(1_000)])
    lag = lag_seconds(h, 42, 10_000 * 1_000 + 5)
    assert lag == LagSeconds(0.0, is_lower_bound=False)
    # Committed past the sampled end (the consumer read messages appended since): still 0.
    assert lag_seconds(h, 50, 10_000_000).seconds == 0.0


def test_stopped_consumer_on_idle_topic_lag_grows_with_wall_time() -> None:
    h = history((0, 0), (10_000, 10))
    for i in range(2, 200):
        h.record(i * 10_000, 10)
    produced = h.produce_time_ms(5)
    assert produced is not None and not produced.is_lower_bound
    earlier = lag_seconds(h, 5, 1_000_000)
    later = lag_seconds(h, 5, 2_000_000)
    assert later.seconds - earlier.seconds == pytest.approx(1_000.0)
    assert not later.is_lower_bound


def test_rewound_consumer_gets_the_age_of_the_message_it_rewound_to() -> None:
    h = history(*[(i * 10_000, i * 100) for i in range(60)])
    # Offset 1_050 was appended between 100 s and 110 s; now is 590 s.
    lag = lag_seconds(h, 1_050, 590_000)
    assert 480.0 <= lag.seconds <= 490.0
    assert not lag.is_lower_bound


def test_lag_is_never_negative_under_clock_skew() -> None:
    h = history((100_000, 0), (110_000, 50))
    lag = lag_seconds(h, 10, 90_000)  # "now" before the samples
    assert lag.seconds == 0.0


# --------------------------------------------------------------------------- properties


class ReferenceHistory:
    """Obviously-correct model of LogEndHistory without a size limit: a plain list."""

    def __init__(self) -> None:
        self.stored: list[tuple[int, int]] = []
        self.last_seen = 0

    def record(self, t: int, end: int) -> None:
        if self.stored and t <= self.last_seen:
            return
        if self.stored and end < self.stored[-1][1]:
            self.stored = []
        if self.stored and end == self.stored[-1][1]:
            self.last_seen = t
            return
        if self.stored and self.last_seen > self.stored[-1][0]:
            self.stored.append((self.last_seen, self.stored[-1][1]))
        self.stored.append((t, end))
        self.last_seen = t

    def samples(self) -> list[tuple[int, int]]:
        out = list(self.stored)
        if out and self.last_seen > out[-1][0]:
            out.append((self.last_seen, out[-1][1]))
        return out


def interpolate(stored: list[tuple[int, int]], offset: int) -> ProduceTime | None:
    if not stored or offset >= stored[-1][1]:
        return None
    j = next(i for i, (_, end) in enumerate(stored) if end > offset)
    if j == 0:
        return ProduceTime(stored[0][0], True)
    (t0, e0), (t1, e1) = stored[j - 1], stored[j]
    return ProduceTime(t0 + (t1 - t0) * (offset - e0 + 1) // (e1 - e0 + 1), False)


steps = st.lists(
    st.tuples(st.integers(-5_000, 60_000), st.integers(-3, 2_000)), min_size=1, max_size=160
)


@settings(max_examples=300, deadline=None)
@given(
    steps=steps,
    recent=st.integers(1, 6),
    extra=st.integers(2, 10),
    probes=st.lists(st.integers(-10, 50_000)),
)
def test_history_matches_reference_model(
    steps: list[tuple[int, int]], recent: int, extra: int, probes: list[int]
) -> None:
    """Arbitrary sample streams (late, duplicate, falling) against the unlimited list model:
    the history holds real samples only, the newest as sampled, thinned gaps bounded by age."""
    max_samples = recent + extra
    h = LogEndHistory(max_samples, recent)
    ref = ReferenceHistory()
    t, end = 1_000_000, 0
    for dt, d_end in steps:
        t += dt
        end = max(0, end + d_end)
        h.record(t, end)
        ref.record(t, end)
        assert len(h) <= max_samples
    held, every = h.samples(), ref.samples()
    assert h.latest() == (every[-1] if every else None)
    positions = {sample: i for i, sample in enumerate(every)}
    assert all(sample in positions for sample in held)
    index = [positions[sample] for sample in held]
    assert index == sorted(index)
    tail = min(len(every), recent + 1)  # the recent samples and the open end of a flat run
    assert held[-tail:] == every[-tail:]
    now = ref.last_seen
    for (t_old, _), (t_young, _), i, j in zip(held, held[1:], index, index[1:], strict=False):
        if j > i + 1:  # something was thinned out between these two
            assert THINNING_DIVISOR * (t_young - t_old) <= now - t_young
    for offset in probes:
        assert h.produce_time_ms(offset) == interpolate(h.samples()[: len(h)], offset)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(1, 120_000), st.integers(0, 10**9)), min_size=1, max_size=200
    ),
    recent=st.integers(1, 100),
    committed=st.integers(0, 10**11),
    now_offset=st.integers(-(10**6), 10**10),
)
def test_lag_seconds_is_finite_non_negative_and_bounded_by_history(
    steps: list[tuple[int, int]], recent: int, committed: int, now_offset: int
) -> None:
    h = LogEndHistory(recent + 2, recent)
    t, end = 1_700_000_000_000, 0
    for dt, d_end in steps:
        t += dt
        end += d_end
        h.record(t, end)
    now = t + now_offset
    first = h.first()
    assert first is not None
    lag = lag_seconds(h, committed, now)
    assert math.isfinite(lag.seconds)
    assert lag.seconds >= 0.0
    assert lag.seconds <= max(0, now - first[0]) / 1000.0
    latest = h.latest()
    assert latest is not None
    if committed >= latest[1]:
        assert lag == LagSeconds(0.0, is_lower_bound=False)


# --------------------------------------------------------------------------- simulation

SIM_SEED = 20_240_611
SAMPLER_MAX_JITTER_MS = 500  # the sampler wakes up late, never early
# Interpolation can be off by at most the gap between the two bracketing samples, and
# consecutive samples are one (jittered) sampler interval apart.
INTERVAL_TOLERANCE_S = (DEFAULT_SAMPLE_INTERVAL_MS + SAMPLER_MAX_JITTER_MS) / 1000.0


@dataclass(frozen=True)
class Segment:
    start_s: float
    end_s: float
    rate: float  # messages per second


def _producer_segments() -> list[Segment]:
    segments = [Segment(0, 900, 50.0)]  # steady
    # Bursty: 3 s at 2000/s at the top of every minute, 2/s in between.
    for minute in range(20):
        base = 900 + minute * 60
        segments.append(Segment(base, base + 3, 2_000.0))
        segments.append(Segment(base + 3, base + 60, 2.0))
    segments.append(Segment(2_100, 3_600, 0.0))  # idle 25 min: past the recent samples
    segments.append(Segment(3_600, 4_800, 0.05))  # one message every ~20 s
    segments.append(Segment(4_800, 6_000, 200.0))  # steady and fast
    segments.append(Segment(6_000, 6_600, 0.0))  # idle
    # Slowly varying rate, 0..100/s, in 30 s steps.
    for step in range(60):
        start = 6_600 + step * 30
        rate = 50.0 + 50.0 * math.sin(step / 6.0)
        segments.append(Segment(start, start + 30, rate))
    segments.append(Segment(8_400, 9_000, 20.0))
    return segments


def _append_times_ms(rng: random.Random) -> list[int]:
    times: list[int] = []
    for seg in _producer_segments():
        if seg.rate <= 0:
            continue
        t = seg.start_s + rng.expovariate(seg.rate)
        while t < seg.end_s:
            times.append(int(t * 1000))
            t += rng.expovariate(seg.rate)
    return times


def _consumer_capacity(t_s: float) -> float:
    """Messages per second the consumer can process at time t (0 = paused)."""
    if 2_000 <= t_s < 2_600:  # paused across the end of the bursts into the idle period
        return 0.0
    if 5_000 <= t_s < 6_300:  # paused ~22 min: behind beyond the recent samples
        return 0.0
    if t_s < 900:
        return 80.0
    if t_s < 4_800:
        return 150.0
    if t_s < 6_600:
        return 400.0
    if t_s < 8_400:
        return 60.0  # slower than the peaks of the varying producer
    return 80.0


REWIND_AT_S = 7_500
REWIND_BACK_S = 480  # re-process the last 8 minutes
COMMIT_EVERY_MS = 5_000
STEP_MS = 100


@dataclass
class SimResult:
    checks: int
    caught_up: int
    interpolated: int
    lower_bound: int
    after_rewind: int
    worst_error_s: float
    worst_at_s: float
    errors_s: list[float]


def _simulate(h: LogEndHistory) -> SimResult:
    rng = random.Random(SIM_SEED)
    append_ms = _append_times_ms(rng)

    def true_log_end(t_ms: int) -> int:
        return bisect.bisect_right(append_ms, t_ms)

    end_ms = 9_000_000
    sample_times = [
        k * DEFAULT_SAMPLE_INTERVAL_MS + rng.randint(0, SAMPLER_MAX_JITTER_MS)
        for k in range(end_ms // DEFAULT_SAMPLE_INTERVAL_MS)
    ]
    next_sample = 0
    position = 0.0
    committed = 0
    rewound = False
    result = SimResult(0, 0, 0, 0, 0, 0.0, 0.0, [])

    for step in range(end_ms // STEP_MS):
        now = step * STEP_MS
        while next_sample < len(sample_times) and sample_times[next_sample] <= now:
            ts = sample_times[next_sample]
            h.record(ts, true_log_end(ts))
            next_sample += 1
        position = min(
            position + _consumer_capacity(now / 1000) * STEP_MS / 1000, true_log_end(now)
        )
        if not rewound and now >= REWIND_AT_S * 1000:
            rewound = True
            position = float(true_log_end(now - REWIND_BACK_S * 1000))
            committed = int(position)
        if now % COMMIT_EVERY_MS == 0:
            committed = int(position)
        if now < 30_000 or now % 7_300 != 0:
            continue

        truth_s = 0.0
        if committed < true_log_end(now):
            truth_s = (now - append_ms[committed]) / 1000
        lag = lag_seconds(h, committed, now)
        result.checks += 1
        first = h.first()
        assert first is not None
        assert math.isfinite(lag.seconds) and lag.seconds >= 0
        assert lag.seconds <= (now - first[0]) / 1000
        if lag.is_lower_bound:
            result.lower_bound += 1
            # Flagged only when the message really predates the history, and never over.
            assert append_ms[committed] <= first[0], now
            assert lag.seconds <= truth_s + 1e-9, now
            continue
        error = abs(lag.seconds - truth_s)
        # beyond the recent samples the bracketing gap may be up to a tenth of the lag
        assert error <= max(INTERVAL_TOLERANCE_S, truth_s / THINNING_DIVISOR), (now, lag, truth_s)
        result.errors_s.append(error)
        if error > result.worst_error_s:
            result.worst_error_s, result.worst_at_s = error, now / 1000
        if truth_s == 0.0 or lag.seconds == 0.0:
            result.caught_up += 1
        else:
            result.interpolated += 1
        if REWIND_AT_S * 1000 <= now < (REWIND_AT_S + REWIND_BACK_S) * 1000:
            result.after_rewind += 1
    return result


#: a history small enough that the simulation (2.5 h) thins it and outgrows it
SMALL_HISTORY = {"max_samples": 40, "recent_samples": 20}


@pytest.mark.parametrize("sizes", [{}, SMALL_HISTORY], ids=["default", "small"])
def test_simulated_lag_seconds_tracks_true_lag(sizes: dict[str, int]) -> None:
    result = _simulate(LogEndHistory(**sizes))
    errors = sorted(result.errors_s)
    print(
        f"\nsimulation: {result.checks} checks, {result.caught_up} caught up, "
        f"{result.interpolated} interpolated, {result.lower_bound} lower bounds, "
        f"{result.after_rewind} after the rewind; worst error {result.worst_error_s:.3f} s "
        f"at t={result.worst_at_s:.1f} s, median {errors[len(errors) // 2]:.3f} s, "
        f"p99 {errors[len(errors) * 99 // 100]:.3f} s"
    )
    # Every regime must actually have been exercised, or the tolerance check proves little.
    assert result.checks > 1_000
    assert result.caught_up > 100
    assert result.interpolated > 300
    assert result.after_rewind > 20
    if sizes:
        assert result.lower_bound > 20
    else:
        # the default history spans the whole run: every estimate is interpolated, and the
        # steady traffic during the long pause keeps even the thinned range within a sample
        assert result.lower_bound == 0
        assert result.worst_error_s <= INTERVAL_TOLERANCE_S
