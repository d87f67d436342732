"""`offsetwatch groups` and `decode` on a secured broker (tests/secured_broker.py): what a
missing ACL hides is said, with the `kafka-acls.sh` grant that shows it, and the exit code is
not 0 when the answer is incomplete (README "Exit codes": 1 when something was missed, 2 for
nothing useful done); a wrong password or protocol is one line with librdkafka's reason."""

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
    return _command(capsys, ["groups", *argv], secured.sasl_properties(USER, PASSWORD), secured)


def _command(
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    properties: dict[str, str],
    secured: SecuredBroker,
    bootstrap: str | None = None,
) -> tuple[int, str, str]:
    connection = ["--bootstrap-server", bootstrap or secured.sasl_ssl]
    for key, value in properties.items():
        connection += ["-X", f"{key}={value}"]
    try:
        code = main([*argv, *connection])
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


def test_decode_with_read_on_the_topic_alone_exits_0(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reading by assignment needs no group ACL: the consumer's own (unused) group id being
    refused is not a problem of the read, so every record prints and the exit code is 0."""
    topic, group = unique("orders"), unique("decoded")
    secured.broker.create_topic(topic, 1)
    _commit(secured, group, topic)
    acls = [("topic", "__consumer_offsets", "read")]
    secured.grant(PRINCIPAL, acls)
    try:
        code, out, err = _command(
            capsys,
            ["decode", "--format", "json", "--group", group, "--timeout", "30"],
            secured.sasl_properties(USER, PASSWORD),
            secured,
        )
        assert code == 0, err
        assert group in out
        assert "authorization" not in err.lower(), err
    finally:
        secured.revoke(PRINCIPAL, acls)


def test_decode_with_a_wrong_password_is_one_line_with_the_reason(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _command(
        capsys,
        ["decode", "--timeout", "30"],
        secured.sasl_properties(USER, "not-the-password"),
        secured,
    )
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert f"cannot reach Kafka at {secured.sasl_ssl}" in err
    assert "Authentication failed" in err or "SASL authentication error" in err, err
    assert "not-the-password" not in err


def test_plaintext_spoken_to_the_tls_listener_is_said(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = _command(capsys, ["decode", "--timeout", "30"], {}, secured)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "as a TLS listener does" in err and "try SSL or SASL_SSL" in err, err
    assert "brokers are down" not in err
