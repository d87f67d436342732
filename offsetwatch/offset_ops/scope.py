"""Which partitions an operation covers: `--topic t[:p,...]` (repeatable) or `--all-topics`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from offsetwatch.offset_ops.model import OffsetOpsError, TopicPartitionKey


@dataclass(slots=True, frozen=True)
class TopicScope:
    topic: str
    partitions: tuple[int, ...] | None  # None: every partition of the topic


def parse_topic_scope(text: str) -> TopicScope:
    """`orders` or `orders:0,2,5` (Kafka topic names cannot hold a colon)."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise OffsetOpsError(f"--topic {text!r}: expected TOPIC or TOPIC:P[,P...]")
    if not sep:
        return TopicScope(topic, None)
    try:
        partitions = tuple(int(part) for part in rest.split(","))
    except ValueError:
        partitions = (-1,)
    if not partitions or min(partitions) < 0:
        raise OffsetOpsError(f"--topic {text!r}: partitions must be numbers >= 0, like orders:0,2")
    return TopicScope(topic, tuple(dict.fromkeys(partitions)))


def check_partitions(
    partitions: Collection[TopicPartitionKey], counts: Mapping[str, int], where: str = ""
) -> None:
    """Every partition exists in the cluster, or an error naming the first one that does not."""
    for topic, partition in sorted(partitions):
        count = counts.get(topic)
        if count is None:
            raise OffsetOpsError(f"{where}unknown topic {topic!r}")
        if partition >= count:
            raise OffsetOpsError(
                f"{where}unknown partition {topic}:{partition} "
                f"(topic {topic!r} has {count} partition{'s' if count != 1 else ''})"
            )


def resolve_scope(
    scopes: Sequence[TopicScope],
    counts: Mapping[str, int],
    committed: Collection[TopicPartitionKey],
    all_topics: bool,
) -> list[TopicPartitionKey]:
    """The partitions in scope, sorted; `--all-topics` means the group's committed partitions
    (as in kafka-consumer-groups)."""
    if all_topics:
        return sorted(committed)
    out: set[TopicPartitionKey] = set()
    for scope in scopes:
        if scope.topic not in counts:
            raise OffsetOpsError(f"unknown topic {scope.topic!r}")
        if scope.partitions is None:
            out.update((scope.topic, p) for p in range(counts[scope.topic]))
        else:
            keys = [(scope.topic, p) for p in scope.partitions]
            check_partitions(keys, counts)
            out.update(keys)
    return sorted(out)
