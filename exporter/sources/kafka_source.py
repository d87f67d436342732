"""Raw reader of `__consumer_offsets`: moves bytes, never decodes them.

`OffsetsTopicSource` wraps one confluent-kafka Consumer that *assigns* every partition of
the offsets topic (a group subscription would make the exporter a group member and let the
broker move partitions away from it). Alone it never commits: the exporter keeps its own
checkpoints and hands the positions back via `start_positions`. A fleet replica with sinks
commits how far its partitions reached the sinks to the fleet's group (`sink_commits`,
exporter/fleet/sink_commits.py), for the next owner of each.

Out-of-range start positions (the log start moved past a checkpoint, or the topic was
recreated) are detected twice, because either check alone has a hole:

* before assigning, each requested position is compared with the partition's watermarks;
  a position below the log start or above the log end is not assigned and comes back as an
  `OffsetOutOfRange` event in the next batch;
* `auto.offset.reset=error` is forced, so a position that becomes invalid later (retention
  deleting a segment while we lag, or a race with the pre-check) makes librdkafka stop that
  partition and deliver an `_AUTO_OFFSET_RESET` error, which also becomes `OffsetOutOfRange`.

Either way the partition stays assigned-but-stopped and `caught_up()` stays false until the
caller rebuilds it, e.g. with `restart_from_beginning()`. Nothing is silently skipped.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

# re-exported: exporter/sinks/publisher.py and spark_jobs/sources/kafka_options.py still import it
# from here
from offsetwatch.core.acl_hints import grant_line
from offsetwatch.core.topics import OFFSETS_TOPIC as OFFSETS_TOPIC
from offsetwatch.exporter.fleet.membership import GroupMembership
from offsetwatch.exporter.fleet.sink_commits import RevokeHandshake, SinkCommit, parse_commit
from offsetwatch.exporter.kafka_clients import AddressWatch, ClientGenerations, redact
from offsetwatch.exporter.state.ingest import ingest_accelerator

log = logging.getLogger(__name__)

#: a gained partition's sink commit is asked inside the assign callback
_COMMITTED_TIMEOUT_S = 10.0

# ------------------------------------------------------------------------------------------
# Value objects
# ------------------------------------------------------------------------------------------


class RawMessage(Protocol):
    """A fetched record as the client delivers it: confluent_kafka.Message satisfies it.

    The source hands out the client's own message objects: copying five fields into a
    Python object per record cost more than the fetch itself (~1-2 us vs ~5 us per record
    all in), and the decoder reads each field once anyway. Tombstones have value() None.
    """

    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...


@dataclass(slots=True, frozen=True)
class RawRecord:
    """A plain, comparable copy of one RawMessage (tests, logs, dead letters)."""

    partition: int
    offset: int
    timestamp_ms: int  # -1 when the broker gave none
    key: bytes | None
    value: bytes | None

    @classmethod
    def of(cls, message: RawMessage) -> RawRecord:
        partition = message.partition()
        offset = message.offset()
        return cls(
            -1 if partition is None else partition,
            -1 if offset is None else offset,
            message.timestamp()[1],
            message.key(),
            message.value(),
        )


@dataclass(slots=True, frozen=True)
class PartitionEof:
    """The partition was read up to `offset` (the next offset to fetch, i.e. the log end
    as seen by read_committed, past any trailing transaction markers)."""

    partition: int
    offset: int


@dataclass(slots=True, frozen=True)
class OffsetOutOfRange:
    """A requested position is not in the log: the caller must rebuild this partition.

    reason: "before-log-start", "after-log-end", "partition-missing" (pre-check) or
    "fetch" (reported by the broker while reading).
    """

    partition: int
    requested_offset: int
    log_start_offset: int | None
    log_end_offset: int | None
    reason: str

    def __str__(self) -> str:
        return (
            f"partition {self.partition}: position {self.requested_offset} is out of range "
            f"({self.reason}; the log holds {self.log_start_offset}-{self.log_end_offset})"
        )


@dataclass(slots=True, frozen=True)
class PartitionsAssigned:
    """Partitions that started being read (at start, or because the topic grew)."""

    partitions: tuple[int, ...]
    #: a fleet replica with sinks: how far each reached the sinks under its earlier owners
    #: (the fleet's commits; a partition whose commit could not be read is missing)
    committed: tuple[SinkCommit, ...] = ()


@dataclass(slots=True, frozen=True)
class PartitionsRevoked:
    """Partitions the fleet's group took from this replica (`lost`: without a handshake, the
    member's session having expired): their groups are another replica's now."""

    partitions: tuple[int, ...]
    lost: bool = False


@dataclass(slots=True, frozen=True)
class SourceError:
    """Any other client or broker error. partition is None for client-wide errors."""

    code: str
    message: str
    partition: int | None = None
    fatal: bool = False
    retriable: bool = False


@dataclass(slots=True, frozen=True)
class ClusterChanged:
    """The cluster behind the bootstrap address is not the one read so far: a cluster wiped
    and replaced on the same address, or a checkpoint written for another cluster. Everything
    read before describes another cluster; the source now reads every partition from its
    start, and the caller must drop what it built."""

    previous: str
    current: str

    def __str__(self) -> str:
        return f"the cluster is now {self.current}, not {self.previous}"


SourceEvent: TypeAlias = (
    PartitionEof
    | OffsetOutOfRange
    | PartitionsAssigned
    | PartitionsRevoked
    | SourceError
    | ClusterChanged
)


@dataclass(slots=True, frozen=True)
class SourceBatch:
    """Data records (never error messages) in fetch order, and what happened meanwhile."""

    messages: list[RawMessage] = field(default_factory=list)
    events: list[SourceEvent] = field(default_factory=list)

    def records(self) -> list[RawRecord]:
        return [RawRecord.of(m) for m in self.messages]

    def next_positions(self) -> dict[int, int]:
        """Per partition, the position to resume from once this whole batch is processed.

        Built from the batch alone (last offset + 1, or the EOF offset when larger, which
        steps over trailing control records), so a caller can checkpoint exactly what it has
        processed rather than what the source has delivered since.
        """
        positions: dict[int, int] = {}
        for message in self.messages:
            partition, offset = message.partition(), message.offset()
            if partition is not None and offset is not None:
                positions[partition] = offset + 1
        for event in self.events:
            if isinstance(event, PartitionEof) and event.offset > positions.get(
                event.partition, -1
            ):
                positions[event.partition] = event.offset
        return positions


# ------------------------------------------------------------------------------------------
# Configuration
# ------------------------------------------------------------------------------------------

# Defaults for a reader that starts far behind and must catch up fast; all overridable.
_DEFAULTS: dict[str, object] = {
    "client.id": "offsetwatch-exporter",
    # Only committed transactional offset commits count; aborted ones must never show up.
    "isolation.level": "read_committed",
    # Big fetches: the offsets topic is read from the start on every cold start.
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "queued.min.messages": 200_000,
    "queued.max.messages.kbytes": 256 * 1024,
    "fetch.wait.max.ms": 500,
    # The consumer must not create the offsets topic (or anything) by asking for metadata.
    "allow.auto.create.topics": False,
    # Broker state for source_up(): the stats callback reports per-broker connection state.
    "statistics.interval.ms": 5000,
}

# Not overridable: the exporter's correctness depends on them.
_FORCED: dict[str, object] = {
    # Never commit: the exporter must not show up as a consumer group of its own.
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    # caught_up() is built on EOF events.
    "enable.partition.eof": True,
    # An invalid position must surface as an error, never be "fixed" by jumping.
    "auto.offset.reset": "error",
}


def consumer_config(config: Mapping[str, object]) -> dict[str, object]:
    """Our defaults, then the caller's properties, then the forced ones."""
    merged: dict[str, object] = dict(_DEFAULTS)
    merged["group.id"] = f"offsetwatch-exporter-{uuid.uuid4().hex[:12]}"
    merged.update(config)
    for key, value in _FORCED.items():
        if key in config and str(config[key]).lower() != str(value).lower():
            log.warning("ignoring %s=%r: the offsets source requires %r", key, config[key], value)
        merged[key] = value
    # after an outage, a quiet cluster is seen back only through the statistics reports
    # (records from before it may still sit in the prefetch queue, and prove nothing)
    interval = str(merged.get("statistics.interval.ms", "")).strip()
    if not interval.isdigit() or int(interval) == 0:
        log.warning(
            "ignoring statistics.interval.ms=%r: the offsets source needs broker statistics "
            "to see the cluster back after an outage; using %s",
            merged.get("statistics.interval.ms"),
            _DEFAULTS["statistics.interval.ms"],
        )
        merged["statistics.interval.ms"] = _DEFAULTS["statistics.interval.ms"]
    return merged


