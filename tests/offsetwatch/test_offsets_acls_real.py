"""`offsetwatch offsets` on a secured broker (tests/secured_broker.py) with the grants of
docs/security.md's table and nothing more: each command works with exactly its row's grants
(Kafka's own OffsetFetch, read as a super user on the PLAINTEXT listener, shows the result),
and without one of them it is one line naming the resource, the operation and the
`kafka-acls.sh` grant, with nothing written."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from offsetwatch.cli import main
from tests.real_broker import retry, unique
from tests.secured_broker import SecuredBroker, secured_broker

pytestmark = pytest.mark.broker

USER, PASSWORD = "resetter", "resetter-secret"
PRINCIPAL = f"User:{USER}"
Acl = tuple[str, str, str]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with secured_broker(tmp_path_factory.mktemp("secured-offsets")) as broker:
        broker.add_user(USER, PASSWORD)
        yield broker


def _topic_with_commit(secured: SecuredBroker, group: str, offset: int = 3) -> str:
    """A topic of 10 records, `group` committed at `offset` (as the super user)."""
    topic = unique("orders")
    secured.broker.create_topic(topic, 1)
    secured.broker.produce(topic, [10])
    consumer = Consumer(
        {"bootstrap.servers": secured.broker.bootstrap, "group.id": group, "log_level": 0}
    )
    try:
        # the coordinators of a broker just started may still be loading
        retry(
            lambda: consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        )
    finally:
        consumer.close()
    return topic


def _offsets(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    connection = ["--bootstrap-server", secured.sasl_ssl]
    for key, value in secured.sasl_properties(USER, PASSWORD).items():
        connection += ["-X", f"{key}={value}"]
    try:
        code = main(["offsets", *argv, *connection])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _granted(secured: SecuredBroker, acls: Sequence[Acl]) -> _Grants:
    return _Grants(secured, list(acls))


class _Grants:
    """The principal's grants for one test, revoked after it (`with`)."""

    def __init__(self, secured: SecuredBroker, acls: list[Acl]) -> None:
        self.secured, self.acls = secured, acls

    def __enter__(self) -> _Grants:
        self.secured.grant(PRINCIPAL, self.acls)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.secured.revoke(PRINCIPAL, self.acls)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_export_needs_group_and_topic_describe(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    group = unique("exported")
    topic = _topic_with_commit(secured, group)
    with _granted(secured, [("group", group, "describe"), ("topic", topic, "describe")]):
        code, out, err = _offsets(secured, capsys, "export", "--group", group)
    assert code == 0, err
    assert f"{topic},0,3" in out.splitlines()


def test_reset_needs_group_read_and_topic_read(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    group = unique("reset")
    topic = _topic_with_commit(secured, group)
    argv = ("reset", "--group", group, "--topic", topic, "--to-offset", "7", "--execute")
    with _granted(secured, [("group", group, "read"), ("topic", topic, "read")]):
        code, _out, err = _offsets(secured, capsys, *argv)
    assert code == 0, err
    assert secured.broker.committed(group) == {(topic, 0): 7}


def test_reset_without_topic_read_names_the_grant_and_writes_nothing(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    group = unique("reset-no-topic-read")
    topic = _topic_with_commit(secured, group)
    argv = ("reset", "--group", group, "--topic", topic, "--to-offset", "7", "--execute")
    with _granted(secured, [("group", group, "read"), ("topic", topic, "describe")]):
        code, out, err = _offsets(secured, capsys, *argv)
    line = _one_line(err)
    assert code == 2, (out, err)
    assert "not authorized" in line and topic in line, line
    assert f"--allow-principal {PRINCIPAL} --operation Read --topic '{topic}'" in line, line
    assert secured.broker.committed(group) == {(topic, 0): 3}


def test_reset_without_group_read_names_the_grant_and_writes_nothing(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    group = unique("reset-no-group-read")
    topic = _topic_with_commit(secured, group)
    argv = ("reset", "--group", group, "--topic", topic, "--to-offset", "7", "--execute")
    with _granted(secured, [("group", group, "describe"), ("topic", topic, "read")]):
        code, out, err = _offsets(secured, capsys, *argv)
    line = _one_line(err)
    assert code == 2, (out, err)
    assert "not authorized" in line and group in line, line
    assert f"--allow-principal {PRINCIPAL} --operation Read --group '{group}'" in line, line
    assert secured.broker.committed(group) == {(topic, 0): 3}


def test_reset_from_a_file_needs_the_same_grants(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    group = unique("imported")
    topic = _topic_with_commit(secured, group)
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,5\n")
    argv = ("reset", "--group", group, "--from-file", str(plan), "--execute")
    with _granted(secured, [("group", group, "read"), ("topic", topic, "read")]):
        code, _out, err = _offsets(secured, capsys, *argv)
    assert code == 0, err
    assert secured.broker.committed(group) == {(topic, 0): 5}


def test_migrate_needs_describe_on_the_source_and_read_on_the_target(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = unique("migrate-from"), unique("migrate-to")
    topic = _topic_with_commit(secured, source, offset=6)
    argv = ("migrate", "--from-group", source, "--to-group", target, "--execute")
    acls = [("group", source, "describe"), ("topic", topic, "read")]
    with _granted(secured, acls):
        code, out, err = _offsets(secured, capsys, *argv)
        line = _one_line(err)
        assert code == 2, (out, err)
        assert "not authorized" in line and target in line, line
        assert f"--operation Read --group '{target}'" in line, line
        assert secured.broker.committed(target) == {}
        with _granted(secured, [("group", target, "read")]):
            code, _out, err = _offsets(secured, capsys, *argv)
    assert code == 0, err
    assert secured.broker.committed(target) == {(topic, 0): 6}


def test_a_dry_run_needs_describe_alone(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    group = unique("dry-run")
    topic = _topic_with_commit(secured, group)
    argv = ("reset", "--group", group, "--topic", topic, "--to-offset", "7")
    with _granted(secured, [("group", group, "describe"), ("topic", topic, "describe")]):
        code, out, err = _offsets(secured, capsys, *argv)
    assert code == 0, err
    assert "dry run: nothing changed" in out
    assert secured.broker.committed(group) == {(topic, 0): 3}
