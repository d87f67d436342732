"""The Kafka release catalog and launcher of scripts/kafka, without Java or Maven."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

KAFKA_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "kafka"
sys.path.insert(0, str(KAFKA_SCRIPTS))

import kafka_dist  # noqa: E402
import kafka_launcher  # noqa: E402


def test_every_release_of_the_matrix_is_pinned_with_a_broker_and_its_tools() -> None:
    books = kafka_dist.catalog()
    assert books.default in books.matrix
    for version in books.matrix:
        pinned = kafka_dist._locked_hashes(version)
        assert f"kafka_2.13-{version}.jar" in pinned, version
        assert f"kafka-tools-{version}.jar" in pinned, version
        assert all(len(digest) == 64 for digest in pinned.values())


def test_a_line_resolves_to_its_tested_patch_and_an_unknown_one_is_one_line() -> None:
    books = kafka_dist.catalog()
    assert books.resolve("4.1") == "4.1.2"
    assert books.resolve(None) == books.default
    assert books.resolve("4.1.0") == "4.1.0"  # another patch of a supported line
    with pytest.raises(kafka_dist.KafkaDistError, match="not supported: use one of"):
        books.resolve("3.8")
    assert books.logging("3.9.2") == "log4j1"
    assert books.logging("4.4.0") == "log4j2"


def test_cluster_ids_look_like_kafkas_uuids() -> None:
    for _ in range(200):
        text = kafka_launcher.cluster_id()
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_three_nodes_replicate_everything_three_times_with_two_in_sync(tmp_path: Path) -> None:
    text = kafka_launcher.properties(2, 30002, tmp_path, "1@h:1,2@h:2,3@h:3", 3, ["a.b=c"])
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["node.id"] == "2"
    assert lines["offsets.topic.replication.factor"] == "3"
    assert lines["min.insync.replicas"] == "2"
    assert lines["transaction.state.log.min.isr"] == "2"
    assert lines["listeners"] == "PLAINTEXT://127.0.0.1:30002,CONTROLLER://127.0.0.1:30003"
    assert lines["a.b"] == "c"
    single = dict(
        line.split("=", 1)
        for line in kafka_launcher.properties(1, 1, tmp_path, "1@h:2", 1, []).splitlines()
    )
    assert single["offsets.topic.replication.factor"] == "1"
    with pytest.raises(kafka_dist.KafkaDistError, match="not KEY=VALUE"):
        kafka_launcher.properties(1, 1, tmp_path, "1@h:2", 1, ["oops"])


def test_a_missing_maven_is_one_line_naming_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFSETWATCH_BROKER_CACHE", str(tmp_path))
    monkeypatch.setattr(
        kafka_dist.shutil, "which", lambda name: "/usr/bin/java" if name == "java" else None
    )
    with pytest.raises(kafka_dist.KafkaDistError, match=r"Maven \(mvn\) is not on PATH"):
        kafka_dist.fetch("4.4.0")


def test_group_kinds_are_enabled_as_each_release_needs_and_refused_where_absent() -> None:
    settings = kafka_launcher.group_kind_settings
    assert settings("4.4.0", ["consumer", "share", "streams"]) == ([], [])
    assert settings("4.2.2", ["share", "streams"]) == ([], [])
    overrides, features = settings("4.1.2", ["share", "streams"])
    assert features == ["share.version=1", "streams.version=1"]
    assert "unstable.feature.versions.enable=true" in overrides
    overrides, features = settings("4.0.2", ["share"])
    assert "group.share.enable=true" in overrides and features == []
    assert settings("3.9.2", ["consumer"]) == (
        ["group.coordinator.rebalance.protocols=classic,consumer"],
        [],
    )
    with pytest.raises(kafka_dist.KafkaDistError, match=r"3\.9\.2 has no share groups.*4\.0"):
        settings("3.9.2", ["share"])
    with pytest.raises(kafka_dist.KafkaDistError, match=r"4\.0\.2 has no streams groups"):
        settings("4.0.2", ["streams"])
    with pytest.raises(kafka_dist.KafkaDistError, match="no group kind"):
        settings("4.4.0", ["classic"])
