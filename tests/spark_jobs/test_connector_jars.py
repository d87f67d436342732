"""Which connector release a Spark gets, and where its jars come from (no Maven here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.spark_jobs import connector_jars
from offsetwatch.spark_jobs.connector_jars import (
    JARS_ENV,
    ConnectorUnavailable,
    artifact_name,
    candidates,
    resolve,
)


def test_spark_own_release_first_then_the_tested_one() -> None:
    assert candidates("4.2.0") == ["4.2.0"]
    assert candidates("4.3.0") == ["4.3.0", "4.2.0"]


def test_artifact_names_drop_the_version() -> None:
    assert artifact_name("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert artifact_name("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert artifact_name("commons-pool2-2.13.1.jar") == "commons-pool2"


def test_a_directory_of_jars_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar").write_bytes(b"")
    (tmp_path / "kafka-clients-3.9.2.jar").write_bytes(b"")
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    found = resolve("4.3.0")
    assert [j.name for j in found.jars] == [
        "kafka-clients-3.9.2.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
    ]
    (tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar").unlink()
    with pytest.raises(ConnectorUnavailable, match="holds no spark-sql-kafka"):
        resolve("4.3.0")


def test_without_maven_one_line_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JARS_ENV, raising=False)
    monkeypatch.setenv(connector_jars.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(connector_jars.shutil, "which", lambda _name: None)
    with pytest.raises(ConnectorUnavailable, match="apt-get install maven.*" + JARS_ENV):
        resolve("4.3.0")
