"""Text, JSON and CSV views of group reports, reset plans and migration checks."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from offsetwatch.offset_ops.describe import GroupReport, PartitionRow, ShareRow
from offsetwatch.offset_ops.migrate import VerifyRow
from offsetwatch.offset_ops.model import Committed, GroupListing
from offsetwatch.offset_ops.plan import PlanRow

Cell = str | int | float | None


def _text(value: Cell) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """Left-aligned columns two spaces apart, like Kafka's tools; unknown values print `-`."""
    cells = [list(header)] + [[_text(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in cells
    )


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return buffer.getvalue()


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def json_key(column: str) -> str:
    """`COORDINATOR (ID)` -> `coordinator_id`, `#MEMBERS` -> `members`."""
    return re.sub(r"[^a-z0-9]+", "_", column.lower()).strip("_")


def render(fmt: str, header: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    if fmt == "csv":
        return csv_text(header, rows)
    if fmt == "json":
        keys = [json_key(h) for h in header]
        return json_text([dict(zip(keys, row, strict=True)) for row in rows])
    return table(header, rows)


# -- groups list ---------------------------------------------------------------------------

LISTING_HEADER = ("GROUP", "TYPE", "STATE", "SIMPLE")


def listing_rows(listings: Sequence[GroupListing]) -> list[list[Cell]]:
    return [[x.group_id, x.type, x.state, "yes" if x.is_simple else "no"] for x in listings]


# -- groups describe -----------------------------------------------------------------------


def offsets_header(with_exporter: bool) -> tuple[str, ...]:
    base = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    return (*base, "LAG-SECONDS", "STATUS") if with_exporter else base


def _offsets_row(group: str, row: PartitionRow, with_exporter: bool) -> list[Cell]:
    member = row.member
    out: list[Cell] = [
        group,
        row.topic,
        row.partition,
        row.current,
        row.log_end,
        row.lag,
        member.member_id if member else None,
        member.host if member else None,
        member.client_id if member else None,
    ]
    if with_exporter:
        out += [row.lag_seconds, row.status]
    return out


def offsets_rows(report: GroupReport, with_exporter: bool) -> list[list[Cell]]:
    return [_offsets_row(report.group_id, row, with_exporter) for row in report.rows]


# A share group (KIP-932) has no committed offset: its position is the start offset in
# `__share_group_state`, with records acknowledged or archived past it. Kafka 4.0's
# kafka-share-groups.sh prints the partition's log end as START-OFFSET; this is the group's.
SHARE_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "START-OFFSET",
    "LOG-END-OFFSET",
    "ACKNOWLEDGED",
    "ARCHIVED",
    "AVAILABLE",
    "MAX-DELIVERIES",
    "LAG",
    "LAG-SECONDS",
    "STATUS",
)


def _share_row(group: str, row: ShareRow) -> list[Cell]:
    return [
        group,
        row.topic,
        row.partition,
        row.start_offset,
        row.log_end,
        row.acknowledged,
        row.archived,
        row.available,
        row.max_delivery_count,
        row.lag,
        row.lag_seconds,
        row.status,
    ]


def share_rows(report: GroupReport) -> list[list[Cell]]:
    return [_share_row(report.group_id, row) for row in report.share or ()]


def group_total(report: GroupReport) -> str:
    state = report.info.state if report.info else "state unknown"
    count = len(report.rows) if report.share is None else len(report.share)
    kind = "" if report.share is None else "share "
    return (
        f"{kind}group {report.group_id}: {count} partitions, total lag "
        f"{report.total_lag}, {state}\n{diagnosis_line(report)}"
    )


def diagnosis_line(report: GroupReport) -> str:
    """`STALL, cause stuck_member: <reason>` from the exporter's diagnosis, when it has one."""
    diagnosis = report.exporter.get("diagnosis")
    if not isinstance(diagnosis, dict) or not diagnosis.get("cause"):
        return ""
    line = f"{diagnosis.get('status')}, cause {diagnosis['cause']}: {diagnosis.get('reason')}"
    catch_up = diagnosis.get("catch_up_seconds")
    if isinstance(catch_up, int | float) and catch_up > 0:
        line += f" (caught up in about {catch_up:.0f} s at the current rate)"
    elif diagnosis.get("falling_behind"):
        line += " (falling behind)"
    return line + "\n"


MEMBERS_HEADER = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")


def _assignment(keys: Sequence[tuple[str, int]]) -> str | None:
    """`orders:0,1,2;refunds:0`: kafka-consumer-groups' CURRENT-ASSIGNMENT, `topic:partitions`
    per topic in topic order, topics apart by `;` (a space would split the table's column)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in keys:
        by_topic.setdefault(topic, []).append(partition)
    text = ";".join(f"{t}:{','.join(map(str, sorted(by_topic[t])))}" for t in sorted(by_topic))
    return text or None


def members_rows(report: GroupReport) -> list[list[Cell]]:
    if report.info is None:
        return []
    return [
        [
            report.group_id,
            m.member_id,
            m.host,
            m.client_id,
            len(m.assignment),
            _assignment(m.assignment),
        ]
        for m in report.info.members
    ]


# kafka-streams-groups.sh --describe --members: a member runs tasks (subtopology:[partitions])
STREAMS_MEMBERS_HEADER = ("GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS")


def streams_members_rows(report: GroupReport) -> list[list[Cell]]:
    if report.info is None:
        return []
    return [
        [report.group_id, m.member_id, m.process_id, m.client_id, m.tasks or None]
        for m in report.info.members
    ]


STATE_HEADER = (
    "GROUP",
    "COORDINATOR (ID)",
    "ASSIGNMENT-STRATEGY",
    "STATE",
    "TYPE",
    "#MEMBERS",
    "EPOCH",
)


def state_row(report: GroupReport) -> list[Cell]:
    info = report.info
    # confluent-kafka's description has no generation or epoch; the exporter knows them.
    epoch = report.exporter.get("assignment_epoch")
    if epoch is None:
        epoch = report.exporter.get("generation")
    if info is None:
        return [report.group_id, None, None, "UNKNOWN", None, None, epoch]
    return [
        report.group_id,
        info.coordinator or None,
        info.assignor or None,
        info.state,
        info.type,
        len(info.members),
        epoch,
    ]


def report_json(report: GroupReport, with_exporter: bool) -> dict[str, Any]:
    keys = [json_key(h) for h in offsets_header(with_exporter)]
    info = report.info
    return {
        "group": report.group_id,
        "state": info.state if info else None,
        "type": info.type if info else None,
        "coordinator": info.coordinator if info else None,
        "assignment_strategy": info.assignor if info else None,
        "generation": report.exporter.get("generation"),
        "assignment_epoch": report.exporter.get("assignment_epoch"),
        "status": report.exporter.get("status"),
        "cause": (report.exporter.get("diagnosis") or {}).get("cause"),
        "diagnosis": report.exporter.get("diagnosis"),
        "total_lag": report.total_lag,
        "members": [
            dict(zip(map(json_key, MEMBERS_HEADER), row, strict=True))
            for row in members_rows(report)
        ],
        **(
            {
                "streams_members": [
                    dict(zip(map(json_key, STREAMS_MEMBERS_HEADER), row, strict=True))
                    for row in streams_members_rows(report)
                ]
            }
            if info is not None and info.type == "STREAMS"
            else {}
        ),
        "partitions": [
            dict(zip(keys, row, strict=True)) for row in offsets_rows(report, with_exporter)
        ],
        **(
            {}
            if report.share is None
            else {
                "share_partitions": [
                    dict(zip(map(json_key, SHARE_HEADER), row, strict=True))
                    for row in share_rows(report)
                ]
            }
        ),
    }


# -- offsets reset / migrate ---------------------------------------------------------------

PLAN_HEADER = ("TOPIC", "PARTITION", "CURRENT", "NEW", "DELTA", "EFFECT", "NOTE")


def plan_rows(rows: Sequence[PlanRow]) -> list[list[Cell]]:
    return [
        [r.topic, r.partition, r.current, r.target, r.delta, r.effect, r.note or None] for r in rows
    ]


COPY_HEADER = ("TOPIC", "PARTITION", "OFFSET", "METADATA")


def copy_rows(offsets: Mapping[tuple[str, int], Committed]) -> list[list[Cell]]:
    return [[t, p, c.offset, c.metadata or None] for (t, p), c in sorted(offsets.items())]


VERIFY_HEADER = ("TOPIC", "PARTITION", "SOURCE-OFFSET", "TARGET-OFFSET", "METADATA", "CHECK")


def verify_rows(rows: Sequence[VerifyRow]) -> list[list[Cell]]:
    return [
        [
            r.topic,
            r.partition,
            r.expected.offset,
            None if r.found is None else r.found.offset,
            r.expected.metadata or None,
            "ok" if r.ok else "DIFFERENT",
        ]
        for r in rows
    ]
