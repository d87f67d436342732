"""LeaderBackoff: when a leader that answered nothing is asked again."""

from __future__ import annotations

from offsetwatch.exporter.sources.leader_backoff import LeaderBackoff


def test_a_silent_leader_is_skipped_then_probed_less_and_less_often() -> None:
    backoff = LeaderBackoff()
    assert backoff.plan(2, 0.0) == "ask"
    delays = [backoff.silent(2, 0.0) for _ in range(7)]
    assert delays == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0, 60.0]
    assert backoff.plan(2, 59.9) == "skip"
    assert backoff.retry_in_s(2, 50.0) == 10.0
    assert backoff.plan(2, 60.0) == "probe"
    assert backoff.plan(3, 0.0) == "ask"  # another leader is not affected
    assert backoff.silent_leaders == (2,)


def test_an_answer_or_a_new_leader_ends_the_backoff() -> None:
    backoff = LeaderBackoff()
    backoff.silent(2, 0.0)
    assert backoff.answered(2) is True
    assert backoff.answered(2) is False
    assert backoff.plan(2, 1.0) == "ask"
    backoff.silent(2, 0.0)
    backoff.silent(3, 0.0)
    backoff.keep_only({3})  # the metadata names other leaders for 2's partitions
    assert backoff.silent_leaders == (3,)
    assert backoff.silent(2, 0.0) == 5.0  # starts over
