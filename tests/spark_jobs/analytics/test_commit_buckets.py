"""commit_buckets under Spark settings an operator may choose."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from offsetwatch.spark_jobs.analytics.commit_buckets import commit_buckets
from tests.spark_jobs.datasets import ScenarioBuilder, at, frames

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture
def without_aqe(spark: SparkSession) -> Iterator[SparkSession]:
    """More shuffle partitions than groups, and no adaptive execution to coalesce the empty
    ones (restored afterwards: the session is shared)."""
    chosen = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "8"}
    saved = {key: spark.conf.get(key) for key in chosen}
    for key, value in chosen.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)


def test_empty_spark_partitions_give_no_rows_and_no_error(without_aqe: SparkSession) -> None:
    # one group, 8 shuffle partitions: 7 of the sweep's inputs are empty (they used to fail
    # in pyarrow with "Must pass schema, or at least one RecordBatch")
    b = ScenarioBuilder(end_ms=at(10))
    b.produce("orders", 0, [(b.start_ms, 10.0)])
    b.join("billing", b.start_ms).follow("billing", "orders", 0, b.start_ms, at(5))
    tables = frames(without_aqe, b.build())
    buckets = commit_buckets(tables.commits, tables.group_events, 60_000).collect()
    assert buckets
    assert {row["group"] for row in buckets} == {"billing"}
