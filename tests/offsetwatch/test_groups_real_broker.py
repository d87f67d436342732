"""`offsetwatch groups list|describe` against `kafka-consumer-groups.sh` on the real broker.

The same groups, seen by both tools at once, compared field by field: a classic group and a
KIP-848 group (two live members each, subscribed to two topics, so assignments span topics and
some assigned partitions have no commit) and an Empty group that only holds offsets. The groups
are frozen while the module runs: offsets are committed before the members join, the members
never commit, and nothing is produced after the start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from offsetwatch.cli import main
from tests.offsetwatch.kafka_tool import (
    live_members,
    parse_table,
    settled,
    tools_in_parallel,
    wait_for,
)
from tests.real_broker import Broker, require_kip848_groups, unique

pytestmark = pytest.mark.broker

#: records per partition of the two topics
COUNTS = {"t1": [5, 7, 9], "t2": [3, 4]}
PARTITIONS = sum(len(c) for c in COUNTS.values())


@dataclass(frozen=True, slots=True)
class Scene:
    broker: Broker
    topics: dict[str, str]  # short name -> unique topic name
    classic: str
    kip848: str
    empty: str
    kafka: dict[str, str]  # view -> Kafka's tool output, read once the groups settled

    @property
    def groups(self) -> list[str]:
        return [self.classic, self.kip848, self.empty]


@pytest.fixture(scope="module")
def scene(kafka_broker: Broker) -> Iterator[Scene]:
    require_kip848_groups()  # the scene compares a KIP-848 group beside a classic one
    topics = {short: unique(short) for short in COUNTS}
    for short, counts in COUNTS.items():
        kafka_broker.create_topic(topics[short], len(counts))
        kafka_broker.produce(topics[short], counts)
    t1, t2 = topics["t1"], topics["t2"]
    classic, kip848, empty = unique("classic"), unique("kip848"), unique("empty")
    # t1:2 and t2:1 stay without a commit: owned but "-" in CURRENT-OFFSET and LAG
    for group in (classic, kip848, empty):
        kafka_broker.commit(group, {(t1, 0): 1, (t1, 1): 2, (t2, 0): 3}, metadata="m")
    with live_members(kafka_broker) as members:
        for group, protocol in ((classic, "classic"), (kip848, "consumer")):
            for n in (1, 2):
                members.join(group, [t1, t2], f"{protocol}{n}", protocol)
        for group in (classic, kip848):
            wait_for(
                partial(settled, kafka_broker, group, 2, PARTITIONS),
                f"{group} stable with 2 members owning {PARTITIONS} partitions",
            )
        named = [arg for g in (classic, kip848, empty) for arg in ("--group", g)]
        views = {
            "offsets": ["--describe", *named],
            "members": ["--describe", *named, "--members", "--verbose"],
            "state": ["--describe", *named, "--state"],
            "list": ["--list", "--state", "--type"],
        }
        answers = tools_in_parallel(kafka_broker, list(views.values()))
        outputs = dict(zip(views, answers, strict=True))
        yield Scene(kafka_broker, topics, classic, kip848, empty, outputs)


def ours(capsys: pytest.CaptureFixture[str], scene: Scene, *argv: str) -> Any:
    code = main([*argv, "--format", "json", "--bootstrap-server", scene.broker.bootstrap])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return json.loads(out)


def test_describe_offsets_field_by_field(scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    columns = {
        "TOPIC": "topic",
        "PARTITION": "partition",
        "CURRENT-OFFSET": "current_offset",
        "LOG-END-OFFSET": "log_end_offset",
        "LAG": "lag",
        "CONSUMER-ID": "consumer_id",
        "HOST": "host",
        "CLIENT-ID": "client_id",
    }
    kafka = {
        (row["GROUP"], row["TOPIC"], row["PARTITION"]): {k: row[k] for k in columns}
        for row in parse_table(scene.kafka["offsets"])
    }
    reports = ours(capsys, scene, "groups", "describe", *scene.groups)
    mine = {
        (report["group"], p["topic"], p["partition"]): {k: p[v] for k, v in columns.items()}
        for report in reports
        for p in report["partitions"]
    }
    assert mine == kafka
    # every partition of both topics in both live groups; the Empty group's three commits
    assert len(kafka) == 2 * PARTITIONS + 3
    t1 = scene.topics["t1"]
    assert kafka[(scene.classic, t1, 2)]["CURRENT-OFFSET"] is None  # owned, never committed
    assert {r["group"]: r["total_lag"] for r in reports} == {
        group: (5 - 1) + (7 - 2) + (3 - 3) for group in scene.groups
    }


def test_describe_members_field_by_field(scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    kafka = {
        (row["GROUP"], row["CONSUMER-ID"]): {
            "host": row["HOST"],
            "client_id": row["CLIENT-ID"],
            "partitions": row["#PARTITIONS"],
            "assignment": row["CURRENT-ASSIGNMENT"],
        }
        for row in parse_table(scene.kafka["members"])
    }
    rows = ours(capsys, scene, "groups", "describe", *scene.groups, "--members")
    mine = {
        (row["group"], row["consumer_id"]): {
            k: row[k] for k in ("host", "client_id", "partitions", "assignment")
        }
        for row in rows
    }
    assert mine == kafka
    assert sorted(str(g) for g, _ in kafka) == sorted([scene.classic] * 2 + [scene.kip848] * 2)
    # the describe view's member lists are the same members
    reports = ours(capsys, scene, "groups", "describe", *scene.groups)
    assert [m for r in reports for m in r["members"]] == rows


def test_describe_state_field_by_field(scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    kafka = {row["GROUP"]: row for row in parse_table(scene.kafka["state"])}
    rows = ours(capsys, scene, "groups", "describe", *scene.groups, "--state")
    mine = {
        row["group"]: {
            "COORDINATOR (ID)": row["coordinator_id"],
            "ASSIGNMENT-STRATEGY": row["assignment_strategy"],
            # Kafka's tool prints GroupState's display name (Stable); ours is upper case
            "STATE": row["state"].title(),
            "#MEMBERS": row["members"],
        }
        for row in rows
    }
    assert mine == {g: {k: v for k, v in row.items() if k != "GROUP"} for g, row in kafka.items()}
    assert {g: (r["ASSIGNMENT-STRATEGY"], r["STATE"]) for g, r in kafka.items()} == {
        scene.classic: ("range", "Stable"),
        scene.kip848: ("uniform", "Stable"),
        scene.empty: (None, "Empty"),
    }


def test_list_field_by_field(scene: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    # other tests' groups come and go on the shared broker: compare this module's own (and
    # a group Kafka does not list cannot match ours, which lists it)
    kafka = {
        row["GROUP"]: (str(row["TYPE"]).upper(), str(row["STATE"]).upper())
        for row in parse_table(scene.kafka["list"])
        if row["GROUP"] in scene.groups
    }
    listed = ours(capsys, scene, "groups", "list")
    mine = {
        row["group"]: (row["type"], row["state"]) for row in listed if row["group"] in scene.groups
    }
    assert mine == kafka
    assert kafka == {
        scene.classic: ("CLASSIC", "STABLE"),
        scene.kip848: ("CONSUMER", "STABLE"),
        scene.empty: ("CLASSIC", "EMPTY"),
    }
    simple = {row["group"]: row["simple"] for row in listed if row["group"] in scene.groups}
    assert simple == {scene.classic: "no", scene.kip848: "no", scene.empty: "yes"}
