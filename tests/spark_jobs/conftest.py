"""The one SparkSession of the Spark tests: starting a JVM costs seconds, so it is shared."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from offsetwatch.spark_jobs.session import SparkSettings, get_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    yield session
    session.stop()
