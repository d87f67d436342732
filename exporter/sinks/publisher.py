"""Republishes already-serialized records, and tracks which source records are safely out.

The exporter may only checkpoint a `__consumer_offsets` position once everything produced
for the records before it was acknowledged by the output cluster. `DeliveryTracker` keeps,
per source partition, the records handed over in source order with the number of outputs
still in flight; `confirmed_positions()` is the first record still waiting (or, when none
waits, the last record + 1). Delivery callbacks may arrive in any order; a failed delivery
pins the watermark below that record for good, so a failure can never be checkpointed past
(the daemon restarts from its last checkpoint and republishes what the output topic does not
hold yet: every output record carries its source position in headers, which a restart reads
back, exporter/sinks/resume_dedup.py).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException, Producer

from offsetwatch.core.acl_hints import grant_line
from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.exporter.kafka_clients import AddressWatch, ClientGenerations, redact
from offsetwatch.exporter.sinks.sink_guard import PartialWrite
from offsetwatch.exporter.state.ingest import Encoded, ingest_accelerator

log = logging.getLogger(__name__)

Headers = Sequence[tuple[str, bytes]]

# Dead-letter headers: enough to find the original record again and to see why it failed.
HEADER_ERROR = "offsetwatch.error"
HEADER_SOURCE_TOPIC = "offsetwatch.source.topic"
HEADER_SOURCE_PARTITION = "offsetwatch.source.partition"
HEADER_SOURCE_OFFSET = "offsetwatch.source.offset"
#: Kafka's cluster id of the source (when known): republished records and dead letters carry
#: the source headers, so that a restarted exporter finds what it already wrote
#: (exporter/sinks/resume_dedup.py) and skips only positions of its own cluster
HEADER_SOURCE_CLUSTER = "offsetwatch.source.cluster"
#: `--publish-headers compact`: the same facts in one header, "<cluster>/<topic>/<partition>/
#: <offset>" (the cluster empty while unknown; neither a topic name nor a cluster id holds a
#: "/"). A header costs the producer more than its bytes: one in place of four takes about
#: 1.5 us of CPU per record off the publish path, none about 2.7 (docs/performance.md)
HEADER_SOURCE = "offsetwatch.source"

#: what republished records carry (dead letters always carry the four source headers):
#: "source" the four headers above, "compact" the one, "none" nothing (a restart then reads
#: the positions from the records' own `partition` and `offset` fields, so the topic must
#: hold this source's records alone)
HEADER_FORMS: Final = ("source", "compact", "none")

#: how long one produce() waits for room in the producer's local queue (500,000 records).
#: Short waits are the catch-up's back-pressure (deliveries free room at the publish rate);
#: a queue that stays full this long means the publish topic takes records slower than they
#: come (a quota throttling this client, a slow or unreachable cluster): the write fails,
#: the sink's guard keeps what follows (bounded, the checkpoint held before it) and
#: ingestion, the state and the metrics go on instead of waiting on the publish topic
QUEUE_FULL_WAIT_S: Final = 5.0


@dataclass(slots=True, frozen=True)
class OutputRecord:
    """One serialized record for the output topic (partitioned by key)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(slots=True, frozen=True)
class PublisherStats:
    produced: int  # handed to the producer (output + dead letters)
    delivered: int
    #: deliveries of records of the offsets topic (not log-end samples, not dead letters)
    records_delivered: int
    failed: int  # delivery errors; each one pins its partition's watermark
    dead_lettered: int
    dropped: int  # dead letters with no DLQ topic, or everything while disabled
    in_flight: int
    last_error: str | None
    fatal_error: str | None


# ------------------------------------------------------------------------------------------
# Contiguous delivery watermark
# ------------------------------------------------------------------------------------------


class _Lane:
    """One source partition: registered records in offset order, oldest first."""

    __slots__ = ("done_upto", "live", "partition", "queue")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.queue: deque[DeliveryToken] = deque()
        self.done_upto = -1  # offset + 1 of the last record released from the queue
        #: False once the tracker dropped the lane (reset, the source went back)
        self.live = True


