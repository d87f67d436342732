"""Tunables of the Spark analytics; the status rules and their thresholds are the exporter's.

`status` is the exporter's own `StatusConfig` (offsetwatch/core/status.py,
docs/status-rules.md), so a history replayed here gets the statuses the live exporter would
have shown. The other thresholds (lag SLO, rebalance storms, commit-rate anomalies) exist
only in the analytics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offsetwatch.core.status import DEFAULT_STATUS_CONFIG, StatusConfig

DEFAULT_WINDOW_SIZES_MS = (60_000, 300_000, 3_600_000)


@dataclass(frozen=True, slots=True)
class AnalyticsSettings:
    status: StatusConfig = field(default_factory=lambda: DEFAULT_STATUS_CONFIG)
    #: statuses are evaluated on a grid of this step (epoch-aligned); it must divide the status
    #: window so "the window start" of a tick is itself a tick
    tick_ms: int = 60_000
    #: sizes of the tumbling windows of the per-partition statistics
    window_sizes_ms: tuple[int, ...] = DEFAULT_WINDOW_SIZES_MS
    #: a lag-SLO episode is a run of ticks whose lag in seconds is above this
    lag_slo_seconds: float = 300.0
    #: a rebalance storm: at least this many rebalances within `storm_window_ms`
    storm_rebalances: int = 5
    storm_window_ms: int = 600_000
    #: the diagnosis blames no member within this long after a rebalance (ownership changes)
    rebalance_grace_ms: int = 60_000
    #: commit-rate anomalies compare a group's commits per `rate_window_ms` with the mean of
    #: the non-empty windows of the trailing `rate_baseline_windows` windows
    rate_window_ms: int = 300_000
    rate_baseline_windows: int = 12
    #: fewer non-empty trailing windows than this: no baseline, no anomaly
    rate_min_baseline_windows: int = 6
    rate_low_ratio: float = 0.25
    rate_high_ratio: float = 4.0
    #: a baseline below this many commits per window is too thin to judge
    rate_min_baseline_commits: float = 10.0
    #: share groups: a record past the start offset delivered this often (or archived) is
    #: poison (Kafka's default group.share.delivery.count.limit)
    poison_limit: int = 5
    #: only history up to here is read (epoch ms; None: to the end of the data)
    until_ms: int | None = None
    #: outputs start here (epoch ms); history before it still builds the state
    since_ms: int | None = None

    def __post_init__(self) -> None:
        if self.tick_ms <= 0 or self.status.window_ms % self.tick_ms:
            raise ValueError(
                f"tick_ms ({self.tick_ms}) must be > 0 and divide the status window "
                f"({self.status.window_ms} ms)"
            )
        for size in self.window_sizes_ms:
            if size <= 0 or size % self.tick_ms:
                raise ValueError(f"window size {size} ms must be a multiple of tick_ms")
        if self.rate_window_ms <= 0 or self.rate_window_ms % self.tick_ms:
            raise ValueError(f"rate_window_ms {self.rate_window_ms} must be a multiple of tick_ms")
        if self.storm_rebalances < 2 or self.storm_window_ms <= 0:
            raise ValueError("a storm needs storm_rebalances >= 2 within storm_window_ms > 0")
        if self.rate_min_baseline_windows < 1 or self.rate_baseline_windows < 1:
            raise ValueError("rate baselines need at least one window")
        if self.poison_limit < 1:
            raise ValueError(f"poison_limit must be >= 1, got {self.poison_limit}")
        if self.lag_slo_seconds < 0:
            raise ValueError(f"lag_slo_seconds must be >= 0, got {self.lag_slo_seconds}")
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms > self.until_ms
        ):
            raise ValueError("since_ms is after until_ms")

    @property
    def window_ticks(self) -> int:
        """The status window in ticks."""
        return self.status.window_ms // self.tick_ms
