"""The exporter on a secured broker (SASL_SSL with SCRAM-SHA-512, mutual TLS, ACLs with
`allow.everyone.if.no.acl.found=false`): it works with the minimal ACLs docs/security.md
lists, and a missing or revoked ACL is said, never served as a right answer. Kafka's answers
come from the same broker's PLAINTEXT listener, as a super user (tests/secured_broker.py)."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.serve.api import group_detail, readiness
from tests.exporter.daemon_helpers import (
    consume_all,
    exporter_config,
    running_exporter,
    wait_for,
)
from tests.exporter.real_broker_helpers import Committer, kafka_offsets
from tests.real_broker import group_kind_properties, unique
from tests.secured_broker import (
    MTLS_PRINCIPAL,
    SecuredBroker,
    issue_client_certificate,
    secured_broker,
)

pytestmark = pytest.mark.broker

USER, PASSWORD = "monitor", "monitor-secret"
PRINCIPAL = f"User:{USER}"
#: what `offsetwatch export` needs (docs/security.md): the source and the data topics' ends
EXPORT_ACLS = [("topic", OFFSETS_TOPIC, "read")]
REAUTH_MS = 3000


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    # re-authentication every few seconds (KIP-368): how a password changed on the broker
    # reaches connections that are already open, as it does in clusters that set it
    reauth = f"connections.max.reauth.ms={REAUTH_MS}"
    with secured_broker(tmp_path_factory.mktemp("secured"), reauth) as broker:
        broker.add_user(USER, PASSWORD)
        yield broker


def _config(secured: SecuredBroker, bootstrap: str, properties: dict[str, str]) -> Any:
    return exporter_config(
        bootstrap,
        sample_interval_s=0.5,
        stale_after_s=2.0,
        kafka_properties=properties,
    )


def _served(service: Any, group: str) -> dict[tuple[str, int], tuple[int, int | None]] | None:
    detail = group_detail(service.exporter.snapshot, group)
    if detail is None:
        return None
    return {(r["topic"], r["partition"]): (r["committed"], r["lag"]) for r in detail["partitions"]}


def _all_lags_known(service: Any, group: str) -> bool:
    served = _served(service, group)
    return served is not None and all(lag is not None for _c, lag in served.values())


def _kafka_committed(secured: SecuredBroker, group: str) -> dict[tuple[str, int], int]:
    return {tp: offset for tp, (offset, _e, _m) in kafka_offsets(secured.broker, group).items()}


def _equal_to_kafka(service: Any, secured: SecuredBroker, group: str) -> bool:
    served = _served(service, group)
    if served is None:
        return False
    return {tp: committed for tp, (committed, _lag) in served.items()} == _kafka_committed(
        secured, group
    )


def test_export_over_sasl_ssl_with_the_minimal_acls(secured: SecuredBroker) -> None:
    topic, group = unique("orders"), unique("billing")
    secured.broker.create_topic(topic, 3)
    secured.broker.produce(topic, [20, 20, 20])
    secured.grant(PRINCIPAL, [*EXPORT_ACLS, ("topic", topic, "describe")])
    committer = Committer(secured.broker, topic, group, 3)
    try:
        wait_for(lambda: committer.commits >= 3, "commits")
        properties = secured.sasl_properties(USER, PASSWORD)
        with running_exporter(_config(secured, secured.sasl_ssl, properties)) as service:
            stats = service.exporter.stats
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            committer.stop()
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")
            served = _served(service, group)
            assert served is not None
            # lag against the log end Kafka holds, never a guess
            assert all(lag is not None for _c, lag in served.values())
    finally:
        committer.stop()
        secured.revoke(PRINCIPAL, [*EXPORT_ACLS, ("topic", topic, "describe")])


def test_read_revoked_is_stale_and_a_grant_is_picked_up_without_a_restart(
    secured: SecuredBroker,
) -> None:
    topic, group = unique("orders"), unique("audit")
    secured.broker.create_topic(topic, 2)
    secured.broker.produce(topic, [10, 10])
    acls = [*EXPORT_ACLS, ("topic", topic, "describe")]
    secured.grant(PRINCIPAL, acls)
    committer = Committer(secured.broker, topic, group, 2)
    try:
        properties = secured.sasl_properties(USER, PASSWORD)
        with running_exporter(_config(secured, secured.sasl_ssl, properties)) as service:
            stats = service.exporter.stats
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            secured.revoke(PRINCIPAL, EXPORT_ACLS)
            wait_for(
                lambda: not readiness(stats)[0],
                "not ready once Read on __consumer_offsets is revoked",
                describe=lambda: readiness(stats),
            )
            _ready, body = readiness(stats)
            assert body["reason"].startswith("stale"), body
            assert "AUTHORIZATION" in body["reason"], body
            secured.grant(PRINCIPAL, EXPORT_ACLS)
            wait_for(
                lambda: readiness(stats)[0],
                "ready again once Read is granted, without a restart",
                describe=lambda: readiness(stats),
            )
            committer.stop()
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")
    finally:
        committer.stop()
        secured.revoke(PRINCIPAL, acls)


def test_export_over_mutual_tls(secured: SecuredBroker, tmp_path: Path) -> None:
    topic, group = unique("orders"), unique("mtls")
    secured.broker.create_topic(topic, 1)
    secured.broker.produce(topic, [5])
    acls = [*EXPORT_ACLS, ("topic", topic, "describe")]
    secured.grant(MTLS_PRINCIPAL, acls)
    committer = Committer(secured.broker, topic, group, 1)
    try:
        wait_for(lambda: committer.commits >= 2, "commits")
        committer.stop()
        properties = secured.mtls_properties()
        with running_exporter(_config(secured, secured.mtls, properties)) as service:
            stats = service.exporter.stats
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")
    finally:
        committer.stop()
        secured.revoke(MTLS_PRINCIPAL, acls)


def test_a_topic_without_describe_is_not_authorized_never_deleted(secured: SecuredBroker) -> None:
    """A broker leaves the topics a client may not describe out of its Metadata answers, as if
    they did not exist: the exporter must say "not authorized", with the grant to make, and
    never "deleted"; the group's lag there is unknown, never 0. A grant is picked up."""
    allowed, hidden, group = unique("orders"), unique("secret"), unique("payments")
    for topic in (allowed, hidden):
        secured.broker.create_topic(topic, 2)
        secured.broker.produce(topic, [30, 30])
    acls = [*EXPORT_ACLS, ("topic", allowed, "describe")]
    secured.grant(PRINCIPAL, acls)
    committers = [Committer(secured.broker, topic, group, 2) for topic in (allowed, hidden)]
    try:
        wait_for(lambda: all(c.commits >= 2 for c in committers), "commits on both topics")
        for committer in committers:
            committer.stop()
        properties = secured.sasl_properties(USER, PASSWORD)
        with running_exporter(_config(secured, secured.sasl_ssl, properties)) as service:
            stats = service.exporter.stats
            # the refused topic does not hold readiness back: the rest is right
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")

            def diagnosis() -> dict[str, Any]:
                detail = group_detail(service.exporter.snapshot, group)
                assert detail is not None
                return dict(detail["diagnosis"])

            wait_for(lambda: diagnosis()["cause"] == "not_authorized", "cause not_authorized")
            reason = diagnosis()["reason"]
            assert hidden in reason and "kafka-acls.sh" in reason
            assert "--operation Describe" in reason
            assert f"--allow-principal {PRINCIPAL}" in reason
            served = _served(service, group)
            assert served is not None
            assert all(lag is None for (topic, _p), (_c, lag) in served.items() if topic == hidden)
            assert all(lag is not None for (t, _p), (_c, lag) in served.items() if t == allowed)
            _ready, body = readiness(stats)
            # the earlier tests' topics too (their grants are gone, their groups stay)
            (refused,) = [x for x in body["not_authorized"] if x["name"] == hidden]
            assert (refused["resource"], refused["name"], refused["operation"]) == (
                "topic",
                hidden,
                "Describe",
            )
            assert "TOPIC_AUTHORIZATION_FAILED" in refused["error"]
            assert refused["grant"].startswith("kafka-acls.sh")

            secured.grant(PRINCIPAL, [("topic", hidden, "describe")])
            acls.append(("topic", hidden, "describe"))
            wait_for(
                lambda: (
                    diagnosis()["cause"] != "not_authorized"
                    and hidden
                    not in {x["name"] for x in readiness(stats)[1].get("not_authorized", [])}
                ),
                "the grant picked up without a restart",
                describe=diagnosis,
            )
            wait_for(
                lambda: all(
                    lag is not None for _c, lag in (_served(service, group) or {}).values()
                ),
                "every lag known once the topic can be described",
            )
    finally:
        for committer in committers:
            committer.stop()
        secured.revoke(PRINCIPAL, acls)