class RunDeliveries:
    """What `DeliveryToken.report` counted and the tracker has not settled yet."""

    __slots__ = ("delivered", "live")

    def __init__(self) -> None:
        self.delivered = 0  # every delivery reported (the publisher's counters)
        self.live = 0  # of them, those of live lanes (still in the tracker's in_flight)


class DeliveryToken:
    """One registered source record, or a run of consecutive ones of one partition (from
    `offset` to `last`); delivery callbacks report against it.

    Holding the token (not the offset) lets callbacks that arrive after `reset()` be
    recognised as stale even when the same offsets were registered again meanwhile. A run is
    released only once every output of it is delivered, and a failure in it pins the
    watermark at its first record: never past a record that is not out.
    """

    __slots__ = ("counts", "failed", "lane", "last", "offset", "on_error", "outstanding")

    def __init__(self, lane: _Lane, offset: int, outstanding: int, last: int = -1) -> None:
        self.lane = lane
        self.offset = offset
        self.last = offset if last < offset else last
        self.outstanding = outstanding
        self.failed = False
        self.counts: RunDeliveries | None = None
        self.on_error: Callable[[DeliveryToken, KafkaError, Any], None] | None = None

    def report(self, err: KafkaError | None, msg: Any) -> None:
        """The delivery callback of a run's records (`DeliveryTracker.register_run`): a
        success only counts (no lock, no release: the tracker settles it when asked how far
        the records are out, on the thread that serves the callbacks); a failure goes to
        `on_error`, as any failed delivery."""
        if err is not None:
            assert self.on_error is not None
            self.on_error(self, err, msg)
            return
        self.outstanding -= 1
        counts = self.counts
        assert counts is not None
        counts.delivered += 1
        if self.lane.live:
            counts.live += 1


