"""Prometheus metrics of the latest snapshot and of the pipeline itself.

A scrape never talks to Kafka: it renders the latest `Snapshot` (lag and status were computed
when it was built) and the `PipelineStats` counters. Two renderings of the same samples:

* `SnapshotCollector.collect()`: prometheus_client metric families, for registries, tests and
  anything that wants `Metric` objects.
* `SnapshotCollector.render()`: the text exposition format 0.0.4, written directly. Formatting
  100k samples through prometheus_client takes seconds; this path takes a fraction of that,
  and the part that only depends on the snapshot (all group/partition series, i.e. nearly all
  of the bytes) is rendered once per snapshot object and cached, plain and gzip-compressed. A
  scrape then only renders the few self-metrics (their ages move with the clock).

Both paths are fed by the same generators (`_snapshot_families`, `_self_families`), so they
cannot disagree on which series exist: per-partition series come as columnar `_Block`s that
the text path formats with one comprehension and the collector path expands sample by sample.
Tests parse both renderings and compare them.

Lag and status series, and every other group/partition series, only exist once the snapshot
is `ready` (the first pass over `__consumer_offsets` is done): during catch-up the state is
history, and exporting it would fire alerts on lag that no longer exists. Self-metrics are
always exported. docs/metrics.md lists every family; keep the two in step.
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import ClassVar, Final, Literal, NamedTuple

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from offsetwatch.exporter.judge.snapshot import GroupSnapshot, Snapshot, TopicRows
from offsetwatch.exporter.judge.status import seconds_since_last_commit
from offsetwatch.exporter.serve.api import owner_index
from offsetwatch.exporter.stats import PipelineStats

__all__ = [
    "ALIAS_FAMILIES",
    "FAMILIES",
    "Exposition",
    "FamilySpec",
    "Granularity",
    "MetricsConfig",
    "SnapshotCollector",
    "escape_label_value",
    "owner_index",
]

Granularity = Literal["partition", "topic", "group"]
_GRANULARITIES: Final = ("partition", "topic", "group")
_LEVEL: Final = {"group": 0, "topic": 1, "partition": 2}

Value = int | float
Sample = tuple[tuple[str, ...], Value]
Source = Callable[[], tuple[Snapshot, PipelineStats]]
Escape = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    #: which per-partition series exist: "partition" (all), "topic" (per (group, topic) and
    #: per group), "group" (per group only); self-metrics are not affected
    granularity: Granularity = "partition"
    #: also export kafka-lag-exporter's metric names (same labels and meaning) so its Grafana
    #: dashboards and alerts work unchanged
    kafka_lag_exporter_aliases: bool = False
    #: the `cluster_name` label of the kafka-lag-exporter aliases
    cluster_name: str = ""
    #: gzip level of the cached compressed exposition (1 = fastest)
    gzip_level: int = 1
    prefix: ClassVar[str] = "offsetwatch_"

    def __post_init__(self) -> None:
        if self.granularity not in _GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {', '.join(_GRANULARITIES)}, got {self.granularity!r}"
            )
        if not 0 <= self.gzip_level <= 9:
            raise ValueError(f"gzip_level must be 0..9, got {self.gzip_level}")

    def covers(self, level: Granularity) -> bool:
        """Are series of this level exported at the configured granularity?"""
        return _LEVEL[self.granularity] >= _LEVEL[level]


# -- families ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FamilySpec:
    #: the name samples carry in the exposition (counters end in _total)
    name: str
    type: Literal["gauge", "counter"]
    labels: tuple[str, ...]
    help: str
    #: text exposition: the HELP/TYPE header and the sample line up to its value
    header: str = field(init=False, repr=False, compare=False)
    line: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.type == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"counter {self.name} must end in _total")
        doc = self.help.replace("\\", r"\\").replace("\n", r"\n")
        object.__setattr__(
            self, "header", f"# HELP {self.name} {doc}\n# TYPE {self.name} {self.type}\n"
        )
        labels = ",".join(f'{label}="%s"' for label in self.labels)
        # label values are %-substituted: a literal % in a name would break that
        assert "%" not in self.name
        object.__setattr__(self, "line", f"{self.name}{{{labels}}} " if labels else f"{self.name} ")

    def block_line(self) -> str:
        """The sample line up to the partition number, for `_Block` rendering."""
        at = self.labels.index("partition")
        tail = self.labels[at + 1 :]
        assert tail in ((), ("member_host", "consumer_id", "client_id")), self.name
        head = "".join(f'{label}="%s",' for label in self.labels[:at])
        return f'{self.name}{{{head}partition="'

    def family(self) -> Metric:
        """An empty prometheus_client family of this spec."""
        if self.type == "counter":
            return CounterMetricFamily(self.name, self.help, labels=self.labels)
        return GaugeMetricFamily(self.name, self.help, labels=self.labels)


def _g(name: str, labels: tuple[str, ...], help: str) -> FamilySpec:
    return FamilySpec(MetricsConfig.prefix + name, "gauge", labels, help)


def _c(name: str, labels: tuple[str, ...], help: str) -> FamilySpec:
    return FamilySpec(MetricsConfig.prefix + name, "counter", labels, help)


_GTP: Final = ("group", "topic", "partition")
_GT: Final = ("group", "topic")
_G: Final = ("group",)

# partition granularity
P_COMMITTED: Final = _g(
    "group_partition_committed_offset", _GTP, "Committed offset: the next message the group reads."
)
P_LAG: Final = _g(
    "group_partition_lag", _GTP, "Messages between the committed offset and the log end."
)
P_LAG_SECONDS: Final = _g(
    "group_partition_lag_seconds",
    _GTP,
    "Age of the next message the group would read (0 when caught up); absent when unknown.",
)
P_LAST_COMMIT: Final = _g(
    "group_partition_last_commit_timestamp_seconds", _GTP, "Time of the last commit (epoch s)."
)
P_STATUS: Final = _g(
    "group_partition_status", _GTP, "Status: 0 OK, 1 WARN, 2 REWIND, 3 STALL, 4 STOP, 5 ERR."
)
P_LEADER_EPOCH: Final = _g(
    "group_partition_leader_epoch", _GTP, "Leader epoch stored with the last commit."
)
LOG_END: Final = _g(
    "partition_log_end_offset", ("topic", "partition"), "Latest sampled log end offset."
)
# topic granularity
T_LAG: Final = _g("group_topic_lag", _GT, "Sum of the known partition lags of the topic.")
T_LAG_SECONDS: Final = _g(
    "group_topic_lag_seconds", _GT, "Largest known partition lag in seconds of the topic."
)
T_STATUS: Final = _g("group_topic_status", _GT, "Worst partition status of the topic.")
# group granularity
G_LAG: Final = _g("group_lag", _G, "Sum of the known partition lags of the group.")
G_LAG_SECONDS: Final = _g(
    "group_lag_seconds", _G, "Largest known partition lag in seconds of the group."
)
G_STATUS: Final = _g(
    "group_status", _G, "Worst partition status: 0 OK, 1 WARN, 2 REWIND, 3 STALL, 4 STOP, 5 ERR."
)
G_COMMITS: Final = _c(
    "group_commits_total", _G, "Offset commits of the group seen in __consumer_offsets."
)
G_COMMIT_RATE: Final = _g(
    "group_commit_rate", _G, "Partition commits per second over the status window."
)
G_LAST_COMMIT: Final = _g(
    "group_last_commit_timestamp_seconds", _G, "Time of the group's latest commit (epoch s)."
)
G_SINCE_COMMIT: Final = _g(
    "group_seconds_since_last_commit", _G, "Seconds from the latest commit to the snapshot time."
)
G_MEMBERS: Final = _g("group_members", _G, "Members of the group.")
G_GENERATION: Final = _g("group_generation", _G, "Classic group generation or KIP-848 group epoch.")
G_ASSIGNMENT_EPOCH: Final = _g(
    "group_assignment_epoch", _G, "Epoch of the group's target assignment."
)
G_INFO: Final = _g(
    "group_info",
    ("group", "kind", "state", "protocol_type", "protocol"),
    "Always 1: kind (CLASSIC/CONSUMER/SHARE/STREAMS), state and protocol of the group.",
)
G_STATE: Final = _g("group_state", ("group", "state"), "1 for the group's current state.")
G_REBALANCES: Final = _c(
    "group_rebalances_total",
    _G,
    "Rebalances seen: classic generation or KIP-848/share/streams group epoch changes.",
)
G_JOINED: Final = _c("group_members_joined_total", _G, "Members that joined the group.")
G_LEFT: Final = _c("group_members_left_total", _G, "Members that left the group.")
G_CATCH_UP: Final = _g(
    "group_catch_up_seconds",
    _G,
    "Lag divided by the net consume rate over the status window; absent when not catching up.",
)
G_FALLING_BEHIND: Final = _g(
    "group_falling_behind", _G, "1 when the group is not OK and its lag does not shrink."
)
G_DIAGNOSIS: Final = _g(
    "group_diagnosis_info",
    ("group", "cause", "suspect_hosts"),
    "Always 1, for groups that are not OK: the cause (docs/diagnosis.md) and the hosts of the "
    "suspect members.",
)
# self-metrics
S_RECORDS: Final = _c("records_total", ("type", "version"), "Records read from __consumer_offsets.")
S_DECODE_ERRORS: Final = _c(
    "decode_errors_total", ("reason",), "Records of __consumer_offsets that failed to decode."
)
S_QUARANTINED: Final = _c("quarantined_total", (), "Records set aside instead of applied.")
S_UNKNOWN: Final = _c(
    "unknown_records_total",
    ("key_type", "value_version"),
    "Records of a key type or value version the decoder does not know: skipped, never fatal.",
)
S_LOOP_ERRORS: Final = _c(
    "loop_errors_total", (), "Failures of the exporter's main loop (logged, retried after 1 s)."
)
S_POSITION: Final = _g(
    "source_position", ("partition",), "Next offset to read per __consumer_offsets partition."
)
S_HIGH_WATERMARK: Final = _g(
    "source_high_watermark", ("partition",), "High watermark per __consumer_offsets partition."
)
S_SOURCE_LAG: Final = _g(
    "source_lag", ("partition",), "Records of __consumer_offsets not read yet."
)
S_SOURCE_UP: Final = _g("source_up", (), "1 while the __consumer_offsets consumer is up.")
S_SOURCE_STALENESS: Final = _g(
    "source_staleness_seconds",
    ("partition",),
    "Seconds since the cluster last confirmed that the exporter holds every record of the "
    "__consumer_offsets partition: its leader answered its log end and the exporter had "
    "read up to it (grows while no leader answers, no fetch answers, or Read is revoked).",
)
S_SOURCE_STALE: Final = _g(
    "source_stale_partitions",
    (),
    "__consumer_offsets partitions unconfirmed for longer than --stale-after-s: their groups "
    "are served from state that may be old, and /readyz says not ready.",
)
S_SHARE_STATE_STALENESS: Final = _g(
    "share_state_staleness_seconds",
    ("partition",),
    "Seconds since the cluster last confirmed that the exporter holds every record of the "
    "__share_group_state partition (the share groups' state): its leader answered its log end "
    "and the exporter had read up to it. No series while the topic does not exist.",
)
S_SHARE_STATE_STALE: Final = _g(
    "share_state_stale_partitions",
    (),
    "__share_group_state partitions unconfirmed for longer than --stale-after-s: the share "
    "groups whose state they hold are served from state that may be old, and /readyz says "
    "not ready.",
)
S_NOT_AUTHORIZED: Final = _g(
    "not_authorized",
    ("resource_type", "operation"),
    "Resources the brokers refuse to the exporter right now, by resource type and operation "
    "(/readyz names each with the kafka-acls.sh grant to make).",
)
S_FLEET_OWNED: Final = _g(
    "fleet_owned_partitions",
    (),
    "With --fleet: the __consumer_offsets partitions the fleet's group gave this replica "
    "(it exports their groups only). Absent alone.",
)
S_FLEET_MEMBERS: Final = _g(
    "fleet_members",
    (),
    "With --fleet: the replicas in the fleet's group, as its coordinator last described it.",
)
S_FLEET_UNOWNED: Final = _g(
    "fleet_unowned_partitions",
    (),
    "With --fleet: __consumer_offsets partitions no replica holds, as the coordinator last "
    "described the fleet's group: their groups are exported by no one (a handover, or too "
    "few replicas running).",
)
S_FLEET_SETTINGS_MISMATCH: Final = _g(
    "fleet_settings_mismatch",
    (),
    "With --fleet: 1 while a replica of the fleet exports with other settings (filters, "
    "granularity, cluster name, aliases, status rules) than this one, as their settings "
    "fingerprints say: the fleet's union mixes two exports. 0 otherwise.",
)
S_FAST_PATH: Final = _c(
    "ingest_fast_path_records_total",
    (),
    "Records of __consumer_offsets the C ingest loop applied; the others (and all of them "
    "while a sink is on) went the Python path, the reference.",
)
S_CLIENTS_REPLACED: Final = _c(
    "clients_replaced_total",
    ("client",),
    "Kafka clients of the exporter replaced by a new one: the old had no broker address left.",
)
S_READY: Final = _g(
    "ready", (), "1 once the first pass over __consumer_offsets is done (lag is exported)."
)
S_GROUPS: Final = _g("groups", (), "Groups in the latest snapshot.")
S_TRACKED: Final = _g(
    "tracked_partitions", (), "(group, topic, partition) entries in the latest snapshot."
)
S_PUBLISHED: Final = _c("published_total", (), "Records published downstream.")
S_PUBLISH_ERRORS: Final = _c("publish_errors_total", (), "Failed downstream publishes.")
S_DLQ: Final = _c("dlq_total", (), "Records sent to the dead-letter queue.")
S_ARCHIVE: Final = _c("archive_records_total", (), "Records written to the archive.")
S_SINK_UP: Final = _g(
    "sink_up",
    ("sink",),
    "1 while the sink (archive, publish, checkpoint) takes what it is given, 0 while it fails.",
)
S_SINK_ERRORS: Final = _c("sink_errors_total", ("sink",), "Failed writes of a sink.")
S_SINK_BACKLOG: Final = _g(
    "sink_backlog_records", ("sink",), "Records kept for a failing sink, retried every second."
)
S_SINK_DROPPED: Final = _c(
    "sink_dropped_total",
    ("sink",),
    "Records a failing sink could not keep (its backlog was full); the checkpoint stays before "
    "them, so a restart writes them.",
)
S_PART_UP: Final = _g(
    "part_up",
    ("part",),
    "1 while the part on its own thread (offsets_reader, share_state_reader, log_end_sampler) "
    "runs, 0 while its rounds fail (it is restarted with backoff).",
)
S_PART_RESTARTS: Final = _c(
    "part_restarts_total", ("part",), "Failed rounds of a part, each followed by a restart."
)
S_ASSIGNMENT_ERRORS: Final = _c(
    "assignment_decode_errors_total",
    (),
    "Classic group members whose consumer-protocol assignment could not be decoded.",
)
S_LOG_END_RECORDS: Final = _c(
    "log_end_records_total",
    (),
    "Log-end samples written as log_end records to the archive and/or the publish topic.",
)
S_SNAPSHOT_AGE: Final = _g("snapshot_age_seconds", (), "Age of the snapshot being served.")
S_SNAPSHOT_DURATION: Final = _g(
    "snapshot_duration_seconds", (), "Time the last snapshot took to build."
)
S_SAMPLE_AGE: Final = _g(
    "log_end_sample_age_seconds", (), "Seconds since the last log-end sampling round finished."
)
S_SAMPLE_DURATION: Final = _g(
    "log_end_sample_duration_seconds", (), "Time the last log-end sampling round took."
)
S_CHECKPOINT_AGE: Final = _g("checkpoint_age_seconds", (), "Seconds since the last checkpoint.")
S_CHECKPOINT_DURATION: Final = _g(
    "checkpoint_duration_seconds", (), "Time the last checkpoint took."
)
S_START_TIME: Final = _g("start_time_seconds", (), "When the pipeline started (epoch s).")
S_BUILD_INFO: Final = _g("build_info", ("version",), "Always 1: the offsetwatch version.")

# kafka-lag-exporter names (github.com/seglo/kafka-lag-exporter, Metrics.scala)
_K_GTP: Final = (
    "cluster_name",
    "group",
    "topic",
    "partition",
    "member_host",
    "consumer_id",
    "client_id",
)
K_OFFSET: Final = FamilySpec(
    "kafka_consumergroup_group_offset",
    "gauge",
    _K_GTP,
    "Last group consumed offset of a partition",
)
K_LAG: Final = FamilySpec(
    "kafka_consumergroup_group_lag", "gauge", _K_GTP, "Group offset lag of a partition"
)
K_LAG_SECONDS: Final = FamilySpec(
    "kafka_consumergroup_group_lag_seconds", "gauge", _K_GTP, "Group time lag of a partition"
)
K_MAX_LAG: Final = FamilySpec(
    "kafka_consumergroup_group_max_lag", "gauge", ("cluster_name", "group"), "Max group offset lag"
)
K_MAX_LAG_SECONDS: Final = FamilySpec(
    "kafka_consumergroup_group_max_lag_seconds",
    "gauge",
    ("cluster_name", "group"),
    "Max group time lag",
)
K_SUM_LAG: Final = FamilySpec(
    "kafka_consumergroup_group_sum_lag",
    "gauge",
    ("cluster_name", "group"),
    "Sum of group offset lag",
)
K_TOPIC_SUM_LAG: Final = FamilySpec(
    "kafka_consumergroup_group_topic_sum_lag",
    "gauge",
    ("cluster_name", "group", "topic"),
    "Sum of group offset lag across topic partitions",
)
K_LATEST_OFFSET: Final = FamilySpec(
    "kafka_partition_latest_offset",
    "gauge",
    ("cluster_name", "topic", "partition"),
    "Latest offset of a partition",
)

# share groups (KIP-932): queues, from __share_group_state (exporter/judge/share_snapshot.py)
SP_START: Final = _g(
    "share_partition_start_offset",
    _GTP,
    "Share partition start offset: records before it are all done (acknowledged or archived).",
)
SP_LAG: Final = _g(
    "share_partition_lag",
    _GTP,
    "Share lag (KIP-1226): log end - start offset - acknowledged - archived records past it.",
)
SP_LAG_SECONDS: Final = _g(
    "share_partition_lag_seconds",
    _GTP,
    "Age of the oldest record neither acknowledged nor archived (0 when none waits).",
)
SP_RECORDS: Final = _g(
    "share_partition_records",
    ("group", "topic", "partition", "state"),
    "Records past the start offset in the persisted state batches, by delivery state.",
)
SP_MAX_DELIVERY: Final = _g(
    "share_partition_max_delivery_count",
    _GTP,
    "Highest delivery count of the records past the start offset.",
)
SP_POISON: Final = _g(
    "share_partition_poison_records",
    _GTP,
    "Records redelivered again and again or archived at the delivery limit.",
)
SP_STATUS: Final = _g(
    "share_partition_status", _GTP, "Queue status: 0 OK, 1 WARN, 3 STALL, 4 STOP, 5 ERR."
)
ST_LAG: Final = _g("share_topic_lag", _GT, "Sum of the known share lags of the topic.")
SG_LAG: Final = _g("share_group_lag", _G, "Sum of the known share lags of the share group.")
SG_LAG_SECONDS: Final = _g(
    "share_group_lag_seconds", _G, "Oldest record not done in the share group, in seconds."
)
SG_STATUS: Final = _g(
    "share_group_status", _G, "Worst share partition status: 0 OK, 1 WARN, 3 STALL, 4 STOP, 5 ERR."
)
SG_POISON: Final = _g(
    "share_group_poison_records", _G, "Poison records (see the partition metric) of the group."
)
SS_RECORDS: Final = _c(
    "share_state_records_total", ("type",), "Records of __share_group_state applied, by type."
)
SS_ERRORS: Final = _c(
    "share_state_errors_total",
    ("reason",),
    "Bad __share_group_state input by reason (counted and shown, never fatal).",
)
SS_UNNAMED: Final = _g(
    "share_unnamed_partitions", (), "Share partitions whose topic id has no known name yet."
)
SS_ORPHANS: Final = _g(
    "share_orphan_partitions",
    (),
    "Share partitions in __share_group_state of groups __consumer_offsets does not know.",
)
STREAMS_TASKS: Final = _g(
    "streams_group_tasks",
    ("group", "type"),
    "Tasks a streams group's members run, by type: active, standby, warmup.",
)
STREAMS_TOPOLOGY_EPOCH: Final = _g(
    "streams_group_topology_epoch", _G, "Epoch of the streams group's topology."
)
STREAMS_FAMILIES: Final = (STREAMS_TASKS, STREAMS_TOPOLOGY_EPOCH)
SHARE_FAMILIES: Final = (
    SP_START,
    SP_LAG,
    SP_LAG_SECONDS,
    SP_RECORDS,
    SP_MAX_DELIVERY,
    SP_POISON,
    SP_STATUS,
    ST_LAG,
    SG_LAG,
    SG_LAG_SECONDS,
    SG_STATUS,
    SG_POISON,
    SS_RECORDS,
    SS_ERRORS,
    SS_UNNAMED,
    SS_ORPHANS,
)

PARTITION_FAMILIES: Final = (
    P_COMMITTED,
    P_LAG,
    P_LAG_SECONDS,
    P_LAST_COMMIT,
    P_STATUS,
    P_LEADER_EPOCH,
    LOG_END,
)
TOPIC_FAMILIES: Final = (T_LAG, T_LAG_SECONDS, T_STATUS)
GROUP_FAMILIES: Final = (
    G_LAG,
    G_LAG_SECONDS,
    G_STATUS,
    G_COMMITS,
    G_COMMIT_RATE,
    G_LAST_COMMIT,
    G_SINCE_COMMIT,
    G_MEMBERS,
    G_GENERATION,
    G_ASSIGNMENT_EPOCH,
    G_INFO,
    G_STATE,
    G_REBALANCES,
    G_JOINED,
    G_LEFT,
    G_CATCH_UP,
    G_FALLING_BEHIND,
    G_DIAGNOSIS,
)
SELF_FAMILIES: Final = (
    S_RECORDS,
    S_DECODE_ERRORS,
    S_QUARANTINED,
    S_UNKNOWN,
    S_LOOP_ERRORS,
    S_POSITION,
    S_HIGH_WATERMARK,
    S_SOURCE_LAG,
    S_SOURCE_UP,
    S_SOURCE_STALENESS,
    S_SOURCE_STALE,
    S_SHARE_STATE_STALENESS,
    S_SHARE_STATE_STALE,
    S_NOT_AUTHORIZED,
    S_FLEET_OWNED,
    S_FLEET_MEMBERS,
    S_FLEET_UNOWNED,
    S_FLEET_SETTINGS_MISMATCH,
    S_FAST_PATH,
    S_CLIENTS_REPLACED,
    S_READY,
    S_GROUPS,
    S_TRACKED,
    S_PUBLISHED,
    S_PUBLISH_ERRORS,
    S_DLQ,
    S_ARCHIVE,
    S_SINK_UP,
    S_SINK_ERRORS,
    S_SINK_BACKLOG,
    S_SINK_DROPPED,
    S_PART_UP,
    S_PART_RESTARTS,
    S_ASSIGNMENT_ERRORS,
    S_LOG_END_RECORDS,
    S_SNAPSHOT_AGE,
    S_SNAPSHOT_DURATION,
    S_SAMPLE_AGE,
    S_SAMPLE_DURATION,
    S_CHECKPOINT_AGE,
    S_CHECKPOINT_DURATION,
    S_START_TIME,
    S_BUILD_INFO,
)
ALIAS_FAMILIES: Final = (
    K_OFFSET,
    K_LAG,
    K_LAG_SECONDS,
    K_MAX_LAG,
    K_MAX_LAG_SECONDS,
    K_SUM_LAG,
    K_TOPIC_SUM_LAG,
    K_LATEST_OFFSET,
)
#: every family offsetwatch can export (docs/metrics.md documents each one)
FAMILIES: Final = (
    PARTITION_FAMILIES
    + TOPIC_FAMILIES
    + GROUP_FAMILIES
    + SELF_FAMILIES
    + ALIAS_FAMILIES
    + SHARE_FAMILIES
    + STREAMS_FAMILIES
)


# -- label values --------------------------------------------------------------------------


def escape_label_value(value: str) -> str:
    """Escape a label value for the text format: backslash, double quote, newline."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _identity(value: str) -> str:
    return value


