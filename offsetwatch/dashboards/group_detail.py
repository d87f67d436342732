"""The group detail dashboard: one consumer group, partition by partition."""

from __future__ import annotations

from typing import Final

from offsetwatch.dashboards import common, share
from offsetwatch.dashboards.grafana import (
    Column,
    Dashboard,
    Query,
    Row,
    selector,
    stat,
    state_timeline,
    table,
    timeseries,
)

UID: Final = common.GROUP_DETAIL_UID

PARTITION: Final = ("instance", "topic", "partition")


def _g(metric: str) -> str:
    return selector(metric, "group")


def _gt(metric: str) -> str:
    return selector(metric, "group", "topic")


def _summary() -> Row:
    status = stat(
        "Status",
        "Worst partition status of the group: OK, WARN (falling behind), REWIND (offset went "
        "back), STALL (commits, offset stuck), STOP (no commits, lag), ERR.",
        "none",
        Query(f"max({_g('offsetwatch_group_status')})", instant=True),
        steps=common.STATUS_STEPS,
        mappings=common.STATUSES,
        colour="background",
    )
    return Row(
        "Group",
        (
            status,
            stat(
                "Lag in seconds",
                "Age of the oldest unread message of the group (0: caught up). Alerts at 300 s "
                "and 1800 s.",
                "s",
                Query(f"max({_g('offsetwatch_group_lag_seconds')})", instant=True),
                steps=(("green", None), ("orange", 300), ("red", 1800)),
                colour="value",
            ),
            stat(
                "Lag",
                "Messages not consumed yet over all the group's partitions.",
                "short",
                Query(f"sum({_g('offsetwatch_group_lag')})", instant=True),
            ),
            stat(
                "Members",
                "Members of the group (0 for an empty or simple assign() group).",
                "short",
                Query(f"sum({_g('offsetwatch_group_members')})", instant=True),
            ),
            stat(
                "State",
                "The group's state as the coordinator recorded it.",
                "none",
                Query(_g("offsetwatch_group_state"), "{{state}}", instant=True),
                text_mode="name",
            ),
            stat(
                "Kind and assignor",
                "CLASSIC, CONSUMER (KIP-848), SHARE or STREAMS, and the assignor in use.",
                "none",
                Query(_g("offsetwatch_group_info"), "{{kind}} {{protocol}}", instant=True),
                text_mode="name",
            ),
            stat(
                "Since last commit",
                "Time since the group's latest offset commit.",
                "s",
                Query(f"max({_g('offsetwatch_group_seconds_since_last_commit')})", instant=True),
            ),
            stat(
                "Commits/s",
                "Partition commits per second over the status window.",
                "cps",
                Query(f"sum({_g('offsetwatch_group_commit_rate')})", instant=True),
            ),
        ),
    )


def _partitions() -> Row:
    committed = _gt("offsetwatch_group_partition_committed_offset")
    log_end = selector("offsetwatch_partition_log_end_offset", "topic")
    on = ", ".join(PARTITION)
    return Row(
        "Partitions",
        (
            timeseries(
                "Committed offset and log end",
                "Per partition: the committed offset (the next message the group reads) and the "
                "partition's log end. The gap between the two is the lag; a flat committed line "
                "under a rising log end is a stalled or stopped consumer.",
                "none",
                Query(committed, "committed {{topic}}/{{partition}}"),
                Query(
                    f"max by ({on}) ({log_end}) and on ({on}) max by ({on}) ({committed})",
                    "log end {{topic}}/{{partition}}",
                ),
            ),
            state_timeline(
                "Status per partition",
                "Status of each partition over time; the group takes the worst one.",
                Query(_gt("offsetwatch_group_partition_status"), "{{topic}}/{{partition}}"),
                mappings=common.STATUSES,
                w=12,
            ),
            timeseries(
                "Lag per partition",
                "Messages between the committed offset and the log end, per partition.",
                "short",
                Query(_gt("offsetwatch_group_partition_lag"), "{{topic}}/{{partition}}"),
            ),
            timeseries(
                "Lag in seconds per partition",
                "Age of the next message each partition's consumer would read; 0 when caught "
                "up. Shaded: the alert thresholds of the group's lag in seconds.",
                "s",
                Query(_gt("offsetwatch_group_partition_lag_seconds"), "{{topic}}/{{partition}}"),
                steps=(("transparent", None), ("orange", 300), ("red", 1800)),
            ),
            table(
                "Partitions",
                "Like kafka-consumer-groups --describe: status, committed offset, lag, lag in "
                "seconds and last commit age per partition. Needs --granularity partition.",
                (("instance", "Exporter"), ("topic", "Topic"), ("partition", "Partition")),
                common.partition_columns(PARTITION, _gt),
                sort_by="Lag",
            ),
        ),
    )


