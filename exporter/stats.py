"""The daemon's own health numbers: what it read, what it could not decode, where it stands.

`PipelineStats` is a plain mutable object. The ingest thread (and the snapshot, sampler and
checkpoint loops) write it; the metrics collector and the HTTP readiness check only read it.
No lock: every write is a single attribute or dict-item store, atomic under the GIL, and
readers copy the dicts before iterating them (`records()`, `errors()`, `source()`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from offsetwatch.decoder.partitioner import partition_for, share_state_partition_for

__all__ = [
    "TOMBSTONE",
    "Freshness",
    "PartHealth",
    "PipelineStats",
    "SinkHealth",
    "SourcePartition",
    "StalePartition",
    "version_label",
]

#: the `version` label of a tombstone (a record without value, hence without value version)
TOMBSTONE: Final = "tombstone"


def version_label(version: int | None) -> str:
    """The `version` label of `offsetwatch_records_total`: the value version or "tombstone"."""
    return TOMBSTONE if version is None else str(version)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class PartHealth:
    """What the metrics and /readyz say of one part that runs on its own thread (a source
    reader, the log-end sampler): whether its last run ended in an error, and how often the
    daemon restarted it."""

    name: str
    restarts_total: int = 0
    #: epoch ms of the first failure of the current outage; 0 while healthy
    failing_since_ms: int = 0
    last_error: str | None = None

    @property
    def up(self) -> bool:
        return self.failing_since_ms == 0


@dataclass(slots=True)
class SinkHealth:
    """What the metrics and /readyz say of one sink."""

    name: str
    errors_total: int = 0
    dropped_total: int = 0
    #: epoch ms of the first failure of the current outage; 0 while healthy
    failing_since_ms: int = 0
    last_error: str | None = None
    backlog: int = 0

    @property
    def up(self) -> bool:
        return self.failing_since_ms == 0


@dataclass(frozen=True, slots=True)
class SourcePartition:
    """Where the ingest stands in one `__consumer_offsets` partition."""

    partition: int
    #: next offset to read; None before the first position is known
    position: int | None
    #: high watermark (log end); None before it was fetched
    high_watermark: int | None

    @property
    def lag(self) -> int | None:
        """Records not read yet (never negative); None while either end is unknown."""
        if self.position is None or self.high_watermark is None:
            return None
        return max(0, self.high_watermark - self.position)

    @property
    def at_end(self) -> bool:
        return self.lag == 0


@dataclass(frozen=True, slots=True)
class StalePartition:
    """A partition of `__consumer_offsets` (or of `__share_group_state`) whose state the
    cluster has not confirmed lately."""

    partition: int
    #: epoch ms of the last confirmation; 0 = never since `Freshness.since_ms`
    confirmed_ms: int
    age_s: float
    cause: str


def _no_times() -> Mapping[int, int]:
    return {}


def _no_causes() -> Mapping[int, str]:
    return {}


@dataclass(frozen=True, slots=True)
class Freshness:
    """When the cluster last confirmed each partition's state complete, of `__consumer_offsets`
    or (a second instance) of `__share_group_state` (exporter/state/source_freshness.py):
    immutable, for readiness, the API and the metrics.

    A partition is stale once it has gone unconfirmed for longer than `stale_after_ms`."""

    #: the partitions this exporter reads, ascending
    tracked: tuple[int, ...] = ()
    #: partitions of the topic (a group's partition: `of_group`; a share partition's:
    #: `of_share`)
    partition_count: int = 0
    #: partition -> epoch ms of its last confirmation (absent: none yet)
    confirmed_ms: Mapping[int, int] = field(default_factory=_no_times)
    #: partition -> why it is not confirmed now (absent: confirmed by the last round)
    causes: Mapping[int, str] = field(default_factory=_no_causes)
    stale_after_ms: int = 0
    #: epoch ms since which partitions are tracked: the age of one never confirmed
    since_ms: int = 0
    #: partition -> epoch ms it was first tracked, for one that appeared after `since_ms`
    #: (its age while never confirmed)
    tracked_since_ms: Mapping[int, int] = field(default_factory=_no_times)

    def age_s(self, partition: int, now_ms: int) -> float:
        """Seconds since the partition was last confirmed (since tracking began if never)."""
        confirmed = self.confirmed_ms.get(partition)
        if confirmed is None:
            confirmed = self.tracked_since_ms.get(partition, self.since_ms)
        return max(0, now_ms - confirmed) / 1000

    def is_stale(self, partition: int, now_ms: int) -> bool:
        return (
            self.stale_after_ms > 0 and self.age_s(partition, now_ms) * 1000 > self.stale_after_ms
        )

    def cause_of(self, partition: int) -> str:
        """Why the partition is not confirmed now (for one that is stale)."""
        return self.causes.get(
            partition, "no log-end round answered since (the sampler's request is still waiting)"
        )

    def stale(self, now_ms: int) -> list[StalePartition]:
        """The stale partitions, the longest unconfirmed first."""
        found = [
            StalePartition(
                p,
                self.confirmed_ms.get(p, 0),
                self.age_s(p, now_ms),
                self.cause_of(p),
            )
            for p in self.tracked
            if self.is_stale(p, now_ms)
        ]
        return sorted(found, key=lambda s: (-s.age_s, s.partition))

    def of_group(self, group_id: str) -> int | None:
        """The `__consumer_offsets` partition holding the group's records."""
        count = self.partition_count
        return partition_for(group_id, count) if count > 0 else None

    def of_share(self, group_id: str, topic_id: str, partition: int) -> int | None:
        """The `__share_group_state` partition holding a share partition's state (for the
        share-state instance; None while the topic's partitions are unknown or it does not
        exist)."""
        count = self.partition_count
        if count <= 0:
            return None
        return share_state_partition_for(group_id, topic_id, partition, count)