# str(p) of the usual partition numbers, shared instead of formatted per sample
_PARTITION_TEXT: Final = tuple(str(p) for p in range(4096))


def _ptext(partition: int) -> str:
    return _PARTITION_TEXT[partition] if 0 <= partition < 4096 else str(partition)


_UNASSIGNED: Final = ("", "", "")


# -- samples (shared by both renderings) ---------------------------------------------------

#: `_Block.min_value` of float columns: keeps everything but NaN (NaN compares false)
_NOT_NAN: Final = -math.inf


class _Block(NamedTuple):
    """Per-partition samples of one (group, topic) - or topic - in columnar form.

    Labels are `head`, then `partition`, then `tails[i]` (member labels of the aliases) when
    given. A value is exported when `min_value` is None or `value >= min_value` (`_NOT_NAN`
    drops NaN); timestamps in ms are exported in seconds when `millis` is set. The text
    renderer turns a block into lines with one comprehension; the collector path expands it
    into plain samples.
    """

    head: tuple[str, ...]
    partitions: Sequence[int]
    values: Sequence[Value]
    min_value: float | None = None
    millis: bool = False
    tails: Sequence[tuple[str, str, str]] | None = None

    def samples(self) -> Iterator[Sample]:
        head, low, millis, tails = self.head, self.min_value, self.millis, self.tails
        for i, (p, v) in enumerate(zip(self.partitions, self.values, strict=True)):
            if low is None or v >= low:
                labels = (*head, _ptext(p), *tails[i]) if tails is not None else (*head, _ptext(p))
                yield labels, (v / 1000 if millis else v)


