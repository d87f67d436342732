"""What the three offsetwatch dashboards share: variables, links, panels, queries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from offsetwatch.dashboards.grafana import (
    JSON,
    STATUS_COLOURS,
    Column,
    Panel,
    Query,
    Variable,
    dashboard_link,
    selector,
    status_column_properties,
    thresholds,
    timeseries,
)

OVERVIEW_UID: Final = "offsetwatch-overview"
GROUP_DETAIL_UID: Final = "offsetwatch-group-detail"
EXPORTER_HEALTH_UID: Final = "offsetwatch-exporter-health"

STATUSES: Final = STATUS_COLOURS
STATUS_STEPS: Final = tuple(
    (colour, None if value == 0 else float(value)) for value, (_, colour) in enumerate(STATUSES)
)


def exporter(metric: str) -> str:
    return selector(metric)


def by(labels: Sequence[str], expr: str) -> Query:
    """An instant table query: `max by (labels) (expr)`."""
    return Query(f"max by ({', '.join(labels)}) ({expr})", instant=True, table=True)


def variables(*, group_multi: bool) -> tuple[Variable, ...]:
    return (
        Variable("job", "Job", "offsetwatch_build_info"),
        Variable("instance", "Exporter", 'offsetwatch_build_info{job=~"$job"}', multi=True),
        Variable(
            "group",
            "Group",
            'offsetwatch_group_status{job=~"$job",instance=~"$instance"}',
            multi=group_multi,
        ),
        Variable(
            "topic",
            "Topic",
            'offsetwatch_group_topic_status{job=~"$job",instance=~"$instance",group=~"$group"}',
            multi=True,
        ),
    )


def links(current: str) -> tuple[JSON, ...]:
    """Links to the two other dashboards."""
    every = (
        (OVERVIEW_UID, "Overview", "Every group: status, lag, commits"),
        (GROUP_DETAIL_UID, "Group detail", "One group: partitions, members, commits"),
        (EXPORTER_HEALTH_UID, "Exporter health", "offsetwatch itself: ingest, errors, ages"),
    )
    return tuple(dashboard_link(title, uid, tip) for uid, title, tip in every if uid != current)


def group_detail_link() -> JSON:
    """Data link from a group name cell to the Group detail dashboard of that group."""
    return {
        "title": "Group detail: partitions, members, commits of ${__value.raw}",
        "url": (
            f"/d/{GROUP_DETAIL_UID}?${{__url_time_range}}&${{DS_PROMETHEUS:queryparam}}"
            "&${job:queryparam}&var-instance=${__data.fields.instance}"
            "&var-group=${__value.raw:percentencode}"
        ),
        "targetBlank": False,
    }


def api_link() -> JSON:
    """Data link to the exporter's own description of the group (owners, metadata)."""
    return {
        "title": "offsetwatch API: this group (partitions, members, assignments)",
        "url": "http://${__data.fields.instance}/api/v1/groups/${__value.raw:percentencode}",
        "targetBlank": True,
    }


def lag_seconds_cell() -> tuple[JSON, ...]:
    return (
        {"id": "thresholds", "value": thresholds(("green", None), ("orange", 300), ("red", 1800))},
        {"id": "custom.cellOptions", "value": {"type": "color-text"}},
    )


def partition_columns(labels: Sequence[str], sel: Callable[[str], str]) -> tuple[Column, ...]:
    """The kafka-consumer-groups --describe columns of a partition table."""
    return (
        Column(
            "Status",
            by(labels, sel("offsetwatch_group_partition_status")),
            "none",
            status_column_properties(),
        ),
        Column(
            "Committed", by(labels, sel("offsetwatch_group_partition_committed_offset")), "none"
        ),
        Column("Lag", by(labels, sel("offsetwatch_group_partition_lag"))),
        Column(
            "Lag (s)",
            by(labels, sel("offsetwatch_group_partition_lag_seconds")),
            "s",
            lag_seconds_cell(),
        ),
        Column(
            "Last commit age",
            by(
                labels,
                f"time() - {sel('offsetwatch_group_partition_last_commit_timestamp_seconds')}",
            ),
            "s",
        ),
    )


def decode_errors_panel(w: int = 8) -> Panel:
    def increase(metric: str) -> str:
        return f"increase({exporter(metric)}[$__rate_interval])"

    return timeseries(
        "Decode errors and quarantine",
        "Records that failed to decode (by reason), were set aside, sent to the DLQ topic, or "
        "failed to publish downstream. Anything above 0 deserves a look "
        "(OffsetwatchDecodeErrors).",
        "short",
        Query(
            f"sum by (instance, reason) ({increase('offsetwatch_decode_errors_total')})",
            "decode error {{reason}} {{instance}}",
        ),
        Query(
            f"sum by (instance) ({increase('offsetwatch_quarantined_total')})",
            "quarantined {{instance}}",
        ),
        Query(f"sum by (instance) ({increase('offsetwatch_dlq_total')})", "DLQ {{instance}}"),
        Query(
            f"sum by (instance) ({increase('offsetwatch_publish_errors_total')})",
            "publish errors {{instance}}",
        ),
        bars=True,
        table_legend=False,
        w=w,
    )


def ages_panel(w: int = 8) -> Panel:
    return timeseries(
        "Snapshot, log-end sample and checkpoint age",
        "Age of the served snapshot (about --snapshot-interval-s), of the last log-end sampling "
        "round (about --sample-interval-s) and of the last checkpoint (with --checkpoint-path). "
        "A steadily growing line is a stuck loop (the *Stale alerts).",
        "s",
        Query(exporter("offsetwatch_snapshot_age_seconds"), "snapshot {{instance}}"),
        Query(exporter("offsetwatch_log_end_sample_age_seconds"), "log-end sample {{instance}}"),
        Query(exporter("offsetwatch_checkpoint_age_seconds"), "checkpoint {{instance}}"),
        table_legend=False,
        w=w,
    )
