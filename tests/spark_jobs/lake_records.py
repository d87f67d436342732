"""Small canonical histories for the lake tests: canonical dicts built by hand, as frames."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.segments import partition_of_dir, read_partition_dir, resolve
from offsetwatch.spark_jobs.schema import CanonicalRows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Canonicals = list[dict[str, Any]]


def _envelope(kind: str, key_type: int, ts: int, pos: int, group: str | None) -> dict[str, Any]:
    return {
        "type": kind,
        "key_type": key_type,
        "value_version": None,
        "tombstone": True,
        "newer_version": False,
        "partition": 0,
        "offset": pos,
        "timestamp": ts,
        "group": group,
        "key": {},
        "value": None,
    }


def commit(
    group: str, topic: str, partition: int, offset: int, ts: int, pos: int, expire: int = -1
) -> dict[str, Any]:
    record = _envelope("offset_commit", 1, ts, pos, group)
    record.update(
        value_version=1 if expire >= 0 else 3,
        tombstone=False,
        key={"group": group, "topic": topic, "partition": partition},
        value={
            "offset": offset,
            "leader_epoch": -1,
            "metadata": "",
            "commit_timestamp": ts,
            "expire_timestamp": expire,
            "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",
        },
    )
    return record


def delete(group: str, topic: str, partition: int, ts: int, pos: int) -> dict[str, Any]:
    record = _envelope("offset_commit", 1, ts, pos, group)
    record["key"] = {"group": group, "topic": topic, "partition": partition}
    return record


def classic(
    group: str, generation: int, members: Sequence[str], ts: int, pos: int
) -> dict[str, Any]:
    record = _envelope("group_metadata", 2, ts, pos, group)
    record.update(
        value_version=3,
        tombstone=False,
        key={"group": group},
        value={
            "protocol_type": "consumer",
            "generation": generation,
            "protocol": "range" if members else None,
            "leader": members[0] if members else None,
            "current_state_timestamp": ts,
            "members": [
                {
                    "member_id": m,
                    "group_instance_id": None,
                    "client_id": f"client-{m}",
                    "client_host": "/10.0.0.1",
                    "rebalance_timeout": 30000,
                    "session_timeout": 10000,
                    "subscription": b"",
                    "assignment": b"",
                    "subscription_decoded": None,
                    "assignment_decoded": None,
                }
                for m in members
            ],
        },
    )
    return record


def group_tombstone(group: str, ts: int, pos: int) -> dict[str, Any]:
    record = _envelope("group_metadata", 2, ts, pos, group)
    record["key"] = {"group": group}
    return record


def log_end(topic: str, partition: int, log_end_offset: int, ts: int) -> dict[str, Any]:
    record = _envelope("log_end", -1, ts, -1, None)
    record.update(
        tombstone=False,
        partition=-1,
        key={"topic": topic, "partition": partition},
        value={"log_end_offset": log_end_offset, "sampled_at_ms": ts},
    )
    return record


def frame(
    spark: SparkSession, canonicals: Iterable[dict[str, Any]], txn: Sequence[str] | None = None
) -> DataFrame:
    """The DataFrame a source yields for `canonicals` (`txn`: their transaction outcomes)."""
    rows = CanonicalRows()
    records = list(canonicals)
    if txn is not None:
        records = [{**r, "txn": t} for r, t in zip(records, txn, strict=True)]
    return spark.createDataFrame([rows.to_row(r) for r in records], rows.struct)


def segment_history(run_dir: Path) -> tuple[Canonicals, list[str]]:
    """A conformance run's segments as canonical dicts with their transaction outcome."""
    codec = Codec()
    canonical = Canonical()
    out: Canonicals = []
    status: list[str] = []
    for directory in sorted((run_dir / "segments").iterdir()):
        partition = partition_of_dir(directory)
        assert partition is not None
        for raw, outcome in resolve(read_partition_dir(directory)):
            record = codec.decode(raw.key, raw.value, partition, raw.offset, raw.timestamp)
            out.append(canonical.to_dict(record))
            status.append(outcome)
    return out, status