Item = Sample | _Block
Families = Iterator[tuple[FamilySpec, Iterable[Item]]]


@dataclass(slots=True)
class _TopicAgg:
    rows: TopicRows
    topic: str  # escaped
    #: None when no partition's lag is known
    lag: int | None
    lag_seconds: float | None
    status: int
    #: escaped (member_host, consumer_id, client_id) per row, for the aliases
    owners: list[tuple[str, str, str]] | None = None


@dataclass(slots=True)
class _GroupAgg:
    snap: GroupSnapshot
    group: str  # escaped
    topics: list[_TopicAgg]
    #: lag is known for at least one partition (or the group has none)
    lag_known: bool
    lag_seconds_known: bool
    max_lag: int | None


def _aggregate(snapshot: Snapshot, esc: Escape, owners: bool) -> list[_GroupAgg]:
    groups = []
    for g in snapshot.groups:
        topics = []
        max_lag: int | None = None
        index = None
        if owners:
            index = {
                tp: (esc(m.client_host), esc(m.member_id), esc(m.client_id))
                for tp, m in owner_index(g.view).items()
            }
        for rows in g.topics:
            known = [x for x in rows.lag if x >= 0]
            seconds = [x for x in rows.lag_seconds if x == x]  # drop NaN
            top = max(known) if known else None
            if top is not None and (max_lag is None or top > max_lag):
                max_lag = top
            agg = _TopicAgg(
                rows,
                esc(rows.topic),
                sum(known) if known else None,
                max(seconds) if seconds else None,
                max(rows.status, default=0),
            )
            if index is not None:
                topic = rows.topic
                agg.owners = [index.get((topic, p), _UNASSIGNED) for p in rows.partitions]
            topics.append(agg)
        no_rows = not topics
        groups.append(
            _GroupAgg(
                g,
                esc(g.view.group_id),
                topics,
                no_rows or any(t.lag is not None for t in topics),
                no_rows or any(t.lag_seconds is not None for t in topics),
                max_lag,
            )
        )
    return groups


