"""Episodes (EPISODES_SCHEMA) -> alerts (ALERTS_SCHEMA): one alert per episode.

The alert id is a hash of what identifies an episode - kind, group, topic, partition and start
- so the same episode found again (a batch job re-run, a streaming micro-batch that sees it
still open or now ended) always gives the same id, and sinks can replace or skip it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from offsetwatch.spark_jobs.lake_schema import ALERTS_SCHEMA, EPISODE_KINDS

#: alertname per episode kind
ALERT_NAMES: Final = MappingProxyType(
    {
        "stall": "OffsetwatchConsumerStalled",
        "stop": "OffsetwatchConsumerStopped",
        "rewind": "OffsetwatchConsumerRewound",
        "lag_slo": "OffsetwatchLagSloBreached",
        "commit_rate_anomaly": "OffsetwatchCommitRateAnomaly",
        "rebalance_storm": "OffsetwatchRebalanceStorm",
        "share_backlog": "OffsetwatchShareBacklog",
        "share_poison": "OffsetwatchSharePoisonRecords",
    }
)
#: a stalled or stopped consumer loses data to retention if nobody acts; the rest want a look
DEFAULT_SEVERITIES: Final = MappingProxyType(
    {
        "stall": "critical",
        "stop": "critical",
        "rewind": "warning",
        "lag_slo": "warning",
        "commit_rate_anomaly": "info",
        "rebalance_storm": "warning",
        "share_backlog": "warning",
        # records given up or redelivered again and again: someone must look at them
        "share_poison": "warning",
    }
)
_WHAT: Final = MappingProxyType(
    {
        "stall": "stalled: no progress while messages arrived",
        "stop": "stopped: no commits while messages wait",
        "rewind": "rewound its committed offset",
        "lag_slo": "is over its lag SLO",
        "commit_rate_anomaly": "commits at an unusual rate",
        "rebalance_storm": "is in a rebalance storm",
        "share_backlog": "has a share backlog that grows or does not drain",
        "share_poison": "has poison records (archived or redelivered at the delivery limit)",
    }
)
assert set(ALERT_NAMES) == set(DEFAULT_SEVERITIES) == set(_WHAT) == set(EPISODE_KINDS)


@dataclass(frozen=True, slots=True)
class AlertSettings:
    severities: Mapping[str, str] = field(default_factory=lambda: DEFAULT_SEVERITIES)
    #: runbook_url is this plus `#<kind>`, e.g. where docs/spark-alerts.md is published (its
    #: sections have those anchors); None: no runbook_url
    runbook_base: str | None = None


def _lookup(mapping: Mapping[str, str], key: Column) -> Column:
    pairs = [item for k, v in sorted(mapping.items()) for item in (F.lit(k), F.lit(v))]
    return F.create_map(*pairs)[key]


def _partition_text(p: Column) -> Column:
    return F.concat_ws(" ", p["topic"], p["partition"])


def _suspect_text(s: Column) -> Column:
    """`c-2 on /10.1.2.7 (member-id) [orders 3, orders 7]`"""
    partitions = F.array_join(F.transform(s["partitions"], _partition_text), ", ")
    return F.concat(
        s["client_id"],
        F.lit(" on "),
        s["host"],
        F.lit(" ("),
        s["member_id"],
        F.lit(")"),
        F.when(
            F.size(s["partitions"]) > 0, F.concat(F.lit(" ["), partitions, F.lit("]"))
        ).otherwise(F.lit("")),
    )


def _cause(episodes: DataFrame) -> Column:
    """` Cause: stuck_member; suspects: c-2 on /10.1.2.7 (member-id) [orders 3, 7].` when the
    episodes carry a diagnosis (`AnalyticsResult.diagnosed_episodes`), else nothing."""
    if "cause" not in episodes.columns:
        return F.lit("")
    suspects = F.from_json(
        F.col("suspects"),
        "array<struct<member_id:string,client_id:string,host:string,"
        "partitions:array<struct<topic:string,partition:int>>>>",
    )
    who = F.array_join(F.transform(suspects, _suspect_text), "; ")
    return F.when(
        F.col("cause").isNotNull(),
        F.concat(
            F.lit(" Cause: "),
            F.col("cause"),
            F.when(F.size(suspects) > 0, F.concat(F.lit("; suspects: "), who)).otherwise(F.lit("")),
            F.lit("."),
        ),
    ).otherwise(F.lit(""))


def alerts_from_episodes(episodes: DataFrame, settings: AlertSettings | None = None) -> DataFrame:
    """One ALERTS_SCHEMA row per episode; `active` while the episode has no end."""
    settings = settings or AlertSettings()
    kind = F.col("kind")
    partition_text = F.col("partition").cast("string")
    where = F.when(
        F.col("topic").isNotNull(),
        F.concat(
            F.lit(" on "),
            F.col("topic"),
            F.when(
                partition_text.isNotNull(), F.concat(F.lit("["), partition_text, F.lit("]"))
            ).otherwise(F.lit("")),
        ),
    ).otherwise(F.lit(""))
    since = F.date_format(F.timestamp_millis(F.col("start_ms")), "yyyy-MM-dd'T'HH:mm:ss'Z'")
    until = F.date_format(F.timestamp_millis(F.col("end_ms")), "yyyy-MM-dd'T'HH:mm:ss'Z'")
    size = F.when(
        F.col("size").isNotNull(),
        F.concat(
            F.lit(" Size: "),
            F.format_number(F.col("size"), 0),
            F.lit(" "),
            F.coalesce(F.col("unit"), F.lit("")),
            F.lit("."),
        ),
    ).otherwise(F.lit(""))
    detail = F.when(F.col("detail").isNotNull(), F.concat(F.lit(" Detail: "), F.col("detail")))
    cause = _cause(episodes)
    identity = F.concat_ws(
        "|",
        kind,
        F.col("group"),
        F.coalesce(F.col("topic"), F.lit("")),
        F.coalesce(partition_text, F.lit("")),
        F.col("start_ms").cast("string"),
    )
    alerts = episodes.select(
        F.substring(F.sha2(identity, 256), 1, 16).alias("alert_id"),
        _lookup(ALERT_NAMES, kind).alias("name"),
        F.coalesce(_lookup(settings.severities, kind), F.lit("warning")).alias("severity"),
        F.col("group"),
        F.col("topic"),
        partition_text.alias("partitions"),
        F.col("start_ms").alias("starts_at"),
        F.col("end_ms").alias("ends_at"),
        F.col("end_ms").isNull().alias("active"),
        F.col("size").alias("value"),
        F.concat(
            F.when(kind.startswith("share_"), F.lit("Share group ")).otherwise(
                F.lit("Consumer group ")
            ),
            F.col("group"),
            F.lit(" "),
            _lookup(_WHAT, kind),
            where,
        ).alias("summary"),
        F.concat(
            F.lit("Since "),
            since,
            F.when(F.col("end_ms").isNotNull(), F.concat(F.lit(" until "), until)).otherwise(
                F.lit(", still open")
            ),
            F.lit("."),
            size,
            cause,
            F.coalesce(detail, F.lit("")),
        ).alias("description"),
        (
            F.concat(F.lit(settings.runbook_base + "#"), kind)
            if settings.runbook_base is not None
            else F.lit(None).cast("string")
        ).alias("runbook_url"),
    )
    return alerts.where(F.col("name").isNotNull()).select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in ALERTS_SCHEMA.fields]
    )
