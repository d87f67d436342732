"""Archive files for the streaming tests and benchmark: one stuck group, one healthy group."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from offsetwatch.decoder.log_end import IDS_PER_MS, log_end_record

MINUTE = 60_000
TOPIC = "orders"
RATE = 10  # messages per minute into TOPIC[0]


def commit(group: str, offset: int, ts: int, position: int) -> dict[str, Any]:
    return {
        "type": "offset_commit",
        "key_type": 1,
        "value_version": 3,
        "tombstone": False,
        "newer_version": False,
        "partition": 0,
        "offset": position,
        "timestamp": ts,
        "group": group,
        "key": {"group": group, "topic": TOPIC, "partition": 0},
        "value": {
            "offset": offset,
            "leader_epoch": -1,
            "metadata": "",
            "commit_timestamp": ts,
            "expire_timestamp": -1,
            "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",
        },
    }


def minutes(start_ms: int, first: int, last: int, stuck_until: int) -> list[dict[str, Any]]:
    """Minutes first..last after start_ms: the log end grows by RATE a minute; `healthy`
    commits the log end every minute; `stuck` commits offset 0 every minute (a stall: it
    commits, no progress, messages wait) until minute `stuck_until`, then the log end."""
    out: list[dict[str, Any]] = []
    for minute in range(first, last + 1):
        ts = start_ms + minute * MINUTE
        end = RATE * minute
        out.append(log_end_record(TOPIC, 0, end, ts, ts * IDS_PER_MS))
        out.append(commit("healthy", end, ts + 1000, 2 * minute))
        stuck = 0 if minute < stuck_until else end
        out.append(commit("stuck", stuck, ts + 2000, 2 * minute + 1))
    return out


def publish(archive: Path, records: list[dict[str, Any]], seq: int) -> Path:
    """One archive file, written hidden and renamed as the exporter does."""
    first = records[0]["timestamp"]
    directory = archive / "date=2026-01-01" / "hour=00"
    directory.mkdir(parents=True, exist_ok=True)
    name = f"offsetwatch-{first:013d}-{seq:06d}.jsonl"
    temp = directory / f".{name}.inprogress"
    temp.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    final = directory / name
    os.replace(temp, final)
    return final
