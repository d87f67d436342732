"""Group descriptions like `kafka-consumer-groups --describe`, from batched broker answers."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from offsetwatch.offset_ops.broker import LATEST, OffsetBroker
from offsetwatch.offset_ops.model import (
    GroupInfo,
    GroupListing,
    MemberInfo,
    OffsetOpsError,
    TopicPartitionKey,
    Unsupported,
)

if TYPE_CHECKING:
    from offsetwatch.offset_ops.exporter_client import ExporterClient


@dataclass(slots=True, frozen=True)
class PartitionRow:
    topic: str
    partition: int
    current: int | None
    log_end: int | None
    member: MemberInfo | None
    lag_seconds: float | None = None
    status: str | None = None

    @property
    def lag(self) -> int | None:
        if self.current is None or self.log_end is None:
            return None
        return max(self.log_end - self.current, 0)


@dataclass(slots=True, frozen=True)
class ShareRow:
    """One share partition (KIP-932) from the exporter's `share` object: the group's start
    offset as `__share_group_state` holds it, and KIP-1226's lag (log end - start -
    acknowledged - archived past the start)."""

    topic: str
    partition: int
    start_offset: int | None
    log_end: int | None
    acknowledged: int
    archived: int
    available: int
    max_delivery_count: int
    lag: int | None
    lag_seconds: float | None
    status: str | None


@dataclass(slots=True)
class GroupReport:
    group_id: str
    info: GroupInfo | None  # None: the cluster cannot describe groups
    rows: list[PartitionRow]
    exporter: dict[str, Any] = field(default_factory=dict)
    # a share group's partitions (the exporter's view; Kafka has no OffsetFetch for them)
    share: list[ShareRow] | None = None

    @property
    def total_lag(self) -> int:
        if self.share is not None:
            return sum(row.lag or 0 for row in self.share)
        return sum(row.lag or 0 for row in self.rows)

    @property
    def exists(self) -> bool:
        return (
            bool(self.rows)
            or self.share is not None
            or (self.info is not None and self.info.exists)
        )


def _share_rows(share: Mapping[str, Any]) -> list[ShareRow]:
    rows = []
    for p in share.get("partitions", []):
        records = p.get("records", {})
        rows.append(
            ShareRow(
                str(p["topic"]),
                int(p["partition"]),
                # -1: Kafka has not persisted this share partition's state yet
                start if (start := int(p["start_offset"])) >= 0 else None,
                p.get("log_end"),
                int(records.get("acknowledged", 0)),
                int(records.get("archived", 0)),
                int(records.get("available", 0)),
                int(p.get("max_delivery_count", 0)),
                p.get("lag"),
                p.get("lag_seconds"),
                p.get("status"),
            )
        )
    return sorted(rows, key=lambda row: (row.topic, row.partition))


#: the group kinds confluent-kafka can neither list nor describe (it answers DEAD, CLASSIC):
#: only a running exporter, which reads their records in `__consumer_offsets`, knows them
EXPORTER_KINDS = ("SHARE", "STREAMS")


def task_text(tasks: Mapping[str, Any]) -> str:
    """kafka-streams-groups.sh's ASSIGNMENTS: `ACTIVE: 0:[0,1,2]; TARGET-ACTIVE: 0:[0,1,2];`."""
    parts = []
    for key, label in (
        ("active", "ACTIVE"),
        ("standby", "STANDBY"),
        ("warmup", "WARMUP"),
        ("target_active", "TARGET-ACTIVE"),
        ("target_standby", "TARGET-STANDBY"),
        ("target_warmup", "TARGET-WARMUP"),
    ):
        listed = tasks.get(key) or []
        if listed:
            each = " ".join(
                f"{t['subtopology']}:[{','.join(str(p) for p in t['partitions'])}];" for t in listed
            )
            parts.append(f"{label}: {each}")
    return " ".join(parts)


