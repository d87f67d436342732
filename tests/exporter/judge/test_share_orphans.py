"""Share partitions of groups `__consumer_offsets` does not know are counted as orphans
(deleted groups), but in a fleet only on this replica's partitions: another replica's share
groups are its, not orphans."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.judge.snapshot import _share_stats

PARTITIONS = 4


def _group_in(partition: int, skip: str = "") -> str:
    return next(
        g
        for g in (f"q{i}" for i in range(1000))
        if partition_for(g, PARTITIONS) == partition and g != skip
    )


def test_orphans_alone_and_in_a_fleet() -> None:
    known, mine, theirs = _group_in(0), _group_in(0, skip=_group_in(0)), _group_in(3)
    state: Any = SimpleNamespace(groups={known: object()})
    share_groups: Any = {known: [1], mine: [1, 2], theirs: [1, 2, 3]}
    alone = _share_stats(state, None, share_groups, None, 0)
    assert alone.orphan_partitions == 5  # mine and theirs: no group record of either here
    replica = _share_stats(state, None, share_groups, None, 0, (frozenset({0, 1}), PARTITIONS))
    assert replica.orphan_partitions == 2  # only mine: theirs is another replica's group