def test_publishing_needs_write_and_describe_on_the_topic_alone(secured: SecuredBroker) -> None:
    """`--publish-topic` with the idempotent producer needs Write and Describe on the topic and
    nothing on the cluster (Kafka 3.0+ no longer asks IdempotentWrite for it): every commit
    the exporter reads reaches the topic, read back as a super user."""
    topic, group, output = unique("orders"), unique("republished"), unique("offsets-json")
    secured.broker.create_topic(topic, 1)
    secured.broker.create_topic(output, 1)
    secured.broker.produce(topic, [10])
    acls = [
        *EXPORT_ACLS,
        ("topic", topic, "describe"),
        ("topic", output, "write"),
        ("topic", output, "describe"),
    ]
    secured.grant(PRINCIPAL, acls)
    committer = Committer(secured.broker, topic, group, 1)
    try:
        wait_for(lambda: committer.commits >= 3, "commits")
        committer.stop()
        properties = secured.sasl_properties(USER, PASSWORD)
        config = exporter_config(
            secured.sasl_ssl,
            sample_interval_s=0.5,
            stale_after_s=2.0,
            kafka_properties=properties,
            publish_topic=output,
        )
        with running_exporter(config) as service:
            stats = service.exporter.stats
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")
            wait_for(
                lambda: any(
                    group.encode() in (r.value or b"")
                    for r in consume_all(secured.broker.bootstrap, output, 1)
                ),
                "the group's commits republished",
            )
            _ready, body = readiness(stats)
            refused = {x["name"] for x in body.get("not_authorized", [])}
            assert not refused & {topic, output}, body
    finally:
        committer.stop()
        secured.revoke(PRINCIPAL, acls)


