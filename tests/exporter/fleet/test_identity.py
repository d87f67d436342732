"""A replica's identity in its member's client id: written and read back, and anything else
in the fleet's group (a consumer pointed at it by mistake) told apart."""

from __future__ import annotations

import pytest

from offsetwatch.exporter.fleet.identity import (
    ReplicaIdentity,
    replica_name_problem,
    url_problem,
)


@pytest.mark.parametrize(
    "identity",
    [
        ReplicaIdentity("ow-a", "http://10.0.0.7:9380"),
        ReplicaIdentity("host.example_1", "https://ow-b.example:443/exporter"),
        ReplicaIdentity("ow-c", None),
    ],
)
def test_an_identity_reads_back_from_its_client_id(identity: ReplicaIdentity) -> None:
    assert ReplicaIdentity.parse(identity.client_id()) == identity


@pytest.mark.parametrize(
    "client_id",
    [
        "rdkafka",
        "offsetwatch-exporter",
        "offsetwatch-fleet|a",
        "offsetwatch-fleet|a|http://x:1|extra",
        "other|a|http://x:1",
        "offsetwatch-fleet|bad name|http://x:1",
        "offsetwatch-fleet||http://x:1",
    ],
)
def test_a_client_id_of_no_replica_is_none(client_id: str) -> None:
    assert ReplicaIdentity.parse(client_id) is None


def test_a_url_that_cannot_be_reached_is_dropped_not_trusted() -> None:
    """A member whose URL is unusable is still a replica, one that cannot be forwarded to."""
    assert ReplicaIdentity.parse("offsetwatch-fleet|a|ftp://x:1") == ReplicaIdentity("a", None)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://h:9380", None),
        ("https://h/prefix", None),
        ("ftp://h:1", "scheme"),
        ("http://", "no host"),
        ("http://u:p@h:1", "credentials"),
        ("http://h:1/?q=1", "query"),
        ("http://h:1/#f", "fragment"),
        ("http://h:0", "port 0"),
        ("http://h:99999", "out of range"),
    ],
)
def test_url_problems(url: str, problem: str | None) -> None:
    said = url_problem(url)
    assert (said is None) == (problem is None), said
    if problem is not None:
        assert said is not None and problem in said


def test_replica_names() -> None:
    assert replica_name_problem("ow-a.1_x") is None
    for bad in ("", "a b", "a|b", "x" * 65, "ü"):
        assert replica_name_problem(bad) is not None


def test_the_settings_fingerprint_is_the_fourth_field_and_three_fields_still_read() -> None:
    with_fp = ReplicaIdentity("ow-a", "http://10.0.0.7:9380", "0123456789ab")
    assert with_fp.client_id() == "offsetwatch-fleet|ow-a|http://10.0.0.7:9380|0123456789ab"
    assert ReplicaIdentity.parse(with_fp.client_id()) == with_fp
    # a replica from before the fingerprint: read, with none
    older = ReplicaIdentity.parse("offsetwatch-fleet|ow-b|http://10.0.0.8:9380")
    assert older == ReplicaIdentity("ow-b", "http://10.0.0.8:9380", None)
    assert ReplicaIdentity.parse("offsetwatch-fleet|ow-c||0123456789ab") == ReplicaIdentity(
        "ow-c", None, "0123456789ab"
    )


@pytest.mark.parametrize(
    "client_id",
    [
        "offsetwatch-fleet|a|http://x:1|",
        "offsetwatch-fleet|a|http://x:1|NOTHEX!!",
        "offsetwatch-fleet|a|http://x:1|abc",
        "offsetwatch-fleet|a|http://x:1|0123456789ab|more",
    ],
)
def test_a_bad_fourth_field_is_no_replica(client_id: str) -> None:
    assert ReplicaIdentity.parse(client_id) is None
