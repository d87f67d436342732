"""The fleet's sink commits: their metadata, and the revocation's handshake between the
reader thread and the main loop (exporter/fleet/sink_commits.py)."""

from __future__ import annotations

import threading

from offsetwatch.exporter.fleet.sink_commits import (
    SINCE_PREFIX,
    RevokeHandshake,
    SinkCommit,
    is_sink_commit,
    parse_commit,
)


def test_a_commit_carries_its_bound_in_its_metadata() -> None:
    commit = SinkCommit(7, 120, 1_767_225_000_000)
    assert commit.metadata() == f"{SINCE_PREFIX}1767225000000"
    assert parse_commit(7, 120, commit.metadata()) == commit
    assert is_sink_commit(commit.metadata())


def test_offsets_that_are_none_of_ours_are_no_commit() -> None:
    assert parse_commit(1, 5, None) is None
    assert parse_commit(1, 5, "") is None
    assert parse_commit(1, 5, "an application's metadata") is None
    assert parse_commit(1, 5, f"{SINCE_PREFIX}soon") is None
    assert parse_commit(1, -1001, f"{SINCE_PREFIX}1") is None  # no offset committed
    assert not is_sink_commit(None) and not is_sink_commit("x")


def test_the_main_loop_answers_the_revocation_the_reader_thread_waits_on() -> None:
    handshake = RevokeHandshake(wait_s=30)
    answers: list[list[SinkCommit]] = []
    asking = threading.Thread(target=lambda: answers.append(handshake.ask([3, 1])))
    asking.start()
    while handshake.pending() is None:
        threading.Event().wait(0.01)
    assert handshake.pending() == (1, 3)
    handshake.answer([SinkCommit(1, 10, 5)])
    asking.join(30)
    assert answers == [[SinkCommit(1, 10, 5)]]
    assert handshake.pending() is None and handshake.timeouts_total == 0


def test_a_revocation_not_answered_in_time_commits_nothing_and_is_counted() -> None:
    handshake = RevokeHandshake(wait_s=0.01)
    assert handshake.ask([2]) == []
    assert handshake.timeouts_total == 1
    handshake.answer([SinkCommit(2, 1, 1)])  # too late: dropped
    assert handshake.pending() is None


def test_after_disable_nothing_waits() -> None:
    handshake = RevokeHandshake(wait_s=30)
    handshake.disable()
    assert handshake.ask([1]) == []
    assert handshake.timeouts_total == 0


def test_lost_partitions_are_taken_once() -> None:
    handshake = RevokeHandshake()
    handshake.note_lost([4, 2])
    handshake.note_lost([2])
    assert handshake.take_lost() == {2, 4}
    assert handshake.take_lost() == set()


def test_a_loss_handled_before_it_was_served_closes_nothing_afterwards() -> None:
    # lost and given back within one consume: the events came first
    handshake = RevokeHandshake()
    handshake.note_lost([3, 5])
    handshake.settled([3])
    assert handshake.take_lost() == {5}