def _share_consumed(bootstrap: str, group: str, topic: str, records: int) -> None:
    """A share consumer (as the super user) that takes and acknowledges `records` records of
    `topic`: its share group then has state in `__share_group_state`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until it answers
    earliest = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(timeout=60)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        consumer.subscribe([topic])
        taken = 0
        deadline = time.monotonic() + 60
        while taken < records:
            assert time.monotonic() < deadline, f"the share consumer took {taken} of {records}"
            taken += sum(1 for m in consumer.poll(0.5) if m.error() is None)
        consumer.commit_sync()
    finally:
        consumer.close()


def test_share_groups_need_read_on_the_share_state_topic(secured: SecuredBroker) -> None:
    """Share groups' state is in `__share_group_state`: with Read on it (and Describe on the
    topic the group consumes) the exporter shows the share group's partitions."""
    group_kind_properties("share")  # skips on a release without share groups
    topic, group = unique("jobs"), unique("workers")
    secured.broker.create_topic(topic, 1)
    secured.broker.produce(topic, [20])
    _share_consumed(secured.broker.bootstrap, group, topic, 5)
    acls = [*EXPORT_ACLS, ("topic", topic, "describe")]
    secured.grant(PRINCIPAL, acls)
    try:
        properties = secured.sasl_properties(USER, PASSWORD)
        with running_exporter(_config(secured, secured.sasl_ssl, properties)) as service:
            stats = service.exporter.stats

            def share_partitions() -> list[Any]:
                detail = group_detail(service.exporter.snapshot, group)
                share = None if detail is None else detail.get("share")
                return [] if share is None else list(share["partitions"])

            def refused_share_state() -> list[Any]:
                refused = readiness(stats)[1].get("not_authorized", [])
                return [x for x in refused if x["name"] == SHARE_STATE_TOPIC]

            # without Read on __share_group_state: the share group is not "OK, lag 0"
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            wait_for(refused_share_state, "__share_group_state named as refused")
            (entry,) = refused_share_state()
            assert entry["operation"] == "Read"
            assert f"--operation Read --topic '{SHARE_STATE_TOPIC}'" in entry["grant"]

            def diagnosis() -> dict[str, Any]:
                detail = group_detail(service.exporter.snapshot, group)
                assert detail is not None, "the share group (from __consumer_offsets)"
                return {"status": detail["status"], **detail["diagnosis"]}

            wait_for(lambda: diagnosis()["cause"] == "not_authorized", "cause not_authorized")
            assert diagnosis()["status"] == "ERR"
            assert f"--operation Read --topic '{SHARE_STATE_TOPIC}'" in diagnosis()["reason"]

            secured.grant(PRINCIPAL, [("topic", SHARE_STATE_TOPIC, "read")])
            acls.append(("topic", SHARE_STATE_TOPIC, "read"))
            wait_for(
                lambda: [row["topic_named"] for row in share_partitions()] == [True],
                "the share group's partition, its topic named",
                describe=share_partitions,
            )
            (row,) = share_partitions()
            assert (row["topic"], row["partition"]) == (topic, 0), row
            assert diagnosis()["cause"] != "not_authorized"
            _ready, body = readiness(stats)
            refused = {x["name"] for x in body.get("not_authorized", [])}
            assert not refused & {topic, SHARE_STATE_TOPIC}, body
    finally:
        secured.revoke(PRINCIPAL, acls)


