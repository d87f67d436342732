"""Which coordinator partition holds a group (`__consumer_offsets`) or a share partition
(`__share_group_state`): the coordinators' own formulas."""

from __future__ import annotations

from typing import Final

DEFAULT_PARTITIONS: Final = 50
_INT_MIN: Final = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, 32-bit two's complement."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int = DEFAULT_PARTITIONS) -> int:
    """`Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (abs(MIN_VALUE) = 0)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions


def share_state_partition_for(
    group_id: str, topic_id: str, partition: int, num_partitions: int
) -> int:
    """The `__share_group_state` partition holding a share partition's state: the share
    coordinator's `Utils.abs(SharePartitionKey.asCoordinatorKey().hashCode()) % numPartitions`,
    whose key is `"%s:%s:%d"` of group id, topic id (Kafka's base64 form) and partition
    (ShareCoordinatorService.partitionFor, Kafka 4.0+)."""
    return partition_for(f"{group_id}:{topic_id}:{partition}", num_partitions)
