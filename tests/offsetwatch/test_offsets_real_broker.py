"""`offsetwatch offsets reset|migrate|export` on the real broker, against Kafka's own answers.

Every reset mode's plan is compared, partition by partition, with `kafka-consumer-groups.sh
--reset-offsets --dry-run` given the same arguments on the same group. The topic's records
carry chosen timestamps (hours apart, relative to the module's start) so that --to-datetime
and --by-duration land mid-partition; partition 0's first record is deleted so that the log
start is not 0 (clamping to it is visible); partition 2's records are all older than the time
(no record at or after it: the log end). Applying a plan, the refusals on live groups and a
migration are checked with Kafka's OffsetFetch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

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

HOUR_MS = 3_600_000
COUNTS = [10, 12, 8]
#: committed before any test: inside the log on every partition, shiftable both ways
COMMITTED = {0: 2, 1: 9, 2: 5}
#: the time the date/duration modes go to: 5 h 15 min before the module's start
BACK_MS = 5 * HOUR_MS + 15 * 60_000


def _timestamp(now_ms: int, partition: int, i: int) -> int:
    if partition == 0:
        return now_ms - (10 - i) * HOUR_MS  # 10 h ago .. 1 h ago: the time lands on 5
    if partition == 1:
        return now_ms - (12 - i) * HOUR_MS - HOUR_MS // 2  # 12.5 h .. 1.5 h ago: on 8
    return now_ms - 30 * HOUR_MS + i * 60_000  # all about 30 h ago: the log end


@dataclass(frozen=True, slots=True)
class Scene:
    broker: Broker
    topic: str
    time_iso: str  # the module's start minus BACK_MS

    def commit_fresh(self, prefix: str, metadata: str | None = None) -> str:
        group = unique(prefix)
        self.broker.commit(group, self.committed_keys(COMMITTED), metadata)
        return group

    def committed_keys(self, offsets: dict[int, int]) -> dict[tuple[str, int], int]:
        return {(self.topic, p): o for p, o in offsets.items()}


@pytest.fixture(scope="module")
def scene(kafka_broker: Broker) -> Scene:
    now_ms = int(time.time() * 1000)
    topic = unique("events")
    kafka_broker.create_topic(topic, len(COUNTS))
    kafka_broker.produce(topic, COUNTS, timestamp_ms=partial(_timestamp, now_ms))
    admin = kafka_broker.admin()  # kept alive until its future answers
    (deleted,) = admin.delete_records([TopicPartition(topic, 0, 1)], request_timeout=30).values()
    assert deleted.result(timeout=60).low_watermark == 1  # the log start of partition 0
    moment = datetime.fromtimestamp((now_ms - BACK_MS) / 1000, UTC)
    # Kafka's tool reads yyyy-MM-ddTHH:mm:ss.SSS with a zone (local time without one)
    return Scene(kafka_broker, topic, moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")


def ours(scene: Scene, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--bootstrap-server", scene.broker.bootstrap])
    out, err = capsys.readouterr()
    return code, out, err


def kafka_plan(output: str, group: str) -> dict[tuple[str, int], int]:
    # 3.9 prints "Warn: Partition 2 from topic T is empty. Falling back to latest known
    # offset." on stdout before its table (to-datetime on an empty partition), and the table
    # without line ends: the upper-case titles, then one row per title count, however laid
    lines = [line for line in output.splitlines() if not line.startswith("Warn:")]
    words = [w for line in lines for w in line.split()]
    width = next(i for i, w in enumerate(words) if not w.isupper())
    rows_text = [" ".join(words[i : i + width]) for i in range(0, len(words), width)]
    rows = parse_table("\n".join(rows_text))
    assert rows and {row["GROUP"] for row in rows} == {group}, output
    return {(str(r["TOPIC"]), int(str(r["PARTITION"]))): int(str(r["NEW-OFFSET"])) for r in rows}


def our_plan(
    scene: Scene, capsys: pytest.CaptureFixture[str], group: str, where: list[str]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """The dry run's table as {partition: NEW} and {partition: CURRENT}; its `--export` CSV
    must say the same NEW offsets."""
    code, out, err = ours(scene, capsys, "offsets", "reset", "--group", group, *where)
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["TOPIC", "PARTITION", "CURRENT", "NEW"]
    assert lines[-1].startswith("dry run: nothing changed"), out
    rows = [line.split() for line in lines[1:-1]]
    new = {(r[0], int(r[1])): int(r[3]) for r in rows}
    current = {(r[0], int(r[1])): int(r[2]) for r in rows if r[2] != "-"}
    code, out, err = ours(scene, capsys, "offsets", "reset", "--group", group, *where, "--export")
    assert (code, err) == (0, ""), err
    exported = {(t, int(p)): int(o) for t, p, o in (line.split(",") for line in out.splitlines())}
    assert exported == new
    return new, current


def test_every_reset_mode_plans_what_kafka_plans(
    scene: Scene, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    group = scene.commit_fresh("plan")
    plan_file = tmp_path / "plan.csv"
    plan_file.write_text(f"{scene.topic},0,4\n{scene.topic},2,7\n")
    t = scene.topic
    modes = {
        "to-datetime": ["--to-datetime", scene.time_iso, "--all-topics"],
        "by-duration": ["--by-duration", "PT5H15M", "--all-topics"],
        "shift-by": ["--shift-by", "-3", "--topic", f"{t}:0,2"],
        "to-earliest": ["--to-earliest", "--topic", t],
        "to-latest": ["--to-latest", "--topic", f"{t}:1"],
        "to-offset": ["--to-offset", "11", "--all-topics"],
        "from-file": ["--from-file", str(plan_file)],
    }
    kafka_runs = [
        ["--reset-offsets", "--dry-run", "--group", group, *where] for where in modes.values()
    ]
    kafka = dict(zip(modes, tools_in_parallel(scene.broker, kafka_runs), strict=True))
    committed = scene.broker.committed(group)
    assert committed == scene.committed_keys(COMMITTED)
    for name, where in modes.items():
        new, current = our_plan(scene, capsys, group, where)
        assert new == kafka_plan(kafka[name], group), name
        assert current == {key: committed[key] for key in new}, name
    # the cases the topic was built for, as Kafka planned them (one JVM per mode: the seven
    # modes, each with its own scope, and clamping at both ends between them)
    expected = {
        "to-datetime": {0: 5, 1: 8, 2: 8},
        "by-duration": {0: 5, 1: 8, 2: 8},
        "shift-by": {0: 1, 2: 2},  # 0: clamped to its log start
        "to-earliest": {0: 1, 1: 0, 2: 0},
        "to-latest": {1: 12},
        "to-offset": {0: 10, 1: 11, 2: 8},  # 0 and 2: clamped to their log ends
        "from-file": {0: 4, 2: 7},
    }
    assert {n: kafka_plan(kafka[n], group) for n in modes} == {
        n: scene.committed_keys(offsets) for n, offsets in expected.items()
    }
    assert scene.broker.committed(group) == committed  # dry runs change nothing


def test_execute_on_an_empty_group_applies_the_plan(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    group = scene.commit_fresh("apply")
    where = ["--to-datetime", scene.time_iso, "--all-topics"]
    planned, _ = our_plan(scene, capsys, group, where)
    code, out, err = ours(scene, capsys, "offsets", "reset", "--group", group, *where, "--execute")
    assert (code, err) == (0, ""), err
    assert out.splitlines()[-1] == f"reset 3 partition(s) of group {group}"
    assert scene.broker.committed(group) == planned == scene.committed_keys({0: 5, 1: 8, 2: 8})
    # a narrower scope moves only its partitions
    where = ["--to-earliest", "--topic", f"{scene.topic}:1", "--execute"]
    code, _, err = ours(scene, capsys, "offsets", "reset", "--group", group, *where)
    assert (code, err) == (0, ""), err
    assert scene.broker.committed(group) == scene.committed_keys({0: 5, 1: 0, 2: 8})
    # `offsets export` writes what OffsetFetch answers
    code, out, err = ours(scene, capsys, "offsets", "export", "--group", group)
    assert (code, err) == (0, ""), err
    assert out == "".join(f"{scene.topic},{p},{o}\n" for p, o in ((0, 5), (1, 0), (2, 8)))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_execute_on_a_live_group_is_refused_in_one_line(
    scene: Scene, capsys: pytest.CaptureFixture[str], protocol: str
) -> None:
    if protocol == "consumer":
        require_kip848_groups()
    group = scene.commit_fresh(f"live-{protocol}")
    with live_members(scene.broker) as members:
        members.join(group, [scene.topic], "member", protocol)
        wait_for(partial(settled, scene.broker, group, 1, len(COUNTS)), f"{group} stable")
        argv = ["offsets", "reset", "--group", group, "--all-topics", "--to-earliest"]
        # a dry run plans and warns
        code, out, err = ours(scene, capsys, *argv)
        assert code == 0 and "dry run: nothing changed" in out
        assert err == (
            f"offsetwatch: warning: group {group!r} has 1 active member(s) (state STABLE): "
            "stop its consumers first; --execute will refuse\n"
        )
        # offsetwatch's own check, before anything is written
        code, out, err = ours(scene, capsys, *argv, "--execute")
        assert (code, out) == (2, "")
        assert err == (
            f"offsetwatch: error: group {group!r} has 1 active member(s) (state STABLE): "
            "stop its consumers first\n"
        )
        # --force skips it: the broker refuses the commit of a group with members
        code, out, err = ours(scene, capsys, *argv, "--execute", "--force")
        assert code == 2
        assert err == (
            f"offsetwatch: error: the broker refused to commit offsets of group {group!r} "
            "(UNKNOWN_MEMBER_ID): the group has members; stop its consumers first\n"
        )
        assert scene.broker.committed(group) == scene.committed_keys(COMMITTED)


def _offsets_and_metadata(broker: Broker, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """Kafka's OffsetFetch with each offset's metadata."""
    admin = broker.admin()  # kept alive until its future answers
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {
        (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
        for tp in future.result(timeout=60).topic_partitions
    }


def test_migrate_copies_offsets_and_metadata(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    source = scene.commit_fresh("migrate-from", metadata="owner=billing")
    target = unique("migrate-to")
    argv = ["offsets", "migrate", "--from-group", source, "--to-group", target]
    code, out, err = ours(scene, capsys, *argv)
    assert (code, err) == (0, ""), err
    assert out.splitlines()[-1] == (
        f"dry run: nothing copied; add --execute to copy 3 offset(s) to {target}"
    )
    assert scene.broker.committed(target) == {}
    code, out, err = ours(scene, capsys, *argv, "--execute")
    assert (code, err) == (0, ""), err
    assert out.splitlines()[-1] == f"copied and verified 3 offset(s) from {source} to {target}"
    copied = _offsets_and_metadata(scene.broker, target)
    assert copied == _offsets_and_metadata(scene.broker, source)
    assert copied == {(scene.topic, p): (o, "owner=billing") for p, o in COMMITTED.items()}
    # a second run finds the target taken
    code, out, err = ours(scene, capsys, *argv, "--execute")
    assert (code, out) == (2, "")
    assert err.startswith(f"offsetwatch: error: migrate target {target!r} already has offsets")
    assert err.count("\n") == 1


def test_unreachable_bootstrap_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listens on port 1; the error names the address and what to check."""
    for argv in (
        ["groups", "list"],
        ["groups", "describe", "g"],
        ["offsets", "reset", "--group", "g", "--all-topics", "--to-latest"],
    ):
        code = main([*argv, "--bootstrap-server", "127.0.0.1:1"])
        out, err = capsys.readouterr()
        assert (code, out) == (2, ""), argv
        assert err.count("\n") == 1 and "KafkaError{" not in err, err
        assert err.startswith(
            "offsetwatch: error: cannot reach Kafka at 127.0.0.1:1 (from --bootstrap-server)"
        ), err
        assert "check that it names a running broker's listener (host:port)" in err
