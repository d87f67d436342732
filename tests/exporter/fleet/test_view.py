"""The fleet view: owners by partition and by group (the coordinator's formula), unowned
partitions, members that are no replica, and a failed description that keeps the last view."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.fleet.identity import ReplicaIdentity
from offsetwatch.exporter.fleet.view import FleetWatch

TOPIC = "__consumer_offsets"


def _member(client_id: str, partitions: list[int], topic: str = TOPIC) -> Any:
    tps = [SimpleNamespace(topic=topic, partition=p) for p in partitions]
    return SimpleNamespace(
        member_id=f"m-{client_id}",
        client_id=client_id,
        host="/10.0.0.1",
        assignment=SimpleNamespace(topic_partitions=tps),
    )


A = ReplicaIdentity("a", "http://a:9380")
B = ReplicaIdentity("b", "http://b:9380")


def test_owners_unowned_and_members_that_are_no_replica() -> None:
    members = [
        _member(A.client_id(), [0, 1, 2]),
        _member(B.client_id(), [3, 4]),
        _member("rdkafka", [5]),  # someone else's consumer in the fleet's group
        _member(B.client_id(), [9], topic="other"),
    ]
    watch = FleetWatch("fleet", TOPIC, lambda _f: ("STABLE", members), lambda: 8)
    view = watch.refresh()
    assert view.state == "STABLE" and view.error is None
    owner = view.owner_of_partition(3)
    assert owner is not None and owner.replica == B
    assert view.unowned() == (6, 7)
    assert [m.replica for m in view.replicas()] == [A, B, B]
    stranger = view.owner_of_partition(5)
    assert stranger is not None and stranger.replica is None
    group = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 8) == 1)
    by_group = view.owner_of_group(group)
    assert by_group is not None and by_group.replica == A


def test_a_failed_description_keeps_the_last_view_and_says_why_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[Any] = [("STABLE", [_member(A.client_id(), [0, 1])])]

    def describe(_fleet: str) -> tuple[str, list[Any]]:
        answer = answers[-1]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    watch = FleetWatch("fleet", TOPIC, describe, lambda: 2, clock_ms=lambda: 1000)
    first = watch.refresh()
    answers.append(RuntimeError("coordinator not available"))
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            failed = watch.refresh()
    assert failed.error == "coordinator not available"
    assert failed.members == first.members and failed.time_ms == 1000
    assert failed.owner_of_partition(1) is not None
    assert watch.failures_total == 3
    assert caplog.text.count("describing the group failed") == 1
    answers.append(("STABLE", []))
    with caplog.at_level(logging.INFO):
        empty = watch.refresh()
    assert empty.error is None and empty.unowned() == (0, 1)
    assert "can be described again" in caplog.text


def test_no_partition_count_yet_owns_no_group() -> None:
    watch = FleetWatch("fleet", TOPIC, lambda _f: ("EMPTY", []), lambda: 0)
    assert watch.refresh().owner_of_group("g") is None


def test_replicas_with_other_settings_are_said_once_per_change_naming_who_is_out_of_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    me = ReplicaIdentity("a", "http://a:9380", "aaaaaaaaaaaa")
    same = ReplicaIdentity("b", "http://b:9380", "aaaaaaaaaaaa")
    other = ReplicaIdentity("c", "http://c:9380", "cccccccccccc")
    older = ReplicaIdentity("d", "http://d:9380", None)
    answers: list[list[Any]] = [
        [_member(me.client_id(), [0]), _member(same.client_id(), [1])],
        [
            _member(me.client_id(), [0]),
            _member(same.client_id(), [1]),
            _member(other.client_id(), [2]),
        ],
    ]
    watch = FleetWatch("fleet", TOPIC, lambda _f: ("STABLE", answers[0]), lambda: 4, me=me)
    with caplog.at_level(logging.INFO):
        view = watch.refresh()
    assert view.mismatched(me.fingerprint) == ()
    assert "settings" not in caplog.text
    answers.pop(0)
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            view = watch.refresh()
    assert [m.replica for m in view.mismatched(me.fingerprint)] == [other]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    line = warnings[0].getMessage()
    assert "\n" not in line
    assert "c (cccccccccccc)" in line and "they are out of step" in line
    # a replica in the minority says it is the one out of step
    lone = FleetWatch("fleet", TOPIC, lambda _f: ("STABLE", answers[0]), lambda: 4, me=other)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        lone.refresh()
    assert "this replica c (cccccccccccc)" in caplog.text
    assert "this replica is out of step" in caplog.text
    # a change of who differs is said again; an older replica announcing none differs too
    answers[0].append(_member(older.client_id(), [3]))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        view = watch.refresh()
        watch.refresh()
    assert caplog.text.count("export with other settings") == 1
    assert "d (none (an offsetwatch that announces no settings))" in caplog.text
    assert {m.replica.name for m in view.mismatched(me.fingerprint) if m.replica} == {"c", "d"}
    # agreement again: one INFO
    answers[0] = [_member(me.client_id(), [0, 1, 2, 3])]
    caplog.clear()
    with caplog.at_level(logging.INFO):
        watch.refresh()
        watch.refresh()
    assert caplog.text.count("same settings again") == 1


def test_a_tie_of_settings_names_no_side() -> None:
    from offsetwatch.exporter.fleet.view import FleetMember, FleetView, mismatch_line

    me = ReplicaIdentity("a", "http://a:1", "aaaaaaaaaaaa")
    other = ReplicaIdentity("b", "http://b:1", "bbbbbbbbbbbb")
    view = FleetView.of(
        "fleet",
        1,
        "STABLE",
        [
            FleetMember("1", me.client_id(), "/h", me, (0,)),
            FleetMember("2", "x", "/h", other, (1,)),
        ],
        2,
    )
    assert "for the operator to say" in mismatch_line(view, me)