def _snapshot_families(snapshot: Snapshot, cfg: MetricsConfig, esc: Escape) -> Families:
    """Every series derived from the snapshot alone (cacheable per snapshot object)."""
    if not snapshot.ready:
        return
    aliases = cfg.kafka_lag_exporter_aliases
    groups = _aggregate(snapshot, esc, owners=aliases and cfg.covers("partition"))
    if cfg.covers("partition"):
        yield P_COMMITTED, _columns(groups, "committed")
        yield P_LAG, _columns(groups, "lag", 0)
        yield P_LAG_SECONDS, _columns(groups, "lag_seconds", _NOT_NAN)
        yield P_LAST_COMMIT, _columns(groups, "commit_ts", 1, millis=True)
        yield P_STATUS, _columns(groups, "status")
        yield P_LEADER_EPOCH, _columns(groups, "leader_epoch", 0)
        yield LOG_END, _log_ends(groups, ())
    if cfg.covers("topic"):
        yield T_LAG, _per_topic(groups, "lag")
        yield T_LAG_SECONDS, _per_topic(groups, "lag_seconds")
        yield T_STATUS, _per_topic(groups, "status")
    yield G_LAG, (((a.group,), a.snap.total_lag) for a in groups if a.lag_known)
    yield (
        G_LAG_SECONDS,
        (((a.group,), a.snap.max_lag_seconds) for a in groups if a.lag_seconds_known),
    )
    yield G_STATUS, (((a.group,), int(a.snap.status)) for a in groups)
    yield G_COMMITS, (((a.group,), a.snap.commits_total) for a in groups)
    yield G_COMMIT_RATE, (((a.group,), a.snap.commit_rate) for a in groups)
    yield (
        G_LAST_COMMIT,
        (((a.group,), a.snap.last_commit_ts / 1000) for a in groups if _committed(a)),
    )
    yield (
        G_SINCE_COMMIT,
        (
            ((a.group,), seconds_since_last_commit(a.snap.last_commit_ts, snapshot.time_ms))
            for a in groups
            if _committed(a)
        ),
    )
    yield G_MEMBERS, (((a.group,), len(a.snap.view.members)) for a in groups)
    yield (
        G_GENERATION,
        (((a.group,), a.snap.view.generation) for a in groups if a.snap.view.generation >= 0),
    )
    yield (
        G_ASSIGNMENT_EPOCH,
        (
            ((a.group,), a.snap.view.assignment_epoch)
            for a in groups
            if a.snap.view.assignment_epoch >= 0
        ),
    )
    yield G_INFO, (_info(a, esc) for a in groups)
    yield G_STATE, (((a.group, esc(a.snap.view.state)), 1) for a in groups)
    yield G_REBALANCES, (((a.group,), a.snap.rebalances_total) for a in groups)
    yield G_JOINED, (((a.group,), a.snap.members_joined_total) for a in groups)
    yield G_LEFT, (((a.group,), a.snap.members_left_total) for a in groups)
    yield (
        G_CATCH_UP,
        (
            ((a.group,), a.snap.diagnosis.catch_up_seconds)
            for a in groups
            if a.snap.diagnosis.catch_up_seconds is not None
        ),
    )
    yield (
        G_FALLING_BEHIND,
        (((a.group,), int(a.snap.diagnosis.falling_behind)) for a in groups),
    )
    yield G_DIAGNOSIS, (_diagnosis(a, esc) for a in groups if a.snap.diagnosis.cause is not None)
    yield from _share_families(snapshot, cfg, esc)
    yield from _streams_families(groups)
    if aliases:
        yield from _alias_families(groups, cfg, esc)