def _exporter_info(
    broker_info: GroupInfo | None, exporter: Mapping[str, Any], kind: str
) -> GroupInfo:
    """A share or streams group as the exporter sees it (members and state from
    `__consumer_offsets`): confluent-kafka has no ShareGroupDescribe nor StreamsGroupDescribe
    and answers DEAD for such a group; only its coordinator is right."""
    members = tuple(
        MemberInfo(
            str(m["member_id"]),
            str(m.get("client_id") or ""),
            str(m.get("host") or ""),
            m.get("instance_id"),
            tuple(
                sorted(
                    (a["topic"], int(p)) for a in m.get("assignment", []) for p in a["partitions"]
                )
            ),
            process_id=(m.get("tasks") or {}).get("process_id"),
            tasks=None if m.get("tasks") is None else task_text(m["tasks"]),
        )
        for m in exporter.get("members", [])
    )
    return GroupInfo(
        group_id=str(exporter["group"]),
        type=kind,
        state=str(exporter.get("state") or "UNKNOWN").upper(),
        coordinator=broker_info.coordinator if broker_info is not None else "",
        assignor=str(exporter.get("protocol") or ""),
        is_simple=False,
        members=members,
    )


def _describe(broker: OffsetBroker, group_ids: Sequence[str]) -> dict[str, GroupInfo] | None:
    try:
        return broker.describe_groups(group_ids)
    except Unsupported:
        return None


def build_reports(
    broker: OffsetBroker,
    group_ids: Sequence[str],
    topics: Collection[str] = (),
    exporter: Mapping[str, dict[str, Any]] | None = None,
) -> list[GroupReport]:
    """One report per group: committed offsets, log ends and owners, in three batched rounds
    (describe all groups, fetch all groups' offsets, list the log ends of every partition)."""
    infos = _describe(broker, group_ids)
    if topics:
        counts = broker.partition_counts()
        for topic in topics:
            if topic not in counts:
                raise OffsetOpsError(f"unknown topic {topic!r}")
        named: list[TopicPartitionKey] | None = [
            (t, p) for t in sorted(topics) for p in range(counts[t])
        ]
    else:
        named = None
    shares = {g for g, x in (exporter or {}).items() if x.get("kind") == "SHARE" and "share" in x}
    streams = {g for g, x in (exporter or {}).items() if x.get("kind") == "STREAMS"}
    if infos is not None:
        # a streams group's offsets are plain commits; its members only the exporter knows
        infos = {
            g: _exporter_info(info, (exporter or {})[g], "STREAMS") if g in streams else info
            for g, info in infos.items()
        }
    elif streams:
        infos = {g: _exporter_info(None, (exporter or {})[g], "STREAMS") for g in streams}
    committed = broker.committed({group: named for group in group_ids if group not in shares})
    owners: dict[str, dict[TopicPartitionKey, MemberInfo]] = {}
    for group in group_ids:
        info = None if infos is None else infos.get(group)
        members = info.members if info is not None and group not in shares else ()
        committed.setdefault(group, {})
        owners[group] = {
            key: m for m in members for key in m.assignment if not topics or key[0] in topics
        }
    partitions = sorted({key for g in group_ids for key in (*committed[g], *owners[g])})
    log_end = broker.list_offsets(partitions, LATEST)
    reports = []
    for group in group_ids:
        extra = (exporter or {}).get(group, {})
        live = {(p["topic"], p["partition"]): p for p in extra.get("partitions", [])}
        rows = []
        for key in sorted({*committed[group], *owners[group]}):
            found = committed[group].get(key)
            seen = live.get(key, {})
            rows.append(
                PartitionRow(
                    key[0],
                    key[1],
                    None if found is None else found.offset,
                    log_end.get(key),
                    owners[group].get(key),
                    seen.get("lag_seconds"),
                    seen.get("status"),
                )
            )
        info = None if infos is None else infos.get(group)
        if group in shares:
            share = [r for r in _share_rows(extra["share"]) if not topics or r.topic in topics]
            share_info = _exporter_info(info, extra, "SHARE")
            reports.append(GroupReport(group, share_info, [], dict(extra), share))
            continue
        reports.append(GroupReport(group, info, rows, dict(extra)))
    return reports


def exporter_groups(client: ExporterClient) -> list[GroupListing]:
    """The share and streams groups a running `offsetwatch export` knows (from
    `__consumer_offsets`): confluent-kafka lists only classic and consumer groups (ListGroups
    without types)."""
    return [
        GroupListing(
            str(g["group"]), str(g["kind"]), str(g.get("state") or "UNKNOWN").upper(), False
        )
        for g in client.groups()
        if g.get("kind") in EXPORTER_KINDS
    ]


def fetch_exporter(client: ExporterClient, group_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each group's /api/v1/groups/{group} from a running `offsetwatch export` (groups it has
    not seen are left out). A few requests at a time: --all-groups may name thousands."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = pool.map(client.group, group_ids)
        return {
            group: answer
            for group, answer in zip(group_ids, answers, strict=True)
            if answer is not None
        }
