"""The long-running exporter: wires the parts and runs the schedule. It does no part's work.

The parts (README "Architecture"):

* sources (exporter/sources/): a reader thread per topic (`__consumer_offsets`,
  `__share_group_state`) fetches batches; the log-end sampler's thread (started by the
  service) runs ListOffsets. They are the only code that reads Kafka.
* state (exporter/state/): the `StateStore`, owned by the main loop alone: no locks.
* judge (exporter/judge/): builds the immutable `Snapshot` from the state.
* sinks (exporter/sinks/): the publisher, archive and quarantine file behind their guards,
  the resume marks, and the checkpoint.
* serve (exporter/serve/): HTTP threads that only read the latest snapshot and the stats,
  and what the main loop hands the console: the lag history and, only while a browser
  watches, every decoded record (`live`).

The main loop (`run`, one `step` at a time) takes finished batches from the readers (waiting
no longer than the next deadline), has the state apply them, hands the sampler's rounds over,
and runs the schedule: snapshots, readiness, sink retries, checkpoints. It never waits on the
network: with a broker hung, snapshots keep their interval. Parts on threads of their own
are restarted with backoff when they fail (exporter/supervisor.py), and their health shows
in /readyz.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import queue
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Final

from offsetwatch.core.acl_hints import grant_line
from offsetwatch.core.atomic import probe_directory, writable_target
from offsetwatch.core.connection import check_client_config
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.fleet.replica import FleetPart, replica_identity
from offsetwatch.exporter.fleet.sink_commits import COMMIT_INTERVAL_S, RevokeHandshake
from offsetwatch.exporter.judge.diagnosis import DiagnosisConfig
from offsetwatch.exporter.judge.judge import Judge
from offsetwatch.exporter.judge.snapshot import Filters, Snapshot, SnapshotBuilder
from offsetwatch.exporter.judge.status import StatusConfig
from offsetwatch.exporter.serve.console_history import ConsoleHistory
from offsetwatch.exporter.serve.live_records import LiveRecords
from offsetwatch.exporter.serve.web_config import load_web_config
from offsetwatch.exporter.sinks.checkpointer import Checkpointer
from offsetwatch.exporter.sinks.fleet_sinks import FleetSinks
from offsetwatch.exporter.sinks.record_sinks import RecordSinks, SinkPartition
from offsetwatch.exporter.sources.credential_watch import CredentialWatch
from offsetwatch.exporter.sources.kafka_source import (
    ClusterChanged,
    OffsetOutOfRange,
    OffsetsTopicSource,
    PartitionEof,
    PartitionsAssigned,
    PartitionsRevoked,
    SourceBatch,
    SourceError,
)
from offsetwatch.exporter.sources.reader import SourceReader
from offsetwatch.exporter.state.store import PartitionState, StateStore
from offsetwatch.exporter.state.topic_names import TopicIdNames
from offsetwatch.exporter.stats import FleetFigures, PipelineStats

log = logging.getLogger(__name__)

Sample = tuple[int, dict[tuple[str, int], int | None]]
#: (time ms, log end per source partition, error per source partition without one)
SourceEnds = tuple[int, dict[int, int], dict[int, str]]

#: gen-0 collections every this many net allocations in the main loop (CPython's default
#: 700). A fetched batch is up to 50,000 Messages alive at once, and with sinks as many
#: encoded items: at 50,000 every batch paid one or two gen-0 passes over objects all still
#: alive, promoted into gen 1 and scanned there again; 500,000 took publishing's catch-up
#: from 191-208k to 224-227k records/s (1.5M commits, Kafka 4.4.0, docs/performance.md)
GC_GEN0_THRESHOLD: Final = 500_000
#: the longest the main loop waits for a batch: the schedule is looked at at least this often
TAKE_WAIT_S: Final = 0.2


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_writable_dir(directory: Path, flag: str) -> None:
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{flag} {directory} is a file, not a directory")
    try:
        probe_directory(directory)
    except OSError as error:
        raise type(error)(
            f"{flag} {directory} cannot be written ({error.strerror or error}): choose a "
            "writable directory"
        ) from None


def _check_writable_file(path: Path, flag: str) -> None:
    if path.is_dir():
        raise IsADirectoryError(
            f"{flag} {path} is a directory: give the path of a file in it, e.g. "
            f"{path / 'offsetwatch.ckpt'}"
        )
    _check_writable_dir(path.parent, f"{flag} {path}: its directory")
    try:
        target, in_place = writable_target(path)
    except OSError as error:
        raise type(error)(f"{flag} {path}: {error.strerror}; choose another path") from None
    if in_place:
        # reading /dev/full never ends, a FIFO blocks, /dev/null keeps nothing: a checkpoint
        # must be a file that holds what was written and gives it back
        raise OSError(f"{flag} {path} is no regular file: give the path of a file")
    _check_writable_dir(target.parent, f"{flag} {path}: its directory")


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    return None if pattern is None else re.compile(pattern)


@dataclass(slots=True)
class Schedule:
    """When the main loop next does each periodic thing (epoch ms of `clock_ms`)."""

    next_snapshot_ms: int = 0
    next_checkpoint_ms: int = 0
    next_second_ms: int = 0
    #: the sampler was asked for a round the moment the first pass was done
    sample_requested: bool = False


@dataclass(slots=True)
class Readers:
    """The source readers and the hand-over of the sampler's rounds."""

    offsets: SourceReader | None = None
    share: SourceReader | None = None
    #: the sampler's rounds, put by its thread, taken by the main loop
    samples: queue.SimpleQueue[Sample] = field(default_factory=queue.SimpleQueue)
    #: histories the sampler rebuilt from record timestamps (a fleet replica's gains)
    backfills: queue.SimpleQueue[list[tuple[int, dict[tuple[str, int], int]]]] = field(
        default_factory=queue.SimpleQueue
    )
    #: the data partitions to sample, published by the main loop (immutable)
    tracked: frozenset[tuple[str, int]] = frozenset()
    #: the sampler's rounds of the source's own log ends (exporter/state/source_freshness.py)
    source_ends: queue.SimpleQueue[SourceEnds] = field(default_factory=queue.SimpleQueue)
    #: the `__consumer_offsets` partitions read, published by the main loop (immutable)
    source_partitions: frozenset[int] = frozenset()
    #: the same two for `__share_group_state` (the share groups' state)
    share_state_ends: queue.SimpleQueue[SourceEnds] = field(default_factory=queue.SimpleQueue)
    share_state_partitions: frozenset[int] = frozenset()
    #: tracked topics the broker refuses to describe -> its error, replaced by the sampler's
    #: thread each round (never changed in place)
    denied_topics: Mapping[str, str] = field(default_factory=dict)
    #: asks the log-end sampler for a round now (set by the service)
    request_sample: Callable[[], None] | None = None
    #: the credential files the clients' settings name (None: they name none)
    credentials: CredentialWatch | None = None
    #: hands the log-end sampler new client settings (set by the service)
    renew_sampler: Callable[[Mapping[str, object]], None] | None = None

    def all(self) -> list[SourceReader]:
        return [reader for reader in (self.offsets, self.share) if reader is not None]


