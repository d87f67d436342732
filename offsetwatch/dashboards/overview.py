"""The overview dashboard: every group of one or more exporters at a glance."""

from __future__ import annotations

from typing import Final

from offsetwatch.dashboards import common, share
from offsetwatch.dashboards.grafana import (
    YES_NO,
    Column,
    Dashboard,
    Query,
    Row,
    piechart,
    selector,
    stat,
    state_timeline,
    status_column_properties,
    table,
    timeseries,
)

UID: Final = common.OVERVIEW_UID


def _g(metric: str) -> str:
    return selector(metric, "group")


def _gt(metric: str) -> str:
    return selector(metric, "group", "topic")


def _summary() -> Row:
    per_group = ("instance", "group")
    return Row(
        "Overview",
        (
            stat(
                "Groups",
                "Groups in the latest snapshot (after --group-allow/--group-deny).",
                "short",
                Query(f"sum({common.exporter('offsetwatch_groups')})", instant=True),
            ),
            stat(
                "Groups not OK",
                "Groups whose status is WARN, REWIND, STALL, STOP or ERR.",
                "short",
                Query(f"count({_g('offsetwatch_group_status')} > 0) or vector(0)", instant=True),
                steps=(("green", None), ("yellow", 1)),
                colour="background",
            ),
            stat(
                "STALL / STOP / ERR",
                "Groups in STALL, STOP or ERR: what OffsetwatchGroupStatus alerts on.",
                "short",
                Query(f"count({_g('offsetwatch_group_status')} >= 3) or vector(0)", instant=True),
                steps=(("green", None), ("red", 1)),
                colour="background",
            ),
            stat(
                "Max lag in seconds",
                "Age of the oldest unread message over the selected groups (0: caught up).",
                "s",
                Query(f"max({_g('offsetwatch_group_lag_seconds')})", instant=True),
                steps=(("green", None), ("orange", 300), ("red", 1800)),
                colour="value",
            ),
            stat(
                "Total lag",
                "Messages not consumed yet, summed over the selected groups.",
                "short",
                Query(f"sum({_g('offsetwatch_group_lag')})", instant=True),
            ),
            stat(
                "Exporter scraped",
                "Prometheus scrapes of offsetwatch (up).",
                "none",
                Query(f"min({common.exporter('up')})", instant=True),
                steps=(("red", None), ("green", 1)),
                mappings=(("DOWN", "red"), ("UP", "green")),
                colour="background",
            ),
            stat(
                "Ready",
                "1 once the first pass over __consumer_offsets is done; lag is exported from then.",
                "none",
                Query(f"min({common.exporter('offsetwatch_ready')})", instant=True),
                steps=(("red", None), ("green", 1)),
                mappings=(("CATCHING UP", "red"), ("READY", "green")),
                colour="background",
            ),
            stat(
                "Kafka source",
                "Connection of the exporter's consumer of __consumer_offsets.",
                "none",
                Query(f"min({common.exporter('offsetwatch_source_up')})", instant=True),
                steps=(("red", None), ("green", 1)),
                mappings=(("DOWN", "red"), ("UP", "green")),
                colour="background",
            ),
            table(
                "Group status",
                "One row per group: worst partition status, lag, lag in seconds, time since the "
                "last commit, commit rate, members, kind, state and assignor. The group link "
                "opens the Group detail dashboard.",
                (("instance", "Exporter"), ("group", "Group")),
                (
                    Column(
                        "Status",
                        common.by(per_group, _g("offsetwatch_group_status")),
                        "none",
                        status_column_properties(),
                    ),
                    Column("Lag", common.by(per_group, _g("offsetwatch_group_lag"))),
                    Column(
                        "Lag (s)",
                        common.by(per_group, _g("offsetwatch_group_lag_seconds")),
                        "s",
                        common.lag_seconds_cell(),
                    ),
                    Column(
                        "Since last commit",
                        common.by(per_group, _g("offsetwatch_group_seconds_since_last_commit")),
                        "s",
                    ),
                    Column(
                        "Commits/s",
                        common.by(per_group, _g("offsetwatch_group_commit_rate")),
                        "cps",
                        ({"id": "decimals", "value": 2},),
                    ),
                    Column("Members", common.by(per_group, _g("offsetwatch_group_members"))),
                    Column(
                        "",
                        common.by(
                            (*per_group, "kind", "state", "protocol"),
                            _g("offsetwatch_group_info"),
                        ),
                    ),
                ),
                extra_labels=(("kind", "Kind"), ("state", "State"), ("protocol", "Assignor")),
                sort_by="Status",
                label_links={"group": (common.group_detail_link(), common.api_link())},
            ),
            state_timeline(
                "Group status history",
                "Worst partition status of each group over time (OK, WARN, REWIND, STALL, "
                "STOP, ERR).",
                Query(_g("offsetwatch_group_status"), "{{group}}"),
                mappings=common.STATUSES,
            ),
        ),
    )


