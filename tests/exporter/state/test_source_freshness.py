"""When the cluster confirms a `__consumer_offsets` partition's state, and when it is stale."""

from __future__ import annotations

import random

from offsetwatch.exporter.state.source_freshness import PENDING_KEPT, SourceFreshness

STALE_AFTER_MS = 30_000


def test_a_log_end_already_reached_confirms_at_once() -> None:
    fresh = SourceFreshness(since_ms=1_000)
    fresh.on_positions({0: 10, 1: 5})
    fresh.on_log_ends(2_000, {0: 10, 1: 7}, {})
    assert fresh.confirmed_ms == {0: 2_000}
    # partition 1 is confirmed as of the sample once the reader gets there, not before
    fresh.on_positions({1: 6})
    assert 1 not in fresh.confirmed_ms
    fresh.on_positions({1: 9})
    assert fresh.confirmed_ms[1] == 2_000
    assert not fresh.pending


def test_the_latest_reached_sample_wins_and_later_ones_wait() -> None:
    fresh = SourceFreshness()
    for time_ms, end in ((1_000, 10), (2_000, 20), (3_000, 30)):
        fresh.on_log_ends(time_ms, {0: end}, {})
    fresh.on_positions({0: 25})
    assert fresh.confirmed_ms[0] == 2_000
    assert [end for _t, end in fresh.pending[0]] == [30]


def test_an_end_of_partition_confirms_at_the_time_it_was_taken() -> None:
    fresh = SourceFreshness()
    fresh.on_log_ends(1_000, {0: 12}, {})
    # a transaction marker at 11: no record stands for offset 11, the end says 12
    fresh.on_positions({0: 11})
    assert 0 not in fresh.confirmed_ms
    fresh.on_ends({0: 12}, 1_500)
    assert fresh.confirmed_ms[0] == 1_500
    assert not fresh.pending


def test_no_answer_and_not_reading_are_told_apart() -> None:
    fresh = SourceFreshness(since_ms=0)
    fresh.on_positions({0: 5, 1: 5, 2: 5})
    fresh.on_log_ends(1_000, {0: 5, 1: 5, 2: 5}, {})
    # partition 1 loses its leader; partition 2 gets commits the reader never reads
    fresh.on_log_ends(2_000, {0: 5, 2: 9}, {1: "NOT_LEADER_OR_FOLLOWER: no leader"})
    view = fresh.view({0, 1, 2}, 3, STALE_AFTER_MS, "TOPIC_AUTHORIZATION_FAILED: denied")
    assert view.confirmed_ms == {0: 2_000, 1: 1_000, 2: 1_000}
    assert "did not answer" in view.causes[1] and "no leader" in view.causes[1]
    assert "not read up to the log end its leader answered (9" in view.causes[2]
    assert "TOPIC_AUTHORIZATION_FAILED" in view.causes[2]
    assert 0 not in view.causes
    now = 1_000 + STALE_AFTER_MS + 1
    assert [s.partition for s in view.stale(now)] == [1, 2]
    assert not view.is_stale(0, now)
    # an answer again, and the reader at the end: fresh
    fresh.on_log_ends(now, {1: 5}, {})
    fresh.on_positions({2: 9})
    assert fresh.view({0, 1, 2}, 3, STALE_AFTER_MS).stale(now) == []


def test_never_confirmed_ages_from_the_start() -> None:
    fresh = SourceFreshness(since_ms=10_000)
    view = fresh.view({0}, 1, STALE_AFTER_MS)
    assert view.causes[0] == "no log end answered yet"
    assert view.age_s(0, 25_000) == 15.0
    assert not view.stale(10_000 + STALE_AFTER_MS)
    assert view.stale(10_001 + STALE_AFTER_MS)[0].confirmed_ms == 0


def test_no_limit_means_never_stale() -> None:
    view = SourceFreshness(since_ms=0).view({0}, 1, 0)
    assert view.stale(10**12) == []


def test_reset_and_forget() -> None:
    fresh = SourceFreshness()
    fresh.on_positions({0: 3, 1: 3})
    fresh.on_log_ends(1_000, {0: 3, 1: 4}, {})
    fresh.forget(1)
    assert 1 not in fresh.pending and 1 not in fresh.positions
    fresh.reset(5_000)
    assert (fresh.confirmed_ms, fresh.positions, fresh.since_ms) == ({}, {}, 5_000)


def test_confirmation_never_claims_more_than_was_read() -> None:
    """Generated: whatever the order of samples and reads, a partition confirmed as of T has
    read at least the log end of some sample taken at T."""
    rng = random.Random(20261203)
    for _ in range(300):
        fresh = SourceFreshness()
        end = position = 0
        samples: dict[int, int] = {}
        for step in range(rng.randint(1, 60)):
            time_ms = 1_000 * (step + 1)
            action = rng.random()
            if action < 0.4:
                end += rng.randint(0, 5)
                fresh.on_log_ends(time_ms, {0: end}, {})
                samples[time_ms] = end
            elif action < 0.5:
                fresh.on_log_ends(time_ms, {}, {0: "timed out"})
            else:
                position = min(end, position + rng.randint(0, 6))
                fresh.on_positions({0: position})
            confirmed = fresh.confirmed_ms.get(0)
            if confirmed is not None:
                assert samples[confirmed] <= position
            assert len(fresh.pending.get(0, ())) <= PENDING_KEPT