#: how many unknown records `PipelineStats.unknown_seen` remembers (the counters count all)
UNKNOWN_KEPT: Final = 20


@dataclass(frozen=True, slots=True)
class UnknownSeen:
    """A record of a key type or value version this decoder does not know (a Kafka newer than
    offsetwatch, or bytes no release writes): counted, named and skipped, as Kafka's own
    coordinator loader skips a key type it does not know; the records around it apply."""

    partition: int
    offset: int
    key_type: int
    #: the value's version prefix; -1 for a tombstone or a value too short to have one
    value_version: int
    #: "key_type" (the key type is unknown) or "value_version" (the version is)
    what: str


@dataclass(slots=True, frozen=True)
class FleetFigures:
    """A fleet replica's partitions, and the fleet as its coordinator last described it."""

    owned: int
    members: int
    unowned: int
    #: replicas whose settings fingerprint differs from this one's (exporter/fleet/view.py,
    #: `FleetPart.mismatched`): the fleet's union mixes two exports while it is not 0
    settings_mismatched: int = 0


@dataclass(slots=True)
class PipelineStats:
    """Self-metrics of the pipeline. Times are epoch milliseconds (0 = never), durations seconds."""

    #: (record type name, value version label) -> records read; see `version_label`
    records_total: dict[tuple[str, str], int] = field(default_factory=dict)
    #: DecodeError.kind (truncated/trailing/version/length/crc/codec/type/malformed) -> count
    decode_errors_total: dict[str, int] = field(default_factory=dict)
    #: records set aside (undecodable or inconsistent) instead of being applied
    quarantined_total: int = 0
    #: (key type, value version) -> records of a type or version the decoder does not know
    unknown_total: dict[tuple[int, int], int] = field(default_factory=dict)
    #: the latest of them, by partition and offset
    unknown_seen: deque[UnknownSeen] = field(default_factory=lambda: deque(maxlen=UNKNOWN_KEPT))
    #: records the C ingest loop applied (the others went the Python path, the reference)
    fast_path_records_total: int = 0
    #: main-loop iterations that raised (the daemon logs, backs off and carries on)
    loop_errors_total: int = 0
    #: `__consumer_offsets` partition -> next offset to read
    source_position: dict[int, int] = field(default_factory=dict)
    #: `__consumer_offsets` partition -> high watermark
    source_high_watermark: dict[int, int] = field(default_factory=dict)
    #: the consumer of `__consumer_offsets` is connected and assigned
    source_up: bool = False
    #: the source's last error, until it reads again
    source_last_error: str | None = None
    #: why the source is down, in librdkafka's words (None while it is up)
    source_down_reason: str | None = None
    #: Kafka client (offsets_source, share_state_source, publisher, log_end_sampler) -> how
    #: many times it was given up on and replaced: it had no broker address left
    clients_replaced_total: dict[str, int] = field(default_factory=dict)
    #: the first pass over `__consumer_offsets` is done: lag and status mean something
    ready: bool = False
    ready_since_ms: int = 0
    published_total: int = 0
    publish_errors_total: int = 0
    dlq_total: int = 0
    archive_records_total: int = 0
    #: log-end samples written as `log_end` records (archive and/or publish topic)
    log_end_records_total: int = 0
    #: last snapshot build: how long it took and when it finished
    snapshot_duration_s: float = 0.0
    snapshot_time_ms: int = 0
    #: last log-end sampling round of the data partitions
    sample_duration_s: float = 0.0
    last_sample_ms: int = 0
    #: last checkpoint of the state
    checkpoint_time_ms: int = 0
    checkpoint_duration_s: float = 0.0
    started_ms: int = field(default_factory=_now_ms)
    #: the health of the archive, the publisher and the checkpoint (as configured)
    sinks: list[SinkHealth] = field(default_factory=list)
    #: the health of the parts on threads of their own (source readers, log-end sampler)
    parts: list[PartHealth] = field(default_factory=list)
    #: how fresh each `__consumer_offsets` partition's state is, as of the last second
    freshness: Freshness = field(default_factory=Freshness)
    #: the same for each `__share_group_state` partition (nothing tracked while the topic
    #: does not exist: no share group yet, or Kafka 3.9)
    share_state_freshness: Freshness = field(default_factory=Freshness)
    #: the `__share_group_state` reader's last error, until it reads again
    share_state_last_error: str | None = None
    #: tracked topics the broker refuses to describe -> (its error, the grant to make);
    #: replaced whole, never changed in place
    denied_topics: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: source topics (`__consumer_offsets`, `__share_group_state`) the broker refuses to the
    #: exporter -> (its error, the grant of Read to make); replaced whole
    refused_sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: a fleet replica: the fleet's group gave it its first assignment (always True alone)
    fleet_joined: bool = True
    #: a fleet replica's view of its fleet, as of the last step (None alone)
    fleet: FleetFigures | None = None
    #: a fleet replica refused its fleet's group: (the group, the error, the grant of Read)
    fleet_refused: tuple[str, str, str] | None = None

    # -- writers (ingest side) -------------------------------------------------------------

    def count_record(self, type_name: str, version: int | None, n: int = 1) -> None:
        """Count a record by type name and value version (None for a tombstone)."""
        key = (type_name, version_label(version))
        self.records_total[key] = self.records_total.get(key, 0) + n

    def count_error(self, reason: str, n: int = 1) -> None:
        """Count a decode error by `DecodeError.kind`."""
        self.decode_errors_total[reason] = self.decode_errors_total.get(reason, 0) + n

    def note_unknown(self, seen: UnknownSeen) -> None:
        key = (seen.key_type, seen.value_version)
        self.unknown_total[key] = self.unknown_total.get(key, 0) + 1
        self.unknown_seen.append(seen)

    def set_position(self, partition: int, position: int) -> None:
        self.source_position[partition] = position

    def forget_partition(self, partition: int) -> None:
        """A `__consumer_offsets` partition another fleet replica reads now."""
        self.source_position.pop(partition, None)
        self.source_high_watermark.pop(partition, None)

    def set_high_watermark(self, partition: int, high_watermark: int) -> None:
        self.source_high_watermark[partition] = high_watermark

    def mark_ready(self, now_ms: int | None = None) -> None:
        if not self.ready:
            self.ready_since_ms = _now_ms() if now_ms is None else now_ms
            self.ready = True

    def mark_not_ready(self) -> None:
        self.ready = False
        self.ready_since_ms = 0

    # -- readers (collector / HTTP side) ---------------------------------------------------

    def records(self) -> dict[tuple[str, str], int]:
        return self.records_total.copy()

    def errors(self) -> dict[str, int]:
        return self.decode_errors_total.copy()

    def unknown(self) -> tuple[dict[tuple[int, int], int], list[UnknownSeen]]:
        return self.unknown_total.copy(), list(self.unknown_seen)

    def source(self) -> list[SourcePartition]:
        """Every known source partition, by partition number."""
        positions = self.source_position.copy()
        watermarks = self.source_high_watermark.copy()
        return [
            SourcePartition(p, positions.get(p), watermarks.get(p))
            for p in sorted(positions.keys() | watermarks.keys())
        ]

    def behind(self) -> tuple[int, int]:
        """(partitions not at their end yet, partitions known)."""
        partitions = self.source()
        return sum(1 for sp in partitions if not sp.at_end), len(partitions)

    @property
    def total_records(self) -> int:
        return sum(self.records().values())
