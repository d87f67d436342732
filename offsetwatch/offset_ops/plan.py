"""Reset plans: where each partition's committed offset goes, checked before anything is written.

Pure functions over what the broker reported (committed offsets, log start and end, the
answers of a timestamp lookup), so that every rule is testable with recorded answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from offsetwatch.offset_ops.model import Committed, OffsetOpsError, TopicPartitionKey


@dataclass(slots=True, frozen=True)
class ToEarliest:
    pass


@dataclass(slots=True, frozen=True)
class ToLatest:
    pass


@dataclass(slots=True, frozen=True)
class ToOffset:
    offset: int


@dataclass(slots=True, frozen=True)
class ShiftBy:
    delta: int


@dataclass(slots=True, frozen=True)
class ToTime:
    """--to-datetime / --by-duration: `time_ms` is resolved, `label` is what the operator typed."""

    time_ms: int
    label: str


@dataclass(slots=True, frozen=True)
class ToOffsets:
    """Explicit offsets: a --from-file CSV, or the history's offsets at a time."""

    offsets: Mapping[TopicPartitionKey, int]
    source: str
    # A file's offsets past the log end are refused (the file does not fit this topic); the
    # history's are clamped like computed offsets (the topic may have been truncated since).
    refuse_past_end: bool


Mode = ToEarliest | ToLatest | ToOffset | ShiftBy | ToTime | ToOffsets


@dataclass(slots=True, frozen=True)
class PlanRow:
    topic: str
    partition: int
    current: int | None  # None: the group has no committed offset there
    target: int
    log_start: int
    log_end: int
    note: str = ""

    @property
    def delta(self) -> int | None:
        return None if self.current is None else self.target - self.current

    @property
    def effect(self) -> str:
        """Messages the group will read again (moving back) or skip (moving forward)."""
        delta = self.delta
        if delta is None or delta == 0:
            return "-"
        return f"re-read {-delta}" if delta < 0 else f"skip {delta}"


def _where(key: TopicPartitionKey) -> str:
    return f"{key[0]}:{key[1]}"


def _clamp(key: TopicPartitionKey, wanted: int, start: int, end: int) -> tuple[int, str]:
    if wanted < start:
        return start, f"clamped to log start (asked {wanted})"
    if wanted > end:
        return end, f"clamped to log end (asked {wanted})"
    return wanted, ""


def _target(
    mode: Mode,
    key: TopicPartitionKey,
    current: Committed | None,
    start: int,
    end: int,
    by_time: Mapping[TopicPartitionKey, int],
) -> tuple[int, str]:
    if isinstance(mode, ToEarliest):
        return start, ""
    if isinstance(mode, ToLatest):
        return end, ""
    if isinstance(mode, ToOffset):
        return _clamp(key, mode.offset, start, end)
    if isinstance(mode, ShiftBy):
        if current is None:
            raise OffsetOpsError(
                f"cannot shift {_where(key)}: the group has no committed offset there "
                "(use --to-earliest, --to-latest or --to-offset for it)"
            )
        return _clamp(key, current.offset + mode.delta, start, end)
    if isinstance(mode, ToTime):
        found = by_time.get(key, -1)
        if found < 0:
            # Kafka's answer when no record is at or after the time: the tool goes to the end.
            return end, "no record at or after the time: log end"
        if found == start and start > 0:
            raise OffsetOpsError(
                f"{mode.label} is before the log start of {_where(key)} (first kept offset "
                f"{start}; older records were deleted): use --to-earliest to accept that"
            )
        return found, ""
    wanted = mode.offsets[key]
    if mode.refuse_past_end and wanted > end:
        raise OffsetOpsError(
            f"{mode.source}: offset {wanted} of {_where(key)} is beyond the log end {end}"
        )
    return _clamp(key, wanted, start, end)


def build_plan(
    mode: Mode,
    partitions: Sequence[TopicPartitionKey],
    current: Mapping[TopicPartitionKey, Committed],
    log_start: Mapping[TopicPartitionKey, int],
    log_end: Mapping[TopicPartitionKey, int],
    by_time: Mapping[TopicPartitionKey, int] | None = None,
) -> list[PlanRow]:
    """One row per partition, or OffsetOpsError for the first partition the plan cannot place
    (the plan is all or nothing)."""
    if not partitions:
        raise OffsetOpsError("no partitions in scope: nothing to reset")
    rows = []
    for key in sorted(partitions):
        start, end = log_start[key], log_end[key]
        old = current.get(key)
        target, note = _target(mode, key, old, start, end, by_time or {})
        rows.append(
            PlanRow(key[0], key[1], None if old is None else old.offset, target, start, end, note)
        )
    return rows


def check_time(time_ms: int, now_ms: int, label: str) -> None:
    if time_ms > now_ms:
        raise OffsetOpsError(f"{label} is in the future: give a time up to now")


def changes(rows: Sequence[PlanRow]) -> dict[TopicPartitionKey, Committed]:
    """What --execute commits: every row (a partition already at its target is committed
    again, so the result does not depend on what happened since the plan was read)."""
    return {(row.topic, row.partition): Committed(row.target) for row in rows}
