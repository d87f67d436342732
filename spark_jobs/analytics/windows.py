"""Per (group, topic, partition) statistics over tumbling windows of 1 min, 5 min and 1 h.

Built from the tick buckets (commit_buckets.py), never from raw commits again. A window
[start, start + size) lists its commits, first and last committed offset, the progress since
the last commit before the window (negative after a rewind), the consumption rate that
progress means, commit-interval statistics (intervals ending in the window), and the lag and
lag in seconds at the window's end from the status timeline. Windows without any commit are
not listed; the timeline covers them.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType

from offsetwatch.spark_jobs.analytics.commit_buckets import KEY, TP
from offsetwatch.spark_jobs.analytics.windows_sweep import sweep
from offsetwatch.spark_jobs.lake_schema import struct_of

WINDOWS_SWEEP_SCHEMA: Final = struct_of(
    ("group", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("window_ms", LongType(), False),
    ("window_start_ms", LongType(), False),
    ("commits", LongType(), False),
    ("first_offset", LongType(), True),
    ("last_offset", LongType(), True),
    ("offset_progress", LongType(), True),
    ("consumption_rate", DoubleType(), False),
    ("interval_avg_ms", DoubleType(), True),
    ("interval_min_ms", LongType(), True),
    ("interval_max_ms", LongType(), True),
    ("lag", LongType(), True),
    ("lag_seconds", DoubleType(), True),
)
_EMPTY: Final = to_arrow_schema(WINDOWS_SWEEP_SCHEMA).empty_table()


def window_stats(buckets: DataFrame, timeline: DataFrame, sizes_ms: tuple[int, ...]) -> DataFrame:
    """WINDOWS_SCHEMA rows for every window size: windows_sweep.sweep per topic-partition
    (aggregates over struct columns, a window function and a join with the timeline cost
    four shuffles here)."""
    flat = buckets.select(
        *KEY,
        "bucket_ms",
        "n",
        *(
            F.col(f"{point}.{field}").alias(f"{point}_{alias}")
            for point in ("first", "last")
            for field, alias in (("ts", "ts"), ("source_offset", "so"), ("offset", "offset"))
        ),
        "interval_sum_ms",
        "interval_n",
        "interval_min_ms",
        "interval_max_ms",
    )
    ticks = timeline.select(*KEY, "tick_ms", "lag", "lag_seconds")

    def per_partition(partition_buckets: pa.Table, partition_ticks: pa.Table) -> pa.Table:
        if partition_buckets.num_rows == 0:
            return _EMPTY
        return sweep(partition_buckets, partition_ticks, sizes_ms)

    return (
        flat.groupBy(*TP)
        .cogroup(ticks.groupBy(*TP))
        .applyInArrow(per_partition, WINDOWS_SWEEP_SCHEMA)
    )
