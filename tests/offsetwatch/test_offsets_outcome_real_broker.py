"""`offsets reset|migrate --execute` tell a commit the broker refused from one whose outcome is
unknown, on a real broker of this module's own (it is hung with SIGSTOP).

The broker is stopped after the plan is made and before the commit is sent, with a short
`-X socket.timeout.ms`: the request sits in the hung broker's socket buffer, the client gives
up, and the broker applies it when it runs again. The command must not call that a failure
(a retried --shift-by shifts twice): it says the outcome is unknown, exit 3, and names the
check. Kafka's OffsetFetch afterwards holds either the old offsets or the new ones, never a
mix, and `offsets export` (the check the message names) says the same as OffsetFetch.

A commit the broker answers with an error (OFFSET_METADATA_TOO_LARGE, per partition) is a
refusal: the message says which partitions were committed, and OffsetFetch agrees.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from offsetwatch.cli import EXIT_OUTCOME_UNKNOWN, main
from offsetwatch.commands import offsets as offsets_command
from offsetwatch.commands._offset_common import open_broker
from offsetwatch.offset_ops import Committed, OffsetOpsError
from offsetwatch.offset_ops.admin import AdminBroker, _may_have_been_sent
from offsetwatch.offset_ops.broker import OffsetBroker
from offsetwatch.offset_ops.csv_io import parse_offsets_csv
from tests.real_broker import Broker, own_broker, unique

pytestmark = pytest.mark.broker

COUNTS = [20, 20]
BEFORE = {0: 4, 1: 7}
#: short, so that the hung broker costs the test seconds, not librdkafka's default minute
FAST_TIMEOUT = "socket.timeout.ms=3000"
#: Kafka's default offset.metadata.max.bytes is 4096
TOO_LARGE = "m" * 5000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with own_broker(tmp_path_factory.mktemp("outcome") / "broker") as own:
        yield own


@pytest.fixture(scope="module")
def topic(broker: Broker) -> str:
    name = unique("outcome")
    broker.create_topic(name, len(COUNTS))
    broker.produce(name, COUNTS)
    return name


class HangBeforeCommit:
    """The command's broker, with the real broker hung (SIGSTOP) just before the commit."""

    def __init__(self, inner: OffsetBroker, pid: int) -> None:
        self._inner = inner
        self._pid = pid
        self.hung = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def alter(self, group_id: str, offsets: Mapping[tuple[str, int], Committed]) -> None:
        os.kill(self._pid, signal.SIGSTOP)
        wait_stopped(self._pid)
        self.hung = True
        self._inner.alter(group_id, offsets)


def wait_stopped(pid: int, timeout_s: float = 30.0) -> None:
    """Until every thread of `pid` is stopped: kill() returns before the signal has stopped
    them, and a broker thread still running answered a commit meant to hang (seen once,
    under load)."""
    deadline = time.monotonic() + timeout_s
    tasks = Path(f"/proc/{pid}/task")
    while True:
        states = []
        for task in tasks.iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue  # a thread that ended meanwhile
            states.append(stat.rsplit(")", 1)[1].split()[0])
        if states and all(state in ("T", "t") for state in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"broker {pid} not stopped after {timeout_s} s: {states}")
        time.sleep(0.01)


