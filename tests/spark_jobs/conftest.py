"""The one SparkSession of the Spark tests: starting a JVM costs seconds, so it is shared.

It carries Spark's own Kafka connector where it can be had (resolved once into the cache from
Maven Central, spark_jobs/connector_jars.py), so the connector's tests need no JVM of their
own; `require_connector` skips them locally, and fails them under CI=true, where it cannot.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from offsetwatch.spark_jobs.connector_jars import ConnectorUnavailable, resolve
from offsetwatch.spark_jobs.session import SparkSettings, get_session
from offsetwatch.spark_jobs.sources.kafka_connector import has_connector

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _connector_conf() -> tuple[dict[str, str], str | None]:
    """(the session's properties for the connector, why there is none)."""
    try:
        connector = resolve()
    except ConnectorUnavailable as error:
        return {}, f"Spark's Kafka connector cannot be had here: {error}"
    return {"spark.jars": connector.spark_jars}, None


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    conf, _why = _connector_conf()
    session = get_session(SparkSettings(master="local[2]", shuffle_partitions=2, conf=conf))
    yield session
    session.stop()


@pytest.fixture
def connector_spark(spark: SparkSession) -> SparkSession:
    """The shared session, which must have the connector (skip locally, fail under CI)."""
    if not has_connector(spark):
        _conf, why = _connector_conf()
        reason = why or "the shared Spark session has no Kafka connector on its classpath"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return spark