class DeliveryTracker:
    """Per source partition, the position below which every output is confirmed.

    Records are registered in increasing offset order per partition (the order the source
    delivers them); offsets may have gaps (control records, compaction). Registering the
    offset of the newest record again adds outputs to it. An offset at or below one already
    registered means the source was re-positioned: that partition starts over (as
    `reset()`), which only ever moves its watermark back. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lanes: dict[int, _Lane] = {}
        self.in_flight = 0
        #: successes of run tokens reported and not settled yet (`settle`)
        self.runs = RunDeliveries()

    def register(self, partition: int, offset: int, outputs: int) -> DeliveryToken:
        """`outputs` deliveries are about to be produced for this record (0: nothing to do)."""
        with self._lock:
            lane = self._lanes.get(partition)
            if lane is None:
                lane = self._lanes[partition] = _Lane(partition)
            if lane.queue and offset == lane.queue[-1].last:
                token = lane.queue[-1]
                token.outstanding += outputs
            else:
                last = lane.queue[-1].last if lane.queue else lane.done_upto - 1
                if offset <= last:
                    # The source went back (rebuild after out-of-range, re-seek). Start a new
                    # generation: its watermark starts below the old one, so checkpoints only
                    # move back, and callbacks of the old generation are ignored from now on.
                    log.info(
                        "source partition %d went back from %d to %d: delivery tracking restarts",
                        partition,
                        last,
                        offset,
                    )
                    self.in_flight -= sum(max(0, t.outstanding) for t in lane.queue)
                    lane.live = False
                    lane = self._lanes[partition] = _Lane(partition)
                token = DeliveryToken(lane, offset, outputs)
                lane.queue.append(token)
            self.in_flight += outputs
            self._release(lane)
            return token

    def register_run(
        self,
        partition: int,
        first: int,
        last: int,
        outputs: int,
        on_error: Callable[[DeliveryToken, KafkaError, Any], None],
    ) -> DeliveryToken:
        """One token for the records from `first` to `last` (consecutive records of the
        partition as the source delivered them), with `outputs` deliveries to come, each
        reported to `token.report` (a failure to `on_error`, which must `complete` it)."""
        with self._lock:
            lane = self._lanes.get(partition)
            if lane is None:
                lane = self._lanes[partition] = _Lane(partition)
            before = lane.queue[-1].last if lane.queue else lane.done_upto - 1
            if first <= before:
                log.info(
                    "source partition %d went back from %d to %d: delivery tracking restarts",
                    partition,
                    before,
                    first,
                )
                self.in_flight -= sum(max(0, t.outstanding) for t in lane.queue)
                lane.live = False
                lane = self._lanes[partition] = _Lane(partition)
            token = DeliveryToken(lane, first, outputs, last)
            token.counts = self.runs
            token.on_error = on_error
            lane.queue.append(token)
            self.in_flight += outputs
            return token

    def cut_run(self, token: DeliveryToken, last: int | None, outputs: int) -> None:
        """A run whose produce() raised before its last `outputs` were queued: it now ends at
        `last` (the last record produced), or is forgotten when none was (None)."""
        with self._lock:
            lane = token.lane
            if self._lanes.get(lane.partition) is not lane:
                return
            token.outstanding -= outputs
            self.in_flight -= outputs
            if last is not None:
                token.last = last
                self._release(lane)
            elif lane.queue and lane.queue[-1] is token:
                lane.queue.pop()

    def unregister(self, token: DeliveryToken, outputs: int) -> None:
        """Undo `outputs` of a registration whose produce() raised before queueing them."""
        with self._lock:
            lane = token.lane
            if self._lanes.get(lane.partition) is not lane:
                return
            token.outstanding -= outputs
            self.in_flight -= outputs
            if token.outstanding <= 0 and lane.queue and lane.queue[-1] is token:
                # Nothing of this record is in flight: forget it, so that a retry registers
                # afresh instead of the watermark passing a record that was never published.
                lane.queue.pop()

    def complete(self, token: DeliveryToken, ok: bool) -> None:
        with self._lock:
            lane = token.lane
            if self._lanes.get(lane.partition) is not lane:
                return  # reset meanwhile: a callback of an abandoned generation
            self.in_flight -= 1
            token.outstanding -= 1
            if not ok:
                token.failed = True
            self._release(lane)

    def settle(self) -> None:
        """Fold the successes `DeliveryToken.report` counted into in_flight, and release
        what they completed."""
        with self._lock:
            self._settle()

    def _settle(self) -> None:
        runs = self.runs
        if runs.live:
            self.in_flight -= runs.live
            runs.live = 0
        for lane in self._lanes.values():
            queue = lane.queue
            if queue and queue[0].outstanding <= 0:
                self._release(lane)

    @staticmethod
    def _release(lane: _Lane) -> None:
        queue = lane.queue
        while queue and queue[0].outstanding <= 0 and not queue[0].failed:
            lane.done_upto = queue.popleft().last + 1

    def confirmed(self) -> dict[int, int]:
        with self._lock:
            self._settle()
            out: dict[int, int] = {}
            for partition, lane in self._lanes.items():
                if lane.queue:
                    out[partition] = lane.queue[0].offset
                elif lane.done_upto >= 0:
                    out[partition] = lane.done_upto
            return out

    def failed_positions(self) -> dict[int, int]:
        """Per partition, the first record whose delivery failed (where the watermark stops)."""
        with self._lock:
            self._settle()
            out: dict[int, int] = {}
            for partition, lane in self._lanes.items():
                for token in lane.queue:
                    if token.failed:
                        out[partition] = token.offset
                        break
            return out

    def reset(self, partition: int) -> None:
        with self._lock:
            lane = self._lanes.pop(partition, None)
            if lane is not None:
                lane.live = False
                self.in_flight -= sum(max(0, t.outstanding) for t in lane.queue)


# ------------------------------------------------------------------------------------------
# Producer wrapper
# ------------------------------------------------------------------------------------------


def _produce_encoded() -> Callable[..., tuple[int, BaseException | None]] | None:
    """The ingest accelerator's produce loop, or None (the Python loop of publish_encoded)."""
    module, _why = ingest_accelerator()
    return None if module is None else getattr(module, "produce_encoded", None)