def run_hung(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    """`offsetwatch *argv` with the broker hung between plan and commit, resumed after."""
    pid = int((broker.directory / "broker.pid").read_text())
    opened: list[HangBeforeCommit] = []

    def hanging(args: Any) -> OffsetBroker:
        opened.append(HangBeforeCommit(open_broker(args), pid))
        return opened[-1]  # type: ignore[return-value]

    monkeypatch.setattr(offsets_command, "broker_from_args", hanging)
    try:
        code = main([*argv, "--bootstrap-server", broker.bootstrap, "-X", FAST_TIMEOUT])
    finally:
        os.kill(pid, signal.SIGCONT)
    out, err = capsys.readouterr()
    assert opened and opened[0].hung, "the command never reached its commit"
    return code, out, err


def exported(
    broker: Broker, capsys: pytest.CaptureFixture[str], group: str
) -> dict[tuple[str, int], int]:
    """The check the message names: `offsetwatch offsets export --group G`."""
    code = main(["offsets", "export", "--group", group, "--bootstrap-server", broker.bootstrap])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return parse_offsets_csv(out, "export")


def assert_unknown_line(err: str, group: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"offsetwatch: error: committing offsets of group {group!r}: ")
    assert "_TIMED_OUT" in lines[0], err
    assert lines[0].endswith(
        "the change may or may not have been applied: check with "
        f"`offsetwatch offsets export --group {group}` before retrying"
    ), err


def test_a_reset_sent_to_a_hung_broker_is_reported_as_unknown(
    broker: Broker,
    topic: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = unique("reset-hung")
    before = {(topic, p): o for p, o in BEFORE.items()}
    broker.commit(group, before)
    after = {key: offset + 5 for key, offset in before.items()}

    code, out, err = run_hung(
        broker, monkeypatch, capsys, "offsets", "reset", "--group", group, "--all-topics",
        "--shift-by", "5", "--execute",
    )  # fmt: skip

    assert code == EXIT_OUTCOME_UNKNOWN == 3
    assert_unknown_line(err, group)
    assert out.splitlines()[0].split()[:4] == ["TOPIC", "PARTITION", "CURRENT", "NEW"]
    assert "reset 2 partition(s)" not in out
    # the broker runs again: all of the commit or none of it, and the named check agrees
    fetched = broker.committed(group)
    assert fetched in (before, after), fetched
    assert exported(broker, capsys, group) == fetched


def test_a_migration_sent_to_a_hung_broker_is_reported_as_unknown(
    broker: Broker,
    topic: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, target = unique("migrate-from"), unique("migrate-to")
    offsets = {(topic, p): o for p, o in BEFORE.items()}
    broker.commit(source, offsets)

    code, out, err = run_hung(
        broker, monkeypatch, capsys, "offsets", "migrate", "--from-group", source,
        "--to-group", target, "--execute",
    )  # fmt: skip

    assert code == EXIT_OUTCOME_UNKNOWN
    assert_unknown_line(err, target)
    assert "copied and verified" not in out
    fetched = broker.committed(target)
    assert fetched in ({}, offsets), fetched
    assert broker.committed(source) == offsets
    if fetched:
        assert exported(broker, capsys, target) == fetched


def test_a_commit_the_broker_refuses_says_what_it_committed(broker: Broker, topic: str) -> None:
    group = unique("refused")
    before = {(topic, p): o for p, o in BEFORE.items()}
    broker.commit(group, before)
    admin = AdminBroker({"bootstrap.servers": broker.bootstrap})

    with pytest.raises(OffsetOpsError) as refused:
        admin.alter(group, {(topic, 0): Committed(9, TOO_LARGE), (topic, 1): Committed(11)})
    message = str(refused.value)
    assert f"{topic}:0 (OFFSET_METADATA_TOO_LARGE" in message, message
    assert message.endswith("the other 1 partition(s) were committed"), message
    assert broker.committed(group) == {(topic, 0): 4, (topic, 1): 11}

    with pytest.raises(OffsetOpsError) as refused:
        admin.alter(group, {key: Committed(2, TOO_LARGE) for key in before})
    message = str(refused.value)
    assert "on 2 partition(s)" in message and message.endswith("nothing was committed"), message
    assert broker.committed(group) == {(topic, 0): 4, (topic, 1): 11}


@pytest.mark.parametrize(
    ("code", "unknown"),
    [
        (KafkaError._TIMED_OUT, True),  # sent, no answer in time
        (KafkaError._TRANSPORT, True),  # the connection dropped mid-request
        (KafkaError._DESTROY, True),
        (KafkaError._INVALID_ARG, False),  # refused before sending
        (KafkaError.REQUEST_TIMED_OUT, True),  # the broker's write may still be in its log
        (KafkaError.NOT_COORDINATOR, False),  # the broker's own answer: refused
        (KafkaError.GROUP_AUTHORIZATION_FAILED, False),
    ],
)
def test_which_errors_leave_the_outcome_unknown(code: int, unknown: bool) -> None:
    assert _may_have_been_sent(KafkaError(code)) is unknown