#: hosts named in the suspect_hosts label; more are summarised (bounded label values)
_MAX_HOSTS: Final = 5


def suspect_hosts(hosts: Iterable[str]) -> str:
    """The `suspect_hosts` label: distinct hosts, sorted, comma-separated, at most five."""
    distinct = sorted({host for host in hosts if host})
    shown = ",".join(distinct[:_MAX_HOSTS])
    extra = len(distinct) - _MAX_HOSTS
    return f"{shown},+{extra} more" if extra > 0 else shown


def _diagnosis(a: _GroupAgg, esc: Escape) -> Sample:
    diagnosis = a.snap.diagnosis
    cause = "" if diagnosis.cause is None else diagnosis.cause.value
    hosts = suspect_hosts(s.host for s in diagnosis.suspects)
    return (a.group, esc(cause), esc(hosts)), 1


def _committed(a: _GroupAgg) -> bool:
    return a.snap.last_commit_ts > 0


def _info(a: _GroupAgg, esc: Escape) -> Sample:
    view = a.snap.view
    labels = (a.group, esc(view.kind), esc(view.state), esc(view.protocol_type), esc(view.protocol))
    return labels, 1


def _columns(
    groups: list[_GroupAgg],
    column: str,
    min_value: float | None = None,
    millis: bool = False,
    prefix: tuple[str, ...] = (),
    owners: bool = False,
) -> Iterator[_Block]:
    for a in groups:
        for t in a.topics:
            yield _Block(
                (*prefix, a.group, t.topic),
                t.rows.partitions,
                getattr(t.rows, column),
                min_value,
                millis,
                t.owners if owners else None,
            )