@dataclass(slots=True)
class ConsoleFeeds:
    """What the main loop hands the web console besides the snapshot."""

    history: ConsoleHistory = field(default_factory=ConsoleHistory)
    live: LiveRecords = field(default_factory=LiveRecords)


@dataclass(slots=True)
class PartitionHandover:
    """One `__consumer_offsets` partition as it moves between exporters: its state and
    position, and the sinks' resume marks."""

    state: PartitionState
    sinks: SinkPartition


class NotDrained(Exception):
    """A partition's records are not all taken by the sinks yet: it cannot move now."""


@dataclass(slots=True)
class Exporter:
    """The parts and the schedule; `run()` drives them until `stop()` (or SIGTERM)."""

    config: ExporterConfig
    clock_ms: Callable[[], int] = _now_ms
    stats: PipelineStats = field(default_factory=PipelineStats)
    store: StateStore = field(init=False)
    judge: Judge = field(init=False)
    readers: Readers = field(default_factory=Readers)
    sinks: RecordSinks = field(init=False)
    checkpointer: Checkpointer = field(init=False)
    schedule: Schedule = field(default_factory=Schedule)
    feeds: ConsoleFeeds = field(default_factory=ConsoleFeeds)
    _stop: threading.Event = field(default_factory=threading.Event)
    #: the final flush or checkpoint at shutdown failed: the process must not exit 0
    close_failed: bool = False
    #: this replica's part in its fleet (--fleet); None alone
    fleet: FleetPart | None = None
    #: in a fleet, the state restored from a checkpoint was cut down to the partitions the
    #: group gave this replica at its first assignment
    _fleet_pruned: bool = False
    #: in a fleet, partitions gained and not read to their end yet (their groups are hidden)
    _fleet_pending: set[int] = field(default_factory=set)
    #: in a fleet, partitions gained and read to their end, whose groups' topics the log-end
    #: sampler has not sampled yet -> when they were read to their end (still hidden: with
    #: no log end their partitions would be ERR until its next round, STALL read ERR)
    _fleet_unsampled: dict[int, int] = field(default_factory=dict)
    #: a fleet replica with sinks: exactly once across the partitions' owners
    #: (exporter/sinks/fleet_sinks.py), the revocations the reader thread asks it to answer,
    #: and when the owned partitions are next committed
    fleet_sinks: FleetSinks | None = None
    _handshake: RevokeHandshake | None = None
    _next_sink_commit_ms: int = 0

    def __post_init__(self) -> None:
        cfg = self.config
        self.store = StateStore(self.stats)
        window_ms = int(cfg.status_window_s * 1000)
        self.judge = Judge(
            SnapshotBuilder(
                status_config=StatusConfig(
                    window_ms=window_ms, warn_min_growth_ratio=cfg.warn_min_growth_ratio
                ),
                diagnosis_config=DiagnosisConfig(
                    storm_rebalances=cfg.storm_rebalances,
                    rebalance_grace_ms=int(cfg.rebalance_grace_s * 1000),
                ),
                filters=Filters(
                    _compile(cfg.group_allow),
                    _compile(cfg.group_deny),
                    _compile(cfg.topic_allow),
                    _compile(cfg.topic_deny),
                ),
            ),
            window_ms,
        )
        self.sinks = RecordSinks(cfg, self.stats, self.clock_ms)
        self.checkpointer = Checkpointer(cfg, self.stats, self.clock_ms)
        self.store.ingestor.quarantine.append(self.sinks.on_quarantined)
        self.store.share_ingestor.quarantine.append(self.sinks.on_share_quarantined)

    # -- what other parts and tests read ----------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        """The latest snapshot: what the API, /metrics and the console serve."""
        return self.judge.snapshot

    @property
    def topic_id_names(self) -> TopicIdNames:
        return self.store.topic_names

    @property
    def live(self) -> LiveRecords:
        return self.feeds.live

    @property
    def console_history(self) -> ConsoleHistory:
        return self.feeds.history

    @property
    def source(self) -> OffsetsTopicSource | None:
        reader = self.readers.offsets
        return None if reader is None else reader.source

    # -- wiring ----------------------------------------------------------------------------

    def kafka_config(self) -> dict[str, object]:
        """Every client's settings, with `<property>.file` ones read now."""
        return dict(self.config.client_properties())

    def open(self) -> None:
        """Restore the checkpoint (if any), create the Kafka clients and start the readers.

        Raises OSError, with a message that names the flag, for a checkpoint path or an
        archive directory that can never be written: refused at start, not found out at the
        first checkpoint."""
        cfg = self.config
        if cfg.checkpoint_path is not None:
            _check_writable_file(Path(cfg.checkpoint_path), "--checkpoint-path")
        if cfg.archive_dir is not None:
            _check_writable_dir(Path(cfg.archive_dir), "--archive-dir")
        restored = self.checkpointer.restore(self.store)
        self.store.freshness.since_ms = self.store.share_freshness.since_ms = self.clock_ms()
        positions = None if restored is None else restored.positions
        cluster_id = None if restored is None else restored.cluster_id
        if cfg.fleet is not None:
            self.stats.fleet_joined = False
            tls = cfg.web_config is not None and load_web_config(cfg.web_config).tls is not None
            self.fleet = FleetPart(
                cfg,
                replica_identity(cfg, tls),
                self.kafka_config,
                self._offsets_partition_count,
            )
            self.fleet.check_name_free()  # an application's group is refused (FleetNameTaken)
            self.fleet.choose_protocol()
            if cfg.publish_topic is not None or cfg.archive_dir is not None:
                self._open_fleet_sinks(self.fleet.identity.name)
        self.readers.offsets = SourceReader(
            OffsetsTopicSource(
                self.kafka_config(),
                topic=cfg.offsets_topic,
                start_positions=positions,
                expected_cluster_id=cluster_id,
                membership=None if self.fleet is None else self.fleet.membership,
            ),
            name="offsets_reader",
        )
        self.readers.offsets.source.sink_commits = self._handshake
        self.readers.share = SourceReader(
            OffsetsTopicSource(
                self.kafka_config(),
                topic=SHARE_STATE_TOPIC,
                start_positions=None if restored is None else restored.share_positions,
                expected_cluster_id=cluster_id,
                optional=True,
            ),
            name="share_state_reader",
            max_messages=10_000,
        )
        self.sinks.open(self.kafka_config())
        self.readers.credentials = CredentialWatch.of(
            cfg.kafka_properties,
            self.kafka_config,
            self._check_renewed_settings,
        )
        self.store.ingestor.sinks.extend(self.sinks.guards)
        # HTTP answers (not ready) meanwhile; nothing is ingested before it is done. A
        # fleet replica reads back at each gain instead, from the fleet's commits
        if self.fleet_sinks is None:
            self.sinks.start_resume_scan(
                self.kafka_config(),
                positions,
                cluster_id,
                None if restored is None else restored.resume_since_ms,
            )
        self.stats.sinks = self.sinks.healths
        if cfg.checkpoint_path is not None:
            self.stats.sinks.append(self.checkpointer.health)
        self.stats.parts = [reader.health for reader in self.readers.all()]
        for reader in self.readers.all():
            reader.start()
        if self.fleet is not None:
            self.stats.parts.append(self.fleet.health)
            self.fleet.start()

    def _open_fleet_sinks(self, replica: str) -> None:
        """Each replica archives under its own name in --archive-dir; its partitions' sink
        positions go to the fleet's group (exporter/fleet/sink_commits.py)."""
        cfg = self.config
        if cfg.archive_dir is not None:
            self.sinks.config = replace(cfg, archive_dir=Path(cfg.archive_dir) / replica)
        self.fleet_sinks = FleetSinks(
            self.sinks, None if cfg.archive_dir is None else Path(cfg.archive_dir)
        )
        self._handshake = RevokeHandshake()

    def _serve_handover(self) -> None:
        """Answer the reader thread's revocation (its records are delivered, then their
        position is committed) and stop writing lost partitions, before the next batch."""
        handshake = self._handshake
        fleet_sinks = self.fleet_sinks
        if handshake is None or fleet_sinks is None:
            return
        lost = handshake.take_lost()
        if lost:
            fleet_sinks.close(lost)
        revoked = handshake.pending()
        if revoked is None:
            return
        commits = fleet_sinks.hand_over(
            revoked,
            self.store.positions,
            self._next_to_read(self.source),
            timeout_s=handshake.wait_s / 2,
        )
        handshake.answer(commits)

    def _commit_sinks(self, final: bool = False) -> None:
        """The owned partitions' sink positions to the fleet's group: at the reader's next
        poll, or (`final`: the reader thread has stopped) now."""
        source = self.source
        fleet_sinks = self.fleet_sinks
        if fleet_sinks is None or source is None:
            return
        owned = source.assigned_partitions()
        positions = {p: o for p, o in self.store.positions.items() if p in owned}
        commits = fleet_sinks.commits(positions, self._next_to_read(source))
        if final:
            source.commit_now(commits)
        else:
            source.request_commit(commits)

    def _offsets_partition_count(self) -> int:
        reader = self.readers.offsets
        return 0 if reader is None else reader.source.partition_count()

    # -- sampler hand-over -----------------------------------------------------------------

    def tracked_partitions(self) -> frozenset[tuple[str, int]]:
        """Called on the sampler thread: returns the immutable set published by the main loop."""
        return self.readers.tracked

    def on_sample(self, time_ms: int, offsets: dict[tuple[str, int], int | None]) -> None:
        """Called on the sampler thread: hand the round over to the main loop."""
        self.readers.samples.put((time_ms, offsets))

    def source_partitions(self) -> frozenset[int]:
        """Called on the sampler thread: the immutable set published by the main loop."""
        return self.readers.source_partitions

    def on_source_ends(self, time_ms: int, ends: dict[int, int], errors: dict[int, str]) -> None:
        """Called on the sampler thread: the source's log ends, for the main loop."""
        self.readers.source_ends.put((time_ms, ends, errors))

    def share_state_partitions(self) -> frozenset[int]:
        """Called on the sampler thread: the `__share_group_state` partitions read (none while
        the topic does not exist), the immutable set published by the main loop."""
        return self.readers.share_state_partitions

    def on_share_state_ends(
        self, time_ms: int, ends: dict[int, int], errors: dict[int, str]
    ) -> None:
        """Called on the sampler thread: `__share_group_state`'s log ends, for the main loop."""
        self.readers.share_state_ends.put((time_ms, ends, errors))

    def on_denied(self, denied: dict[str, str]) -> None:
        """Called on the sampler thread: the tracked topics it may not describe."""
        self.readers.denied_topics = dict(denied)

    def on_sampler_admin_replaced(self, total: int) -> None:
        """Called on the sampler thread: how many admin clients it replaced so far."""
        self.stats.clients_replaced_total["log_end_sampler"] = total

    def on_backfill(self, points: list[tuple[int, dict[tuple[str, int], int]]]) -> None:
        """Called on the sampler thread: the history, rebuilt from record timestamps, of the
        partitions it is about to sample for the first time (a fleet replica's gains)."""
        self.readers.backfills.put(points)

    def _apply_samples(self) -> None:
        # a rebuilt history goes first: it is older than any round that samples its
        # partitions, and only the sampler's own rounds reach the sinks as log_end records
        while True:
            try:
                points = self.readers.backfills.get_nowait()
            except queue.Empty:
                break
            for time_ms, log_ends in points:
                self.store.apply_sample(time_ms, dict(log_ends))
        samples = self.readers.samples
        sampled_ms: int | None = None
        while True:
            try:
                time_ms, offsets = samples.get_nowait()
            except queue.Empty:
                break
            self.store.apply_sample(time_ms, offsets)
            self.stats.last_sample_ms = sampled_ms = time_ms
            self.sinks.write_log_ends(time_ms, offsets)
        self._release_sampled(sampled_ms)
        for rounds, freshness in (
            (self.readers.source_ends, self.store.freshness),
            (self.readers.share_state_ends, self.store.share_freshness),
        ):
            while True:
                try:
                    time_ms, ends, errors = rounds.get_nowait()
                except queue.Empty:
                    break
                freshness.on_log_ends(time_ms, ends, errors)

    # -- the main loop ---------------------------------------------------------------------

    def step(self, max_wait_s: float = TAKE_WAIT_S) -> int:
        """One iteration of the main loop; returns the number of messages ingested."""
        reader = self.readers.offsets
        assert reader is not None, "open() first"
        handled = 0
        self._serve_handover()
        if not self.sinks.resume_pending():
            now = self.clock_ms()
            wait_s = max(0.0, min(max_wait_s, (self._next_deadline_ms() - now) / 1000))
            batch = reader.take(wait_s)
            if batch is not None:
                handled = self._ingest(reader, batch)
            self._step_share()
        else:
            self._stop.wait(min(max_wait_s, 0.05))
        self.sinks.poll()
        self._apply_samples()
        self._update_source_stats(reader)
        self._run_schedule(reader)
        return handled

    def _next_deadline_ms(self) -> int:
        schedule = self.schedule
        deadlines = [schedule.next_snapshot_ms, schedule.next_second_ms]
        if self.config.checkpoint_path is not None:
            deadlines.append(schedule.next_checkpoint_ms)
        return min(deadlines)

    def _ingest(self, reader: SourceReader, batch: SourceBatch) -> int:
        rebuilt = False
        for event in batch.events:
            rebuilt = self._on_event(event) or rebuilt
        # after a rebuild every partition is read again from its start: this batch's records
        # were fetched from the old positions and must not be applied to the emptied state
        self._watch_live()
        if rebuilt:
            return 0
        messages = batch.messages
        ends = {e.partition: e.offset for e in batch.events if isinstance(e, PartitionEof)}
        reached = self._fleet_pending.intersection(ends) if self._fleet_pending else set()
        if reached:
            # applied below, so read to their end from the next snapshot on
            self._fleet_pending.difference_update(reached)
            self._publish_pending()
        if messages or ends:
            self.stats.source_last_error = None  # reading again, whatever failed before
        if not messages:
            self.store.ingest(messages, ends, self.clock_ms())
            self._await_log_ends(reached)
            return 0
        source = reader.source
        self.sinks.before_ingest(lambda: self._next_to_read(source), source.cluster_id)
        handled = self.store.ingest(messages, ends, self.clock_ms())
        self._await_log_ends(reached)
        return handled

    def _await_log_ends(self, reached: set[int]) -> None:
        """Gained partitions just read to their end (their records applied) stay hidden until
        a sampler round that started after now was applied: it asked for every partition
        their groups track, and its history rebuild came with it. Asked for at once. Before
        ready the start waits for every log end anyway; without a sampler (a bare Exporter)
        nothing would come."""
        if not reached or not self.stats.ready or self.readers.request_sample is None:
            return
        # what the sampler is to sample now, not at the next second's publication
        self.readers.tracked = frozenset(self.store.tracked_partitions())
        now_ms = self.clock_ms()
        for partition in reached:
            self._fleet_unsampled[partition] = now_ms
        self._publish_pending()
        self.readers.request_sample()

    def _release_sampled(self, sampled_ms: int | None) -> None:
        """Show the gained partitions whose groups a round started since sampled (`sampled_ms`:
        the latest round applied), or that waited three sample intervals: a sampler that
        fails must not hide them for good (they show what is known, ERR where nothing is)."""
        if not self._fleet_unsampled:
            return
        now_ms = self.clock_ms()
        patience_ms = int(3 * self.config.sample_interval_s * 1000)
        done = [
            partition
            for partition, at in self._fleet_unsampled.items()
            if (sampled_ms is not None and sampled_ms >= at) or now_ms - at >= patience_ms
        ]
        if done:
            for partition in done:
                del self._fleet_unsampled[partition]
            self._publish_pending()
            # served now, not at the next snapshot interval
            self.schedule.next_snapshot_ms = 0

    def _run_schedule(self, reader: SourceReader) -> None:
        now = self.clock_ms()
        schedule = self.schedule
        if now >= schedule.next_second_ms:
            tracked = self.store.tracked_partitions()
            self.readers.tracked = frozenset(tracked)
            self._update_freshness(reader)
            self._note_denied(self.readers.denied_topics)
            self._renew_clients()
            schedule.next_second_ms = now + 1000
            self._check_ready(reader, tracked)
            self.sinks.every_second()
        if now >= schedule.next_snapshot_ms:
            self.build_snapshot(now)
            schedule.next_snapshot_ms = now + int(self.config.snapshot_interval_s * 1000)
        if self.config.checkpoint_path is not None and now >= schedule.next_checkpoint_ms:
            if schedule.next_checkpoint_ms:
                self.checkpoint()
            schedule.next_checkpoint_ms = now + int(self.config.checkpoint_interval_s * 1000)
        if self.fleet_sinks is not None and now >= self._next_sink_commit_ms:
            self._commit_sinks()
            self._next_sink_commit_ms = now + int(COMMIT_INTERVAL_S * 1000)

    def _check_renewed_settings(self, settings: Mapping[str, object]) -> None:
        """Renewed settings are checked as every client that will take them: the consumers,
        and the producer when republishing (as the start-up check does)."""
        check_client_config(settings, {}, "consumer")
        if self.sinks.publisher is not None:
            check_client_config(settings, {}, "producer")

    def _renew_clients(self) -> None:
        """New clients everywhere once a credential file was replaced: librdkafka reads
        them only when a client is made (exporter/sources/credential_watch.py)."""
        watch = self.readers.credentials
        settings = None if watch is None else watch.poll()
        if settings is None:
            return
        for reader in self.readers.all():
            reader.source.reconfigure(settings)
        self.sinks.reconfigure(settings)
        if self.fleet is not None:
            self.fleet.renew()
        if self.readers.renew_sampler is not None:
            self.readers.renew_sampler(settings)

    def _step_share(self) -> None:
        """Apply what the `__share_group_state` reader fetched (never waits)."""
        reader = self.readers.share
        if reader is None:
            return
        batch = reader.take(0)
        if batch is None:
            return
        for event in batch.events:
            if isinstance(event, OffsetOutOfRange | ClusterChanged):
                log.warning(
                    "%s: %s; rebuilding the share-group state from the start of the topic",
                    SHARE_STATE_TOPIC,
                    event,
                )
                self.store.clear_share(self.clock_ms())
                reader.restart_from_beginning()
                return
            if isinstance(event, SourceError):
                # named in the cause of a share-state partition not read up to its end
                self.stats.share_state_last_error = f"{event.code}: {event.message}"
        ends = {e.partition: e.offset for e in batch.events if isinstance(e, PartitionEof)}
        if batch.messages or ends:
            self.stats.share_state_last_error = None  # reading again
        self.store.ingest_share(batch.messages, ends, self.clock_ms())

    def _watch_live(self) -> None:
        """Hand records to the live stream only while someone watches: unwatched, the
        sink would cost every record a call. Changed here, between batches, on this thread."""
        sinks = self.store.ingestor.sinks
        sink = self.feeds.live.append
        installed = sink in sinks
        if self.feeds.live.watched() != installed:
            if installed:
                sinks.remove(sink)
            else:
                sinks.append(sink)

    def _drop_partitions(self, partitions: tuple[int, ...]) -> None:
        """Partitions the fleet's group gave another replica: their groups, positions and
        resume marks go now (their series leave /metrics at the next snapshot)."""
        count = self._offsets_partition_count()
        for partition in partitions:
            taken = self.store.take(partition, count)
            self.sinks.take(partition)
            if self.fleet_sinks is not None:
                self.fleet_sinks.lost(partition)
            self.stats.forget_partition(partition)
            log.info(
                "%s partition %d is another replica's now: %d group(s) dropped",
                self.config.offsets_topic,
                partition,
                len(taken.groups),
            )
        # the API must not serve the dropped groups until the next snapshot interval
        self.schedule.next_snapshot_ms = 0

    def _publish_pending(self) -> None:
        pending = frozenset(self._fleet_pending.union(self._fleet_unsampled))
        self.store.catching_up = (pending, self._offsets_partition_count()) if pending else None

    def _prune_to_assignment(self, source: OffsetsTopicSource) -> None:
        """At the first assignment of a replica started from a checkpoint: what the
        checkpoint held for partitions the group gave others goes."""
        if self._fleet_pruned or not source.joined():
            return
        self._fleet_pruned = True
        count = source.partition_count()
        assigned = source.assigned_partitions()
        held = set(self.store.positions) | {
            partition_for(group_id, count) for group_id in self.store.offsets.groups
        }
        others = tuple(sorted(held - assigned))
        if others and count > 0:
            self._drop_partitions(others)

    def _on_event(self, event: object) -> bool:
        """Handle a source event; True when it rebuilt the state."""
        if (
            isinstance(event, PartitionsRevoked | PartitionsAssigned)
            and self._handshake is not None
        ):
            self._handshake.settled(event.partitions)
        if isinstance(event, PartitionsRevoked):
            self._drop_partitions(event.partitions)
            self._fleet_pending.difference_update(event.partitions)
            for partition in event.partitions:
                self._fleet_unsampled.pop(partition, None)
            self._publish_pending()
            return False
        if isinstance(event, PartitionsAssigned) and self.fleet is not None:
            self._fleet_pending.update(event.partitions)
            self._publish_pending()
            if self.fleet_sinks is not None:
                source = self.source
                self.fleet_sinks.gain(
                    event.committed,
                    self.kafka_config(),
                    None if source is None else source.cluster_id,
                )
            return False
        if isinstance(event, OffsetOutOfRange):
            # the checkpoint points where the log no longer is: rebuild from scratch
            log.warning(
                "%s partition %d: checkpoint position %d is out of range (%s); rebuilding "
                "the whole state from the start of the topic",
                self.config.offsets_topic,
                event.partition,
                event.requested_offset,
                event.reason,
            )
            self.rebuild()
            return True
        if isinstance(event, ClusterChanged):
            log.warning(
                "the Kafka cluster behind %s is now %s, not %s (wiped and replaced, or a "
                "checkpoint of another cluster): dropping the old cluster's state and "
                "rebuilding from the start of the new cluster's %s; not ready until caught up",
                self.config.bootstrap_servers,
                event.current,
                event.previous,
                self.config.offsets_topic,
            )
            self.store.forget_log_ends()
            self.rebuild()
            return True
        if isinstance(event, SourceError):
            log.warning("%s source: %s: %s", self.config.offsets_topic, event.code, event.message)
            self.stats.source_last_error = f"{event.code}: {event.message}"
        return False

    def rebuild(self) -> None:
        reader = self.readers.offsets
        assert reader is not None
        self.store.clear_offsets(self.clock_ms())
        reader.restart_from_beginning()
        self.stats.mark_not_ready()
        self.schedule.sample_requested = False
        # everything is read and written again from the start: nothing to skip any more
        self.sinks.forget()
        # the API must not serve the dropped state until the next snapshot interval
        self.schedule.next_snapshot_ms = 0

    def _next_to_read(self, source: OffsetsTopicSource | None) -> dict[int, int]:
        # a partition nothing was read from yet (since start or rebuild) starts at 0
        positions = self.store.positions
        assigned = set() if source is None else source.assigned_partitions()
        return {**{p: 0 for p in assigned}, **positions}

    def _update_source_stats(self, reader: SourceReader) -> None:
        source = reader.source
        stats = self.stats
        stats.source_up = source.source_up()
        stats.source_down_reason = source.down_reason()
        replaced = stats.clients_replaced_total
        replaced["offsets_source"] = source.clients_replaced_total
        if self.readers.share is not None:
            replaced["share_state_source"] = self.readers.share.source.clients_replaced_total
        if self.sinks.publisher is not None:
            replaced["publisher"] = self.sinks.publisher.producers_replaced
        for partition, position in source.positions().items():
            stats.set_position(partition, position)
        for partition, end in reader.end_offsets().items():
            stats.set_high_watermark(partition, end)
        self._note_refused_sources()
        if self.fleet is not None:
            self._prune_to_assignment(source)
            stats.fleet_joined = source.joined()
            self.store.owned = (frozenset(source.assigned_partitions()), source.partition_count())
            view = self.fleet.view
            stats.fleet = FleetFigures(
                len(source.assigned_partitions()),
                len(view.replicas()),
                len(view.unowned()),
                len(self.fleet.mismatched()),
            )
            refused = source.refused_group
            stats.fleet_refused = (
                None
                if refused is None
                else (
                    self.fleet.fleet,
                    refused,
                    grant_line(self.kafka_config(), "Read", "group", self.fleet.fleet),
                )
            )

    def _note_refused_sources(self) -> None:
        """The source topics the broker refuses (no Read, so no Describe either), with the
        grant, for readiness, the metrics and the share groups' diagnosis; each source said
        the WARNING itself when it started."""
        refused: dict[str, tuple[str, str]] = {}
        for reader in self.readers.all():
            error = reader.source.refused
            if error is not None:
                topic = reader.source.topic
                grant = grant_line(self.kafka_config(), "Read", "topic", topic)
                refused[topic] = (error, grant)
        if refused != self.stats.refused_sources:
            self.stats.refused_sources = refused
            share = refused.get(SHARE_STATE_TOPIC)
            self.store.share_state_refused = None if share is None else share[1]

    def _note_denied(self, denied: Mapping[str, str]) -> None:
        """Hand the topics the exporter may not describe to the state and the stats; one
        line for each that is newly refused (with the grant to make) and each granted since."""
        before = self.store.denied_topics
        if denied.keys() == before.keys():
            return
        properties = self.kafka_config()
        for topic in sorted(denied.keys() - before.keys()):
            log.warning(
                "not authorized to describe topic %r (%s): the lag of the groups that consume "
                "it is unknown and they show cause not_authorized; grant it: %s",
                topic,
                denied[topic],
                grant_line(properties, "Describe", "topic", topic),
            )
        for topic in sorted(before.keys() - denied.keys()):
            log.info("topic %r can be described again", topic)
        grants = {topic: grant_line(properties, "Describe", "topic", topic) for topic in denied}
        self.store.denied_topics = grants
        self.stats.denied_topics = {topic: (denied[topic], grants[topic]) for topic in denied}

    def _update_freshness(self, reader: SourceReader) -> None:
        source = reader.source
        assigned = source.assigned_partitions()
        self.readers.source_partitions = frozenset(assigned)
        # without a log-end sampler (a bare Exporter, as tests step it) nothing confirms an
        # idle partition, so nothing is judged stale
        sampled = self.readers.request_sample is not None
        stale_after_ms = int(self.config.stale_after_s_resolved * 1000) if sampled else 0
        if self.fleet is not None:
            # a partition gained from another replica ages from when it came, not the start
            self.store.freshness.track(assigned, self.clock_ms())
        self.stats.freshness = self.store.freshness.view(
            assigned, source.partition_count(), stale_after_ms, self.stats.source_last_error
        )
        share = self.readers.share
        if share is None:
            return
        # no partition is assigned while `__share_group_state` does not exist: nothing tracked;
        # created with the first share group, its partitions age from then, not from the start
        share_assigned = share.source.assigned_partitions()
        self.readers.share_state_partitions = frozenset(share_assigned)
        self.store.share_freshness.track(share_assigned, self.clock_ms())
        self.stats.share_state_freshness = self.store.share_freshness.view(
            share_assigned,
            share.source.partition_count(),
            stale_after_ms,
            self.stats.share_state_last_error,
        )

    def _check_ready(self, reader: SourceReader, tracked: set[tuple[str, int]]) -> None:
        """Ready = the first pass reached the end of every partition AND the log end of every
        tracked partition is known: lag computed before both would be a spike from history."""
        if self.stats.ready or not reader.caught_up():
            return
        if self.store.log_ends_known(tracked):
            now_ms = self.clock_ms()
            # lag and status at once, not at the next snapshot interval, and served before
            # /readyz says ready: whoever waits for it never gets the catch-up's empty snapshot
            self.build_snapshot(now_ms, ready=True)
            self.schedule.next_snapshot_ms = now_ms + int(self.config.snapshot_interval_s * 1000)
            self.stats.mark_ready(now_ms)
            log.info("ready: caught up with %s", self.config.offsets_topic)
        elif not self.schedule.sample_requested and self.readers.request_sample is not None:
            # caught up: sample the log ends of what is now tracked at once
            self.schedule.sample_requested = True
            self.readers.request_sample()

    def build_snapshot(self, now_ms: int, ready: bool | None = None) -> Snapshot:
        """The snapshot served from now on; `ready` (default: the stats' readiness) says
        whether it is a full one or the counters-only one of a catch-up."""
        started = time.perf_counter()
        full = self.stats.ready if ready is None else ready
        stats = self.stats
        snapshot = self.judge.judge(
            self.store, now_ms, full, stats.freshness, stats.share_state_freshness
        )
        self.stats.snapshot_time_ms = now_ms
        if full:
            self.stats.snapshot_duration_s = time.perf_counter() - started
            self.feeds.history.record(snapshot)
        return snapshot

    def checkpoint(self) -> bool:
        """Save state and positions; False (logged, counted, retried later) when it failed."""
        source = self.source
        return self.checkpointer.save(
            self.store,
            lambda: self.sinks.checkpoint_positions(dict(self.store.positions)),
            lambda capped: self.sinks.since_bounds(capped, self._next_to_read(source)),
            None if source is None else source.cluster_id,
        )

    # -- ownership per __consumer_offsets partition ----------------------------------------

    def take_partition(self, partition: int, partitions: int) -> PartitionHandover:
        """Remove what `partition` (of `partitions`) holds - its groups, its position and the
        sinks' resume marks - for another exporter's `put_partition`. Raises NotDrained while
        a sink has not taken every record read from it (retry after the next poll)."""
        if not self.sinks.drained(partition, self.store.positions.get(partition)):
            raise NotDrained(f"partition {partition}: records not yet taken by every sink")
        return PartitionHandover(self.store.take(partition, partitions), self.sinks.take(partition))

    def put_partition(self, handover: PartitionHandover, partitions: int) -> None:
        self.store.put(handover.state, partitions)
        self.sinks.put(handover.sinks)

    # -- running ---------------------------------------------------------------------------

    def run(self) -> None:
        """Run until stop(): the caller has called open() and started HTTP/sampler."""
        # The state is arrays and the per-batch garbage (Message and Record objects) is
        # acyclic, yet each 50,000-message batch triggered gen-0/1/2 passes over the whole
        # heap (8% of a catch-up's CPU). Freeze what start-up and the checkpoint load built,
        # and collect gen 0 less often; both are undone when the loop ends (tests run the
        # exporter inside their own process).
        thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(GC_GEN0_THRESHOLD, thresholds[1], thresholds[2])
        try:
            while not self._stop.is_set():
                try:
                    self.step()
                except Exception:
                    # the daemon outlives any one failure: log it, back off, carry on
                    self.stats.loop_errors_total += 1
                    log.exception("exporter main loop failed; retrying in 1 s")
                    self._stop.wait(1.0)
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        def handle(signum: int, _frame: FrameType | None) -> None:
            log.info("signal %d: flushing, checkpointing and exiting", signum)
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)
        # `kill -USR1 PID`: every thread's stack on stderr, for a daemon that seems stuck
        faulthandler.register(signal.SIGUSR1, all_threads=True)

    def close(self) -> None:
        """Stop the readers, flush sinks, write the final checkpoint, close clients. A
        failure of any of them is logged as an ERROR that says what was lost and sets
        `close_failed`."""
        if self.fleet is not None:
            self.fleet.stop()
        if self._handshake is not None:
            # the main loop answers no revocation any more (one inside the client's close
            # runs on this thread): the last commit below covers what the sinks delivered
            self._handshake.disable()
        readers = self.readers.all()
        for reader in readers:
            reader.request_stop()
        stopped = [reader.stop() for reader in readers]
        if not self.sinks.drain():
            self.close_failed = True
        if stopped and stopped[0]:
            # the client's own commit, before it leaves the group in reader.close(): the
            # next owners start from it (never while the reader thread may still use it)
            self._commit_sinks(final=True)
        if not self.checkpoint():
            self.close_failed = True
            log.error(
                "the final checkpoint to %s failed: the next start rebuilds the state from "
                "the start of %s (slower; nothing is lost)",
                self.config.checkpoint_path,
                self.config.offsets_topic,
            )
        self.sinks.close()
        for reader, ended in zip(readers, stopped, strict=True):
            if ended:
                reader.close()
            else:
                log.error(
                    "the %s thread did not end (a Kafka call that does not return?): its "
                    "client stays open",
                    reader.health.name,
                )
