"""Share group (KIP-932 queue) panels: a row of the group detail, a row of the overview.

A share group has no committed offsets: its backlog is the KIP-1226 share lag per share
partition (log end - start offset - records acknowledged or archived past it), from
`__share_group_state` (docs/metrics.md, "Share groups"). The queries select on the group only:
the dashboards' topic variable lists the topics groups commit offsets for, which a queue has
none of.
"""

from __future__ import annotations

from offsetwatch.dashboards import common
from offsetwatch.dashboards.grafana import Query, Row, selector, stat, state_timeline, timeseries


def _g(metric: str) -> str:
    return selector(metric, "group")


def detail_row() -> Row:
    """One share group, share partition by share partition (empty for other kinds)."""
    return Row(
        "Share group (queue)",
        (
            stat(
                "Queue status",
                "Worst share partition status: OK, WARN (backlog grows, or poison records), "
                "STALL (members, start offset stuck), STOP (no members, records wait), ERR. "
                "Empty for groups that are not share groups.",
                "none",
                Query(f"max({_g('offsetwatch_share_group_status')})", instant=True),
                steps=common.STATUS_STEPS,
                mappings=common.STATUSES,
                colour="background",
                w=6,
            ),
            stat(
                "Share backlog",
                "Records neither acknowledged nor archived, over all share partitions "
                "(KIP-1226 share lag).",
                "short",
                Query(f"sum({_g('offsetwatch_share_group_lag')})", instant=True),
                w=6,
            ),
            stat(
                "Oldest waiting record",
                "Age of the oldest record not done yet in the group (0: nothing waits).",
                "s",
                Query(f"max({_g('offsetwatch_share_group_lag_seconds')})", instant=True),
                steps=(("green", None), ("orange", 300), ("red", 1800)),
                colour="value",
                w=6,
            ),
            stat(
                "Poison records",
                "Records available again after 3 deliveries or more, or archived at the delivery "
                "limit (OffsetwatchSharePoisonRecords). Their offsets are in the API.",
                "short",
                Query(f"sum({_g('offsetwatch_share_group_poison_records')})", instant=True),
                steps=(("green", None), ("red", 1)),
                colour="value",
                w=6,
            ),
            timeseries(
                "Share backlog per partition",
                "Share lag of each share partition: log end - start offset - acknowledged - "
                "archived records past it. Needs --granularity partition.",
                "short",
                Query(_g("offsetwatch_share_partition_lag"), "{{topic}}/{{partition}}"),
            ),
            timeseries(
                "Share lag in seconds per partition",
                "Age of the oldest record neither acknowledged nor archived, per share "
                "partition; 0 when none waits.",
                "s",
                Query(_g("offsetwatch_share_partition_lag_seconds"), "{{topic}}/{{partition}}"),
                steps=(("transparent", None), ("orange", 300), ("red", 1800)),
            ),
            timeseries(
                "In-flight records by delivery state",
                "Records past the start offset in the batches Kafka persisted, summed over the "
                "share partitions: available (released, waiting for redelivery), acknowledged, "
                "archived (rejected or at the delivery limit). Acquired records are never "
                "persisted.",
                "short",
                Query(f"sum by (state) ({_g('offsetwatch_share_partition_records')})", "{{state}}"),
                table_legend=False,
                w=8,
            ),
            timeseries(
                "Start offset per partition",
                "Every record before the start offset is done. A flat line while records wait "
                "is a stuck queue (STALL, or STOP without members).",
                "none",
                Query(_g("offsetwatch_share_partition_start_offset"), "{{topic}}/{{partition}}"),
                w=8,
            ),
            timeseries(
                "Poison records and deliveries per partition",
                "Poison records of each share partition, and the highest delivery count past "
                "its start offset (records archived at group.share.delivery.count.limit reach "
                "it).",
                "short",
                Query(
                    _g("offsetwatch_share_partition_poison_records"),
                    "poison {{topic}}/{{partition}}",
                ),
                Query(
                    _g("offsetwatch_share_partition_max_delivery_count"),
                    "max deliveries {{topic}}/{{partition}}",
                ),
                w=8,
            ),
            state_timeline(
                "Queue status per share partition",
                "Status of each share partition over time; the group takes the worst one.",
                Query(_g("offsetwatch_share_partition_status"), "{{topic}}/{{partition}}"),
                mappings=common.STATUSES,
            ),
        ),
    )


def overview_row() -> Row:
    """Every selected share group: backlog, its age, poison records, status."""
    return Row(
        "Share groups (queues)",
        (
            timeseries(
                "Share backlog per share group",
                "Records neither acknowledged nor archived (KIP-1226 share lag), per share group.",
                "short",
                Query(_g("offsetwatch_share_group_lag"), "{{group}}"),
                w=8,
            ),
            timeseries(
                "Oldest waiting record per share group",
                "Age of each share group's oldest record not done yet; 0 when none waits.",
                "s",
                Query(_g("offsetwatch_share_group_lag_seconds"), "{{group}}"),
                steps=(("transparent", None), ("orange", 300), ("red", 1800)),
                w=8,
            ),
            timeseries(
                "Poison records per share group",
                "Records redelivered again and again or archived at the delivery limit.",
                "short",
                Query(_g("offsetwatch_share_group_poison_records"), "{{group}}"),
                bars=True,
                w=8,
            ),
            state_timeline(
                "Queue status per share group",
                "OK, WARN (backlog grows, or poison records), STALL, STOP, ERR per share group.",
                Query(_g("offsetwatch_share_group_status"), "{{group}}"),
                mappings=common.STATUSES,
            ),
        ),
    )