def _log_ends(groups: list[_GroupAgg], prefix: tuple[str, ...]) -> Iterator[_Block]:
    """Log end offsets per (topic, partition), once however many groups read it."""
    seen: dict[str, set[int]] = {}
    for a in groups:
        for t in a.topics:
            done = seen.setdefault(t.rows.topic, set())
            partitions = []
            ends = []
            for p, end in zip(t.rows.partitions, t.rows.log_end, strict=True):
                if end >= 0 and p not in done:
                    done.add(p)
                    partitions.append(p)
                    ends.append(end)
            if partitions:
                yield _Block((*prefix, t.topic), partitions, ends)


def _per_topic(groups: list[_GroupAgg], attr: str) -> Iterator[Sample]:
    for a in groups:
        for t in a.topics:
            value: Value | None = getattr(t, attr)
            if value is not None:
                yield (a.group, t.topic), value


def _alias_families(groups: list[_GroupAgg], cfg: MetricsConfig, esc: Escape) -> Families:
    cluster = (esc(cfg.cluster_name),)
    if cfg.covers("partition"):
        yield K_OFFSET, _columns(groups, "committed", prefix=cluster, owners=True)
        yield K_LAG, _columns(groups, "lag", 0, prefix=cluster, owners=True)
        yield K_LAG_SECONDS, _columns(groups, "lag_seconds", _NOT_NAN, prefix=cluster, owners=True)
    yield K_MAX_LAG, (((*cluster, a.group), a.max_lag) for a in groups if a.max_lag is not None)
    yield (
        K_MAX_LAG_SECONDS,
        (((*cluster, a.group), a.snap.max_lag_seconds) for a in groups if a.lag_seconds_known),
    )
    yield K_SUM_LAG, (((*cluster, a.group), a.snap.total_lag) for a in groups if a.lag_known)
    if cfg.covers("topic"):
        yield (
            K_TOPIC_SUM_LAG,
            (
                ((*cluster, a.group, t.topic), t.lag)
                for a in groups
                for t in a.topics
                if t.lag is not None
            ),
        )
    if cfg.covers("partition"):
        yield K_LATEST_OFFSET, _log_ends(groups, cluster)


_SHARE_STATES: Final = (("available", 0), ("acknowledged", 1), ("archived", 2), ("unknown", 3))


def _streams_families(groups: list[_GroupAgg]) -> Families:
    """Streams groups' tasks and topology epoch (KIP-1071), from their records."""
    streams = [(a.group, a.snap.view) for a in groups if a.snap.view.kind == "STREAMS"]
    counts = []
    for group, view in streams:
        tasks = [m.tasks for m in view.members if m.tasks is not None]
        for kind in ("active", "standby", "warmup"):
            n = sum(len(ps) for t in tasks for _sub, ps in getattr(t, kind))
            counts.append(((group, kind), n))
    yield STREAMS_TASKS, counts
    yield (
        STREAMS_TOPOLOGY_EPOCH,
        [((group,), view.topology.epoch) for group, view in streams if view.topology is not None],
    )


def _share_families(snapshot: Snapshot, cfg: MetricsConfig, esc: Escape) -> Families:
    """Share groups' series (ready-gated like every group series)."""
    queues = [(esc(g.view.group_id), g.share) for g in snapshot.groups if g.share is not None]
    if cfg.covers("partition"):
        rows = [
            ((group, esc(r.topic), _ptext(r.partition)), r)
            for group, share in queues
            for r in share.partitions
        ]
        yield SP_START, [(k, r.start_offset) for k, r in rows]
        yield SP_LAG, [(k, r.lag) for k, r in rows if r.lag >= 0]
        yield SP_LAG_SECONDS, [(k, r.lag_seconds) for k, r in rows if r.lag_seconds >= 0]
        yield (
            SP_RECORDS,
            [
                ((*k, state), (r.available, r.acknowledged, r.archived, r.unknown_state)[i])
                for k, r in rows
                for state, i in _SHARE_STATES
            ],
        )
        yield SP_MAX_DELIVERY, [(k, r.max_delivery_count) for k, r in rows]
        yield SP_POISON, [(k, sum(b[1] - b[0] + 1 for b in r.poison)) for k, r in rows]
        yield SP_STATUS, [(k, int(r.status)) for k, r in rows]
    if cfg.covers("topic"):
        topic_lag: dict[tuple[str, ...], int] = {}
        for group, share in queues:
            for r in share.partitions:
                if r.lag >= 0:
                    key = (group, esc(r.topic))
                    topic_lag[key] = topic_lag.get(key, 0) + r.lag
        yield ST_LAG, list(topic_lag.items())
    yield SG_LAG, [((g,), q.total_lag) for g, q in queues]
    yield SG_LAG_SECONDS, [((g,), q.max_lag_seconds) for g, q in queues]
    yield SG_STATUS, [((g,), int(q.status)) for g, q in queues]
    yield SG_POISON, [((g,), q.poison_records) for g, q in queues]


