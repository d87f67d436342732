"""Everything the exporter knows, as one part the main loop owns: the offset state and its
ingest, the share-group state and its ingest, the log-end histories, the topic-id names.

Pure: records and log-end samples in, state out. The per-partition hand-over (`take` and
`put`) moves what one `__consumer_offsets` partition holds - the groups whose records live
in it and the position reached - from one exporter to another: every record of a group lives
in the partition `partition_for(group_id)`, so a partition's groups are whole groups.

Share groups' `__share_group_state` partitions are keyed by (group, topic id, partition), not
by group alone, so they are not split by `__consumer_offsets` partition here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.state.ingest import Ingestor, RawMessage
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import GroupState, OffsetState
from offsetwatch.exporter.state.share_ingest import ShareIngestor
from offsetwatch.exporter.state.share_state import ShareStateStore
from offsetwatch.exporter.state.source_freshness import SourceFreshness
from offsetwatch.exporter.state.topic_names import TopicIdNames, share_topic_names
from offsetwatch.exporter.stats import PipelineStats


@dataclass(slots=True)
class PartitionState:
    """What one `__consumer_offsets` partition holds in an exporter's state."""

    partition: int
    #: the next offset to read: every record before it is in `groups`
    position: int | None
    groups: dict[str, GroupState]


