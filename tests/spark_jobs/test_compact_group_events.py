"""Group events from group records (pure Python): rebalances, joins, leaves, deletions,
migrations, KIP-848, and the same events whether a history is applied whole or in parts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.cli import main
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.spark_jobs.lake_group_events import GroupEvent, GroupState, events_for_group
from tests.conformance_data import decode_run
from tests.spark_jobs.lake_records import classic, group_tombstone


def _kinds(events: list[GroupEvent]) -> list[tuple[str, str | None, int | None]]:
    return [(e.event, e.member_id, e.generation) for e in events]


def test_classic_rebalances_joins_leaves_and_deletion() -> None:
    history = [
        classic("g", 0, [], 1_000, 0),
        classic("g", 1, ["a"], 1_100, 1),
        classic("g", 2, ["a", "b"], 1_200, 2),
        classic("g", 3, ["b"], 1_300, 3),
        classic("g", 4, [], 1_400, 4),
        group_tombstone("g", 1_500, 5),
    ]
    events = events_for_group("g", GroupState(), history)
    assert _kinds(events) == [
        ("state", None, 0),
        ("generation", None, 1),
        ("member_join", "a", 1),
        ("state", None, 1),
        ("generation", None, 2),
        ("member_join", "b", 2),
        ("generation", None, 3),
        ("member_leave", "a", 3),
        ("generation", None, 4),
        ("member_leave", "b", 4),
        ("state", None, 4),
        ("group_deleted", None, 4),
    ]
    assert [e.state for e in events if e.event == "state"] == ["Empty", "Stable", "Empty"]
    assert events[2].client_id == "client-a"
    assert events[-1].state == "Dead"


def test_migration_is_not_a_deletion() -> None:
    upgrade: dict[str, Any] = {
        "type": "consumer_group_metadata",
        "tombstone": False,
        "timestamp": 2_000,
        "partition": 0,
        "offset": 3,
        "key": {"group_id": "g"},
        "value": {"epoch": 5},
    }
    history = [classic("g", 1, ["a"], 1_000, 0), group_tombstone("g", 2_000, 2), upgrade]
    events = events_for_group("g", GroupState(), history)
    assert "group_deleted" not in [e.event for e in events]
    migrated = [e for e in events if e.state == "Migrated"]
    assert migrated and migrated[0].detail == '{"from":"classic","to":"consumer"}'
    assert events[-1].event == "generation" and events[-1].group_type == "consumer"


def test_reapplied_records_change_nothing() -> None:
    history = [classic("g", 1, ["a"], 1_000, 0), classic("g", 2, ["a", "b"], 1_100, 1)]
    state = GroupState()
    first = events_for_group("g", state, history)
    assert first and events_for_group("g", state, history) == []


def _canonical_run(conformance_dir: Path) -> dict[str, list[dict[str, Any]]]:
    canonical = Canonical()
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in decode_run(conformance_dir, "main"):
        data = canonical.to_dict(record)
        if data["group"] is not None:
            groups.setdefault(data["group"], []).append(data)
    return groups


def test_kafka_history_whole_or_in_two_parts(conformance_dir: Path) -> None:
    for group, records in _canonical_run(conformance_dir).items():
        whole = events_for_group(group, GroupState(), records)
        state = GroupState()
        half = len(records) // 2
        first = events_for_group(group, state, records[:half])
        resumed = GroupState.from_json(state.to_json())
        assert first + events_for_group(group, resumed, records[half:]) == whole, group


def test_kafka_kip848_group_lifecycle(conformance_dir: Path) -> None:
    groups = _canonical_run(conformance_dir)
    kinds = {
        e.event
        for group, records in groups.items()
        for e in events_for_group(group, GroupState(), records)
        if e.group_type == "consumer"
    }
    assert kinds == {
        "generation",
        "member_join",
        "member_leave",
        "assignment",
        "state",
        "group_deleted",
    }
    share = [
        e
        for group, records in groups.items()
        for e in events_for_group(group, GroupState(), records)
        if e.group_type == "share" and e.event == "assignment"
    ]
    assert share and all(e.detail and '"topic":' in e.detail for e in share)


RELEASES = Path(__file__).resolve().parent.parent / "data" / "releases"


def _release_records(version: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """What a real Kafka Streams application made Kafka `version` write, decoded as
    `offsetwatch decode --input segments` gives it."""
    capsys.readouterr()
    assert main(
        ["decode", "--input", "segments", str(RELEASES / version / "__consumer_offsets-0")]
    ) in (0, None)
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]


def _dump_log_members(version: str, group: str) -> list[tuple[str, bool]]:
    """(member id, deleted) of each StreamsGroupMemberMetadata record (key type 19) in the
    release's own kafka-dump-log.sh --offsets-decoder text, in log order."""
    text = RELEASES / version / "dumplog.txt"
    out = []
    for match in re.finditer(
        r'key: (\{"type":"19".*?\}\}) payload: (<DELETE>|\{)', text.read_text()
    ):
        key = json.loads(match.group(1))["data"]
        if key["groupId"] == group:
            out.append((key["memberId"], match.group(2) == "<DELETE>"))
    return out


def test_a_real_streams_application_joins_and_leaves_as_kafka_wrote_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kafka 4.4.0's records of a real Kafka Streams application (tests/data/releases): the
    member's join and leave follow its member records in Kafka's own dump-log."""
    capture = json.loads((RELEASES / "4.4.0" / "capture.json").read_text())
    group = capture["groups"]["streams"]
    records = [r for r in _release_records("4.4.0", capsys) if r.get("group") == group]
    events = events_for_group(group, GroupState(), records)
    kafka = _dump_log_members("4.4.0", group)
    assert kafka and kafka[-1][1], "the capture's member left"
    joins = [e.member_id for e in events if e.event == "member_join"]
    leaves = [e.member_id for e in events if e.event == "member_leave"]
    assert joins == [m for m, deleted in kafka if not deleted][:1]
    assert leaves == [m for m, deleted in kafka if deleted]
    assert {e.group_type for e in events} == {"streams"}
    assert events[-1].state == "Empty"