def _lag() -> Row:
    partition = ("instance", "group", "topic", "partition")
    return Row(
        "Lag",
        (
            timeseries(
                "Lag in seconds per group",
                "Age of the oldest unread message of each group (its slowest partition); 0 when "
                "caught up. The orange and red areas are the OffsetwatchGroupLagHigh thresholds "
                "(300 s, 1800 s).",
                "s",
                Query(_g("offsetwatch_group_lag_seconds"), "{{group}}"),
                steps=(("transparent", None), ("orange", 300), ("red", 1800)),
            ),
            timeseries(
                "Lag per group",
                "Messages between the committed offsets and the log ends, summed over the "
                "group's partitions.",
                "short",
                Query(_g("offsetwatch_group_lag"), "{{group}}"),
            ),
            timeseries(
                "Lag rate of change",
                "How fast each group's lag changes (deriv over 10 minutes): above 0 the group "
                "falls behind, below 0 it catches up.",
                "short",
                Query(f"deriv({_g('offsetwatch_group_lag')}[10m])", "{{group}}"),
            ),
            timeseries(
                "Lag in seconds per topic",
                "Largest partition lag in seconds per (group, topic). Needs --granularity topic "
                "or partition.",
                "s",
                Query(_gt("offsetwatch_group_topic_lag_seconds"), "{{group}} {{topic}}"),
            ),
            timeseries(
                "Lag per partition",
                "Lag of every selected partition. Needs --granularity partition.",
                "short",
                Query(_gt("offsetwatch_group_partition_lag"), "{{group}} {{topic}}/{{partition}}"),
            ),
            timeseries(
                "Lag in seconds per partition",
                "Age of the next unread message of every selected partition. Needs --granularity "
                "partition.",
                "s",
                Query(
                    _gt("offsetwatch_group_partition_lag_seconds"),
                    "{{group}} {{topic}}/{{partition}}",
                ),
            ),
            table(
                "Partitions",
                "Like kafka-consumer-groups --describe, per selected partition: status, committed "
                "offset, lag, lag in seconds and the age of the last commit. Needs --granularity "
                "partition.",
                (
                    ("instance", "Exporter"),
                    ("group", "Group"),
                    ("topic", "Topic"),
                    ("partition", "Partition"),
                ),
                common.partition_columns(partition, _gt),
                sort_by="Lag",
                label_links={"group": (common.group_detail_link(), common.api_link())},
            ),
        ),
    )


def _commits() -> Row:
    return Row(
        "Commits and membership",
        (
            timeseries(
                "Commit rate",
                "Offset commit records per second (one per partition and commit) seen in "
                "__consumer_offsets.",
                "cps",
                Query(
                    f"rate({_g('offsetwatch_group_commits_total')}[$__rate_interval])", "{{group}}"
                ),
            ),
            timeseries(
                "Seconds since last commit",
                "Time since each group's latest commit. Not an alert by itself: an idle consumer "
                "of an idle topic commits rarely and is fine (lag in seconds is 0).",
                "s",
                Query(_g("offsetwatch_group_seconds_since_last_commit"), "{{group}}"),
            ),
            timeseries(
                "Members",
                "Members per group (0 for empty and simple assign() groups).",
                "short",
                Query(_g("offsetwatch_group_members"), "{{group}}"),
                table_legend=False,
                w=8,
            ),
            piechart(
                "Groups per state",
                "Current state of the selected groups as the coordinator recorded it: STABLE, "
                "EMPTY, and for KIP-848 groups ASSIGNING and RECONCILING.",
                Query(
                    f"count by (state) ({_g('offsetwatch_group_state')})", "{{state}}", instant=True
                ),
            ),
            timeseries(
                "Rebalances",
                "Changes of the classic generation / KIP-848 group epoch: one per rebalance.",
                "short",
                Query(
                    f"changes({_g('offsetwatch_group_generation')}[$__rate_interval])", "{{group}}"
                ),
                bars=True,
                table_legend=False,
                w=8,
            ),
        ),
    )


def _exporter() -> Row:
    return Row(
        "Exporter",
        (
            state_timeline(
                "Scraped, ready, Kafka source",
                "Prometheus scrapes (up), the end of the first pass over __consumer_offsets "
                "(ready) and the connection to Kafka (source up), per exporter. More on the "
                "Exporter health dashboard.",
                Query(common.exporter("up"), "scraped {{instance}}"),
                Query(common.exporter("offsetwatch_ready"), "ready {{instance}}"),
                Query(common.exporter("offsetwatch_source_up"), "source up {{instance}}"),
                mappings=YES_NO,
                show_values=True,
                h=5,
            ),
            timeseries(
                "Source lag (__consumer_offsets)",
                "Records of __consumer_offsets the exporter has not read yet: its own lag. "
                "Lag and status trail the real consumers by this much.",
                "short",
                Query(
                    f"sum by (instance) ({common.exporter('offsetwatch_source_lag')})",
                    "{{instance}}",
                ),
                table_legend=False,
                w=8,
            ),
            common.decode_errors_panel(),
            common.ages_panel(),
        ),
    )


def build() -> Dashboard:
    return Dashboard(
        uid=UID,
        title="offsetwatch / Kafka consumer lag",
        description=(
            "Consumer-group lag, lag in seconds and status from offsetwatch (metrics: "
            "docs/metrics.md; alert rules: grafana/prometheus/offsetwatch-rules.yml)."
        ),
        variables=common.variables(group_multi=True),
        rows=(_summary(), _lag(), share.overview_row(), _commits(), _exporter()),
        links=common.links(UID),
        annotation_selector='instance=~"$instance",group=~"$group|"',
    )
