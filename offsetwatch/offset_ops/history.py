"""Offsets a group had at a past time, from the Spark history (offsetwatch.spark_jobs)."""

from __future__ import annotations

from pathlib import Path

from offsetwatch.offset_ops.model import OffsetOpsError, TopicPartitionKey


def offsets_at_history(history_dir: str, group: str, time_ms: int) -> dict[TopicPartitionKey, int]:
    """The group's committed offsets at `time_ms` according to the history in `history_dir`."""
    if not Path(history_dir).exists():
        raise OffsetOpsError(f"--history {history_dir!r}: no such file or directory")
    # imported here: only this mode needs pyspark, the other offset commands start without it
    from offsetwatch.spark_jobs.offsets_at import offsets_at_from_path

    try:
        found = offsets_at_from_path(history_dir, group, time_ms)
    except LookupError as error:  # offsets_at's UnknownGroupError: the history lacks the group
        raise OffsetOpsError(f"--history {history_dir}: {error}") from None
    return {
        (str(topic), int(partition)): int(offset) for (topic, partition), offset in found.items()
    }
