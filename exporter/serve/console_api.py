"""JSON views the console adds to `/api/v1`: pure functions, latest data in, dict out.

* `/api/v1/health`: the exporter's own state (ready, source, decode errors, checkpoint and
  snapshot ages, live stream figures), from `PipelineStats` and the snapshot;
* `/api/v1/groups/{group}/history`: one group's recent totals from `ConsoleHistory`;
* `/api/v1/history/lag-seconds`: every group's recent largest lag in seconds (sparklines);
* `record_event`: one decoded record as the live stream sends it.

Nothing here computes lag or status: that happened when the snapshot was built.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any, Final

from offsetwatch.decoder.canonical import Canonical, dumps
from offsetwatch.decoder.records import AnyRecord
from offsetwatch.exporter.judge.snapshot import Snapshot
from offsetwatch.exporter.serve.api import readiness
from offsetwatch.exporter.serve.console_history import ConsoleHistory, finite
from offsetwatch.exporter.stats import PipelineStats

__all__ = [
    "MAX_VALUE_CHARS",
    "group_history",
    "health",
    "lag_seconds_history",
    "record_event",
]

JsonDict = dict[str, Any]

#: a record value longer than this (as JSON) is sent as its size only: a group with hundreds
#: of members would otherwise make one event of megabytes
MAX_VALUE_CHARS: Final = 4096


def _age_s(now_ms: int, then_ms: int) -> float | None:
    return None if then_ms <= 0 else round(max(0, now_ms - then_ms) / 1000, 3)


def health(
    stats: PipelineStats,
    snapshot: Snapshot,
    now_ms: int,
    streams: JsonDict,
    http: JsonDict,
) -> JsonDict:
    """The Exporter health page: readiness plus the self-metrics an operator looks at."""
    _ready, body = readiness(stats)
    source = stats.source()
    lags = [sp.lag for sp in source if sp.lag is not None]
    errors = stats.errors()
    records: dict[str, int] = {}
    for (type_name, _version), n in stats.records().items():
        records[type_name] = records.get(type_name, 0) + n
    return {
        **body,
        "source_lag": sum(lags) if lags else None,
        "records_total": sum(records.values()),
        "records_by_type": dict(sorted(records.items())),
        "decode_errors_total": sum(errors.values()),
        "decode_errors": dict(sorted(errors.items())),
        "quarantined_total": stats.quarantined_total,
        "fast_path_records_total": stats.fast_path_records_total,
        **_unknown_json(stats),
        "loop_errors_total": stats.loop_errors_total,
        "checkpoint_age_seconds": _age_s(now_ms, stats.checkpoint_time_ms),
        "checkpoint_duration_seconds": stats.checkpoint_duration_s or None,
        "snapshot_age_seconds": _age_s(now_ms, snapshot.time_ms),
        "snapshot_duration_seconds": stats.snapshot_duration_s,
        "log_end_sample_age_seconds": _age_s(now_ms, stats.last_sample_ms),
        "groups": len(snapshot.groups),
        "tracked_partitions": snapshot.tracked_partitions,
        "published_total": stats.published_total,
        "publish_errors_total": stats.publish_errors_total,
        "dlq_total": stats.dlq_total,
        "archive_records_total": stats.archive_records_total,
        "uptime_seconds": _age_s(now_ms, stats.started_ms),
        "live_stream": streams,
        "http": http,
        "time_ms": now_ms,
    }


def _unknown_json(stats: PipelineStats) -> JsonDict:
    """Records of a key type or value version the decoder does not know: how many, and the
    latest by partition and offset (skipped; a newer Kafka than offsetwatch wrote them?)."""
    totals, seen = stats.unknown()
    return {
        "unknown_records_total": sum(totals.values()),
        "unknown_records": [
            {
                "partition": s.partition,
                "offset": s.offset,
                "key_type": s.key_type,
                "value_version": s.value_version,
                "unknown": s.what,
            }
            for s in seen
        ],
    }


def group_history(history: ConsoleHistory, group_id: str) -> JsonDict:
    """Totals over the group's partitions, oldest first: log end, consumed (log end - lag),
    lag and the largest lag in seconds. Empty lists while no point was recorded."""
    series = history.series(group_id)
    if series is None:
        times: tuple[int, ...] = ()
        log_end: tuple[int, ...] = ()
        lag: tuple[int, ...] = ()
        seconds: list[float | None] = []
    else:
        times, log_end, lag = series.times_ms, series.log_end, series.lag
        seconds = [finite(s) for s in series.lag_seconds]
    return {
        "group": group_id,
        "span_seconds": history.span_ms // 1000,
        "times_ms": list(times),
        "log_end": list(log_end),
        "consumed": [end - behind for end, behind in zip(log_end, lag, strict=True)],
        "lag": list(lag),
        "lag_seconds": seconds,
    }


def lag_seconds_history(history: ConsoleHistory, only: Collection[str] | None = None) -> JsonDict:
    """Every group's largest lag in seconds (or those in `only`), aligned to the tail of one
    time axis; a group without history is left out."""
    times, groups = history.lag_seconds_all(only)
    return {
        "span_seconds": history.span_ms // 1000,
        "times_ms": list(times),
        "groups": {group: _nulls(values) for group, values in groups.items()},
    }


def _nulls(values: list[float]) -> list[float] | list[float | None]:
    """NaN (unknown) as null. Only a series with a NaN (or infinity) pays for a loop: one
    makes the C-level sum non-finite."""
    if math.isfinite(sum(values)):
        return values
    return [v if math.isfinite(v) else None for v in values]


def record_event(canonical: Canonical, record: AnyRecord) -> str:
    """One record of the live stream as JSON: its position, type, group, key and value."""
    rendered = canonical.to_dict(record)
    key = {k: v for k, v in rendered["key"].items() if k not in ("group", "group_id")}
    value = rendered["value"]
    value_json = "null" if value is None else dumps(value)
    if len(value_json) > MAX_VALUE_CHARS:
        value_json = dumps({"truncated": True, "chars": len(value_json)})
    head = dumps(
        {
            "type": rendered["type"],
            "partition": rendered["partition"],
            "offset": rendered["offset"],
            "timestamp": rendered["timestamp"],
            "group": rendered["group"],
            "tombstone": rendered["tombstone"],
            "key": key,
        }
    )
    return f'{head[:-1]},"value":{value_json}}}'
