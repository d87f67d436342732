"""Offsets a group had at a past time, from the Spark history (offsetwatch.spark_jobs)."""

from __future__ import annotations

import importlib
from pathlib import Path

from offsetwatch.offset_ops.model import OffsetOpsError, TopicPartitionKey


def offsets_at_history(history_dir: str, group: str, time_ms: int) -> dict[TopicPartitionKey, int]:
    """The group's committed offsets at `time_ms` according to the history in `history_dir`.

    Spark starts only for this mode, so the import is deferred; the function it calls is
    `offsetwatch.spark_jobs.offsets_at.offsets_at_from_path(path, group, time_ms)`.
    """
    if not Path(history_dir).exists():
        raise OffsetOpsError(f"--history {history_dir!r}: no such file or directory")
    try:
        module = importlib.import_module("offsetwatch.spark_jobs.offsets_at")
        function = module.offsets_at_from_path
    except (ImportError, AttributeError):
        raise OffsetOpsError(
            "--to-history-time needs offsetwatch.spark_jobs.offsets_at.offsets_at_from_path, "
            "which this installation does not have yet"
        ) from None
    try:
        found = function(history_dir, group, time_ms)
    except LookupError as error:  # offsets_at's UnknownGroupError: the history lacks the group
        raise OffsetOpsError(f"--history {history_dir}: {error}") from None
    return {
        (str(topic), int(partition)): int(offset) for (topic, partition), offset in found.items()
    }
