"""Copying one group's committed offsets to another, and checking the copy."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from offsetwatch.offset_ops.model import Committed, OffsetOpsError, TopicPartitionKey


@dataclass(slots=True, frozen=True)
class VerifyRow:
    topic: str
    partition: int
    expected: Committed
    found: Committed | None

    @property
    def ok(self) -> bool:
        return self.found is not None and (self.found.offset, self.found.metadata) == (
            self.expected.offset,
            self.expected.metadata,
        )


def select_offsets(
    source: Mapping[TopicPartitionKey, Committed], topic_pattern: str | None
) -> dict[TopicPartitionKey, Committed]:
    """The source's offsets whose topic matches the pattern entirely (all without one)."""
    if topic_pattern is None:
        return dict(source)
    try:
        pattern = re.compile(topic_pattern)
    except re.error as error:
        raise OffsetOpsError(
            f"--topic {topic_pattern!r}: not a regular expression: {error}"
        ) from None
    return {key: c for key, c in source.items() if pattern.fullmatch(key[0])}


def verify(
    expected: Mapping[TopicPartitionKey, Committed], found: Mapping[TopicPartitionKey, Committed]
) -> list[VerifyRow]:
    return [VerifyRow(t, p, c, found.get((t, p))) for (t, p), c in sorted(expected.items())]