def _self_families(
    snapshot: Snapshot, stats: PipelineStats, now_ms: int, version: str, esc: Escape
) -> Families:
    """The pipeline's own metrics: always exported, rendered fresh at every scrape."""
    yield (
        S_RECORDS,
        [((esc(t), esc(v)), n) for (t, v), n in sorted(stats.records().items())],
    )
    yield S_DECODE_ERRORS, [((esc(r),), n) for r, n in sorted(stats.errors().items())]
    yield S_QUARANTINED, [((), stats.quarantined_total)]
    unknown, _seen = stats.unknown()
    yield S_UNKNOWN, [((str(k), str(v)), n) for (k, v), n in sorted(unknown.items())]
    yield S_LOOP_ERRORS, [((), stats.loop_errors_total)]
    source = stats.source()
    yield S_POSITION, [((str(s.partition),), s.position) for s in source if s.position is not None]
    yield (
        S_HIGH_WATERMARK,
        [((str(s.partition),), s.high_watermark) for s in source if s.high_watermark is not None],
    )
    yield S_SOURCE_LAG, [((str(s.partition),), s.lag) for s in source if s.lag is not None]
    yield S_SOURCE_UP, [((), int(stats.source_up))]
    freshness = stats.freshness
    yield (
        S_SOURCE_STALENESS,
        [((str(p),), freshness.age_s(p, now_ms)) for p in freshness.tracked],
    )
    yield S_SOURCE_STALE, [((), len(freshness.stale(now_ms)))]
    share_freshness = stats.share_state_freshness
    yield (
        S_SHARE_STATE_STALENESS,
        [((str(p),), share_freshness.age_s(p, now_ms)) for p in share_freshness.tracked],
    )
    yield S_SHARE_STATE_STALE, [((), len(share_freshness.stale(now_ms)))]
    yield (
        S_NOT_AUTHORIZED,
        [
            (("topic", "Describe"), len(stats.denied_topics)),
            (("topic", "Read"), len(stats.refused_sources)),
            (("group", "Read"), int(stats.fleet_refused is not None)),
        ],
    )
    fleet = stats.fleet
    if fleet is not None:
        yield S_FLEET_OWNED, [((), fleet.owned)]
        yield S_FLEET_MEMBERS, [((), fleet.members)]
        yield S_FLEET_UNOWNED, [((), fleet.unowned)]
        yield S_FLEET_SETTINGS_MISMATCH, [((), int(fleet.settings_mismatched > 0))]
    yield S_FAST_PATH, [((), stats.fast_path_records_total)]
    yield S_CLIENTS_REPLACED, [((c,), n) for c, n in sorted(stats.clients_replaced_total.items())]
    yield S_READY, [((), int(stats.ready))]
    yield S_GROUPS, [((), len(snapshot.groups))]
    yield S_TRACKED, [((), snapshot.tracked_partitions)]
    yield S_PUBLISHED, [((), stats.published_total)]
    yield S_PUBLISH_ERRORS, [((), stats.publish_errors_total)]
    yield S_DLQ, [((), stats.dlq_total)]
    yield S_ARCHIVE, [((), stats.archive_records_total)]
    sinks = stats.sinks
    yield S_SINK_UP, [((h.name,), int(h.up)) for h in sinks]
    yield S_SINK_ERRORS, [((h.name,), h.errors_total) for h in sinks]
    yield S_SINK_BACKLOG, [((h.name,), h.backlog) for h in sinks if h.name != "checkpoint"]
    yield S_SINK_DROPPED, [((h.name,), h.dropped_total) for h in sinks if h.name != "checkpoint"]
    parts = stats.parts
    yield S_PART_UP, [((h.name,), int(h.up)) for h in parts]
    yield S_PART_RESTARTS, [((h.name,), h.restarts_total) for h in parts]
    yield S_ASSIGNMENT_ERRORS, [((), snapshot.assignment_decode_errors)]
    yield S_LOG_END_RECORDS, [((), stats.log_end_records_total)]
    yield S_SNAPSHOT_AGE, _age(snapshot.time_ms, now_ms)
    if stats.snapshot_time_ms > 0:
        yield S_SNAPSHOT_DURATION, [((), stats.snapshot_duration_s)]
    yield S_SAMPLE_AGE, _age(stats.last_sample_ms, now_ms)
    if stats.last_sample_ms > 0:
        yield S_SAMPLE_DURATION, [((), stats.sample_duration_s)]
    yield S_CHECKPOINT_AGE, _age(stats.checkpoint_time_ms, now_ms)
    if stats.checkpoint_time_ms > 0:
        yield S_CHECKPOINT_DURATION, [((), stats.checkpoint_duration_s)]
    if stats.started_ms > 0:
        yield S_START_TIME, [((), stats.started_ms / 1000)]
    yield S_BUILD_INFO, [((esc(version),), 1)]
    share = snapshot.share_stats
    yield SS_RECORDS, [((esc(kind),), n) for kind, n in share.applied]
    yield SS_ERRORS, [((esc(reason),), n) for reason, n in share.errors]
    yield SS_UNNAMED, [((), share.unnamed_partitions)]
    yield SS_ORPHANS, [((), share.orphan_partitions)]


def _age(time_ms: int, now_ms: int) -> list[Sample]:
    """Seconds since `time_ms` (0 = never: no sample), clamped at 0."""
    return [((), max(0, now_ms - time_ms) / 1000)] if time_ms > 0 else []


# -- text rendering ------------------------------------------------------------------------

_NON_FINITE: Final = {"inf": "+Inf", "-inf": "-Inf", "nan": "NaN"}


def _value_text(value: Value) -> str:
    text = f"{value}"
    return _NON_FINITE.get(text, text) if value.__class__ is float else text