def test_no_read_on_the_offsets_topic_is_not_ready_with_the_grant(
    secured: SecuredBroker,
) -> None:
    """Never granted Read on __consumer_offsets: nothing can be read, so /readyz says so and
    names the grant, where it said "catching up" for ever."""
    properties = secured.sasl_properties(USER, PASSWORD)
    with running_exporter(_config(secured, secured.sasl_ssl, properties)) as service:
        stats = service.exporter.stats

        def reason() -> str:
            return str(readiness(stats)[1].get("reason", ""))

        wait_for(lambda: "not authorized to read" in reason(), "the refusal said")
        ready, body = readiness(stats)
        assert not ready
        assert f"--operation Read --topic '{OFFSETS_TOPIC}'" in body["reason"], body
        assert any(
            x["name"] == OFFSETS_TOPIC and x["operation"] == "Read" for x in body["not_authorized"]
        ), body


def test_a_fleet_replica_needs_read_on_the_fleet_group(secured: SecuredBroker) -> None:
    """--fleet joins a consumer group: without Read on it the replica is not ready, says so
    with the grant, and joins once it is granted, without a restart."""
    topic, group, fleet = unique("orders"), unique("fleet-app"), unique("fleet")
    secured.broker.create_topic(topic, 1)
    secured.broker.produce(topic, [5])
    acls = [*EXPORT_ACLS, ("topic", topic, "describe")]
    secured.grant(PRINCIPAL, acls)
    committer = Committer(secured.broker, topic, group, 1)
    try:
        wait_for(lambda: committer.commits >= 2, "commits")
        committer.stop()
        config = exporter_config(
            secured.sasl_ssl,
            sample_interval_s=0.5,
            stale_after_s=2.0,
            kafka_properties=secured.sasl_properties(USER, PASSWORD),
            fleet=fleet,
            fleet_url="http://127.0.0.1:1",
            fleet_protocol="classic",
        )
        with running_exporter(config) as service:
            stats = service.exporter.stats

            def reason() -> str:
                return str(readiness(stats)[1].get("reason", ""))

            wait_for(
                lambda: "not authorized to join" in reason(), "the refusal said", describe=reason
            )
            ready, body = readiness(stats)
            assert not ready
            assert f"--operation Read --group '{fleet}'" in body["reason"], body
            assert any(
                x["resource"] == "group" and x["name"] == fleet for x in body["not_authorized"]
            )
            secured.grant(PRINCIPAL, [("group", fleet, "read")])
            acls.append(("group", fleet, "read"))
            wait_for(lambda: readiness(stats)[0], "ready once granted", describe=reason)
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")
    finally:
        committer.stop()
        secured.revoke(PRINCIPAL, acls)


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".new")
    partial.write_text(text)
    partial.rename(path)


def _renewals(service: Any) -> int:
    watch = service.exporter.readers.credentials
    return 0 if watch is None else int(watch.renewals_total)