_DEFAULTS: dict[str, object] = {
    "client.id": "offsetwatch-publisher",
    "linger.ms": 50,
    "batch.num.messages": 10_000,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 500_000,
    # Same key -> same partition as the Java clients, so output consumers can rely on it.
    "partitioner": "murmur2_random",
    # broker handles for the address watch (exporter/kafka_clients.py)
    "statistics.interval.ms": 5000,
}

# Exactly-once per partition and no acknowledged-then-lost records: the watermark relies on it.
_FORCED: dict[str, object] = {"enable.idempotence": True, "acks": "all"}


#: seconds between a producer's fatal error and the new producer that replaces it
FATAL_RETRY_S: Final = 10.0
#: how long a producer replaced on a credential change may still deliver what it holds
RETIRE_DRAIN_S: Final = 30.0


def producer_config(config: Mapping[str, object]) -> dict[str, object]:
    merged: dict[str, object] = dict(_DEFAULTS)
    merged.update(config)
    for key, value in _FORCED.items():
        if key in config and str(config[key]).lower() not in {str(value).lower(), "-1"}:
            log.warning("ignoring %s=%r: the publisher requires %r", key, config[key], value)
        merged[key] = value
    return merged


class RecordPublisher:
    """Idempotent producer for the output topic plus a dead-letter topic.

    Every call names the source record (offsets-topic partition and offset) it belongs to;
    `confirmed_positions()` says how far each source partition is safely published.
    With `enabled=False` nothing is produced and every record counts as done at once.
    Delivery callbacks run inside `poll()`/`flush()`: call `poll(0)` regularly.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None,
        *,
        output_topic: str,
        dlq_topic: str | None = None,
        enabled: bool = True,
        source_topic: str = OFFSETS_TOPIC,
        queue_full_timeout_s: float = QUEUE_FULL_WAIT_S,
        producer_factory: Callable[[dict[str, object]], Any] = Producer,
        header_form: str = "source",
    ) -> None:
        if header_form not in HEADER_FORMS:
            raise ValueError(f"header_form must be one of {', '.join(HEADER_FORMS)}")
        self.header_form = header_form
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        self.enabled = enabled
        self._source_topic = source_topic.encode()
        self._queue_full_timeout_s = queue_full_timeout_s
        self.tracker = DeliveryTracker()
        #: the source cluster's id for the headers, set by the daemon once the source knows it
        self.source_cluster_id: str | None = None
        self._lock = threading.Lock()
        self._produced = 0
        self._delivered = 0
        self._records_delivered = 0
        self._failed = 0
        self._dead_lettered = 0
        self._dropped = 0
        self._last_error: str | None = None
        self._fatal_error: str | None = None
        #: the last throttle the brokers reported (monotonic time, broker, ms), for the reason
        #: a full queue gives
        self._throttle: tuple[float, str, int] | None = None
        self._producer: Any = None
        self._user_error_cb: object = None
        self._user_stats_cb: object = None
        self.config_for_logging: dict[str, object] = {}
        self._config: dict[str, object] = {}
        #: settings the next producer is to take (credentials rotated)
        self._next_config: dict[str, object] | None = None
        #: producers replaced on a credential change that may still deliver, and until when
        self._retiring: list[tuple[Any, float]] = []
        self._producer_factory = producer_factory
        self._generations = ClientGenerations()
        self._addresses = AddressWatch()
        self._replace = False
        self.producers_replaced = 0
        #: monotonic time from which a producer that hit a fatal error is replaced
        self._fatal_retry_at: float | None = None
        if enabled:
            user = dict(config or {})
            self._user_error_cb = user.get("error_cb")
            self._user_stats_cb = user.get("stats_cb")
            self._config = self._merged(user)
            log.info("publisher config: %s", self.config_for_logging)
            self._producer = self._new_producer()

    def _merged(self, config: Mapping[str, object]) -> dict[str, object]:
        merged = producer_config(config)
        merged.setdefault("logger", logging.getLogger(f"{__name__}.librdkafka"))
        self.config_for_logging = redact(merged)
        return merged

    def reconfigure(self, config: Mapping[str, object]) -> None:
        """Publish through a new producer made from `config` (a credential file was
        replaced), from the next poll on; what the old one still holds is handled as when a
        producer is given up on (`_replace_producer`)."""
        if self._producer is None:
            return
        self._next_config = self._merged(config)
        self._replace = True

    def _new_producer(self) -> Any:
        callbacks = self._generations.callbacks(
            error_cb=self._on_error, stats_cb=self._on_stats, throttle_cb=self._on_throttle
        )
        return self._producer_factory({**self._config, **callbacks})

    def _replace_producer(self) -> None:
        """A producer without a broker address (exporter/kafka_clients.py) never delivers
        again. What it holds is purged: each purged record is a failed delivery, which holds
        the checkpoint back like any other (a restart publishes it); what comes next goes
        through a new producer. One replaced on a credential change (`reconfigure`) is not
        purged: it delivers what it holds for RETIRE_DRAIN_S first (`_serve_retiring`)."""
        self._replace = False
        old = self._producer
        next_config, self._next_config = self._next_config, None
        if next_config is not None:
            # the old producer may well still deliver (a certificate renewed before it
            # expires): it keeps what it holds, served by poll(), for a while
            self._config = next_config
            self._retiring.append((old, time.monotonic() + RETIRE_DRAIN_S))
            log.info(
                "publisher: the credential files changed; a new producer takes over (the "
                "old one delivers what it holds for up to %g s, then what is left counts as "
                "failed deliveries)",
                RETIRE_DRAIN_S,
            )
        else:
            log.warning(
                "publisher: the producer has had no broker address for %d statistics "
                "reports (librdkafka dropped the broker from a metadata answer); its queued "
                "records count as failed deliveries and a new producer takes over",
                self._addresses.reports,
            )
            try:
                old.purge(in_queue=True, in_flight=True, blocking=False)
                old.flush(2.0)  # serves the purged records' delivery reports
            except (KafkaException, RuntimeError) as exc:
                log.debug("publisher: purging the producer given up on: %s", exc)
        self._generations.advance()
        self._addresses.reset()
        self._producer = self._new_producer()
        self.producers_replaced += 1

    # -- producing -------------------------------------------------------------------------

    def publish(
        self,
        source_partition: int,
        source_offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
    ) -> None:
        """One output record for one source record."""
        self.publish_many(
            source_partition, source_offset, (OutputRecord(key, value, tuple(headers)),)
        )

    def publish_many(
        self, source_partition: int, source_offset: int, records: Sequence[OutputRecord]
    ) -> None:
        """All output records of one source record; an empty sequence marks it done.

        Registering them together means an early delivery of the first cannot release the
        record before the last one was even produced.
        """
        if not self.enabled:
            self.tracker.register(source_partition, source_offset, 0)
            return
        token = self.tracker.register(source_partition, source_offset, len(records))
        source = self._output_headers(source_partition, source_offset)
        for index, record in enumerate(records):
            try:
                self._produce(
                    self.output_topic,
                    record.key,
                    record.value,
                    (*record.headers, *source),
                    functools.partial(self._on_delivery, token),
                )
            except BaseException:
                self.tracker.unregister(token, len(records) - index)
                raise

    def publish_encoded(self, items: Sequence[Encoded]) -> None:
        """One output record per item (source partition, offset, timestamp, key, value), in
        order: `publish` for each, fed to the producer in one loop, with one delivery token
        and one callback per run of records of one source partition. Raises PartialWrite
        (how many items were produced) when produce() fails; the rest is not registered."""
        n = len(items)
        if not self.enabled:
            for partition, offset, _ts, _key, _value in items:
                self.tracker.register(partition, offset, 0)
            return
        producer = self._producer
        if producer is None:
            raise PartialWrite(0, RuntimeError("publisher is closed"))
        produce = producer.produce
        # the loop in C (exporter/state/_ingest_speedups.c produce_encoded) where it is built
        fast = _produce_encoded()
        topic = self.output_topic
        form = self.header_form
        source_topic = (HEADER_SOURCE_TOPIC, self._source_topic)
        cluster = self.source_cluster_id
        tail: tuple[tuple[str, bytes], ...] = ()
        if cluster is not None and form == "source":
            tail = ((HEADER_SOURCE_CLUSTER, cluster.encode()),)
        # the one header that names the offset: head + (name, prefix + b"<offset>") + tail
        name: str | None = {"source": HEADER_SOURCE_OFFSET, "compact": HEADER_SOURCE}.get(form)
        start = 0
        while start < n:
            partition = items[start][0]
            end = start + 1
            while end < n and items[end][0] == partition:
                end += 1
            token = self.tracker.register_run(partition, items[start][1], items[end - 1][1],
                                              end - start, self._on_delivery)  # fmt: skip
            callback = token.report
            head: tuple[tuple[str, bytes], ...] = ()
            prefix = b""
            if form == "source":
                head = (source_topic, (HEADER_SOURCE_PARTITION, str(partition).encode()))
            elif form == "compact":
                prefix = b"%s/%s/%d/" % ((cluster or "").encode(), self._source_topic, partition)
            k = start
            try:
                while k < end:
                    if fast is not None and type(items) is list:
                        k, stopped = fast(produce, topic, items, k, end, head,
                                          name, tail, callback, prefix)  # fmt: skip
                        if stopped is None:
                            break
                        if not isinstance(stopped, BufferError):
                            raise stopped
                    _p, offset, _ts, key, value = items[k]
                    headers = (
                        None
                        if name is None
                        else [*head, (name, prefix + str(offset).encode()), *tail]
                    )
                    try:
                        produce(topic, value, key, headers=headers, on_delivery=callback)
                    except BufferError:
                        # the local queue is full: wait for it as `publish` does
                        self._produce(topic, key, value, headers or (), callback)
                        with self._lock:
                            self._produced -= 1  # counted below with the run
                    k += 1
            except BaseException as error:
                self.tracker.cut_run(token, items[k - 1][1] if k > start else None, end - k)
                with self._lock:
                    self._produced += k - start
                if isinstance(error, Exception):
                    raise PartialWrite(k, error) from error
                raise
            with self._lock:
                self._produced += end - start
            start = end

    def dead_letter(
        self,
        source_partition: int,
        source_offset: int,
        key: bytes | None,
        value: bytes | None,
        reason: str,
        headers: Headers = (),
    ) -> None:
        """Send an undecodable source record, unchanged, to the dead-letter topic."""
        if not self.enabled or self.dlq_topic is None:
            with self._lock:
                self._dropped += 1
            self.tracker.register(source_partition, source_offset, 0)
            return
        dlq_headers = (
            *headers,
            (HEADER_ERROR, reason.encode("utf-8", "replace")),
            *self._source_headers(source_partition, source_offset),
        )
        token = self.tracker.register(source_partition, source_offset, 1)
        try:
            self._produce(
                self.dlq_topic, key, value, dlq_headers, functools.partial(self._on_delivery, token)
            )
        except BaseException:
            self.tracker.unregister(token, 1)
            raise
        with self._lock:
            self._dead_lettered += 1

    def _output_headers(self, partition: int, offset: int) -> tuple[tuple[str, bytes], ...]:
        """The source headers of a republished record, in the publisher's header form."""
        if self.header_form == "source":
            return self._source_headers(partition, offset)
        if self.header_form == "none":
            return ()
        cluster = self.source_cluster_id or ""
        return (
            (
                HEADER_SOURCE,
                b"%s/%s/%d/%d" % (cluster.encode(), self._source_topic, partition, offset),
            ),
        )

    def _source_headers(self, partition: int, offset: int) -> tuple[tuple[str, bytes], ...]:
        """Where the record comes from: the output topic is read back after a crash to skip
        what is already there (exporter/sinks/resume_dedup.py), and readers can trace a record."""
        headers = (
            (HEADER_SOURCE_TOPIC, self._source_topic),
            (HEADER_SOURCE_PARTITION, str(partition).encode()),
            (HEADER_SOURCE_OFFSET, str(offset).encode()),
        )
        cluster = self.source_cluster_id
        if cluster is None:
            return headers
        return (*headers, (HEADER_SOURCE_CLUSTER, cluster.encode()))

    def mark_done(self, source_partition: int, source_offset: int) -> None:
        """A source record that produces nothing (filtered, or state-only)."""
        self.tracker.register(source_partition, source_offset, 0)

    def publish_unpositioned(self, key: bytes | None, value: bytes | None) -> None:
        """An output record of no source record (a log-end sample): it holds back no
        checkpoint, and a failed delivery counts as a failure but pins no watermark (the
        next sampling round writes the partition again)."""
        if not self.enabled:
            return
        self._produce(self.output_topic, key, value, (), self._on_unpositioned_delivery)

    def _produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, bytes]],
        callback: Callable[[KafkaError | None, Any], None],
    ) -> None:
        if self._producer is None:
            raise RuntimeError("publisher is closed")
        header_list = list(headers) or None
        deadline: float | None = None
        while True:
            try:
                self._producer.produce(
                    topic, value=value, key=key, headers=header_list, on_delivery=callback
                )
                break
            except BufferError:
                # Local queue full (output cluster slow or down): serve callbacks and wait,
                # which is the back-pressure that slows the source reader down.
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._queue_full_timeout_s
                elif now >= deadline:
                    raise BufferError(self._queue_full_reason()) from None
                self._producer.poll(0.1)
        with self._lock:
            self._produced += 1

    # -- callbacks -------------------------------------------------------------------------

    def _on_delivery(self, token: DeliveryToken, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            with self._lock:
                self._delivered += 1
                if msg is None or msg.topic() == self.output_topic:
                    self._records_delivered += 1
            self.tracker.complete(token, True)
            return
        with self._lock:
            self._failed += 1
            self._last_error = f"{err.name()}: {err.str()}"
        # not an ERROR per record (a topic that cannot exist fails every one): the exporter
        # reports the publish sink's failures at a bounded rate
        log.debug(
            "delivery failed for source record %d/%d: %s",
            token.lane.partition,
            token.offset,
            err.str(),
        )
        self.tracker.complete(token, False)

    def _on_unpositioned_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        with self._lock:
            if err is None:
                self._delivered += 1
                return
            self._failed += 1
            self._last_error = f"{err.name()}: {err.str()}"
        log.debug("delivery failed for a log-end sample: %s", err.str())

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self._last_error = f"{err.name()}: {err.str()}"
            if err.fatal():
                # The idempotent producer cannot go on (e.g. sequence gap): only a new one can.
                self._fatal_error = self._last_error
        if err.fatal():
            # a new producer gets a new producer id: what was refused (Write, or
            # IdempotentWrite on an old cluster, missing) works once granted, no restart
            retry_s = FATAL_RETRY_S
            with self._lock:
                self._fatal_retry_at = time.monotonic() + retry_s
            log.warning(
                "publisher: the idempotent producer cannot go on (%s); its records count as "
                "failed deliveries (the checkpoint stays before them) and a new producer is "
                "tried in %.0f s. Missing ACL? The publisher needs Write and Describe on topic "
                "%r: %s",
                err.str(),
                retry_s,
                self.output_topic,
                grant_line(self._config, "Write", "topic", self.output_topic),
            )
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            log.warning("publisher: %s", err.str())
        else:
            # Per-connection errors repeat at every reconnect attempt while a broker is away.
            log.debug("publisher: %s", err.str())
        if callable(self._user_error_cb):
            self._user_error_cb(err)

    # -- driving and state -----------------------------------------------------------------

    def _on_throttle(self, event: Any) -> None:
        """librdkafka's ThrottleEvent: a broker delayed its answers to stay in a quota."""
        ms = int(float(getattr(event, "throttle_time", 0.0)) * 1000)
        if ms > 0:
            name = str(getattr(event, "broker_name", "?"))
            with self._lock:
                self._throttle = (time.monotonic(), name, ms)

    def _queue_full_reason(self) -> str:
        """Why records wait: a quota when the brokers said so in the last minute."""
        reason = (
            f"the producer's local queue stayed full for {self._queue_full_timeout_s:g} s: "
            f"topic {self.output_topic!r} takes records slower than they come"
        )
        with self._lock:
            throttle = self._throttle
        if throttle is not None and time.monotonic() - throttle[0] < 60.0:
            client = self._config.get("client.id", "")
            reason += (
                f"; broker {throttle[1]} throttles this client ({throttle[2]} ms): a quota "
                f"(kafka-configs --describe --entity-type clients --entity-name {client})"
            )
        return reason

    def _on_stats(self, stats_json: str) -> None:
        if self._addresses.observe_json(stats_json):
            self._replace = True
        if callable(self._user_stats_cb):
            self._user_stats_cb(stats_json)

    def poll(self, timeout_s: float = 0.0) -> int:
        """Serve delivery callbacks; returns how many ran."""
        if self._producer is None:
            return 0
        if self._replace:
            self._replace_producer()
        retry_at = self._fatal_retry_at
        if retry_at is not None and time.monotonic() >= retry_at:
            self._replace_fatal_producer()
        served = self._serve_retiring() if self._retiring else 0
        return served + int(self._producer.poll(timeout_s))

    def _serve_retiring(self) -> int:
        """Delivery reports of producers replaced on a credential change; past their time,
        what they still hold is purged (each record a failed delivery)."""
        served, kept = 0, []
        now = time.monotonic()
        for producer, until in self._retiring:
            served += int(producer.poll(0))
            if len(producer) == 0:
                continue
            if now >= until:
                try:
                    producer.purge(in_queue=True, in_flight=True, blocking=False)
                    served += int(producer.poll(0))
                except (KafkaException, RuntimeError) as exc:
                    log.debug("publisher: purging a retired producer: %s", exc)
                if len(producer):
                    kept.append((producer, now + RETIRE_DRAIN_S))
                continue
            kept.append((producer, until))
        self._retiring = kept
        return served

    def _replace_fatal_producer(self) -> None:
        with self._lock:
            self._fatal_retry_at = None
            self._fatal_error = None
        old = self._producer
        try:
            old.purge(in_queue=True, in_flight=True, blocking=False)
            old.flush(2.0)  # serves the purged records' delivery reports: failed deliveries
        except (KafkaException, RuntimeError) as exc:
            log.debug("publisher: purging the producer that hit a fatal error: %s", exc)
        self._generations.advance()
        self._producer = self._new_producer()
        self.producers_replaced += 1
        log.info("publisher: a new producer takes over after the fatal error")

    def flush(self, timeout_s: float = 10.0) -> int:
        """Wait for outstanding deliveries; returns how many are still queued."""
        if self._producer is None:
            return 0
        deadline = time.monotonic() + timeout_s
        still = 0
        for producer, _until in self._retiring:
            still += int(producer.flush(max(0.0, deadline - time.monotonic())))
        return still + int(self._producer.flush(max(0.0, deadline - time.monotonic())))

    def confirmed_positions(self) -> dict[int, int]:
        """Per source partition, the position below which every record is fully published."""
        return self.tracker.confirmed()

    def failed_positions(self) -> dict[int, int]:
        return self.tracker.failed_positions()

    def reset_partition(self, source_partition: int) -> None:
        """Forget a source partition (the source was re-positioned, e.g. rebuilt from 0)."""
        self.tracker.reset(source_partition)

    @property
    def delivery_failures(self) -> int:
        with self._lock:
            return self._failed

    def healthy(self) -> bool:
        with self._lock:
            return self._fatal_error is None and self._failed == 0

    def stats(self) -> PublisherStats:
        self.tracker.settle()
        with self._lock:
            runs = self.tracker.runs.delivered  # all of the output topic
            return PublisherStats(
                produced=self._produced,
                delivered=self._delivered + runs,
                records_delivered=self._records_delivered + runs,
                failed=self._failed,
                dead_lettered=self._dead_lettered,
                dropped=self._dropped,
                in_flight=self.tracker.in_flight,
                last_error=self._last_error,
                fatal_error=self._fatal_error,
            )

    def close(self, timeout_s: float = 10.0) -> int:
        """Flush; returns how many records were still undelivered."""
        remaining = self.flush(timeout_s)
        self._producer = None
        return remaining

    def __enter__(self) -> RecordPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
