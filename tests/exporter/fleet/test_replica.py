"""A replica's start-up check that its fleet's group is no application's, and the settings
fingerprint it announces (no Kafka: the admin client is a fake)."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from offsetwatch.exporter.config import ConfigError, ExporterConfig
from offsetwatch.exporter.fleet.replica import (
    FINGERPRINTED,
    FleetNameTaken,
    FleetPart,
    replica_identity,
    settings_fingerprint,
)
from offsetwatch.exporter.fleet.sink_commits import SinkCommit

CONFIG = ExporterConfig(fleet="ow-fleet", fleet_url="http://127.0.0.1:9380")
REPLICA = "offsetwatch-fleet|r1|http://h:1|0123456789ab"


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


class _Admin:
    def __init__(self, described: Any, offsets: Any) -> None:
        self.described, self.offsets = described, offsets

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> Any:
        assert request_timeout <= 5
        return {
            g: self.described if isinstance(self.described, Future) else _done(self.described)
            for g in groups
        }

    def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float) -> Any:
        offsets = self.offsets
        return {
            r.group_id: offsets if isinstance(offsets, Future) else _done(offsets) for r in requests
        }


def _part(admin: _Admin) -> FleetPart:
    part = FleetPart(CONFIG, replica_identity(CONFIG, False), dict, lambda: 50)
    part._admin = admin
    return part


def _group(*client_ids: str) -> Any:
    return SimpleNamespace(members=[SimpleNamespace(client_id=c) for c in client_ids])


NO_OFFSETS = SimpleNamespace(topic_partitions=[])
SINK_COMMIT = SinkCommit(3, 40, 5).metadata()
NOT_FOUND = KafkaException(KafkaError(KafkaError.GROUP_ID_NOT_FOUND, "no such group"))


@pytest.mark.parametrize(
    ("described", "offsets"),
    [
        (_group(), NO_OFFSETS),  # a Dead group (classic describe of an unknown group)
        (NOT_FOUND, NOT_FOUND),
        (_group(REPLICA, "offsetwatch-fleet|r2|"), NO_OFFSETS),  # the fleet's own replicas
        (_group(), SimpleNamespace(topic_partitions=[TopicPartition("t", 0, -1001)])),
        # the fleet's own sink commits (exporter/fleet/sink_commits.py)
        (_group(), SimpleNamespace(topic_partitions=[TopicPartition("t", 3, 40, SINK_COMMIT)])),
    ],
)
def test_a_free_name_or_the_fleet_itself_passes(described: Any, offsets: Any) -> None:
    _part(_Admin(described, offsets)).check_name_free()


@pytest.mark.parametrize(
    ("described", "offsets", "said"),
    [
        (_group(REPLICA, "billing-consumer-1"), NO_OFFSETS, "client ids 'billing-consumer-1'"),
        (
            NOT_FOUND,
            SimpleNamespace(topic_partitions=[TopicPartition("orders", 0, 42)]),
            "offsets committed on 1 partition(s) of orders",
        ),
    ],
)
def test_a_group_an_application_uses_is_refused_in_one_line(
    described: Any, offsets: Any, said: str
) -> None:
    with pytest.raises(FleetNameTaken) as refused:
        _part(_Admin(described, offsets)).check_name_free()
    line = str(refused.value)
    assert isinstance(refused.value, ConfigError)
    assert "\n" not in line and said in line
    assert line.startswith("--fleet ow-fleet: the consumer group 'ow-fleet' is used by an app")
    assert line.endswith("Choose another --fleet name")


def test_a_cluster_that_does_not_answer_is_one_warning_and_the_start_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    never: Future[Any] = Future()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        _part(_Admin(never, never)).check_name_free(timeout_s=0.5)
    assert time.monotonic() - started < 3
    assert len(caplog.records) == 1
    assert "could not check within 0.5 s" in caplog.text
    assert "no application uses the consumer group ow-fleet (no answer); starting" in caplog.text
    refused = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied"))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _part(_Admin(refused, NO_OFFSETS)).check_name_free()
    assert "(denied); starting anyway" in caplog.text


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("group_allow", "^orders-"),
        ("group_deny", "^console-"),
        ("topic_allow", "^t"),
        ("topic_deny", "^x"),
        ("granularity", "topic"),
        ("cluster_name", "prod"),
        ("kafka_lag_exporter_aliases", True),
        ("status_window_s", 300.0),
        ("warn_min_growth_ratio", 0.2),
        ("storm_rebalances", 9),
        ("rebalance_grace_s", 5.0),
    ],
)
def test_each_setting_that_changes_the_export_changes_the_fingerprint(
    name: str, value: object
) -> None:
    assert name in FINGERPRINTED
    changed = replace(CONFIG, **{name: value})
    assert settings_fingerprint(changed) != settings_fingerprint(CONFIG)


def test_settings_that_do_not_change_the_export_keep_the_fingerprint() -> None:
    same = replace(CONFIG, fleet_replica="other", http_port=9999, sample_interval_s=2.0)
    assert settings_fingerprint(same) == settings_fingerprint(CONFIG)
    identity = replica_identity(CONFIG, False)
    assert identity.fingerprint == settings_fingerprint(CONFIG)
    assert identity.client_id().endswith("|" + settings_fingerprint(CONFIG))
