"""The status rules, from their one home in offsetwatch.core.status (the Spark analytics apply
the same rules); this name stays for the exporter's modules and its API users."""

from __future__ import annotations

from offsetwatch.core.status import (
    DEFAULT_STATUS_CONFIG,
    PartitionWindow,
    Status,
    StatusConfig,
    commit_rate_per_second,
    evaluate_group,
    evaluate_partition,
    seconds_since_last_commit,
)

__all__ = [
    "DEFAULT_STATUS_CONFIG",
    "PartitionWindow",
    "Status",
    "StatusConfig",
    "commit_rate_per_second",
    "evaluate_group",
    "evaluate_partition",
    "seconds_since_last_commit",
]
