"""The long-running exporter: wires the source, ingest, state, sampler, sinks and snapshots.

Threads and who owns what:

* the main loop (`run`) owns the state store and the log-end histories: it polls the source,
  ingests, applies sampler results, builds snapshots and writes checkpoints. No locks are
  needed around the state because nothing else touches it.
* the sampler thread only talks to Kafka; its results are handed over through a queue, and it
  reads the set of partitions to sample from an immutable set the main loop publishes.
* HTTP threads only read the latest immutable `Snapshot` and the stats, and what the main
  loop hands the console: the lag history (appended after each snapshot) and, only while a
  browser watches, every decoded record (`live`, a ring the stream threads read).
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import queue
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

from offsetwatch.decoder.canonical import Canonical, dumps, identity_key
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.log_end import log_end_identity_key
from offsetwatch.decoder.records import AnyRecord
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.judge.diagnosis import DiagnosisConfig
from offsetwatch.exporter.judge.share_snapshot import topic_names
from offsetwatch.exporter.judge.snapshot import EMPTY_SNAPSHOT, Filters, Snapshot, SnapshotBuilder
from offsetwatch.exporter.judge.status import StatusConfig
from offsetwatch.exporter.serve.console_history import ConsoleHistory
from offsetwatch.exporter.serve.live_records import LiveRecords
from offsetwatch.exporter.sinks.checkpoint import (
    CheckpointError,
    CheckpointMeta,
    CheckpointNotFound,
    load_checkpoint,
    save_checkpoint,
)
from offsetwatch.exporter.sinks.log_end_records import LogEndRecords
from offsetwatch.exporter.sinks.publisher import PublisherStats, RecordPublisher
from offsetwatch.exporter.sinks.resume_dedup import SinceMarks, SkipSet, scan_archive, scan_topics
from offsetwatch.exporter.sinks.sink_guard import GuardedSink
from offsetwatch.exporter.sources.kafka_source import (
    ClusterChanged,
    OffsetOutOfRange,
    OffsetsTopicSource,
    SourceError,
)
from offsetwatch.exporter.state.ingest import Ingestor, Quarantined
from offsetwatch.exporter.state.lag import LogEndHistory
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.state.share_ingest import ShareIngestor
from offsetwatch.exporter.state.share_state import ShareStateStore
from offsetwatch.exporter.state.topic_names import TopicIdNames
from offsetwatch.exporter.stats import PipelineStats, SinkHealth

log = logging.getLogger(__name__)

Sample = tuple[int, dict[tuple[str, int], int | None]]


#: gen-0 collections every this many net allocations in the main loop (CPython's default 700)
GC_GEN0_THRESHOLD: Final = 50_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PublishRefused(Exception):
    """Deliveries to the publish topic that the brokers refused."""


def _check_writable_dir(directory: Path, flag: str) -> None:
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{flag} {directory} is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # a real write: access() says yes to root on a read-only filesystem
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".offsetwatch-probe-"):
            pass
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


def _compile(pattern: str | None) -> Any:
    import re

    return None if pattern is None else re.compile(pattern)


@dataclass(slots=True)
class Exporter:
    """Everything the exporter knows; `run()` drives it until `stop()` (or SIGTERM)."""

    config: ExporterConfig
    clock_ms: Callable[[], int] = _now_ms
    codec: Codec = field(default_factory=Codec)
    stats: PipelineStats = field(default_factory=PipelineStats)
    state: OffsetState = field(default_factory=OffsetState)
    histories: dict[tuple[str, int], LogEndHistory] = field(default_factory=dict)
    snapshot: Snapshot = EMPTY_SNAPSHOT
    ingestor: Ingestor = field(init=False)
    builder: SnapshotBuilder = field(init=False)
    source: OffsetsTopicSource | None = None
    #: share groups (KIP-932): __share_group_state, read beside __consumer_offsets once it
    #: exists (exporter/state/share_state.py); its undecodable records go to the quarantine file
    share_store: ShareStateStore = field(default_factory=ShareStateStore)
    share_ingestor: ShareIngestor = field(init=False)
    share_source: OffsetsTopicSource | None = None
    #: names of the topic ids share partitions are keyed by (group records, topic metadata)
    topic_id_names: TopicIdNames = field(default_factory=TopicIdNames)
    _share_positions: dict[int, int] | None = None
    publisher: RecordPublisher | None = None
    archive: Any = None
    _canonical: Canonical = field(default_factory=Canonical)
    _samples: queue.SimpleQueue[Sample] = field(default_factory=queue.SimpleQueue)
    _tracked: frozenset[tuple[str, int]] = frozenset()
    _stop: threading.Event = field(default_factory=threading.Event)
    #: asks the log-end sampler for a round now (set by the service)
    request_sample: Callable[[], None] | None = None
    _sample_requested: bool = False
    #: tracked partitions the sampler reported as not existing (deleted topics)
    _missing: set[tuple[str, int]] = field(default_factory=set)
    _next_snapshot_ms: int = 0
    _next_checkpoint_ms: int = 0
    _next_tracked_ms: int = 0
    _quarantine_file: Any = None
    _avro: Any = None
    _log_end_records: LogEndRecords = field(init=False)
    #: the console's feeds: recent lag totals per group, and records for the live stream
    console_history: ConsoleHistory = field(default_factory=ConsoleHistory)
    live: LiveRecords = field(default_factory=LiveRecords)
    #: the archive and the publisher, each behind a guard that keeps its records when it fails
    guards: list[GuardedSink] = field(default_factory=list)
    checkpoint_health: SinkHealth = field(default_factory=lambda: SinkHealth("checkpoint"))
    _next_checkpoint_log: float = 0.0
    #: the final flush or checkpoint at shutdown failed: the process must not exit 0
    close_failed: bool = False
    _refused_seen: int = 0
    #: exactly once across a crash of the exporter (exporter/sinks/resume_dedup.py): when the sinks
    #: took records after each position, and what they already hold after the checkpoint
    _since: SinceMarks = field(default_factory=SinceMarks)
    _resume_since: dict[int, int] | None = None
    #: (restored positions, cluster id) until the first step reads back what was written
    _resume_pending: tuple[dict[int, int] | None, str | None] | None = None
    _published_skip: SkipSet = field(default_factory=SkipSet)
    _archived_skip: SkipSet = field(default_factory=SkipSet)

    def __post_init__(self) -> None:
        cfg = self.config
        self.ingestor = Ingestor(self.state, self.stats, self.codec)
        self.builder = SnapshotBuilder(
            status_config=StatusConfig(
                window_ms=int(cfg.status_window_s * 1000),
                warn_min_growth_ratio=cfg.warn_min_growth_ratio,
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
        )
        self.ingestor.quarantine.append(self._on_quarantined)
        self.share_ingestor = ShareIngestor(
            self.share_store, quarantine=[self._on_share_quarantined]
        )
        self._log_end_records = LogEndRecords(int(cfg.log_end_full_round_s * 1000))

    # -- wiring ----------------------------------------------------------------------------

    def kafka_config(self) -> dict[str, object]:
        properties: dict[str, object] = dict(self.config.kafka_properties)
        properties["bootstrap.servers"] = self.config.bootstrap_servers
        return properties

    def open(self) -> None:
        """Restore the checkpoint (if any) and create the Kafka clients.

        Raises OSError, with a message that names the flag, for a checkpoint path or an
        archive directory that can never be written: refused at start, not found out at the
        first checkpoint."""
        if self.config.checkpoint_path is not None:
            _check_writable_file(Path(self.config.checkpoint_path), "--checkpoint-path")
        if self.config.archive_dir is not None:
            _check_writable_dir(Path(self.config.archive_dir), "--archive-dir")
        positions, cluster_id = self._restore()
        self.source = OffsetsTopicSource(
            self.kafka_config(),
            topic=self.config.offsets_topic,
            start_positions=positions,
            expected_cluster_id=cluster_id,
        )
        self.share_source = OffsetsTopicSource(
            self.kafka_config(),
            topic=SHARE_STATE_TOPIC,
            start_positions=self._share_positions,
            expected_cluster_id=cluster_id,
            optional=True,
        )
        if self.config.publish_topic is not None:
            if self.config.publish_format == "avro":
                from offsetwatch.decoder.avro import AvroCodec

                self._avro = AvroCodec()
            self.publisher = RecordPublisher(
                self.kafka_config(),
                output_topic=self.config.publish_topic,
                dlq_topic=self.config.publish_dlq_topic,
                source_topic=self.config.offsets_topic,
            )
            self._guard(
                "publish",
                self._publish,
                f"check that the topic {self.config.publish_topic!r} can exist on the cluster "
                "and that this client may write to it",
            )
        if self.config.archive_dir is not None:
            from offsetwatch.exporter.sinks.archive import ArchiveWriter

            self.archive = ArchiveWriter(
                self.config.archive_dir,
                format=self.config.archive_format,
                gzip=self.config.archive_gzip,
                roll_bytes=self.config.archive_roll_bytes,
                roll_seconds=self.config.archive_roll_s,
            )
            self._guard(
                "archive",
                self._archive,
                f"free space in {self.config.archive_dir} or check its permissions",
            )
        # read back in the first step, not here: HTTP answers (not ready) meanwhile
        self._resume_pending = (positions, cluster_id)
        self.stats.sinks = [guard.health for guard in self.guards]
        if self.config.checkpoint_path is not None:
            self.stats.sinks.append(self.checkpoint_health)

    def _guard(self, name: str, write: Callable[[AnyRecord], None], advice: str) -> None:
        guard = GuardedSink(name, write, advice, clock_ms=self.clock_ms)
        self.guards.append(guard)
        self.ingestor.sinks.append(guard)

    def _checkpoint_meta(self) -> CheckpointMeta:
        cluster_id = None if self.source is None else self.source.cluster_id
        return CheckpointMeta.for_cluster(
            self.config.offsets_topic, cluster_id, self.config.bootstrap_servers
        )

    def _restore(self) -> tuple[dict[int, int] | None, str | None]:
        """Positions and cluster id of the checkpoint; the source compares that id with the
        cluster's own before it reads from those positions."""
        path = self.config.checkpoint_path
        if path is None:
            return None, None
        try:
            loaded = load_checkpoint(path, expect=self._checkpoint_meta(), codec=self.codec)
        except CheckpointNotFound:
            log.info(
                "no checkpoint at %s: reading %s from the start", path, self.config.offsets_topic
            )
            return None, None
        except CheckpointError as error:
            log.warning("%s; rebuilding the state from the start of the topic", error)
            return None, None
        self.state.groups.update(loaded.state.groups)
        self.ingestor.positions.update(loaded.positions)
        if loaded.share_state is not None:
            # absent from checkpoints written before share groups: read that topic anew
            store = ShareStateStore.from_json(loaded.share_state["store"])
            self.share_store = self.share_ingestor.store = store
            self._share_positions = {
                int(p): int(o) for p, o in loaded.share_state["positions"].items()
            }
            self.share_ingestor.positions.update(self._share_positions)
        log.info(
            "resumed from checkpoint %s: %d groups, %d partitions of %s",
            path,
            len(self.state.groups),
            len(loaded.positions),
            self.config.offsets_topic,
        )
        self._resume_since = loaded.resume_since_ms
        return dict(loaded.positions), loaded.meta.cluster_id

    # -- sinks -----------------------------------------------------------------------------

    def _publish(self, record: AnyRecord) -> None:
        assert self.publisher is not None
        if self._published_skip and self._published_skip.take(record.partition, record.offset):
            self.publisher.mark_done(record.partition, record.offset)  # there before the crash
            return
        if self._avro is None:
            value = self._canonical.to_json(record).encode("utf-8")
        else:
            canonical = self._canonical.to_dict(record)
            schema_id = self.config.publish_schema_id
            value = (
                self._avro.encode(canonical)
                if schema_id is None
                else self._avro.encode_confluent(canonical, schema_id)
            )
        self.publisher.publish(record.partition, record.offset, identity_key(record), value)

    def _write_log_ends(self, time_ms: int, offsets: dict[tuple[str, int], int | None]) -> None:
        """Log-end samples go where the records go, so history jobs see both in one stream."""
        if self.archive is None and self.publisher is None:
            return
        for sample in self._log_end_records.records(time_ms, offsets):
            if self.archive is not None:
                try:
                    self.archive.write(sample)
                except Exception as error:
                    # the next sampling round writes every partition again: count, go on
                    self._guard_named("archive").note_failure(error)
            if self.publisher is not None:
                try:
                    self.publisher.publish_unpositioned(
                        log_end_identity_key(sample["key"]["topic"], sample["key"]["partition"]),
                        self._serialize(sample),
                    )
                except Exception as error:
                    self._guard_named("publish").note_failure(error)
            self.stats.log_end_records_total += 1

    def _serialize(self, canonical: dict[str, Any]) -> bytes:
        if self._avro is None:
            return dumps(canonical).encode("utf-8")
        schema_id = self.config.publish_schema_id
        if schema_id is None:
            body: bytes = self._avro.encode(canonical)
            return body
        framed: bytes = self._avro.encode_confluent(canonical, schema_id)
        return framed

    def _guard_named(self, name: str) -> GuardedSink:
        return next(guard for guard in self.guards if guard.name == name)

    def _archive(self, record: AnyRecord) -> None:
        if self._archived_skip and self._archived_skip.take(record.partition, record.offset):
            return  # archived before the crash
        self.archive.write(self._canonical.to_dict(record))
        self.stats.archive_records_total += 1

    def _on_quarantined(self, item: Quarantined) -> None:
        self.stats.quarantined_total += 1
        log.warning("quarantined undecodable record: %s", item.error)
        if self.publisher is not None and self.config.publish_dlq_topic is not None:
            if self._published_skip and self._published_skip.take(item.partition, item.offset):
                self.publisher.mark_done(item.partition, item.offset)  # there before the crash
                return
            self.publisher.dead_letter(
                item.partition, item.offset, item.key, item.value, str(item.error)
            )
            self.stats.dlq_total += 1
            return
        if self.publisher is not None:
            self.publisher.mark_done(item.partition, item.offset)
        self._write_quarantine_file(item)

    def _write_quarantine_file(self, item: Quarantined, topic: str | None = None) -> None:
        """Without a dead-letter topic the bytes still must not be lost: keep them on disk.
        `topic` names the source when it is not __consumer_offsets (the lines' old shape)."""
        directory = self._state_dir()
        if directory is None:
            return
        if self._quarantine_file is None:
            directory.mkdir(parents=True, exist_ok=True)
            self._quarantine_file = open(directory / "quarantine.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        line = dumps(
            {
                **({} if topic is None else {"topic": topic}),
                "partition": item.partition,
                "offset": item.offset,
                "timestamp": item.timestamp,
                "key": None if item.key is None else item.key.hex(),
                "value": None if item.value is None else item.value.hex(),
                "error": str(item.error),
                "reason": item.error.kind,
            }
        )
        self._quarantine_file.write(line + "\n")
        self._quarantine_file.flush()

    def _state_dir(self) -> Path | None:
        if self.config.checkpoint_path is not None:
            return Path(self.config.checkpoint_path).parent
        if self.config.archive_dir is not None:
            return Path(self.config.archive_dir)
        return None

    # -- exactly once across a crash of the exporter (exporter/sinks/resume_dedup.py) --------------

    def _skip_written(self, positions: dict[int, int] | None, cluster_id: str | None) -> None:
        """After a restore: find what the sinks took after the checkpoint before the crash
        (publish and dead-letter topics by their source headers, archive files by their
        records), so that reading it again writes none of it twice. Checkpoints written
        before this existed have no bound: nothing is skipped then (at-least-once)."""
        bounds = self._resume_since
        if positions is None or not bounds:
            return
        since = min(bounds.values())
        found_published: set[tuple[int, int]] = set()
        if self.publisher is not None:
            topics = [self.publisher.output_topic]
            if self.config.publish_dlq_topic is not None:
                topics.append(self.config.publish_dlq_topic)
            found_published = scan_topics(
                self.kafka_config(),
                topics,
                positions,
                since,
                source_topic=self.config.offsets_topic,
                cluster_id=cluster_id,
            )
        found_archived: set[tuple[int, int]] = set()
        if self.archive is not None:
            found_archived = scan_archive(Path(self.config.archive_dir or "."), positions, since)
        self._published_skip = SkipSet.of(found_published)
        self._archived_skip = SkipSet.of(found_archived)
        for skip in (self._published_skip, self._archived_skip):
            for partition, last in skip.last_offsets().items():
                self._since.found(partition, last, since)
        log.info(
            "since the checkpoint, %d records were already published and %d archived before "
            "the exporter stopped: reading them again writes none of them twice",
            len(found_published),
            len(found_archived),
        )

    def _before_ingest(self, source: OffsetsTopicSource) -> None:
        # wall time, not clock_ms: the bound is compared with Kafka timestamps and file times
        now = _now_ms()
        if self._since.due(now):
            self._since.note(self._next_to_read(source), now)
        if self.publisher is not None:
            self.publisher.source_cluster_id = source.cluster_id

    def _next_to_read(self, source: OffsetsTopicSource | None) -> dict[int, int]:
        # a partition nothing was read from yet (since start or rebuild) starts at 0
        positions = self.ingestor.positions
        assigned = set() if source is None else source.assigned_partitions()
        return {**{p: 0 for p in assigned}, **positions}

    def _since_bounds(self, positions: dict[int, int]) -> dict[int, int]:
        """Per checkpointed position, when the sinks could first have taken a record at or
        after it (a mark now covers everything not read yet)."""
        self._since.note(self._next_to_read(self.source), _now_ms(), force=True)
        return self._since.bounds(positions)

    # -- sampler hand-over ------------------------------------------------------------------

    def tracked_partitions(self) -> frozenset[tuple[str, int]]:
        """Called on the sampler thread: returns the immutable set published by the main loop."""
        return self._tracked

    def on_sample(self, time_ms: int, offsets: dict[tuple[str, int], int | None]) -> None:
        """Called on the sampler thread: hand the round over to the main loop."""
        self._samples.put((time_ms, offsets))

    def on_sampler_admin_replaced(self, total: int) -> None:
        """Called on the sampler thread: how many admin clients it replaced so far."""
        self.stats.clients_replaced_total["log_end_sampler"] = total

    def _apply_samples(self) -> None:
        while True:
            try:
                time_ms, offsets = self._samples.get_nowait()
            except queue.Empty:
                return
            for key, end in offsets.items():
                if end is None:
                    # the topic is gone: forget its history so the partition reports unknown
                    self.histories.pop(key, None)
                    self._missing.add(key)
                    continue
                self._missing.discard(key)
                history = self.histories.get(key)
                if history is None:
                    history = self.histories[key] = LogEndHistory()
                history.record(time_ms, end)
            self.stats.last_sample_ms = time_ms
            self._write_log_ends(time_ms, offsets)

    # -- the main loop ---------------------------------------------------------------------

    def step(self, max_messages: int = 50_000, timeout_s: float = 0.2) -> int:
        """One iteration of the main loop; returns the number of messages ingested."""
        source = self.source
        assert source is not None
        if self._resume_pending is not None:
            pending, self._resume_pending = self._resume_pending, None
            self._skip_written(*pending)  # before any record is read again
        batch = source.poll_batch(max_messages, timeout_s)
        rebuilt = False
        for event in batch.events:
            rebuilt = self._on_event(event) or rebuilt
        # after a rebuild every partition is read again from its start: this batch's records
        # were fetched from the old positions and must not be applied to the emptied state
        messages = [] if rebuilt else batch.messages
        self._watch_live()
        if messages:
            self._before_ingest(source)
        handled = self.ingestor.ingest(messages) if messages else 0
        self._step_share()
        if self.publisher is not None:
            self.publisher.poll(0)
            self._watch_deliveries(self.publisher.stats())
        self._apply_samples()
        now = self.clock_ms()
        self._update_source_stats(source)
        if now >= self._next_tracked_ms:
            tracked = self.state.tracked_partitions() | self._share_tracked()
            self._tracked = frozenset(tracked)
            self._next_tracked_ms = now + 1000
            self._check_ready(source, tracked)
            for guard in self.guards:
                guard.retry()
            if self.archive is not None:
                try:
                    self.archive.roll_expired()
                except Exception as error:
                    self._guard_named("archive").note_failure(error)
        if now >= self._next_snapshot_ms:
            self.build_snapshot(now)
            self._next_snapshot_ms = now + int(self.config.snapshot_interval_s * 1000)
        if self.config.checkpoint_path is not None and now >= self._next_checkpoint_ms:
            if self._next_checkpoint_ms:
                self.checkpoint()
            self._next_checkpoint_ms = now + int(self.config.checkpoint_interval_s * 1000)
        return handled

    def _watch_deliveries(self, delivered: PublisherStats) -> None:
        """Deliveries the brokers refused (a topic that cannot exist, no ACL) fail after
        produce() returned: they count as failures of the publish sink too. Their records
        hold the checkpoint back (the delivery tracker), so a restart publishes them."""
        guard = self._guard_named("publish")
        refused = delivered.failed - self._refused_seen
        if refused > 0:
            error = PublishRefused(f"the brokers refused {refused}: {delivered.last_error}")
            guard.note_failure(error, count=refused)
        elif delivered.records_delivered > self.stats.published_total:
            guard.note_success()
        self._refused_seen = delivered.failed
        self.stats.published_total = delivered.records_delivered
        self.stats.publish_errors_total = guard.health.errors_total

    def _step_share(self) -> None:
        """Read and apply what `__share_group_state` has (never waits: timeout 0)."""
        source = self.share_source
        if source is None:
            return
        batch = source.poll_batch(10_000, 0)
        for event in batch.events:
            if isinstance(event, OffsetOutOfRange | ClusterChanged):
                log.warning(
                    "%s: %s; rebuilding the share-group state from the start of the topic",
                    SHARE_STATE_TOPIC,
                    event,
                )
                self.share_store.clear()
                self.share_ingestor.positions.clear()
                source.restart_from_beginning(source.assigned_partitions())
                return
        if batch.messages:
            self.share_ingestor.ingest(batch.messages)

    def _share_tracked(self) -> set[tuple[str, int]]:
        """The data partitions of share partitions whose topic name is known (sampled).

        Names are learned from the groups' records while they name their topics (Kafka 4.0
        empties them when the last member leaves) and from the sampler's metadata lookup of
        the ids still unknown, published here for its next round."""
        names = self.topic_id_names
        names.take_offered()
        learned: set[str] = set()
        for group_id, _topic_id, _partition in self.share_store.partitions:
            if group_id not in learned:
                learned.add(group_id)
                group = self.state.groups.get(group_id)
                if group is not None:
                    names.learn(topic_names(group))
        known = names.names
        tracked: set[tuple[str, int]] = set()
        for _group_id, topic_id, partition in self.share_store.partitions:
            name = known.get(topic_id)
            if name is not None:
                tracked.add((name, partition))
        names.publish_unknown(t for _g, t, _p in self.share_store.partitions)
        return tracked

    def _on_share_quarantined(self, item: Quarantined) -> None:
        # never the dead-letter topic: its positions are those of __consumer_offsets
        self.stats.quarantined_total += 1
        log.warning("quarantined undecodable %s record: %s", SHARE_STATE_TOPIC, item.error)
        self._write_quarantine_file(item, SHARE_STATE_TOPIC)

    def _watch_live(self) -> None:
        """Hand records to the live stream only while someone watches: unwatched, the
        sink would cost every record a call. Changed here, between batches, on this thread."""
        sinks = self.ingestor.sinks
        sink = self.live.append
        installed = sink in sinks
        if self.live.watched() != installed:
            if installed:
                sinks.remove(sink)
            else:
                sinks.append(sink)

    def _on_event(self, event: object) -> bool:
        """Handle a source event; True when it rebuilt the state."""
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
            self.histories.clear()
            self._missing.clear()
            self.rebuild()
            return True
        if isinstance(event, SourceError):
            log.warning("%s source: %s: %s", self.config.offsets_topic, event.code, event.message)
        return False

    def rebuild(self) -> None:
        source = self.source
        assert source is not None
        self.state.groups.clear()
        self.ingestor.positions.clear()
        for guard in self.guards:
            guard.forget()
        source.restart_from_beginning(source.assigned_partitions())
        self.stats.mark_not_ready()
        self._sample_requested = False
        # everything is read and written again from the start: nothing to skip any more
        self._since.reset(_now_ms())
        self._published_skip.clear()
        self._archived_skip.clear()
        # the API must not serve the dropped state until the next snapshot interval
        self._next_snapshot_ms = 0

    def _update_source_stats(self, source: OffsetsTopicSource) -> None:
        stats = self.stats
        stats.source_up = source.source_up()
        replaced = stats.clients_replaced_total
        replaced["offsets_source"] = source.clients_replaced_total
        if self.share_source is not None:
            replaced["share_state_source"] = self.share_source.clients_replaced_total
        if self.publisher is not None:
            replaced["publisher"] = self.publisher.producers_replaced
        for partition, position in source.positions().items():
            stats.set_position(partition, position)
        for partition, end in source.end_offsets().items():
            stats.set_high_watermark(partition, end)

    def _check_ready(self, source: OffsetsTopicSource, tracked: set[tuple[str, int]]) -> None:
        """Ready = the first pass reached the end of every partition AND the log end of every
        tracked partition is known: lag computed before both would be a spike from history."""
        if self.stats.ready or not source.caught_up():
            return
        histories, missing = self.histories, self._missing
        if all(key in histories or key in missing for key in tracked):
            now_ms = self.clock_ms()
            # lag and status at once, not at the next snapshot interval, and served before
            # /readyz says ready: whoever waits for it never gets the catch-up's empty snapshot
            self.build_snapshot(now_ms, ready=True)
            self._next_snapshot_ms = now_ms + int(self.config.snapshot_interval_s * 1000)
            self.stats.mark_ready(now_ms)
            log.info("ready: caught up with %s", self.config.offsets_topic)
        elif not self._sample_requested and self.request_sample is not None:
            # caught up: sample the log ends of what is now tracked at once
            self._sample_requested = True
            self.request_sample()

    def build_snapshot(self, now_ms: int, ready: bool | None = None) -> Snapshot:
        """The snapshot served from now on; `ready` (default: the stats' readiness) says
        whether it is a full one or the counters-only one of a catch-up."""
        started = time.perf_counter()
        window_ms = int(self.config.status_window_s * 1000)
        self.state.roll_windows(now_ms, window_ms)
        self.share_store.roll_windows(now_ms, window_ms)
        undecodable = sum(self.share_ingestor.decode_errors.values())
        if not (self.stats.ready if ready is None else ready):
            # catching up: no rows, lag, status nor diagnosis (nothing shows them before
            # ready); _check_ready asks for the first full build the moment it is ready
            snapshot = self.builder.catching_up(
                self.state,
                now_ms,
                share=self.share_store,
                share_errors={"undecodable": undecodable},
            )
            self.snapshot = snapshot
            self.stats.snapshot_time_ms = now_ms
            return snapshot
        snapshot = self.builder.build(
            self.state,
            self.histories,
            now_ms,
            True,
            share=self.share_store,
            share_errors={"undecodable": undecodable},
            topic_names=self.topic_id_names.names,
        )
        # KIP-848 assignments name topics by id (4.1+): the sampler looks the unnamed ones up
        self.topic_id_names.publish_unknown_assigned(self.builder.views.take_unnamed())
        self.snapshot = snapshot
        self.stats.snapshot_duration_s = time.perf_counter() - started
        self.stats.snapshot_time_ms = now_ms
        self.console_history.record(snapshot)
        return snapshot

    def checkpoint(self) -> bool:
        """Save state and positions; False (logged, counted, retried later) when it failed."""
        path = self.config.checkpoint_path
        if path is None:
            return True
        positions = dict(self.ingestor.positions)
        started = time.perf_counter()
        try:
            if self.archive is not None:
                # archived records up to the checkpointed positions must survive a crash
                self.archive.flush(fsync=True)
            if self.publisher is not None:
                # only what was delivered counts as done: resume before anything unconfirmed
                self.publisher.flush(10)
                confirmed = self.publisher.confirmed_positions()
                positions = {p: min(pos, confirmed.get(p, pos)) for p, pos in positions.items()}
            for guard in self.guards:
                # a sink's kept or dropped records are read again after a restart
                positions = guard.cap_positions(positions)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            save_checkpoint(
                path,
                self.state,
                positions,
                meta=self._checkpoint_meta(),
                codec=self.codec,
                resume_since_ms=self._since_bounds(positions),
                share_state={
                    "positions": {str(p): o for p, o in self.share_ingestor.positions.items()},
                    "store": self.share_store.to_json(),
                },
            )
        except Exception as error:
            self._checkpoint_failed(path, error)
            return False
        health = self.checkpoint_health
        if health.failing_since_ms:
            log.warning("checkpoint to %s works again", path)
            health.failing_since_ms = 0
        self.stats.checkpoint_duration_s = time.perf_counter() - started
        self.stats.checkpoint_time_ms = self.clock_ms()
        return True

    def _checkpoint_failed(self, path: Path | str, error: Exception) -> None:
        health = self.checkpoint_health
        health.errors_total += 1
        health.last_error = f"{type(error).__name__}: {error}"
        first = not health.failing_since_ms
        if first:
            health.failing_since_ms = self.clock_ms()
        now = time.monotonic()
        if first or now >= self._next_checkpoint_log:
            log.error(
                "checkpoint to %s failed: %s; retried every %g s (a restart meanwhile "
                "rebuilds the state from the start of %s: slower, nothing lost); check that "
                "the path is a writable file on a disk with free space",
                path,
                health.last_error,
                self.config.checkpoint_interval_s,
                self.config.offsets_topic,
            )
            self._next_checkpoint_log = now + 60.0

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
                    # the daemon outlives any one failure (e.g. the producer's queue staying
                    # full while the output cluster is down): log it, back off, carry on
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
        """Flush sinks, write the final checkpoint, close clients. A failure of any of them is
        logged as an ERROR that says what was lost and sets `close_failed`."""
        for guard in self.guards:
            guard.retry()
            if guard.health.backlog or guard.health.dropped_total:
                self.close_failed = True
                log.error(
                    "%s sink: %d kept and %d dropped records were not written at exit (%s); "
                    "the checkpoint stays before them, so the next start writes them",
                    guard.name,
                    guard.health.backlog,
                    guard.health.dropped_total,
                    guard.health.last_error,
                )
        if self.publisher is not None:
            self.publisher.flush(30)
        if self.archive is not None:
            try:
                self.archive.close()
            except Exception as error:
                self.close_failed = True
                log.error(
                    "closing the archive in %s failed: %s; its unfinished files stay as "
                    "in-progress files, recovered at the next start",
                    self.config.archive_dir,
                    error,
                )
        if not self.checkpoint():
            self.close_failed = True
            log.error(
                "the final checkpoint to %s failed: the next start rebuilds the state from "
                "the start of %s (slower; nothing is lost)",
                self.config.checkpoint_path,
                self.config.offsets_topic,
            )
        if self.publisher is not None:
            self.publisher.close()
        if self.source is not None:
            self.source.close()
        if self.share_source is not None:
            self.share_source.close()
        if self._quarantine_file is not None:
            self._quarantine_file.close()
