"""Every place decoded records are written, as one part: the publish topic (and its dead-letter
topic), the archive, the quarantine file, the log-end records, and the resume marks that make
a restart write nothing twice (exporter/sinks/resume_dedup.py).

The main loop hands records over (through the guards the ingestor calls) - one by one, or
as the ingest's encoded batches of commits (JSON or Avro to the publish topic, JSON lines or
Avro blocks to the archive: `publish_encoded`, `write_archive_encoded`; the Avro bodies built
in C too, `EncodedBatch.avro_items`) - and asks, at each
checkpoint, how far every sink has really taken them (`checkpoint_positions`). Nothing here
waits on Kafka: the producer is polled without a timeout, the read-back of what a crashed run
already wrote (`start_resume_scan`) runs on a thread of its own, and only the exit drains
the producer with a deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offsetwatch.decoder.canonical import Canonical, dumps, identity_key
from offsetwatch.decoder.log_end import log_end_identity_key
from offsetwatch.decoder.records import AnyRecord
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.sinks.log_end_records import LogEndRecords
from offsetwatch.exporter.sinks.publisher import RecordPublisher
from offsetwatch.exporter.sinks.quarantine import QuarantineFile
from offsetwatch.exporter.sinks.resume_dedup import (
    PartitionMarks,
    SinceMarks,
    SkipSet,
    scan_archive,
    scan_topics,
    value_position_reader,
)
from offsetwatch.exporter.sinks.sink_guard import GuardedSink, PartialWrite
from offsetwatch.exporter.state.ingest import AvroForm, Encoded, EncodedBatch, Quarantined
from offsetwatch.exporter.stats import PipelineStats, SinkHealth

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PublishRefused(Exception):
    """Deliveries to the publish topic that the brokers refused."""


@dataclass(slots=True, frozen=True)
class SinkPartition:
    """What the sinks hold of one `__consumer_offsets` partition, for another exporter."""

    partition: int
    since: PartitionMarks
    published_skip: frozenset[int]
    archived_skip: frozenset[int]


class _ResumeScan:
    """Reads back, on its own thread, what the sinks took after the checkpoint before the
    process stopped; `result` is (published, archived) positions once done."""

    def __init__(self, scan: Callable[[], tuple[set[tuple[int, int]], set[tuple[int, int]]]]):
        self.result: tuple[set[tuple[int, int]], set[tuple[int, int]]] | None = None
        self.error: Exception | None = None
        self._scan = scan
        self._thread = threading.Thread(target=self._run, name="resume-scan", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self._scan()
        except Exception as error:
            self.error = error

    def done(self) -> bool:
        return not self._thread.is_alive()


class RecordSinks:
    """The configured sinks and their guards (see the module doc). Main loop only."""

    def __init__(
        self,
        config: ExporterConfig,
        stats: PipelineStats,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.config = config
        self.stats = stats
        self.clock_ms = clock_ms
        self.publisher: RecordPublisher | None = None
        self.archive: Any = None
        #: the archive and the publisher, each behind a guard that keeps its records when it
        #: fails; the ingestor calls them for every record
        self.guards: list[GuardedSink] = []
        self._canonical = Canonical()
        self._avro: Any = None
        #: the publish topic's and the archive's Avro form of encoded batches (None: JSON)
        self._publish_form: AvroForm | None = None
        self._archive_form: AvroForm | None = None
        directory = _state_dir(config)
        self._quarantine = None if directory is None else QuarantineFile(directory)
        self._log_end_records = LogEndRecords(int(config.log_end_full_round_s * 1000))
        #: exactly once across a crash of the exporter: when the sinks took records after
        #: each position, and what they already hold after the checkpoint
        self._since = SinceMarks()
        self._published_skip = SkipSet()
        self._archived_skip = SkipSet()
        self._resume: _ResumeScan | None = None
        self._resume_since_ms = 0
        self._refused_seen = 0

    @property
    def healths(self) -> list[SinkHealth]:
        return [guard.health for guard in self.guards]

    def reconfigure(self, kafka_config: Mapping[str, object]) -> None:
        """New client settings (credentials rotated) for the publisher, if it runs."""
        if self.publisher is not None:
            self.publisher.reconfigure(kafka_config)

    def open(self, kafka_config: dict[str, object]) -> None:
        cfg = self.config
        if cfg.publish_topic is not None:
            if cfg.publish_format == "avro":
                from offsetwatch.decoder.avro import AvroCodec, commit_branches, confluent_header

                self._avro = AvroCodec()
                # the config checked the schema id: the header cannot fail here
                schema_id = cfg.publish_schema_id
                self._publish_form = AvroForm(
                    b"" if schema_id is None else confluent_header(schema_id),
                    commit_branches(self._avro.schema),
                    lambda record: self._serialize(self._canonical.to_dict(record)),
                )
            self.publisher = RecordPublisher(
                kafka_config,
                output_topic=cfg.publish_topic,
                dlq_topic=cfg.publish_dlq_topic,
                source_topic=cfg.offsets_topic,
                header_form=cfg.publish_headers,
            )
            self._guard(
                "publish",
                self.publish,
                f"check that the topic {cfg.publish_topic!r} can exist on the cluster "
                "and that this client may write to it",
                write_encoded=self.publish_encoded,
            )
        if cfg.archive_dir is not None:
            from offsetwatch.exporter.sinks.archive import ArchiveWriter

            self.archive = ArchiveWriter(
                cfg.archive_dir,
                format=cfg.archive_format,
                gzip=cfg.archive_gzip,
                gzip_level=cfg.archive_gzip_level,
                roll_bytes=cfg.archive_roll_bytes,
                roll_seconds=cfg.archive_roll_s,
            )
            # a record the writer took is in memory until its file's bytes reach the OS:
            # only that says the archive works again
            self._guard(
                "archive",
                self.write_archive,
                f"free space in {cfg.archive_dir} or check its permissions",
                recovered_by_flush=True,
                write_encoded=self.write_archive_encoded,
            )
            if cfg.archive_format == "avro":
                from offsetwatch.decoder.avro import commit_branches

                archive_avro = self.archive._avro
                self._archive_form = AvroForm(
                    b"",
                    commit_branches(archive_avro.schema),
                    lambda record: bytes(archive_avro.encode(self._canonical.to_dict(record))),
                )

    def _guard(
        self,
        name: str,
        write: Callable[[AnyRecord], None],
        advice: str,
        recovered_by_flush: bool = False,
        write_encoded: Callable[[EncodedBatch], None] | None = None,
    ) -> None:
        self.guards.append(
            GuardedSink(
                name,
                write,
                advice,
                clock_ms=self.clock_ms,
                recovered_by_flush=recovered_by_flush,
                write_encoded=write_encoded,
            )
        )

    def guard(self, name: str) -> GuardedSink:
        return next(guard for guard in self.guards if guard.name == name)

    # -- records ---------------------------------------------------------------------------

    def publish(self, record: AnyRecord) -> None:
        publisher = self.publisher
        assert publisher is not None
        if self._published_skip and self._published_skip.take(record.partition, record.offset):
            publisher.mark_done(record.partition, record.offset)  # there before the crash
            return
        if self._avro is None:
            value = self._canonical.to_json(record).encode("utf-8")
        else:
            value = self._serialize(self._canonical.to_dict(record))
        publisher.publish(record.partition, record.offset, identity_key(record), value)

    def write_archive(self, record: AnyRecord) -> None:
        if self._archived_skip and self._archived_skip.take(record.partition, record.offset):
            return  # archived before the crash
        self.archive.write(self._canonical.to_dict(record), (record.partition, record.offset))
        self.stats.archive_records_total += 1

    def publish_encoded(self, batch: EncodedBatch) -> None:
        """`publish` of every record of the batch (its bytes are the C encoder's: JSON, or
        with --publish-format avro the Avro bodies, framed when a schema id is set)."""
        publisher = self.publisher
        assert publisher is not None
        form = self._publish_form
        items: list[Encoded] = batch.items if form is None else batch.avro_items(form)
        skip = self._published_skip
        if not skip:
            publisher.publish_encoded(items)
            return
        for k, (partition, offset, _ts, key, value) in enumerate(items):
            if skip and skip.take(partition, offset):
                publisher.mark_done(partition, offset)  # there before the crash
                continue
            try:
                publisher.publish(partition, offset, key, value)
            except Exception as error:
                raise PartialWrite(k, error) from error

    def write_archive_encoded(self, batch: EncodedBatch) -> None:
        """`write_archive` of every record of the batch, in blocks (JSON lines, or the Avro
        bodies of an Avro archive)."""
        form = self._archive_form
        items = batch.items if form is None else batch.avro_items(form)
        skip = self._archived_skip
        index: list[int] | None = None
        if skip:
            index = [k for k, item in enumerate(items) if not skip.take(item[0], item[1])]
            items = [items[k] for k in index]
        try:
            self.archive.write_encoded(items)
        except PartialWrite as failure:
            self.stats.archive_records_total += failure.taken
            if index is not None:  # in the batch's numbering
                failure.taken = index[failure.taken] if failure.taken < len(index) else len(batch)
            raise
        self.stats.archive_records_total += len(items)

    def write_log_ends(self, time_ms: int, offsets: Mapping[tuple[str, int], int | None]) -> None:
        """Log-end samples go where the records go, so history jobs see both in one stream."""
        if self.archive is None and self.publisher is None:
            return
        for sample in self._log_end_records.records(time_ms, dict(offsets)):
            if self.archive is not None:
                try:
                    self.archive.write(sample)
                except Exception as error:
                    # the next sampling round writes every partition again: count, go on
                    self.guard("archive").note_failure(error)
            if self.publisher is not None:
                try:
                    self.publisher.publish_unpositioned(
                        log_end_identity_key(sample["key"]["topic"], sample["key"]["partition"]),
                        self._serialize(sample),
                    )
                except Exception as error:
                    self.guard("publish").note_failure(error)
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

    def on_quarantined(self, item: Quarantined) -> None:
        """An undecodable `__consumer_offsets` record: the dead-letter topic, else the file."""
        self.stats.quarantined_total += 1
        log.warning("quarantined undecodable record: %s", item.error)
        publisher = self.publisher
        if publisher is not None and self.config.publish_dlq_topic is not None:
            if self._published_skip and self._published_skip.take(item.partition, item.offset):
                publisher.mark_done(item.partition, item.offset)  # there before the crash
                return
            publisher.dead_letter(
                item.partition, item.offset, item.key, item.value, str(item.error)
            )
            self.stats.dlq_total += 1
            return
        if publisher is not None:
            publisher.mark_done(item.partition, item.offset)
        if self._quarantine is not None:
            self._quarantine.write(item)

    def on_share_quarantined(self, item: Quarantined) -> None:
        # never the dead-letter topic: its positions are those of __consumer_offsets
        self.stats.quarantined_total += 1
        log.warning("quarantined undecodable %s record: %s", SHARE_STATE_TOPIC, item.error)
        if self._quarantine is not None:
            self._quarantine.write(item, SHARE_STATE_TOPIC)

    # -- on the main loop's schedule -------------------------------------------------------

    def before_ingest(
        self, next_to_read: Callable[[], dict[int, int]], cluster_id: str | None
    ) -> None:
        # wall time, not clock_ms: the bound is compared with Kafka timestamps and file times
        now = _now_ms()
        if self._since.due(now):
            self._since.note(next_to_read(), now)
        if self.publisher is not None:
            self.publisher.source_cluster_id = cluster_id

    def poll(self) -> None:
        """Serve the producer's delivery reports (never waits) and count refusals."""
        publisher = self.publisher
        if publisher is None:
            return
        publisher.poll(0)
        delivered = publisher.stats()
        guard = self.guard("publish")
        refused = delivered.failed - self._refused_seen
        if refused > 0:
            # deliveries the brokers refused (a topic that cannot exist, no ACL) fail after
            # produce() returned: failures of the publish sink too; their records hold the
            # checkpoint back (the delivery tracker), so a restart publishes them
            error = PublishRefused(f"the brokers refused {refused}: {delivered.last_error}")
            guard.note_failure(error, count=refused)
        elif delivered.records_delivered > self.stats.published_total:
            guard.note_success()
        self._refused_seen = delivered.failed
        self.stats.published_total = delivered.records_delivered
        self.stats.publish_errors_total = guard.health.errors_total

    def every_second(self) -> None:
        """Retry what failing sinks kept; close archive files that are old enough."""
        for guard in self.guards:
            guard.retry()
        if self.archive is not None:
            # the files' bytes to the OS (and the files that are due rolled): what a full
            # disk refuses stays in the writer, and is tried again next second
            try:
                self.archive.flush()
            except Exception as error:
                self.guard("archive").note_failure(error)
            else:
                self.guard("archive").note_success()

    def forget(self) -> None:
        """The state is rebuilt from the start of the topic: everything is read and written
        again, so nothing kept or marked means anything any more."""
        for guard in self.guards:
            guard.forget()
        self._since.reset(_now_ms())
        self._published_skip.clear()
        self._archived_skip.clear()

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint_positions(self, positions: dict[int, int]) -> dict[int, int]:
        """`positions` capped where a sink has not surely taken every record before them.

        An archive that cannot be made durable (a full disk) fails as the archive, not as
        the checkpoint: the positions stop at its first record not surely on disk. The
        producer's reports are served without waiting: a record whose delivery is not
        confirmed yet holds its partition's position back until a later checkpoint, which
        is correct and never blocks the main loop."""
        if self.archive is not None:
            # archived records up to the checkpointed positions must survive a crash
            try:
                self.archive.flush(fsync=True)
            except OSError as error:
                self.guard("archive").note_failure(error)
            positions = self.archive.durable_positions(positions)
        if self.publisher is not None:
            self.publisher.poll(0)
            confirmed = self.publisher.confirmed_positions()
            positions = {p: min(pos, confirmed.get(p, pos)) for p, pos in positions.items()}
        for guard in self.guards:
            # a sink's kept or dropped records are read again after a restart
            positions = guard.cap_positions(positions)
        return positions

    def since_bounds(
        self, positions: dict[int, int], next_to_read: dict[int, int]
    ) -> dict[int, int]:
        """Per checkpointed position, when the sinks could first have taken a record at or
        after it (a mark now covers everything not read yet)."""
        self._since.note(next_to_read, _now_ms(), force=True)
        return self._since.bounds(positions)

    # -- exactly once across a crash -------------------------------------------------------

    def start_resume_scan(
        self,
        kafka_config: dict[str, object],
        positions: dict[int, int] | None,
        cluster_id: str | None,
        bounds: dict[int, int] | None,
    ) -> None:
        """After a restore: find, on a thread, what the sinks took after the checkpoint
        before the crash (publish and dead-letter topics by their source headers, archive
        files by their records), so that reading it again writes none of it twice.
        Checkpoints written before this existed have no bound: nothing is skipped then."""
        if positions is None or not bounds:
            return
        since = min(bounds.values())
        publisher = self.publisher
        archive_dir = None if self.archive is None else Path(self.config.archive_dir or ".")
        topics: list[str] = []
        if publisher is not None:
            topics.append(publisher.output_topic)
            if self.config.publish_dlq_topic is not None:
                topics.append(self.config.publish_dlq_topic)
        source_topic = self.config.offsets_topic

        def scan() -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
            published: set[tuple[int, int]] = set()
            if topics:
                published = scan_topics(
                    kafka_config,
                    topics,
                    positions,
                    since,
                    source_topic=source_topic,
                    cluster_id=cluster_id,
                    values_of=self.values_of(),
                )
            archived: set[tuple[int, int]] = set()
            if archive_dir is not None:
                archived = scan_archive(archive_dir, positions, since)
            return published, archived

        self._resume_since_ms = since
        self._resume = _ResumeScan(scan)

    def values_of(self) -> tuple[str, Callable[[bytes], tuple[int, int] | None]] | None:
        """With `--publish-headers none`, the publish topic and how its values name their
        source position (for the read-back of resume_dedup.scan_topics)."""
        cfg = self.config
        if self.publisher is None or cfg.publish_headers != "none":
            return None
        framed = cfg.publish_schema_id is not None
        return self.publisher.output_topic, value_position_reader(cfg.publish_format, framed)

    def resume_pending(self) -> bool:
        """True while the read-back runs: nothing may be written before it is known."""
        resume = self._resume
        if resume is None:
            return False
        if not resume.done():
            return True
        self._resume = None
        if resume.error is not None or resume.result is None:
            log.warning(
                "reading back what the sinks took before the exporter stopped failed (%s): "
                "records after the checkpoint may be written a second time",
                resume.error,
            )
            return False
        published, archived = resume.result
        self._published_skip = SkipSet.of(published)
        self._archived_skip = SkipSet.of(archived)
        for skip in (self._published_skip, self._archived_skip):
            for partition, last in skip.last_offsets().items():
                self._since.found(partition, last, self._resume_since_ms)
        log.info(
            "since the checkpoint, %d records were already published and %d archived before "
            "the exporter stopped: reading them again writes none of them twice",
            len(published),
            len(archived),
        )
        return False

    # -- ownership per __consumer_offsets partition ----------------------------------------

    def drained(self, partition: int, position: int | None) -> bool:
        """Whether every sink has taken every record of `partition` before `position`: only
        then can another exporter go on from there without losing or repeating one."""
        if position is None:
            return True
        if any(
            guard.cap_positions({partition: position})[partition] < position
            for guard in self.guards
        ):
            return False
        if self.publisher is not None:
            self.publisher.poll(0)
            confirmed = self.publisher.confirmed_positions().get(partition, position)
            if confirmed < position:
                return False
        return True

    def take(self, partition: int) -> SinkPartition:
        """Remove and return the partition's resume marks (call once `drained`)."""
        if self.publisher is not None:
            self.publisher.reset_partition(partition)
        return SinkPartition(
            partition,
            self._since.take(partition),
            self._published_skip.take_partition(partition),
            self._archived_skip.take_partition(partition),
        )

    def put(self, taken: SinkPartition) -> None:
        self._since.put(taken.partition, taken.since)
        self._published_skip.put_partition(taken.partition, taken.published_skip)
        self._archived_skip.put_partition(taken.partition, taken.archived_skip)

    # -- exit ------------------------------------------------------------------------------

    def drain(self) -> bool:
        """Hand every kept record over one last time and wait (with a deadline) for the
        producer; False when something was not written (logged as an ERROR)."""
        ok = True
        for guard in self.guards:
            guard.retry()
            if guard.health.backlog or guard.health.dropped_total:
                ok = False
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
                ok = False
                log.error(
                    "closing the archive in %s failed: %s; its unfinished files stay as "
                    "in-progress files, recovered at the next start",
                    self.config.archive_dir,
                    error,
                )
        return ok

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
        if self._quarantine is not None:
            self._quarantine.close()


def _state_dir(config: ExporterConfig) -> Path | None:
    if config.checkpoint_path is not None:
        return Path(config.checkpoint_path).parent
    if config.archive_dir is not None:
        return Path(config.archive_dir)
    return None
