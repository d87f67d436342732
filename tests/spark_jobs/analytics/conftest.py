"""The reference history (datasets.known_episodes) analysed once for every analytics test."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from offsetwatch.spark_jobs.analytics import AnalyticsResult, analyze
from tests.spark_jobs.datasets import Scenario, frames, known_episodes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def known_scenario() -> Scenario:
    return known_episodes().build()


@pytest.fixture(scope="session")
def known_result(spark: SparkSession, known_scenario: Scenario) -> AnalyticsResult:
    tables = frames(spark, known_scenario)
    return analyze(tables.commits, tables.log_ends, tables.group_events)
