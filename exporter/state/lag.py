"""Consumer lag in offsets and in seconds, from a compact history of log-end samples.

Pure logic: no I/O, no clock. Times are epoch milliseconds (int); lag in seconds is a float.

Lag in seconds is "how long has the next unread message been waiting", i.e. now minus the
time the message at the committed offset was appended. Kafka does not tell us append times
per offset cheaply, so a background sampler records the log end offset of every data
partition every few seconds and `LogEndHistory` turns those samples into an offset -> time
lookup. Two rules keep the number honest, which is where kafka-lag-exporter goes wrong:
the lookup only interpolates between real samples and never extrapolates (no astronomical or
infinite values), and a consumer at the log end has lag 0.0 (no NaN, no gaps).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_SAMPLES",
    "DEFAULT_RECENT_SAMPLES",
    "DEFAULT_SAMPLE_INTERVAL_MS",
    "THINNING_DIVISOR",
    "LagSeconds",
    "LogEndHistory",
    "ProduceTime",
    "lag_seconds",
    "offset_lag",
]

DEFAULT_SAMPLE_INTERVAL_MS = 10_000
# A partition whose log end moves at every 10 s sample: the newest 90 samples (15 minutes,
# as far as the status window looks back) stay at full resolution and the rest of the 200
# are thinned geometrically, which always reaches back more than 40 hours (measured in
# benchmarks/lag_history.py). Idle stretches cost at most two samples, so quiet partitions
# are covered for even longer.
DEFAULT_MAX_SAMPLES = 200
DEFAULT_RECENT_SAMPLES = 90
#: beyond the recent samples, two kept samples are at most 1/10 of the younger one's age apart
THINNING_DIVISOR = 10


def offset_lag(log_end_offset: int, committed_offset: int) -> int:
    """Messages between the committed offset and the log end; never negative.

    A committed offset past the log end (stale log-end sample, truncated or recreated topic)
    reads as 0 here; telling those cases apart is the status evaluation's job.
    """
    return max(0, log_end_offset - committed_offset)


@dataclass(slots=True, frozen=True)
class ProduceTime:
    """When the message at an offset was appended, as far as the history can tell.

    `is_lower_bound` is True when the message is older than the oldest sample: `time_ms` is
    then that sample's time, the message was appended at or before it, and any age derived
    from it is a lower bound of the true age.
    """

    time_ms: int
    is_lower_bound: bool


@dataclass(slots=True, frozen=True)
class LagSeconds:
    """Age in seconds of the next message a consumer would read (0.0 when caught up).

    `is_lower_bound` is True when that message predates the history (the true lag is at least
    `seconds`), or when nothing at all is known about the partition yet.
    """

    seconds: float
    is_lower_bound: bool


class LogEndHistory:
    """Bounded history of (sample_time_ms, log_end_offset) for one data topic-partition.

    Samples live interleaved, oldest first, in a single `array('q')` (16 bytes per sample, no
    per-sample Python objects) that grows on demand up to `max_samples`: with ~100k
    partitions a list of tuples would cost ~10x more, and preallocating would charge idle
    partitions for samples they never need.

    Runs of equal log ends are compressed: a run keeps its first sample (so "idle since" stays
    exact) and the latest time it was still seen at that offset is held in one field; only
    when the log end moves again is that run end written as a sample, because interpolating
    the next messages needs to know when the partition was last seen still. An idle partition
    therefore costs one or two samples however long it idles.

    A busy partition fills the array; it is then thinned geometrically instead of dropping its
    oldest samples, so the history reaches back days rather than `max_samples` intervals and
    lag in seconds keeps growing for a stopped consumer. The newest `recent_samples` are kept
    as sampled. Older ones are dropped only while the gap left between two kept samples stays
    within 1/`THINNING_DIVISOR` of the younger one's age: every kept sample is a real sample,
    so interpolation still never extrapolates, and its error (at most the bracketing gap) is
    at most one sampling interval in the recent range and 10% of the lag beyond it. A thinning
    pass frees at least a quarter of the thinnable room (dropping the oldest samples if the
    rule alone frees less), so its cost is spread over that many samples.
    """

    __slots__ = ("_buf", "_last_seen_ms", "_max", "_recent", "_resets", "_slack")

    def __init__(
        self,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        recent_samples: int = DEFAULT_RECENT_SAMPLES,
    ) -> None:
        if recent_samples < 1 or max_samples < recent_samples + 2:
            # Closing a flat run and opening the next one writes two samples at once.
            raise ValueError(
                f"need 1 <= recent_samples <= max_samples - 2, got recent_samples "
                f"{recent_samples} and max_samples {max_samples}"
            )
        self._max = max_samples
        self._recent = recent_samples
        self._slack = max(2, (max_samples - recent_samples) // 4)
        self._buf = array("q")
        self._last_seen_ms = 0
        self._resets = 0

    def __len__(self) -> int:
        """Number of stored samples (a flat run's open end is not one of them)."""
        return len(self._buf) >> 1

    @property
    def max_samples(self) -> int:
        return self._max

    @property
    def recent_samples(self) -> int:
        return self._recent

    @property
    def resets(self) -> int:
        """How many times a falling log end (recreated/truncated topic) wiped the history."""
        return self._resets

    def clear(self) -> None:
        self._buf = array("q")
        self._last_seen_ms = 0

    def record(self, time_ms: int, log_end_offset: int) -> bool:
        """Add a sample; returns False when it was ignored (not newer than the latest one).

        A log end lower than the previous one cannot happen to a live partition, so it means
        the topic was recreated or truncated: offsets before and after are unrelated, and the
        history restarts from this sample.
        """
        if log_end_offset < 0:
            raise ValueError(f"log end offset must be >= 0, got {log_end_offset}")
        buf = self._buf
        if not buf:
            self._push(time_ms, log_end_offset)
            self._last_seen_ms = time_ms
            return True
        if time_ms <= self._last_seen_ms:
            return False
        last_time, last_offset = buf[-2], buf[-1]
        if log_end_offset == last_offset:
            self._last_seen_ms = time_ms
            return True
        if log_end_offset < last_offset:
            self.clear()
            self._resets += 1
            self._push(time_ms, log_end_offset)
            self._last_seen_ms = time_ms
            return True
        if self._last_seen_ms > last_time:
            self._push(self._last_seen_ms, last_offset)
        self._push(time_ms, log_end_offset)
        self._last_seen_ms = time_ms
        return True

    def latest(self) -> tuple[int, int] | None:
        """(time_ms, log_end_offset) of the most recent sample, None before the first one."""
        if not self._buf:
            return None
        return self._last_seen_ms, self._buf[-1]

    def first(self) -> tuple[int, int] | None:
        """(time_ms, log_end_offset) of the oldest sample still held."""
        if not self._buf:
            return None
        return self._buf[0], self._buf[1]

    def samples(self) -> list[tuple[int, int]]:
        """Stored samples oldest first, plus the open end of the current flat run if any."""
        buf = self._buf
        out = list(zip(buf[0::2], buf[1::2], strict=True))
        if out and self._last_seen_ms > out[-1][0]:
            out.append((self._last_seen_ms, out[-1][1]))
        return out

    def unchanged_since_ms(self) -> int | None:
        """First time the current log end was seen, if it has been seen at least twice.

        None when the latest sample moved the log end (or there is no sample): then it is only
        known to have changed somewhere between the last two samples.
        """
        if not self._buf:
            return None
        run_start = self._buf[-2]
        return run_start if self._last_seen_ms > run_start else None

    def log_end_at(self, time_ms: int) -> int | None:
        """Log end as of `time_ms`: the last sample at or before it; None if before the history.

        For times after the latest sample this is the latest known value, not a guess.
        """
        buf = self._buf
        if not buf or time_ms < buf[0]:
            return None
        lo, hi = 0, (len(buf) >> 1) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if buf[2 * mid] <= time_ms:
                lo = mid
            else:
                hi = mid - 1
        return buf[2 * lo + 1]

    def lag_at(self, time_ms: int, offset: int) -> int | None:
        """Lag as of `time_ms` of a consumer at `offset`: `log_end_at(time_ms) - offset`,
        clamped at 0; None when unknown.

        Before the oldest sample the log end is unknown but bounded: a log end never goes
        down, so it was at most the oldest sample's. When that is no higher than `offset`,
        the lag then was 0, not unknown. This is what a partition first committed after the
        exporter started needs: its history begins a sample after that commit. Read as
        unknown, "behind at window start" held there but not at the next boundary (caught
        up on its first sample), so a consumer stalled from its first commit went STALL, OK,
        STALL (docs/status-rules.md). A reset history (a recreated topic) bounds nothing
        before its reset.
        """
        end = self.log_end_at(time_ms)
        if end is not None:
            return end - offset if end > offset else 0
        buf = self._buf
        if buf and not self._resets and buf[1] <= offset:
            return 0
        return None

    def produce_time_ms(self, offset: int) -> ProduceTime | None:
        """When the message AT `offset` was appended (the next one a consumer there would read).

        None when no sample has a log end above `offset` (the consumer is caught up as far as
        we know). Otherwise interpolates between the last sample with log_end <= offset and
        the first with log_end > offset; never extrapolates outside the history.
        """
        buf = self._buf
        if not buf or offset >= buf[-1]:
            return None
        lo = _first_sample_past(buf, offset)
        if lo == 0:
            return ProduceTime(buf[0], is_lower_bound=True)
        t_before, end_before = buf[2 * lo - 2], buf[2 * lo - 1]
        t_after, end_after = buf[2 * lo], buf[2 * lo + 1]
        # The n = end_after - end_before messages arrived somewhere in (t_before, t_after];
        # for arrivals spread uniformly the k-th of n lands on average at k/(n+1) of the gap.
        # That keeps a lone message in a gap at the midpoint instead of at either end.
        k = offset - end_before + 1
        n = end_after - end_before
        return ProduceTime(t_before + (t_after - t_before) * k // (n + 1), is_lower_bound=False)

    def lag_s(self, offset: int, now_ms: int) -> float:
        """`lag_seconds(self, offset, now_ms).seconds` without its two objects.

        The snapshot asks this for every tracked partition, every build: the dataclass
        instances of `produce_time_ms` and `lag_seconds` were ~19% of a catch-up's CPU.
        The same search and arithmetic as those two (a test checks them against each other).
        """
        buf = self._buf
        if not buf or offset >= buf[-1]:
            return 0.0
        lo = _first_sample_past(buf, offset)
        if lo == 0:
            produced = buf[0]
        else:
            t_before, end_before = buf[2 * lo - 2], buf[2 * lo - 1]
            t_after = buf[2 * lo]
            k = offset - end_before + 1
            n = buf[2 * lo + 1] - end_before
            produced = t_before + (t_after - t_before) * k // (n + 1)
        age_ms = now_ms - produced
        return age_ms / 1000.0 if age_ms > 0 else 0.0

    def _push(self, time_ms: int, log_end_offset: int) -> None:
        if len(self._buf) >= 2 * self._max:
            self._thin(time_ms)
        self._buf.append(time_ms)
        self._buf.append(log_end_offset)

    def _thin(self, now_ms: int) -> None:
        """Drop older samples (see the class docs) until `_slack` slots are free."""
        buf = self._buf
        recent_from = (len(buf) >> 1) - self._recent
        times = buf[0 : 2 * recent_from : 2].tolist()
        divisor = THINNING_DIVISOR
        # Walk from the newest thinnable sample to the oldest, dropping sample i when the gap
        # between its older neighbour and the youngest sample kept so far stays small enough.
        # Dropped samples come in runs, each removed with one slice deletion (a memmove); a
        # run above the current index never shifts the samples still to be looked at.
        younger_at = recent_from
        younger = buf[2 * recent_from]
        kept = 1  # the oldest sample, unless the room runs out below
        for i in range(recent_from - 1, 0, -1):
            if divisor * (younger - times[i - 1]) > now_ms - younger:
                if younger_at > i + 1:
                    del buf[2 * i + 2 : 2 * younger_at]
                younger_at = i
                younger = times[i]
                kept += 1
        if younger_at > 1:
            del buf[2 : 2 * younger_at]
        # Beyond the room the oldest go: the history then starts later, as a plain ring would.
        excess = kept - (self._max - self._slack - self._recent)
        if excess > 0:
            del buf[: 2 * excess]


def lag_seconds(history: LogEndHistory, committed_offset: int, now_ms: int) -> LagSeconds:
    """Age of the message at `committed_offset` at `now_ms`, in seconds.

    0.0 when the consumer is at (or past) the latest sampled log end: a caught-up consumer of
    an idle topic stays at 0 forever. Otherwise now minus the interpolated append time,
    clamped at 0 (clock skew) and, because the append time is never earlier than the oldest
    sample, never more than now minus the oldest sample. A stopped consumer on an idle topic
    therefore sees its lag grow with wall time, which is true: the message it has not read
    has been waiting that long.
    """
    latest = history.latest()
    if latest is None:
        return LagSeconds(0.0, is_lower_bound=True)
    if committed_offset >= latest[1]:
        return LagSeconds(0.0, is_lower_bound=False)
    produced = history.produce_time_ms(committed_offset)
    if produced is None:  # pragma: no cover - excluded by the latest() check above
        return LagSeconds(0.0, is_lower_bound=False)
    age_ms = max(0, now_ms - produced.time_ms)
    return LagSeconds(age_ms / 1000.0, produced.is_lower_bound)


def _first_sample_past(buf: array[int], offset: int) -> int:
    """Index of the first (time, log end) sample of `buf` whose log end is past `offset`
    (the caller has checked that the newest one is)."""
    lo, hi = 0, (len(buf) >> 1) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if buf[2 * mid + 1] > offset:
            hi = mid
        else:
            lo = mid + 1
    return lo
