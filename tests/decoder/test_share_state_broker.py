"""`__share_group_state` live from a real Kafka broker with share groups enabled: what
`offsetwatch decode` reads from the live topic and from the broker's own segment files equals
what kafka-dump-log --share-group-state-decoder prints for those files.

One broker of the module's own (share groups need other settings than the shared one) and one
console share consumer run; the checked-in capture (test_share_state.py) covers the rest."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from offsetwatch.cli import main
from tests.decoder.test_share_state import kafka_dump_log
from tests.real_broker import (
    REPO_ROOT,
    Broker,
    group_kind_properties,
    kafka_home,
    own_broker,
    run_tool,
)

pytestmark = pytest.mark.broker

STATE_TOPIC = "__share_group_state"


def _script() -> ModuleType:
    path = REPO_ROOT / "scripts" / "capture_share_state.py"
    spec = importlib.util.spec_from_file_location("capture_share_state", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, Any]]:
    script = _script()
    directory = tmp_path_factory.mktemp("share-broker") / "broker"
    share = group_kind_properties("share")
    with own_broker(directory, *share, *script.SHARE_TUNING) as broker:
        # one run: two records rejected, the other four released when the consumer closes
        drive = script.drive(kafka_home(), broker.bootstrap, 6, (("--reject", 2),))
        yield broker, drive


def _decode(capsys: pytest.CaptureFixture[str], *argv: str) -> list[Any]:
    code = main(["decode", *argv])
    out = capsys.readouterr()
    assert (code, out.err) == (0, "")
    return [json.loads(line) for line in out.out.splitlines()]


def test_live_topic_and_segments_equal_kafka_dump_log(
    capsys: pytest.CaptureFixture[str], share_broker: tuple[Broker, Any]
) -> None:
    broker, (topic, topic_id, group) = share_broker
    state_dirs = sorted(broker.data_dir.glob(f"{STATE_TOPIC}-*"))
    assert [d.name for d in state_dirs] == [f"{STATE_TOPIC}-0"]
    logs = sorted(state_dirs[0].glob("*.log"))
    expected = []
    for log in logs:
        text = run_tool("kafka-dump-log.sh", "--share-group-state-decoder", "--files", str(log))
        expected += [{"key": k, "payload": p} for _, k, p in kafka_dump_log(text)]
    # the share coordinator wrote the initial snapshot and the acknowledgements' updates
    assert {line["key"]["type"] for line in expected} == {"0", "1"}
    assert {line["key"]["data"]["groupId"] for line in expected} == {group}
    assert {line["key"]["data"]["topicId"] for line in expected} == {topic_id}
    segments = _decode(capsys, "--format", "dump-log", str(state_dirs[0]))
    assert segments == expected
    live = _decode(
        capsys,
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        STATE_TOPIC,
        "--format",
        "dump-log",
        "--timeout",
        "60",
    )
    assert live == expected
    # the canonical records of the live topic name the same share partition, field by field
    rows = _decode(capsys, "--bootstrap-server", broker.bootstrap, "--topic", STATE_TOPIC)
    assert [row["type"] for row in rows] == [
        "share_snapshot" if line["key"]["type"] == "0" else "share_update" for line in expected
    ]
    assert {(row["group"], row["key"]["topic_id"], row["key"]["partition"]) for row in rows} == {
        (group, topic_id, 0)
    }
    assert topic  # the data topic the group consumed
