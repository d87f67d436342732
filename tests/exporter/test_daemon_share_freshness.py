"""The main loop's part in the share state's freshness, with the readers stubbed (no Kafka):
which `__share_group_state` partitions it publishes to the sampler, and that a topic created
while it runs (with the first share group) ages from then, not from the start."""

from __future__ import annotations

from dataclasses import dataclass, field

from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter

HOUR_MS = 3_600_000


@dataclass(slots=True)
class _Source:
    """What `_update_freshness` asks of a reader's source."""

    assigned: set[int] = field(default_factory=set)
    partitions: int = 0

    def assigned_partitions(self) -> set[int]:
        return set(self.assigned)

    def partition_count(self) -> int:
        return self.partitions


@dataclass(slots=True)
class _Reader:
    source: _Source


def _exporter(now: list[int]) -> tuple[Exporter, _Reader, _Reader]:
    exp = Exporter(ExporterConfig(bootstrap_servers="127.0.0.1:1"), clock_ms=lambda: now[0])
    offsets, share = _Reader(_Source({0}, 1)), _Reader(_Source())
    exp.readers.share = share  # type: ignore[assignment]
    exp.readers.request_sample = lambda: None  # a sampler is wired: staleness is judged
    exp.store.freshness.since_ms = exp.store.share_freshness.since_ms = now[0]
    return exp, offsets, share


def test_no_share_state_topic_publishes_nothing_and_tracks_nothing() -> None:
    now = [HOUR_MS]
    exp, offsets, _share = _exporter(now)
    now[0] += 2 * HOUR_MS
    exp._update_freshness(offsets)  # type: ignore[arg-type]
    assert exp.share_state_partitions() == frozenset()
    assert exp.stats.share_state_freshness.tracked == ()
    assert exp.stats.share_state_freshness.stale(now[0]) == []


def test_a_share_state_topic_created_while_running_ages_from_then() -> None:
    now = [HOUR_MS]
    exp, offsets, share = _exporter(now)
    exp._update_freshness(offsets)  # type: ignore[arg-type]
    now[0] += 2 * HOUR_MS  # the first share group, two hours after the start
    share.source.assigned, share.source.partitions = {0, 1, 2}, 3
    exp._update_freshness(offsets)  # type: ignore[arg-type]
    assert exp.share_state_partitions() == frozenset({0, 1, 2})
    freshness = exp.stats.share_state_freshness
    assert freshness.tracked == (0, 1, 2) and freshness.partition_count == 3
    assert freshness.stale(now[0]) == [] and freshness.age_s(0, now[0]) == 0.0
    # a round confirms partitions 0 and 1 (empty, read to their end); none answers for 2
    exp.on_share_state_ends(now[0], {0: 0, 1: 0}, {2: "NOT_LEADER_OR_FOLLOWER: no leader"})
    exp._apply_samples()
    now[0] += 20_000
    exp.on_share_state_ends(now[0], {0: 0, 1: 0}, {2: "NOT_LEADER_OR_FOLLOWER: no leader"})
    exp._apply_samples()
    now[0] += 11_000  # 31 s after it appeared: past --stale-after-s (30 s)
    exp._update_freshness(offsets)  # type: ignore[arg-type]
    (stale,) = exp.stats.share_state_freshness.stale(now[0])
    assert (stale.partition, stale.age_s, stale.confirmed_ms) == (2, 31.0, 0)
    assert stale.cause == (
        "its leader did not answer for its log end: NOT_LEADER_OR_FOLLOWER: no leader"
    )