# ------------------------------------------------------------------------------------------
# The source
# ------------------------------------------------------------------------------------------

_DOWN_CODES = frozenset({KafkaError._ALL_BROKERS_DOWN})
#: errors of the consumer group, not of a partition (librdkafka at times names one)
_GROUP_CODES = frozenset({KafkaError.GROUP_AUTHORIZATION_FAILED})


def _group_level(message: Any) -> bool:
    error = message.error()
    return error is not None and error.code() in _GROUP_CODES


#: statistics reports in a row without a broker connection up that mean "down"
_DOWN_AFTER_REPORTS = 2
#: librdkafka's fetch states of a partition waiting for an answer before it fetches (an
#: OffsetForLeaderEpoch validation, an offset lookup), and the statistics reports in a row
#: (5 s apart) in one of them after which the source reads it again: each normally lasts one
#: round trip, and a partition left in one fetches nothing however long the cluster answers
_WAITING_FETCH_STATES = frozenset({"validate-epoch-wait", "offset-query", "offset-wait"})
_STUCK_AFTER_REPORTS = 3
#: how long a metadata probe of a cluster reported down may block the main loop
_DOWN_PROBE_TIMEOUT_S = 1.0
#: while down, how often a failed probe is logged with the client's broker states
_DOWN_REPORT_EVERY_S = 30.0
#: how long `close()` waits for clients given up on to finish closing
_RETIRED_CLOSE_WAIT_S = 5.0


