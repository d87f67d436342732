"""`offsetwatch groups` on a secured broker (tests/secured_broker.py): what a missing ACL hides
is said, with the `kafka-acls.sh` grant that shows it, and the exit code is not 0 when the
answer is incomplete (README "Exit codes": 1 when something was missed, 2 for nothing
useful done)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from offsetwatch.cli import main
from tests.real_broker import retry, unique
from tests.secured_broker import SecuredBroker, secured_broker

pytestmark = pytest.mark.broker

USER, PASSWORD = "operator", "operator-secret"
PRINCIPAL = f"User:{USER}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with secured_broker(tmp_path_factory.mktemp("secured-groups")) as broker:
        broker.add_user(USER, PASSWORD)
        yield broker


def _commit(secured: SecuredBroker, group: str, topic: str) -> None:
    consumer = Consumer(
        {"bootstrap.servers": secured.broker.bootstrap, "group.id": group, "log_level": 0}
    )
    try:
        # the coordinators of a broker just started may still be loading
        retry(lambda: consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False))
    finally:
        consumer.close()


def _groups(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    options = [f"{k}={v}" for k, v in secured.sasl_properties(USER, PASSWORD).items()]
    connection = ["--bootstrap-server", secured.sasl_ssl]
    for option in options:
        connection += ["-X", option]
    try:
        code = main(["groups", *argv, *connection])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_list_without_cluster_describe_says_it_may_be_partial(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, mine, theirs = unique("orders"), unique("mine"), unique("theirs")
    secured.broker.create_topic(topic, 1)
    secured.broker.produce(topic, [5])
    for group in (mine, theirs):
        _commit(secured, group, topic)
    acls = [("group", mine, "describe")]
    secured.grant(PRINCIPAL, acls)
    try:
        code, out, err = _groups(secured, capsys, "list")
        assert mine in out and theirs not in out
        assert code == 1
        assert "may not Describe the cluster" in err
        assert f"--allow-principal {PRINCIPAL} --operation Describe --cluster" in err
        secured.grant(PRINCIPAL, [("cluster", "", "describe")])
        acls.append(("cluster", "", "describe"))
        code, out, err = _groups(secured, capsys, "list")
        assert (code, err) == (0, "")
        assert mine in out and theirs in out
    finally:
        secured.revoke(PRINCIPAL, acls)


def test_describe_without_group_describe_names_the_grant(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = unique("orders"), unique("hidden")
    secured.broker.create_topic(topic, 1)
    _commit(secured, group, topic)
    code, out, err = _groups(secured, capsys, "describe", group)
    assert code == 2 and out == ""
    assert f"not authorized to describe group {group!r}" in err
    assert f"--operation Describe --group '{group}'" in err
    assert len(err.strip().splitlines()) == 1