def _render_text(families: Families) -> str:
    out: list[str] = []
    #: id(partitions or owners) -> (that object, rendered partition closings), shared by the
    #: families rendering the same rows
    closings: dict[int, tuple[object, list[str]]] = {}
    for spec, items in families:
        lines = [spec.header]
        append = lines.append
        line = spec.line
        block_line: str | None = None
        for item in items:
            if isinstance(item, _Block):
                if block_line is None:
                    block_line = spec.block_line()
                _render_block(item, block_line, lines, closings)
            else:
                labels, value = item
                append(f"{line % labels}{_value_text(value)}\n")
        if len(lines) > 1:
            out.extend(lines)
    return "".join(out)


# 'p"} ' for the usual partition numbers: formatting ints is a large part of a line's cost
_CLOSE: Final = tuple(f'{p}"}} ' for p in range(4096))


def _render_block(
    block: _Block, line: str, out: list[str], closings: dict[int, tuple[object, list[str]]]
) -> None:
    """Lines of a block: one comprehension over the columns (the hot loop of a scrape)."""
    prefix = line % block.head
    low = block.min_value
    ps, vs = block.partitions, block.values
    rows: object = block.tails if block.tails is not None else ps
    cached = closings.get(id(rows))
    if cached is None or cached[0] is not rows:
        cached = closings[id(rows)] = (rows, _closings(block))
    close = cached[1]
    pairs = zip(close, vs, strict=True)
    if block.millis:
        if low is None:
            out += [f"{prefix}{c}{v / 1000}\n" for c, v in pairs]
        else:
            out += [f"{prefix}{c}{v / 1000}\n" for c, v in pairs if v >= low]
    elif low is None:
        out += [f"{prefix}{c}{v}\n" for c, v in pairs]
    else:
        out += [f"{prefix}{c}{v}\n" for c, v in pairs if v >= low]


def _closings(block: _Block) -> list[str]:
    """What follows the partition label's opening quote, up to the value, for each row."""
    ps = block.partitions
    if block.tails is not None:
        return [f"{p}{_TAIL % tail}" for p, tail in zip(ps, block.tails, strict=True)]
    try:
        return [_CLOSE[p] for p in ps]  # partitions are never negative
    except IndexError:
        return [f'{p}"}} ' for p in ps]


_TAIL: Final = '",member_host="%s",consumer_id="%s",client_id="%s"} '


@dataclass(frozen=True, slots=True)
class Exposition:
    """A rendered /metrics body: the cached snapshot part followed by the fresh self part."""

    chunks: tuple[bytes, ...]
    gzipped: bool

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def __len__(self) -> int:
        return sum(len(c) for c in self.chunks)


class _Rendered:
    """The snapshot part of the exposition, for one snapshot object."""

    __slots__ = ("_gzip", "gzip_level", "snapshot", "text")

    def __init__(self, snapshot: Snapshot, text: bytes, gzip_level: int) -> None:
        self.snapshot = snapshot  # held, so its id() cannot be reused while cached
        self.text = text
        self.gzip_level = gzip_level
        self._gzip: tuple[bytes, zlib._Compress] | None = None

    def gzip(self) -> tuple[bytes, zlib._Compress]:
        """Compressed snapshot part and the compressor state after it (to append to)."""
        if self._gzip is None:
            compressor = zlib.compressobj(self.gzip_level, zlib.DEFLATED, 31)
            self._gzip = (compressor.compress(self.text), compressor)
        return self._gzip


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _version() -> str:
    try:
        return metadata.version("offsetwatch")
    except metadata.PackageNotFoundError:
        return "unknown"


class SnapshotCollector:
    """prometheus_client collector (and fast text renderer) of the latest snapshot + stats.

    `source` returns the latest (snapshot, stats) pair; it must be cheap (an attribute read).
    `describe()` returns nothing so registering the collector never calls `collect()`.
    """

    def __init__(
        self,
        source: Source,
        config: MetricsConfig | None = None,
        *,
        version: str | None = None,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.source = source
        self.config = config or MetricsConfig()
        self.version = version if version is not None else _version()
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._cached: _Rendered | None = None

    # -- prometheus_client -----------------------------------------------------------------

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        snapshot, stats = self.source()
        yield from _to_metrics(_snapshot_families(snapshot, self.config, _identity))
        now_ms = self._clock_ms()
        yield from _to_metrics(_self_families(snapshot, stats, now_ms, self.version, _identity))

    # -- direct text exposition ------------------------------------------------------------

    def render(self, gzip: bool = False, extra: bytes = b"") -> Exposition:
        """The text exposition (format 0.0.4) of the latest snapshot, optionally gzipped.

        The snapshot part is rendered once per snapshot object; only the self-metrics are
        rendered per call, followed by `extra` (more exposition text, e.g. process metrics).
        Gzip output is a single gzip member: the compressor state after the cached snapshot
        part is copied and fed the rest, so a scrape only compresses the tail.
        """
        snapshot, stats = self.source()
        cached = self._snapshot_part(snapshot)
        families = _self_families(
            snapshot, stats, self._clock_ms(), self.version, escape_label_value
        )
        tail = _render_text(families).encode() + extra
        if not gzip:
            return Exposition((cached.text, tail), gzipped=False)
        with self._lock:
            head, compressor = cached.gzip()
            finish = compressor.copy()
        return Exposition((head, finish.compress(tail) + finish.flush()), gzipped=True)

    def warm(self, gzip: bool = False) -> None:
        """Render (and cache) the current snapshot's part ahead of the next scrape."""
        cached = self._snapshot_part(self.source()[0])
        if gzip:
            with self._lock:
                cached.gzip()

    def _snapshot_part(self, snapshot: Snapshot) -> _Rendered:
        with self._lock:
            cached = self._cached
            if cached is None or cached.snapshot is not snapshot:
                families = _snapshot_families(snapshot, self.config, escape_label_value)
                text = _render_text(families).encode()
                cached = self._cached = _Rendered(snapshot, text, self.config.gzip_level)
            return cached


def _to_metrics(families: Families) -> Iterator[Metric]:
    for spec, items in families:
        metric = spec.family()
        add = metric.add_metric  # type: ignore[attr-defined]
        for item in items:
            if isinstance(item, _Block):
                for labels, value in item.samples():
                    add(labels, value)
            else:
                add(*item)
        if metric.samples:
            yield metric