def _members() -> Row:
    owner = ("topic", "partition", "consumer_id", "client_id", "member_host")
    assignment = (
        f"max by ({', '.join(owner)}) "
        f'(kafka_consumergroup_group_lag{{job=~"$job",instance=~"$instance",group=~"$group",'
        f'topic=~"$topic"}})'
    )
    return Row(
        "Members and assignments",
        (
            timeseries(
                "Members",
                "Number of members over time: drops and returns are consumers leaving and joining.",
                "short",
                Query(_g("offsetwatch_group_members"), "members"),
                table_legend=False,
                w=8,
            ),
            timeseries(
                "Generation and assignment epoch",
                "Classic generation or KIP-848 group epoch (each step is a rebalance) and the "
                "target assignment epoch (trails the group epoch while the assignor runs).",
                "none",
                Query(_g("offsetwatch_group_generation"), "generation / group epoch"),
                Query(_g("offsetwatch_group_assignment_epoch"), "assignment epoch"),
                table_legend=False,
                w=8,
            ),
            timeseries(
                "Rebalances",
                "Changes of the generation / group epoch: one per rebalance.",
                "short",
                Query(
                    f"changes({_g('offsetwatch_group_generation')}[$__rate_interval])", "rebalances"
                ),
                bars=True,
                table_legend=False,
                w=8,
            ),
            table(
                "Assignments",
                "Which member owns each partition, with its lag. The member labels come from "
                "the kafka-lag-exporter aliases: run the exporter with "
                "--kafka-lag-exporter-aliases, or open the group in offsetwatch's API "
                "(/api/v1/groups/<group>), which lists every member and its assignment.",
                (
                    ("topic", "Topic"),
                    ("partition", "Partition"),
                    ("consumer_id", "Member"),
                    ("client_id", "Client"),
                    ("member_host", "Host"),
                ),
                (Column("Lag", Query(assignment, instant=True, table=True)),),
                sort_by="Lag",
                h=8,
            ),
        ),
    )


def _commits() -> Row:
    return Row(
        "Commits",
        (
            timeseries(
                "Commit rate",
                "Offset commit records per second from the counter, and the exporter's own "
                "rate over the status window.",
                "cps",
                Query(
                    f"rate({_g('offsetwatch_group_commits_total')}[$__rate_interval])",
                    "commits (counter)",
                ),
                Query(_g("offsetwatch_group_commit_rate"), "commits (status window)"),
                table_legend=False,
            ),
            timeseries(
                "Seconds since last commit per partition",
                "Age of each partition's last commit. A consumer that commits but does not "
                "move (STALL) keeps this low; a stopped one lets it grow.",
                "s",
                Query(
                    f"time() - {_gt('offsetwatch_group_partition_last_commit_timestamp_seconds')}",
                    "{{topic}}/{{partition}}",
                ),
            ),
        ),
    )


def build() -> Dashboard:
    return Dashboard(
        uid=UID,
        title="offsetwatch / Consumer group detail",
        description=(
            "One consumer group: partitions (committed offset, log end, lag, lag in seconds, "
            "status), members and assignments, commits and rebalances; for a share group "
            "(queue), its share partitions: backlog, start offset, records by delivery state, "
            "poison records."
        ),
        variables=common.variables(group_multi=False),
        rows=(_summary(), _partitions(), share.detail_row(), _members(), _commits()),
        links=common.links(UID),
        annotation_selector='instance=~"$instance",group=~"$group"',
    )