@dataclass(slots=True)
class StateStore:
    """The main loop's state (see the module doc); never touched by another thread."""

    stats: PipelineStats
    codec: Codec = field(default_factory=Codec)
    offsets: OffsetState = field(default_factory=OffsetState)
    share: ShareStateStore = field(default_factory=ShareStateStore)
    #: log-end histories of the tracked data partitions (from the sampler's rounds)
    histories: dict[tuple[str, int], LogEndHistory] = field(default_factory=dict)
    #: tracked partitions the sampler reported as not existing (deleted topics)
    missing: set[tuple[str, int]] = field(default_factory=set)
    #: tracked topics the broker refuses to describe -> the grant to make: their log ends
    #: are unknown, not gone
    denied_topics: dict[str, str] = field(default_factory=dict)
    #: the grant of Read on `__share_group_state` while the broker refuses it to the exporter
    share_state_refused: str | None = None
    #: a fleet replica's `__consumer_offsets` partitions gained and not read to their end yet,
    #: and the partition count: their groups are not served half read (None: none)
    catching_up: tuple[frozenset[int], int] | None = None
    #: a fleet replica's `__consumer_offsets` partitions and their count (None alone): the
    #: share groups of the others' partitions are theirs, not orphans
    owned: tuple[frozenset[int], int] | None = None
    #: names of the topic ids share partitions and KIP-848 assignments are keyed by
    topic_names: TopicIdNames = field(default_factory=TopicIdNames)
    #: when the cluster last confirmed each `__consumer_offsets` partition's state complete
    freshness: SourceFreshness = field(default_factory=SourceFreshness)
    #: the same for each `__share_group_state` partition (the share groups' state)
    share_freshness: SourceFreshness = field(default_factory=SourceFreshness)
    ingestor: Ingestor = field(init=False)
    share_ingestor: ShareIngestor = field(init=False)

    def __post_init__(self) -> None:
        self.ingestor = Ingestor(self.offsets, self.stats, self.codec)
        self.share_ingestor = ShareIngestor(self.share)

    # -- records ---------------------------------------------------------------------------

    def ingest(
        self, messages: list[RawMessage], ends: Mapping[int, int] | None = None, now_ms: int = 0
    ) -> int:
        """Apply a batch's records; `ends`: the partitions the batch read to their end, with
        the offset of that end (past trailing transaction markers), taken at `now_ms`."""
        applied = self.ingestor.ingest(messages) if messages else 0
        if messages:
            self.freshness.on_positions(self.ingestor.positions)
        if ends:
            self.freshness.on_ends(ends, now_ms)
        return applied

    def ingest_share(
        self, messages: list[RawMessage], ends: Mapping[int, int] | None = None, now_ms: int = 0
    ) -> int:
        """Apply a `__share_group_state` batch; `ends` as for `ingest`."""
        applied = self.share_ingestor.ingest(messages) if messages else 0
        if messages:
            self.share_freshness.on_positions(self.share_ingestor.positions)
        if ends:
            self.share_freshness.on_ends(ends, now_ms)
        return applied

    @property
    def positions(self) -> dict[int, int]:
        """Next `__consumer_offsets` offset per partition, after what was applied."""
        return self.ingestor.positions

    @property
    def share_positions(self) -> dict[int, int]:
        return self.share_ingestor.positions

    def clear_offsets(self, now_ms: int) -> None:
        """Forget every group and position: the topic is read again from its start."""
        self.offsets.groups.clear()
        self.ingestor.positions.clear()
        self.freshness.reset(now_ms)

    def clear_share(self, now_ms: int) -> None:
        """Forget the share-group state and positions: the topic is read again from its start."""
        self.share.clear()
        self.share_ingestor.positions.clear()
        self.share_freshness.reset(now_ms)

    def restore(
        self,
        groups: Mapping[str, GroupState],
        positions: Mapping[int, int],
        share: ShareStateStore | None = None,
        share_positions: Mapping[int, int] | None = None,
    ) -> None:
        """Start from a checkpoint's state instead of nothing."""
        self.offsets.groups.update(groups)
        self.ingestor.positions.update(positions)
        if share is not None:
            self.share = self.share_ingestor.store = share
            self.share_ingestor.positions.update(share_positions or {})

    # -- log ends --------------------------------------------------------------------------

    def apply_sample(self, time_ms: int, offsets: Mapping[tuple[str, int], int | None]) -> None:
        """One sampler round: the log end of each tracked partition (None: it is gone)."""
        histories, missing = self.histories, self.missing
        for key, end in offsets.items():
            if end is None:
                # the topic is gone: forget its history so the partition reports unknown
                histories.pop(key, None)
                missing.add(key)
                continue
            if end < 0:
                continue  # not a log end (OFFSET_INVALID): the last known one stays
            missing.discard(key)
            history = histories.get(key)
            if history is None:
                history = histories[key] = LogEndHistory()
            history.record(time_ms, end)

    def forget_log_ends(self) -> None:
        self.histories.clear()
        self.missing.clear()

    def log_ends_known(self, tracked: set[tuple[str, int]]) -> bool:
        """Whether every tracked partition has a log end (or is known to be gone, or the
        broker refuses to describe its topic: waiting would never end)."""
        histories, missing, denied = self.histories, self.missing, self.denied_topics
        return all(key in histories or key in missing or key[0] in denied for key in tracked)

    # -- what the sampler samples ----------------------------------------------------------

    def tracked_partitions(self) -> set[tuple[str, int]]:
        return self.offsets.tracked_partitions() | self._share_tracked()

    def _share_tracked(self) -> set[tuple[str, int]]:
        """The data partitions of share partitions whose topic name is known (sampled).

        Names are learned from the groups' records while they name their topics (Kafka 4.0
        empties them when the last member leaves) and from the sampler's metadata lookup of
        the ids still unknown, published here for its next round."""
        names = self.topic_names
        names.take_offered()
        learned: set[str] = set()
        for group_id, _topic_id, _partition in self.share.partitions:
            if group_id not in learned:
                learned.add(group_id)
                group = self.offsets.groups.get(group_id)
                if group is not None:
                    names.learn(share_topic_names(group))
        known = names.names
        tracked: set[tuple[str, int]] = set()
        for _group_id, topic_id, partition in self.share.partitions:
            name = known.get(topic_id)
            if name is not None:
                tracked.add((name, partition))
        names.publish_unknown(t for _g, t, _p in self.share.partitions)
        return tracked

    # -- ownership per __consumer_offsets partition ----------------------------------------

    def take(self, partition: int, partitions: int) -> PartitionState:
        """Remove and return what `partition` (of `partitions`) holds."""
        groups = self.offsets.groups
        moving = {
            group_id: groups[group_id]
            for group_id in [g for g in groups if partition_for(g, partitions) == partition]
        }
        for group_id in moving:
            del groups[group_id]
        position = self.ingestor.positions.pop(partition, None)
        self.freshness.forget(partition)
        return PartitionState(partition, position, moving)

    def put(self, taken: PartitionState, partitions: int) -> None:
        """Take over what another exporter's `take` returned."""
        for group_id in taken.groups:
            if partition_for(group_id, partitions) != taken.partition:
                raise ValueError(
                    f"group {group_id!r} belongs to partition "
                    f"{partition_for(group_id, partitions)}, not {taken.partition}"
                )
        self.offsets.groups.update(taken.groups)
        if taken.position is None:
            self.ingestor.positions.pop(taken.partition, None)
        else:
            self.ingestor.positions[taken.partition] = taken.position