class OffsetsTopicSource:
    """Reads every partition of the offsets topic as raw records.

    Single-threaded use for `poll_batch`/`start`/`restart_from_beginning`/`close` and for
    `end_offsets`/`lag`, which ask the client for its cached watermarks (the exporter runs
    all of them on its reader thread, exporter/sources/reader.py); `positions`,
    `caught_up`, `source_up` and `assigned_partitions` only read state behind the source's
    lock and may be called from any thread.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        topic: str = OFFSETS_TOPIC,
        start_positions: Mapping[int, int] | None = None,
        expected_cluster_id: str | None = None,
        metadata_refresh_s: float = 30.0,
        metadata_timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        consumer_factory: Callable[[dict[str, object]], Any] = Consumer,
        optional: bool = False,
        membership: GroupMembership | None = None,
    ) -> None:
        self.topic = topic
        #: read as a member of the fleet's group (exporter/fleet/membership.py): the
        #: coordinator assigns the partitions, where alone the source assigns them all
        self.membership = membership
        #: the group gave this member its first assignment (maybe empty): until then a
        #: replica has nothing to be caught up with, and is not ready
        self._joined = False
        self._subscribed = False
        #: partitions the group took from this member, and those it gave it (with where each
        #: was started), inside the consume() of the current poll_batch: a consume can return
        #: records fetched before a revocation its callbacks applied (`_drop_revoked`)
        self._revoked_in_poll: set[int] = set()
        self._assigned_in_poll: dict[int, int] = {}
        #: a fleet replica with sinks: its sink commits (read at each gain, made at each
        #: revocation through the main loop's answer, periodically and at exit)
        self.sink_commits: RevokeHandshake | None = None
        self._commits_due: list[SinkCommit] = []
        self.commit_errors_total = 0
        #: a topic that may not exist (`__share_group_state` before any share group): its
        #: absence is looked up again quietly, not reported as an error every few seconds
        self.optional = optional
        #: the broker's refusal of the topic itself (no Describe, so no Read either), while
        #: it lasts: "TOPIC_AUTHORIZATION_FAILED: ..."; set and cleared on the reader thread
        self.refused: str | None = None
        #: a fleet replica refused its fleet's group (no Read on it), while it lasts
        self.refused_group: str | None = None
        self._metadata_refresh_s = metadata_refresh_s
        self._metadata_timeout_s = metadata_timeout_s
        self._clock = clock
        self._user_error_cb = config.get("error_cb")
        #: librdkafka's last word on a failed connection: what "every broker down" is about
        #: (a refused login, "connecting to a SSL listener?")
        self._last_transport_error: str | None = None
        self._user_stats_cb = config.get("stats_cb")
        self._config = self._merged(config)
        log.info("%s source config: %s", self.topic, self.config_for_logging)
        #: settings a new client is to take (credentials rotated), handed over by another
        #: thread; the reader thread swaps the client at its next poll
        self._next_config: dict[str, object] | None = None
        self._consumer_factory = consumer_factory
        self._generations = ClientGenerations()
        self._consumer = self._new_consumer()
        self._retired: list[threading.Thread] = []
        self.clients_replaced_total = 0
        accelerator, _why = ingest_accelerator()
        #: the C loop of `_split`, when exporter.state._ingest_speedups is built
        self._split_batch = accelerator.split_batch if accelerator is not None else None

        self._lock = threading.Lock()
        self._pending_start: dict[int, int] = dict(start_positions or {})
        self._assigned: set[int] = set()
        self._stopped: set[int] = set()  # assigned but out of range: waiting for the caller
        self._eof_seen: set[int] = set()
        self._partition_count = 0
        self._eof_offsets: dict[int, int] = {}
        self._positions: dict[int, int] = {}
        self._events: list[SourceEvent] = []
        # Not "up" before anything answered: a daemon started against a dead cluster must
        # not report a healthy source.
        self._up = False
        self._down_since: float | None = clock()
        self._down_reason = "no broker has answered yet"
        #: high watermarks as fetched before the last "all brokers down": records below them
        #: may come from the client's prefetch queue, and prove nothing about the cluster now
        self._down_ends: dict[int, int] = {}
        self._reports_without_up = 0
        #: statistics reports in a row that found a partition in one of
        #: `_WAITING_FETCH_STATES` (and which one), and the partitions to seek again
        #: (`_watch_fetch_states`)
        self._stuck_reports: dict[int, int] = {}
        self._stuck_states: dict[int, str] = {}
        self._nudge: set[int] = set()
        #: statistics reports in a row without a broker address, and whether poll_batch is
        #: to open a new client (`_replace_consumer`)
        self._addresses = AddressWatch()
        self._replace = False
        #: the logical start (OFFSET_BEGINNING, OFFSET_END) of an assigned partition that has
        #: no position yet: where a new client starts it
        self._logical_starts: dict[int, int] = {}
        #: the broker connections of the last statistics report (None before one), and when
        #: a failed probe of a cluster reported down is next logged with them
        self._last_brokers: dict[str, Any] | None = None
        self._next_down_report = 0.0
        self._started = False
        self._next_refresh = 0.0
        self._closed = False
        self.messages_total = 0
        self.errors_total = 0
        #: Kafka's cluster id as the metadata last reported it (or as the checkpoint the start
        #: positions come from recorded it, until the first metadata answer)
        self.cluster_id: str | None = expected_cluster_id

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> bool:
        """Look the topic up and assign its partitions; True if anything is assigned.

        Never raises for an unreachable cluster: poll_batch retries the lookup.
        """
        self._refresh_assignment()
        return bool(self._assigned)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:  # already closed / broker gone
            log.debug("%s source close: %s", self.topic, exc)
        for closing in self._retired:
            closing.join(_RETIRED_CLOSE_WAIT_S)

    def _merged(self, config: Mapping[str, object]) -> dict[str, object]:
        merged = consumer_config(config)
        if self.membership is not None:
            merged.update(self.membership.settings())
        merged.setdefault("logger", logging.getLogger(f"{__name__}.librdkafka"))
        self.config_for_logging = redact(merged)
        return merged

    def reconfigure(self, config: Mapping[str, object]) -> None:
        """Read on with a new client made from `config` (a credential file was replaced:
        librdkafka loads certificates and passwords only when a client is made). Any thread;
        the swap happens on the reader's, at its next poll."""
        self._next_config = self._merged(config)
        self._replace = True

    def _new_consumer(self) -> Any:
        callbacks = self._generations.callbacks(error_cb=self._on_error, stats_cb=self._on_stats)
        return self._consumer_factory({**self._config, **callbacks})

    def _replace_consumer(self) -> None:
        """Give the client up and read on with a new one from the same positions: it has
        no broker address left and would never read again (exporter/kafka_clients.py;
        the hang test under load, 2 runs in 3)."""
        self._replace = False
        with self._lock:
            stopped = set(self._stopped)
            restart = {
                partition: self._positions.get(
                    partition, self._logical_starts.get(partition, OFFSET_BEGINNING)
                )
                for partition in sorted(self._assigned - stopped)
            }
        next_config, self._next_config = self._next_config, None
        if next_config is not None:
            self._config = next_config
            log.info(
                "%s source: the credential files changed; a new client reads on from the "
                "positions reached (%d partitions)",
                self.topic,
                len(restart),
            )
        else:
            log.warning(
                "%s source: the client has had no broker address for %d statistics reports "
                "(librdkafka dropped the broker from a metadata answer); opening a new client "
                "that reads on from the positions reached (%d partitions)",
                self.topic,
                self._addresses.reports,
                len(restart),
            )
        self._last_transport_error = None
        old = self._consumer
        if self.membership is not None:
            # the partitions are the group's to give: the new client joins as a new member,
            # and what it is given is read from the start like any partition gained
            self._give_up_all()
            restart = {}
        self._generations.advance()
        self._consumer = self._new_consumer()
        self._addresses.reset()
        self._last_brokers = None
        self._reports_without_up = 0
        self._stuck_reports.clear()
        self._stuck_states.clear()
        self._nudge.clear()
        self.clients_replaced_total += 1
        if restart:
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, offset) for p, offset in restart.items()]
            )
        # closing the old client may wait on its broker threads: not on the main loop
        closing = threading.Thread(
            target=self._close_retired, args=(old,), name="offsets-source-close", daemon=True
        )
        closing.start()
        self._retired = [t for t in self._retired if t.is_alive()] + [closing]

    def _close_retired(self, consumer: Any) -> None:
        try:
            consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.debug("%s source: closing the client given up on: %s", self.topic, exc)

    def __enter__(self) -> OffsetsTopicSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------

    def poll_batch(self, max_messages: int = 10_000, timeout_s: float = 1.0) -> SourceBatch:
        """Up to `max_messages` records plus the events seen meanwhile.

        Never raises for broker trouble: that comes back as events and `source_up()`. Until
        the topic was found once, each retry of the lookup (every few seconds) may block for
        up to `metadata_timeout_s`; afterwards lookups are skipped while the cluster is down.
        """
        if self._replace:
            self._replace_consumer()
        if self._clock() >= self._next_refresh:
            self._refresh_assignment()
        self._revoked_in_poll.clear()
        self._assigned_in_poll.clear()
        if self._commits_due:
            self._commit_due()
        raw = self._consumer.consume(max_messages, timeout_s)
        if self._nudge:
            self._nudge_stuck()
        messages, last, failed = self._split(raw)
        if self.membership is not None:
            messages, last, failed = self._drop_revoked(messages, last, failed)
        events: list[SourceEvent] = []
        for m in failed:
            self._partition_error(m.partition(), m.offset(), m.error(), events)
        at_end = self._reached_end(last)
        with self._lock:
            self._eof_seen.update(at_end)
            if not self._up and self._fetched_since_down(last, events):
                # A fetch answered: the cluster is reachable whatever the last error said.
                self._mark_up()
            for partition, offset in last.items():
                self._positions[partition] = offset + 1
            for event in events:
                if isinstance(event, PartitionEof):
                    self._eof_seen.add(event.partition)
                    self._eof_offsets[event.partition] = event.offset
                    if event.offset > self._positions.get(event.partition, -1):
                        self._positions[event.partition] = event.offset
            # Client-wide events from callbacks (run inside consume()) go first: they happened
            # before or during this fetch.
            queued, self._events = self._events, []
        self.messages_total += len(messages)
        return SourceBatch(messages, queued + events)

    def _split(self, raw: list[Any]) -> tuple[list[RawMessage], dict[int, int], list[Any]]:
        """(the records, the offset of the last per partition, the messages with an error)."""
        split = self._split_batch
        if split is not None and type(raw) is list:
            return split(raw)  # type: ignore[no-any-return]
        messages: list[RawMessage] = []
        last: dict[int, int] = {}
        failed = []
        for m in raw:
            if m.error() is None:
                messages.append(m)
                last[m.partition()] = m.offset()
            else:
                failed.append(m)
        return messages, last, failed

    def _drop_revoked(
        self, messages: list[RawMessage], last: dict[int, int], failed: list[Any]
    ) -> tuple[list[RawMessage], dict[int, int], list[Any]]:
        """The batch without what belongs to a partition this member does not hold.

        The callbacks of a rebalance run inside consume(), after records of the revoked
        partitions may already have been put in the batch; the daemon applies the batch's
        PartitionsRevoked first, then its records, so such a record would bring part of a
        group back into the state of a replica that no longer owns it, and export it half
        read. Such records, ends and errors go (their new owner reads them). A partition taken
        and given back within the same consume is read again from where the new assignment
        started it: its records in this batch may come from either assignment."""
        with self._lock:
            assigned = set(self._assigned)
        revoked = self._revoked_in_poll
        drop = revoked | (last.keys() - assigned)
        for m in failed:
            partition = m.partition()
            if _group_level(m):
                continue  # the group's own error, whatever partition it names
            if partition is not None and partition >= 0 and partition not in assigned:
                drop.add(partition)
        if not drop:
            return messages, last, failed
        kept = [m for m in messages if m.partition() not in drop]
        dropped = len(messages) - len(kept)
        if dropped:
            log.info(
                "%s source: %d record(s) of partition(s) %s fetched before they were "
                "revoked left out of the batch",
                self.topic,
                dropped,
                sorted(drop & last.keys()),
            )
        again = {
            p: start
            for p, start in self._assigned_in_poll.items()
            if p in revoked and p in assigned
        }
        if again:
            self.seek(again)
        return (
            kept,
            {p: offset for p, offset in last.items() if p not in drop},
            [m for m in failed if _group_level(m) or m.partition() not in drop],
        )

    def _fetched_since_down(self, last: dict[int, int], events: list[SourceEvent]) -> bool:
        """Whether this batch holds a record or an end beyond what was fetched before the
        cluster was reported down (under self._lock). A catch-up goes on from the client's
        prefetch queue (up to queued.min.messages records) for seconds after a crash: those
        records must not flip the source back up while the cluster is away."""
        ends = self._down_ends
        if any(offset >= ends.get(partition, -1) for partition, offset in last.items()):
            return True
        return any(
            isinstance(e, PartitionEof) and e.offset > ends.get(e.partition, -1) for e in events
        )

    def _reached_end(self, last: dict[int, int]) -> list[int]:
        """Partitions of the first pass whose last record delivered is the last of the log as
        its fetch answered: at the end, as a PARTITION_EOF says. A partition that takes
        commits all the time never gets that event (each fetch brings records: none answers
        empty at the end), so the first pass, and readiness, would never finish."""
        with self._lock:
            pending = [p for p in last if p not in self._eof_seen]
        at_end = []
        for partition in pending:
            _low, high = self._cached_watermarks(partition)
            if high is not None and last[partition] + 1 >= high:
                at_end.append(partition)
        return at_end

    def _partition_error(
        self, partition: int | None, offset: int | None, err: KafkaError, events: list[SourceEvent]
    ) -> None:
        code = err.code()
        if partition is None or partition < 0:
            partition = None  # a client-wide error that reached the queue, not error_cb
        if code == KafkaError._PARTITION_EOF and partition is not None and offset is not None:
            events.append(PartitionEof(partition, offset))
            return
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # as in _on_error: the consumer's own unused group id, which reached the queue,
            # at times with the partition of a fetch attached (seen on a secured broker with
            # share groups): reading by assignment makes no group request of its own
            self._group_refused(err)
            return
        self.errors_total += 1
        out_of_range = code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
        if out_of_range and partition is not None and offset is not None:
            low, high = self._cached_watermarks(partition)
            with self._lock:
                self._stopped.add(partition)
                self._positions.pop(partition, None)
            events.append(OffsetOutOfRange(partition, offset, low, high, "fetch"))
            log.warning("offsets topic partition %d: offset %d out of range", partition, offset)
            return
        events.append(
            SourceError(
                err.name(),
                err.str(),
                partition,
                err.fatal(),
                err.retriable(),
            )
        )

    # -- assignment ------------------------------------------------------------------------

    def _refresh_assignment(self) -> None:
        """Assign partitions not assigned yet (first call, or the topic grew)."""
        retry = min(5.0, self._metadata_refresh_s)
        # Down: a short probe (the loop goes on reading what the client holds meanwhile). Its
        # answer says the cluster is back, and it hands librdkafka fresh leaders and epochs:
        # after a broker hung past the request timeouts, the fetchers could wait for those
        # with no broker connection open, so no statistics report ever said UP again and
        # nothing was read (seen in the hang test under load).
        probing = self._started and not self._up
        timeout = self._metadata_timeout_s
        if probing:
            timeout = min(_DOWN_PROBE_TIMEOUT_S, timeout)
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=timeout)
        except KafkaException as exc:
            if not probing:  # a down cluster was reported once already
                self._queue_error(exc.args[0] if exc.args else None, "metadata lookup failed")
            elif self._clock() >= self._next_down_report:
                # what the client's connections were doing meanwhile: after a hang, a client
                # was once seen never to connect again while others of the process did
                self._next_down_report = self._clock() + _DOWN_REPORT_EVERY_S
                err = exc.args[0] if exc.args else None
                log.warning(
                    "%s source: down for %.0f s, the metadata probe failed (%s); the "
                    "client's broker connections: %s",
                    self.topic,
                    self.down_for_s(),
                    err.str() if isinstance(err, KafkaError) else exc,
                    self._broker_states(),
                )
            self._next_refresh = self._clock() + retry
            return
        self._note_cluster(metadata.cluster_id)
        topic_md = metadata.topics.get(self.topic)
        if topic_md is None or topic_md.error is not None:
            err = topic_md.error if topic_md is not None else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                # an answer, and no absence: an optional topic refused is not "no share
                # groups yet", it is share groups whose state cannot be known
                with self._lock:
                    self._mark_up()
                self._note_refused(err)
                self._next_refresh = self._clock() + retry
                return
            if self.optional:
                with self._lock:
                    self._mark_up()
                log.debug("optional topic %s not available (yet): %s", self.topic, err)
                self._next_refresh = self._clock() + retry
                return
            self._queue_error(err, f"topic {self.topic} not available")
            self._next_refresh = self._clock() + retry
            return
        if self.refused is not None:
            log.info("%s source: the topic can be read again", self.topic)
            self.refused = None
        self._started = True
        with self._lock:
            self._mark_up()
        self._next_refresh = self._clock() + self._metadata_refresh_s
        present = set(topic_md.partitions)
        self._partition_count = len(present)
        if self.membership is not None:
            self._subscribe()
            return
        new = sorted(present - self._assigned)
        # Checkpointed partitions that no longer exist: the topic was recreated smaller.
        for partition in sorted(set(self._pending_start) - present):
            missing_at = self._pending_start.pop(partition)
            self._queue(OffsetOutOfRange(partition, missing_at, None, None, "partition-missing"))
        if not new:
            return
        to_assign: list[TopicPartition] = []
        for partition in new:
            requested = self._pending_start.pop(partition, None)
            if requested is None or requested < 0:
                # A logical offset (OFFSET_BEGINNING / OFFSET_END): nothing to pre-check.
                logical = OFFSET_BEGINNING if requested is None else requested
                to_assign.append(TopicPartition(self.topic, partition, logical))
                self._logical_starts[partition] = logical
                continue
            problem = self._check_position(partition, requested)
            if problem is not None:
                self._queue(problem)
                with self._lock:
                    self._assigned.add(partition)
                    self._stopped.add(partition)
                continue
            to_assign.append(TopicPartition(self.topic, partition, requested))
            with self._lock:
                self._positions[partition] = requested
        if to_assign:
            self._consumer.incremental_assign(to_assign)
            with self._lock:
                self._assigned.update(tp.partition for tp in to_assign)
            self._queue(PartitionsAssigned(tuple(tp.partition for tp in to_assign)))
            log.info("%s source assigned %d partition(s)", self.topic, len(to_assign))

    # -- as a member of the fleet's group ---------------------------------------------------

    def _subscribe(self) -> None:
        if self._subscribed:
            return
        self._subscribed = True
        generation = self._generations.current

        def guarded(
            handler: Callable[[Any, list[TopicPartition]], None],
        ) -> Callable[[Any, list[TopicPartition]], None]:
            # a client given up on (_replace_consumer) may still run its callbacks while it
            # closes: its partitions were given up with it
            def call(consumer: Any, partitions: list[TopicPartition]) -> None:
                if generation == self._generations.current:
                    handler(consumer, partitions)

            return call

        self._consumer.subscribe(
            [self.topic],
            on_assign=guarded(self._on_assign),
            on_revoke=guarded(self._on_revoke),
            on_lost=guarded(self._on_lost),
        )
        assert self.membership is not None
        log.info(
            "%s source: joining fleet %s (%s protocol) as %s",
            self.topic,
            self.membership.group,
            self.membership.protocol,
            self.membership.client_id,
        )

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """The group gave this member `partitions` (incrementally): each is read from the
        checkpoint's position where one fits, else from the log start. Runs inside
        consume(), on the reader thread."""
        to_assign: list[TopicPartition] = []
        for tp in partitions:
            if tp.topic != self.topic:
                continue
            requested = self._pending_start.pop(tp.partition, None)
            if requested is not None and requested >= 0:
                if self._check_position(tp.partition, requested) is None:
                    to_assign.append(TopicPartition(self.topic, tp.partition, requested))
                    with self._lock:
                        self._positions[tp.partition] = requested
                    continue
                log.info(
                    "%s partition %d: the checkpoint's position %d is out of range; read "
                    "from the log start",
                    self.topic,
                    tp.partition,
                    requested,
                )
            to_assign.append(TopicPartition(self.topic, tp.partition, OFFSET_BEGINNING))
            self._logical_starts[tp.partition] = OFFSET_BEGINNING
        gained = tuple(sorted(tp.partition for tp in to_assign))
        # before the records can be fetched: the bound "now" of a first commit must come
        # before any record of the partition reaches this replica
        committed = () if self.sink_commits is None else self._read_commits(consumer, gained)
        consumer.incremental_assign(to_assign)
        self._assigned_in_poll.update((tp.partition, tp.offset) for tp in to_assign)
        if self.refused_group is not None:
            log.info("%s source: the fleet's group can be joined again", self.topic)
            self.refused_group = None
        with self._lock:
            self._joined = True
            self._assigned.update(gained)
            if gained:
                self._events.append(PartitionsAssigned(gained, committed))
        log.info(
            "%s source: the fleet's group gave this replica %d partition(s)%s",
            self.topic,
            len(gained),
            f": {list(gained)}" if gained else "",
        )

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self._give_up(consumer, partitions, lost=False)

    def _on_lost(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self._give_up(consumer, partitions, lost=True)

    def _give_up(self, consumer: Any, partitions: list[TopicPartition], lost: bool) -> None:
        """Partitions another member holds now: stop reading them and forget where they
        were; the daemon drops their groups (PartitionsRevoked)."""
        mine = [tp for tp in partitions if tp.topic == self.topic]
        handshake = self.sink_commits
        if mine and handshake is not None:
            if lost:
                handshake.note_lost(tp.partition for tp in mine)
            else:
                # still this member's: the commit goes before the partition does
                self._commit(consumer, handshake.ask(tp.partition for tp in mine), wait=True)
        if mine:
            try:
                consumer.incremental_unassign(mine)
            except (KafkaException, RuntimeError) as exc:  # closing, or already gone
                log.debug("%s source: unassigning revoked partitions: %s", self.topic, exc)
        gone = tuple(sorted(tp.partition for tp in mine))
        self._revoked_in_poll.update(gone)
        with self._lock:
            for partition in gone:
                self._assigned.discard(partition)
                self._stopped.discard(partition)
                self._eof_seen.discard(partition)
                self._eof_offsets.pop(partition, None)
                self._positions.pop(partition, None)
                self._logical_starts.pop(partition, None)
            if gone:
                self._events.append(PartitionsRevoked(gone, lost))
        if gone:
            log.info(
                "%s source: %d partition(s) %s: %s",
                self.topic,
                len(gone),
                "lost (the member's session expired)" if lost else "handed to another replica",
                list(gone),
            )

    def _give_up_all(self) -> None:
        with self._lock:
            gone = tuple(sorted(self._assigned))
            self._assigned.clear()
            self._stopped.clear()
            self._eof_seen.clear()
            self._eof_offsets.clear()
            self._positions.clear()
            self._logical_starts.clear()
            self._joined = False
            if gone:
                self._events.append(PartitionsRevoked(gone))
        self._subscribed = False
        self._next_refresh = 0.0  # the new client subscribes at the next poll

    # -- sink commits (a fleet replica with sinks) --------------------------------------------

    def _read_commits(self, consumer: Any, gained: tuple[int, ...]) -> tuple[SinkCommit, ...]:
        """The fleet's sink commits of `gained`; a partition with none of ours is committed
        now at 0 with the bound now (nothing of it reached this replica's sinks yet)."""
        if not gained:
            return ()
        now_ms = time.time_ns() // 1_000_000
        try:
            answers = consumer.committed(
                [TopicPartition(self.topic, p) for p in gained], timeout=_COMMITTED_TIMEOUT_S
            )
        except (KafkaException, RuntimeError) as exc:
            self.commit_errors_total += 1
            log.warning(
                "%s source: the fleet's sink commits of partitions %s could not be read (%s): "
                "their records are written to the sinks again from the log start (duplicates)",
                self.topic,
                list(gained),
                exc,
            )
            return ()
        found: dict[int, SinkCommit] = {}
        for tp in answers:
            commit = None
            if tp.error is None:
                commit = parse_commit(tp.partition, int(tp.offset), tp.metadata)
            if commit is not None:
                found[tp.partition] = commit
        first = [SinkCommit(p, 0, now_ms) for p in gained if p not in found]
        if first and self._commit(consumer, first, wait=True):
            found.update((c.partition, c) for c in first)
        log.info(
            "%s source: sink commits of the partitions gained: %s",
            self.topic,
            {p: found[p].offset for p in sorted(found)},
        )
        return tuple(found[p] for p in sorted(found))

    def _commit(self, consumer: Any, commits: list[SinkCommit], wait: bool) -> bool:
        if not commits:
            return True
        offsets = [TopicPartition(self.topic, c.partition, c.offset, c.metadata()) for c in commits]
        try:
            answers = consumer.commit(offsets=offsets, asynchronous=not wait)
        except (KafkaException, RuntimeError) as exc:
            # a member that lost its partitions is refused (stale generation / member epoch)
            self.commit_errors_total += 1
            log.warning(
                "%s source: the sink commit of partitions %s failed: %s",
                self.topic,
                [c.partition for c in commits],
                exc,
            )
            return False
        failed = [tp for tp in answers or () if tp.error is not None]
        if failed:
            self.commit_errors_total += 1
            log.warning(
                "%s source: the sink commit was refused for %s",
                self.topic,
                {tp.partition: str(tp.error) for tp in failed},
            )
            return False
        return True

    def request_commit(self, commits: list[SinkCommit]) -> None:
        """Any thread: commit these (of partitions still assigned) at the reader's next poll,
        without waiting for the answer."""
        with self._lock:
            self._commits_due = list(commits)

    def _commit_due(self) -> None:
        with self._lock:
            due = [c for c in self._commits_due if c.partition in self._assigned]
            self._commits_due = []
        self._commit(self._consumer, due, wait=False)

    def commit_now(self, commits: list[SinkCommit]) -> bool:
        """Commit and wait: the exit's last commit, once the reader thread has stopped (the
        client is not used by two threads at once)."""
        with self._lock:
            due = [c for c in commits if c.partition in self._assigned]
            self._commits_due = []
        return self._commit(self._consumer, due, wait=True)

    def joined(self) -> bool:
        """Alone: always; in a fleet, once the group gave this member an assignment."""
        with self._lock:
            return self.membership is None or self._joined

    def _note_cluster(self, cluster_id: str | None) -> None:
        """Compare the cluster id of a metadata answer with the one read so far."""
        if not cluster_id:
            return
        previous, self.cluster_id = self.cluster_id, cluster_id
        if previous is None or previous == cluster_id:
            return
        # Positions (checkpointed or read) in another cluster's log mean nothing here: forget
        # the assignment, and the caller of _refresh_assignment assigns every partition the
        # new cluster has from its beginning.
        assigned = [tp for tp in self._consumer.assignment() if tp.topic == self.topic]
        if assigned:
            self._consumer.incremental_unassign(assigned)
        with self._lock:
            self._pending_start.clear()
            self._assigned.clear()
            self._stopped.clear()
            self._eof_seen.clear()
            self._eof_offsets.clear()
            self._positions.clear()
            self._logical_starts.clear()
        self._queue(ClusterChanged(previous, cluster_id))

    def _check_position(self, partition: int, requested: int) -> OffsetOutOfRange | None:
        try:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=self._metadata_timeout_s
            )
        except KafkaException as exc:
            # Cannot check now; auto.offset.reset=error still catches a bad position.
            log.info("watermarks of partition %d unavailable (%s): not pre-checked", partition, exc)
            return None
        if requested < low:
            return OffsetOutOfRange(partition, requested, low, high, "before-log-start")
        if requested > high:
            return OffsetOutOfRange(partition, requested, low, high, "after-log-end")
        return None

    def restart_from_beginning(self, partitions: Iterable[int]) -> None:
        """Re-read partitions from their log start (after an OffsetOutOfRange, the caller
        drops that partition's state and rebuilds it)."""
        self.seek({partition: OFFSET_BEGINNING for partition in partitions})

    def seek(self, positions: Mapping[int, int]) -> None:
        """Move assigned partitions to explicit positions (OFFSET_BEGINNING allowed).

        Done as unassign + assign: librdkafka refuses to seek a partition that stopped on an
        out-of-range error.
        """
        if not positions:
            return
        # assignment() is local state; a partition stopped by the pre-check was never given
        # to librdkafka and needs no unassign.
        current = {tp.partition for tp in self._consumer.assignment()}
        to_unassign = [TopicPartition(self.topic, p) for p in positions if p in current]
        if to_unassign:
            self._consumer.incremental_unassign(to_unassign)
        self._consumer.incremental_assign(
            [TopicPartition(self.topic, p, offset) for p, offset in positions.items()]
        )
        with self._lock:
            for partition, offset in positions.items():
                self._assigned.add(partition)
                self._stopped.discard(partition)
                self._eof_seen.discard(partition)
                self._eof_offsets.pop(partition, None)
                if offset >= 0:
                    self._positions[partition] = offset
                else:
                    self._positions.pop(partition, None)
                    self._logical_starts[partition] = offset

    # -- state for the caller and for metrics ----------------------------------------------

    def assigned_partitions(self) -> set[int]:
        with self._lock:
            return set(self._assigned)

    def partition_count(self) -> int:
        """Partitions of the topic in the last metadata answer (0 before the first)."""
        return self._partition_count

    def out_of_range_partitions(self) -> set[int]:
        with self._lock:
            return set(self._stopped)

    def caught_up(self) -> bool:
        """Every assigned partition reached its end at least once since start (or seek); in
        a fleet, a member the group gave no partition is caught up with its nothing."""
        with self._lock:
            if self.membership is not None:
                return self._joined and self._assigned <= self._eof_seen
            return bool(self._assigned) and self._assigned <= self._eof_seen

    def positions(self) -> dict[int, int]:
        """Next offset to read per partition, for records delivered so far.

        Partitions not started yet (no record, no EOF, no explicit start) and partitions
        stopped out of range are absent: resuming from "absent" means from the beginning.
        """
        with self._lock:
            return dict(self._positions)

    def end_offsets(self) -> dict[int, int]:
        """High watermark per partition from the last fetch responses (no network call)."""
        with self._lock:
            partitions = sorted(self._assigned)
            eofs = dict(self._eof_offsets)
        ends: dict[int, int] = {}
        for partition in partitions:
            _, high = self._cached_watermarks(partition)
            if high is None:
                high = eofs.get(partition)
            if high is not None:
                ends[partition] = high
        return ends

    def lag(self, positions: Mapping[int, int] | None = None) -> dict[int, int]:
        """High watermark - position per partition; `positions` defaults to `positions()`
        (pass the checkpointed/processed ones to measure what is really done)."""
        current = self.positions() if positions is None else dict(positions)
        return {
            partition: max(0, end - current[partition])
            for partition, end in self.end_offsets().items()
            if partition in current
        }

    def source_up(self) -> bool:
        """False from an all-brokers-down report until a broker is seen up again."""
        with self._lock:
            return self._up

    def down_reason(self) -> str | None:
        """Why the source is down (None while it is up): what librdkafka last said."""
        with self._lock:
            if self._up:
                return None
            return self._with_last_failure(self._down_reason)

    def _with_last_failure(self, text: str) -> str:
        """`text` and librdkafka's last connection failure, unless it says it already:
        "1/1 brokers are down" alone hides why (a refused login, a handshake)."""
        last = self._last_transport_error
        return f"{text}; the last failure: {last}" if last and last not in text else text

    def down_for_s(self) -> float:
        with self._lock:
            return 0.0 if self._down_since is None else self._clock() - self._down_since

    def _cached_watermarks(self, partition: int) -> tuple[int | None, int | None]:
        try:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), cached=True
            )
        except (KafkaException, RuntimeError):
            return None, None
        # librdkafka answers OFFSET_INVALID (-1001) until a fetch response carried them.
        return (low if low >= 0 else None, high if high >= 0 else None)

    # -- librdkafka callbacks (run inside consume()/list_topics() on our thread) -----------

    def _watch_fetch_states(self, stats: dict[str, Any]) -> None:
        """Partitions librdkafka left waiting before a fetch, report after report.

        After a broker hung past the request timeouts, a partition can stay in the fetch
        state `validate-epoch-wait` for minutes and fetch nothing (librdkafka issue 4492;
        the hang test under load: the client committed again, the exporter never read it);
        an offset lookup can be left waiting the same way (librdkafka issue 843).
        `poll_batch` seeks such a partition to its position again, without a leader epoch,
        so the fetch starts over instead of waiting for an answer that does not come.
        A partition without a leader (a lost quorum, every replica down) waits rightly: it
        is not counted."""
        topic = stats.get("topics", {}).get(self.topic, {})
        waiting = {
            int(p): str(info["fetch_state"])
            for p, info in topic.get("partitions", {}).items()
            if info.get("fetch_state") in _WAITING_FETCH_STATES
            and int(p) >= 0
            and int(info.get("leader", 0)) >= 0
        }
        reports = {p: self._stuck_reports.get(p, 0) + 1 for p in waiting}
        self._stuck_reports = reports
        self._stuck_states = waiting
        if self._up:  # while the cluster is away, waiting is all a partition can do
            self._nudge.update(p for p, n in reports.items() if n >= _STUCK_AFTER_REPORTS)

    def _nudge_stuck(self) -> None:
        """Seek the partitions `_watch_fetch_states` found stuck to their positions."""
        nudge, self._nudge = self._nudge, set()
        nudged: list[str] = []
        for partition in sorted(nudge):
            with self._lock:
                position = self._positions.get(partition)
            if position is None or partition not in self._assigned:
                continue
            nudged.append(
                f"{partition} ({self._stuck_states.get(partition, '?')}, "
                f"{self._stuck_reports.get(partition, _STUCK_AFTER_REPORTS)} reports)"
            )
            self._stuck_reports.pop(partition, None)
            try:
                self._consumer.seek(TopicPartition(self.topic, partition, position))
            except KafkaException as exc:
                self._queue_error(exc.args[0] if exc.args else None, "seek failed")
        if nudged:
            # one line per round, and said as what it is: the same position asked again
            log.warning(
                "%s: %d partitions with a leader waited before a fetch while the cluster "
                "answered; asking each for its current position again (no rewind): %s",
                self.topic,
                len(nudged),
                ", ".join(nudged[:10])
                + (f" and {len(nudged) - 10} more" if len(nudged) > 10 else ""),
            )

    def _broker_states(self) -> str:
        """The last statistics report's broker connections: name, state, seconds in it."""
        if self._last_brokers is None:
            return "none reported yet"
        return (
            ", ".join(
                f"{b.get('nodename', name)} {b.get('state')} "
                f"({int(b.get('stateage', 0)) // 1_000_000} s)"
                for name, b in sorted(self._last_brokers.items())
            )
            or "none"
        )

    def _mark_down(self, fetched_ends: dict[int, int], why: str) -> None:
        """Under self._lock."""
        self._up = False
        self._down_ends = fetched_ends
        self._down_since = self._clock()
        self._down_reason = why
        log.warning("%s source: %s", self.topic, self._with_last_failure(why))

    def _mark_up(self) -> None:
        if not self._up:
            log.info("%s source: cluster reachable", self.topic)
            # back after an outage: look at the metadata at once, the cluster behind the
            # address may be another one (wiped and replaced)
            self._next_refresh = 0.0
        self._up = True
        self._down_since = None

    def _queue(self, event: SourceEvent) -> None:
        with self._lock:
            self._events.append(event)

    def _group_refused(self, err: KafkaError) -> None:
        """Alone, the group id is the consumer's own and unused: nobody's problem. In a
        fleet it is the fleet's group, which the replica cannot join without Read on it: one
        WARNING with the grant, `refused_group` until the group gives an assignment."""
        if self.membership is None:
            log.debug("%s source: %s (its own unused group id)", self.topic, err.str())
            return
        if self.refused_group is not None:
            return
        self.errors_total += 1
        self.refused_group = f"{err.name()}: {err.str()}"
        group = self.membership.group
        log.warning(
            "%s source: not authorized to join fleet %s (%s): this replica exports nothing "
            "until it is granted; grant it: %s",
            self.topic,
            group,
            self.refused_group,
            grant_line(self._config, "Read", "group", group),
        )

    def _note_refused(self, err: KafkaError) -> None:
        """The topic refused in a Metadata answer: one WARNING with the grant when it starts
        (counted as an error); the daemon reads `refused` for readiness and the metrics."""
        if self.refused is not None:
            return
        self.refused = f"{err.name()}: {err.str()}"
        self.errors_total += 1
        grant = grant_line(self._config, "Read", "topic", self.topic)
        log.warning(
            "%s source: not authorized to read the topic (%s): what it holds is unknown "
            "until it is granted; grant it: %s",
            self.topic,
            self.refused,
            grant,
        )

    def _queue_error(self, err: object, context: str) -> None:
        self.errors_total += 1
        if isinstance(err, KafkaError):
            event = SourceError(
                err.name(), f"{context}: {err.str()}", None, err.fatal(), err.retriable()
            )
        else:
            event = SourceError("UNKNOWN", f"{context}: {err}")
        log.warning("%s source: %s", self.topic, event.message)
        self._queue(event)

    def _on_error(self, err: KafkaError) -> None:
        code = err.code()
        fallback = None if self.membership is None else self.membership.fallback(err)
        if fallback is not None:
            log.warning(
                "%s source: the brokers have no KIP-848 consumer groups (%s): fleet %s is "
                "joined with the classic protocol and the cooperative-sticky assignor",
                self.topic,
                err.str(),
                fallback.group,
            )
            self.membership = fallback
            self._next_config = self._merged(
                {k: v for k, v in self._config.items() if k != "group.protocol"}
            )
            self._replace = True
            return
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # the consumer's own random group id (confluent-kafka requires one), which it
            # never joins nor commits to: reading by assignment needs no group ACL
            self._group_refused(err)
            return
        self.errors_total += 1
        if code not in _DOWN_CODES:
            self._last_transport_error = err.str()
        ends = self.end_offsets() if code in _DOWN_CODES and self._up else {}
        with self._lock:
            if code in _DOWN_CODES and self._up:
                # librdkafka counts its own connections: "3/3 brokers are down" can come
                # while another client of the exporter is connected to a live broker
                last = self._last_transport_error
                self._mark_down(
                    ends,
                    f"no connection to any broker (librdkafka: {err.str()})"
                    + (f"; the last failure: {last}" if last else "")
                    + "; waiting",
                )
            message = self._with_last_failure(err.str()) if code in _DOWN_CODES else err.str()
            self._events.append(
                SourceError(err.name(), message, None, err.fatal(), err.retriable())
            )
        if callable(self._user_error_cb):
            self._user_error_cb(err)

    def _on_stats(self, stats_json: str) -> None:
        try:
            stats = json.loads(stats_json)
        except ValueError:
            return
        brokers = stats.get("brokers", {})
        self._last_brokers = brokers
        self._watch_fetch_states(stats)
        if self._addresses.observe(brokers) and not self._closed:
            self._replace = True
        if any(b.get("state") == "UP" for b in brokers.values()):
            self._reports_without_up = 0
            with self._lock:
                self._mark_up()
        elif brokers:
            # A second signal besides _ALL_BROKERS_DOWN, which librdkafka raises once per
            # transition of its own broker counts: two reports in a row (one could fall in
            # an ordinary reconnect) without any connection up
            self._reports_without_up += 1
            if self._reports_without_up == _DOWN_AFTER_REPORTS and self._up:
                ends = self.end_offsets()
                with self._lock:
                    self._mark_down(
                        ends, f"no broker connection up in {_DOWN_AFTER_REPORTS} statistics reports"
                    )
        if callable(self._user_stats_cb):
            self._user_stats_cb(stats_json)