def test_a_rotated_scram_password_is_said_and_a_new_password_file_recovers(
    secured: SecuredBroker, tmp_path: Path
) -> None:
    """The password changes on the broker first: re-authentication with the old one fails and
    the exporter is not ready, saying why. The mounted secret is replaced next: new clients,
    ready again, no restart."""
    user, topic, group = unique("rotating"), unique("orders"), unique("rotation")
    secured.add_user(user, "first-secret")
    secured.broker.create_topic(topic, 2)
    secured.broker.produce(topic, [20, 20])
    principal = f"User:{user}"
    acls = [*EXPORT_ACLS, ("topic", topic, "describe")]
    secured.grant(principal, acls)
    committer = Committer(secured.broker, topic, group, 2)
    password = tmp_path / "kafka-password"
    password.write_text("first-secret\n")
    properties = secured.sasl_properties(user, "")
    del properties["sasl.password"]
    properties["sasl.password.file"] = str(password)
    try:
        with running_exporter(_config(secured, secured.sasl_ssl, properties)) as service:
            stats = service.exporter.stats
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            secured.add_user(user, "second-secret")
            wait_for(
                lambda: not readiness(stats)[0],
                "not ready once re-authentication with the old password fails",
                describe=lambda: readiness(stats),
            )
            _ready, body = readiness(stats)
            print("readyz while the old password is refused:", body["reason"])
            assert "Authentication failed" in json.dumps(body), body["reason"]
            _replace(password, "second-secret\n")
            wait_for(
                lambda: readiness(stats)[0],
                "ready again with the new password file, without a restart",
                describe=lambda: readiness(stats),
            )
            assert _renewals(service) == 1
            committer.stop()
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")
    finally:
        committer.stop()
        secured.revoke(principal, acls)


def test_an_expired_client_certificate_is_said_and_a_renewed_one_recovers(
    secured: SecuredBroker, tmp_path: Path
) -> None:
    """A client certificate expires while the exporter runs. Open connections live on; once
    the broker restarts, every new one is refused: not ready, saying why. cert-manager then
    renews the files: new clients, ready again, no restart. (Last in the module: it restarts
    the module's broker.)"""
    topic, group = unique("orders"), unique("expiry")
    secured.broker.create_topic(topic, 1)
    secured.broker.produce(topic, [5])
    acls = [*EXPORT_ACLS, ("topic", topic, "describe")]
    secured.grant(MTLS_PRINCIPAL, acls)
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    issue_client_certificate(secured.certificates, cert, key, expires)
    properties = {
        **secured.mtls_properties(),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }
    committer = Committer(secured.broker, topic, group, 1)
    try:
        wait_for(lambda: committer.commits >= 2, "commits")
        committer.stop()
        with running_exporter(_config(secured, secured.mtls, properties)) as service:
            stats = service.exporter.stats
            wait_for(lambda: readiness(stats)[0], "ready", describe=lambda: readiness(stats))
            left_s = (expires - datetime.datetime.now(datetime.UTC)).total_seconds()
            time.sleep(max(0.0, left_s + 1))  # the clock must pass the certificate's end
            secured.broker.control("stop")
            secured.broker.control("restart")

            def refused() -> bool:
                ready, body = readiness(stats)
                # the broker's TLS alert in librdkafka's words (Java answers an expired
                # certificate with alert 46, "certificate unknown"), then what to check
                reason = str(body.get("reason"))
                return not ready and "alert certificate" in reason and "expiry" in reason

            wait_for(
                refused,
                "not ready, saying why, once the broker refuses the expired certificate",
                describe=lambda: readiness(stats),
            )
            print("readyz while the certificate is expired:", readiness(stats)[1]["reason"])
            renewed = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
            issue_client_certificate(secured.certificates, cert, key, renewed)
            wait_for(
                lambda: readiness(stats)[0],
                "ready again with the renewed certificate, without a restart",
                describe=lambda: readiness(stats),
            )
            assert _renewals(service) >= 1
            wait_for(lambda: _equal_to_kafka(service, secured, group), "API = OffsetFetch")
    finally:
        committer.stop()
        secured.revoke(MTLS_PRINCIPAL, acls)
