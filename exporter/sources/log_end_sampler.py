"""Background sampling of log-end offsets of the data topics the exporter tracks.

This is the only place the exporter reads log ends: scrapes use the last sample and never
call Kafka (a scrape must not hang on a slow cluster or multiply broker load by the number
of Prometheus replicas).

Each round asks one Metadata request (which topics and partitions exist) and then
ListOffsets(latest) in chunks through AdminClient.list_offsets, which librdkafka groups into
one request per leader broker. Per-partition `Consumer.get_watermark_offsets` was measured
on the mock cluster at ~0.12 ms per partition against ~0.012 ms per partition for chunked
list_offsets (1000 partitions: ~120 ms vs ~12 ms); against a real cluster the gap is one
round trip per partition, so only list_offsets is implemented.

Result per tracked partition in `on_sample(time_ms, offsets)`:
* an int: the log-end offset (high watermark, or last stable offset with read_committed);
* None: the topic or partition does not exist (deleted topic, stale state), so the consumer
  can stop reporting it instead of keeping a frozen value;
* absent: not known this round (timeout, leader unavailable, not authorized to describe the
  topic...). The previous sample stays the best knowledge; `last_round` says how the round
  went, and `on_denied` gets the tracked topics the broker refused to describe each round
  (a broker leaves them out of a Metadata answer as if they did not exist).
A round in which nothing at all was learned does not call `on_sample`.

With `source_topic`, each round then asks the log ends of the source's own partitions
(read_committed, as the source reads) for `on_source_ends`: what tells a frozen source from an
idle one (exporter/state/source_freshness.py). With `share_state_topic`, the same for the
`__share_group_state` partitions the share-state reader reads (`on_share_state_ends`); none
are asked while that topic does not exist (no share group yet, or Kafka 3.9).

With `topic_ids`/`on_topic_names`, each round first looks up the names of the topic ids the
exporter cannot name (share partitions are keyed by topic id:
exporter/sources/topic_id_resolver.py), so that those blocking Admin calls never run on the main
loop either.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)

# OffsetSpec is re-exported by confluent_kafka.admin without __all__, which strict mypy refuses.
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from offsetwatch.exporter.kafka_clients import AddressWatch, redact
from offsetwatch.exporter.sources.leader_backoff import PROBE_TIMEOUT_S, LeaderBackoff
from offsetwatch.exporter.sources.log_end_backfill import Backfill, backfill_times, rebuild
from offsetwatch.exporter.sources.topic_id_resolver import TopicIdResolver
from offsetwatch.exporter.stats import PartHealth

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]
SampleCallback = Callable[[int, dict[TopicPartitionKey, int | None]], None]
#: (time ms, log end per source partition, error per source partition without one)
SourceEndsCallback = Callable[[int, dict[int, int], dict[int, str]], None]

# Errors that mean "no such topic/partition" rather than "could not ask right now".
_UNKNOWN_CODES = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
)


# Errors that mean the leader gave no answer at all (down, hung, unreachable): grounds for
# leaving it alone for a while (exporter/sources/leader_backoff.py).
_NO_ANSWER_CODES = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)

# Errors that mean "you may not" (an ACL is missing), never "it does not exist".
_DENIED_CODES = frozenset(
    {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}
)


@dataclass(slots=True, frozen=True)
class SampleRound:
    """How one round went (also what `sample_once` returns)."""

    time_ms: int
    requested: int
    resolved: int  # partitions with an offset
    unknown: int  # partitions reported as not existing (None)
    failed: int  # partitions left out this round
    duration_s: float
    error: str | None = None


class LogEndSampler:
    """Samples log-end offsets every `interval_s` on a daemon thread.

    `partitions()` is called each round for the set to sample; `on_sample` runs on the
    sampler thread, so it must hand the data over thread-safely (the state store does).
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        partitions: Callable[[], Iterable[TopicPartitionKey]],
        on_sample: SampleCallback,
        interval_s: float = 10.0,
        chunk_size: int = 1000,
        request_timeout_s: float = 10.0,
        read_committed: bool = False,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        admin_factory: Callable[..., Any] = AdminClient,
        topic_ids: Callable[[], Collection[str]] | None = None,
        on_topic_names: Callable[[dict[str, str]], None] | None = None,
        on_admin_replaced: Callable[[int], None] | None = None,
        source_topic: str | None = None,
        source_partitions: Callable[[], Collection[int]] | None = None,
        on_source_ends: SourceEndsCallback | None = None,
        on_denied: Callable[[dict[str, str]], None] | None = None,
        share_state_topic: str | None = None,
        share_state_partitions: Callable[[], Collection[int]] | None = None,
        on_share_state_ends: SourceEndsCallback | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        backfill_window_s: float = 0.0,
        on_backfill: Callable[[Backfill], None] | None = None,
    ) -> None:
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self._partitions = partitions
        self._on_sample = on_sample
        self.interval_s = interval_s
        self._chunk_size = chunk_size
        self._timeout_s = request_timeout_s
        # Lag is usually measured against the high watermark; a read_committed consumer
        # can never get past the last stable offset, so that is offered too.
        self._isolation = (
            IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        )
        self._wall_clock_ms = wall_clock_ms
        self._monotonic = monotonic
        #: each sampled partition's leader in the round's metadata (None: not named there)
        self._leaders: dict[TopicPartitionKey, int] = {}
        self._backoff = LeaderBackoff()
        self._latest: Any = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        self._refusals = _RefusedConnections()
        merged = self._merged(config)
        log.info("log-end sampler config: %s", self.config_for_logging)
        self._user_stats_cb = merged.get("stats_cb")
        self._config = {**merged, "stats_cb": self._on_stats}
        #: settings the next admin client is to take (credentials rotated), from any thread
        self._next_config: dict[str, object] | None = None
        self._admin_factory = admin_factory
        self._addresses = AddressWatch()
        self._replace = False
        self.admins_replaced = 0
        self._on_admin_replaced = on_admin_replaced
        self._admin = admin_factory(self._config)
        self._source_topic = source_topic
        self._source_partitions = source_partitions
        self._on_source_ends = on_source_ends
        self._share_state_topic = share_state_topic
        self._share_state_partitions = share_state_partitions
        self._on_share_state_ends = on_share_state_ends
        self._on_denied = on_denied
        #: a fleet replica's partitions first sampled get the window before them rebuilt
        #: from Kafka's timestamps (exporter/sources/log_end_backfill.py), handed over
        #: before the round that first samples them
        self._backfill_window_ms = int(backfill_window_s * 1000)
        self._on_backfill = on_backfill
        self._sampled: set[TopicPartitionKey] = set()
        self._topic_ids = topic_ids
        self._on_topic_names = on_topic_names
        self._resolver = TopicIdResolver(self._admin, request_timeout_s)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._last_round: SampleRound | None = None
        self._last_success_ms: int | None = None
        #: tracked topics the broker refuses to describe -> its error (the last round's)
        self._denied_topics: dict[str, str] = {}
        #: rounds that raised (not those whose requests failed: those are answers)
        self.health = PartHealth("log_end_sampler")
        self.rounds = 0
        self.failed_rounds = 0
        self.callback_errors = 0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="log-end-sampler", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Run the next round now instead of at the next interval (e.g. right after catch-up,
        so readiness does not wait up to a whole interval for the first useful round)."""
        self._wake.set()

    def stop(self, timeout_s: float = 15.0) -> bool:
        """Stop after the current round; True if the thread ended within timeout_s."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    def __enter__(self) -> LogEndSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception as error:  # a sampler that dies silently is worse than one that logs
                health = self.health
                health.restarts_total += 1
                health.last_error = f"{type(error).__name__}: {error}"
                if not health.failing_since_ms:
                    health.failing_since_ms = self._wall_clock_ms()
                    log.exception("log-end sampling round failed; the next round runs as planned")
            else:
                if self.health.failing_since_ms:
                    log.warning("log-end sampling works again")
                    self.health.failing_since_ms = 0
            # Fixed rate, but never a burst of catch-up rounds after a slow one.
            next_at = max(next_at + self.interval_s, time.monotonic())
            if self._wake.wait(max(0.0, next_at - time.monotonic())):
                self._wake.clear()
                next_at = time.monotonic()

    # -- one round -------------------------------------------------------------------------

    def _on_stats(self, stats_json: str) -> None:
        if self._addresses.observe_json(stats_json):
            self._replace = True
        if callable(self._user_stats_cb):
            self._user_stats_cb(stats_json)

    def _merged(self, config: Mapping[str, object]) -> dict[str, object]:
        merged: dict[str, object] = {
            "client.id": "offsetwatch-log-end-sampler",
            # broker handles for the address watch (exporter/kafka_clients.py)
            "statistics.interval.ms": 5000,
        }
        merged.update(config)
        if "logger" not in merged:
            merged["logger"] = self._refusals.logger(f"{__name__}.librdkafka")
        self.config_for_logging = redact(merged)
        return merged

    def reconfigure(self, config: Mapping[str, object]) -> None:
        """Sample with a new admin client made from `config` (a credential file was
        replaced); any thread, taken at the next round."""
        self._next_config = self._merged(config)
        self._replace = True
        self.wake()

    def _watch_admin(self) -> None:
        """Serve the admin client's statistics reports; replace a client left without a
        broker address (exporter/kafka_clients.py), which would never answer again."""
        self._admin.poll(0)
        if not self._replace:
            return
        self._replace = False
        next_config, self._next_config = self._next_config, None
        if next_config is not None:
            self._config = {**next_config, "stats_cb": self._on_stats}
            log.info("log-end sampler: the credential files changed; using a new admin client")
        else:
            log.warning(
                "log-end sampler: the admin client has had no broker address for %d "
                "statistics reports (librdkafka dropped the broker from a metadata answer); "
                "using a new one",
                self._addresses.reports,
            )
        self._addresses.reset()
        self._admin = self._admin_factory(self._config)
        self._resolver.use(self._admin)
        self.admins_replaced += 1
        if self._on_admin_replaced is not None:
            self._on_admin_replaced(self.admins_replaced)

    def sample_once(self) -> SampleRound:
        """One sampling round on the calling thread (the background thread uses it too)."""
        started = time.monotonic()
        self._watch_admin()
        self._resolve_topic_ids()
        time_ms = self._wall_clock_ms()
        try:
            wanted = sorted(set(self._partitions()))
        except Exception as exc:
            log.exception("tracked-partitions provider failed")
            return self._finish(SampleRound(time_ms, 0, 0, 0, 0, 0.0, f"provider: {exc}"))
        results: dict[TopicPartitionKey, int | None] = {}
        failed = 0
        error: str | None = None
        existing: dict[str, set[int]] | None = None
        if wanted or self._own_topics():
            try:
                existing = self._existing_partitions({topic for topic, _ in wanted})
            except KafkaException as exc:
                error = f"metadata: {_describe(exc)}"
        if wanted:
            if existing is None:
                failed = len(wanted)
            else:
                to_ask = []
                denied = self.denied_topics
                for key in wanted:
                    topic, partition = key
                    if partition in existing.get(topic, ()):
                        to_ask.append(key)
                    elif topic in denied:
                        # unknown, not "deleted"; said once by the daemon (on_denied), not
                        # in every round's line
                        failed += 1
                    else:
                        results[key] = None
                if self._on_denied is not None:
                    try:
                        self._on_denied(denied)
                    except Exception:
                        self.callback_errors += 1
                        log.exception("on_denied callback failed")
                for start in range(0, len(to_ask), self._chunk_size):
                    chunk_failed = self._list_offsets(
                        to_ask[start : start + self._chunk_size], results
                    )
                    failed += len(chunk_failed)
                    if chunk_failed and error is None:
                        (topic, partition), why = next(iter(chunk_failed.items()))
                        error = f"{topic}[{partition}]: {why}"
        unknown = sum(1 for v in results.values() if v is None)
        sample = SampleRound(
            time_ms,
            len(wanted),
            len(results) - unknown,
            unknown,
            failed,
            time.monotonic() - started,
            error,
        )
        if self._on_backfill is not None and self._backfill_window_ms > 0:
            self._backfill(time_ms, wanted, results)
        if results or not wanted:
            try:
                self._on_sample(time_ms, results)
            except Exception:
                self.callback_errors += 1
                log.exception("on_sample callback failed")
        self._sample_source(time_ms)
        return self._finish(sample)

    def _backfill(
        self,
        time_ms: int,
        wanted: list[TopicPartitionKey],
        results: Mapping[TopicPartitionKey, int | None],
    ) -> None:
        """The history before this round of the partitions it samples for the first time
        (a partition left and come back counts as new: its history was another's)."""
        self._sampled.intersection_update(wanted)
        ends = {k: v for k, v in results.items() if v is not None and k not in self._sampled}
        if not ends:
            return
        times = backfill_times(
            time_ms, self._backfill_window_ms, max(1, int(self.interval_s * 1000))
        )
        try:
            points = rebuild(
                self._admin, sorted(ends), ends, times, self._isolation, self._timeout_s
            )
        except (KafkaException, ValueError) as exc:
            log.warning(
                "rebuilding the log-end history of %d partition(s) from record timestamps "
                "failed (%s): their lag in seconds and status build up from this round on",
                len(ends),
                _describe(exc),
            )
            points = []
        self._sampled.update(ends)
        if not points:
            return
        try:
            assert self._on_backfill is not None
            self._on_backfill(points)
        except Exception:
            self.callback_errors += 1
            log.exception("on_backfill callback failed")

    def _resolve_topic_ids(self) -> None:
        """Names for the topic ids the exporter asks about, handed back before the round's
        log ends are asked (a name found now is sampled in the next round)."""
        if self._topic_ids is None or self._on_topic_names is None:
            return
        try:
            unknown = self._topic_ids()
            if not unknown:
                return
            found = self._resolver.resolve(unknown)
        except KafkaException as exc:
            log.warning("topic id lookup: %s", _describe(exc))
            return
        if found:
            self._on_topic_names(found)

    def _existing_partitions(self, topics: Collection[str]) -> dict[str, set[int]]:
        """Partitions of each topic that exists, from one Metadata request for all topics.

        Asking for all topics rather than per topic: one request, and librdkafka cannot
        mistake a missing topic for one to create. A broker leaves the topics the client may
        not Describe out of that answer, as if they did not exist: those missing are asked
        again by name (`_denied`), so that "not authorized" is never taken for "deleted".
        """
        metadata = self._admin.list_topics(timeout=self._timeout_s)
        existing: dict[str, set[int]] = {}
        absent = []
        leaders: dict[TopicPartitionKey, int] = {}
        for name in topics:
            topic = metadata.topics.get(name)
            if topic is not None and topic.error is None:
                existing[name] = set(topic.partitions)
                _note_leaders(name, topic, leaders)
            else:
                absent.append(name)
        for own in self._own_topics():
            source = metadata.topics.get(own)
            if source is not None and source.error is None:
                _note_leaders(own, source, leaders)
        self._leaders = leaders
        named = {leader for leader in leaders.values() if leader >= 0}
        self._backoff.keep_only(named)
        self._note_refusals(named)
        denied = self._denied(absent) if absent else {}
        with self._lock:
            self._denied_topics = denied
        return existing

    def _denied(self, topics: list[str]) -> dict[str, str]:
        """Which of `topics` (absent from the metadata answer) the broker refuses to describe,
        with its error (DescribeTopics never creates a topic)."""
        try:
            futures = self._admin.describe_topics(
                TopicCollection(sorted(topics)), request_timeout=self._timeout_s
            )
        except (KafkaException, ValueError) as exc:
            log.debug("describe_topics of absent topics: %s", exc)
            return dict(self._denied_topics)  # unknown this round: the last answer stays
        denied: dict[str, str] = {}
        for name, future in futures.items():
            try:
                future.result(timeout=self._timeout_s + 5)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and err.code() in _DENIED_CODES:
                    denied[name] = f"{err.name()}: {err.str()}"
            except Exception:  # a timeout: unknown this round
                previous = self._denied_topics.get(name)
                if previous is not None:
                    denied[name] = previous
        return denied

    def _list_offsets(
        self,
        keys: list[TopicPartitionKey],
        results: dict[TopicPartitionKey, int | None],
        isolation: Any = None,
    ) -> dict[TopicPartitionKey, str]:
        """Ask the leaders of `keys` for their log ends into `results`; the error of each
        partition that got no log end. Leaders that lately answered nothing are left out or
        probed (exporter/sources/leader_backoff.py)."""
        now = self._monotonic()
        failed: dict[TopicPartitionKey, str] = {}
        ask: list[TopicPartitionKey] = []
        probe: list[TopicPartitionKey] = []
        for key in keys:
            leader = self._leaders.get(key)
            if leader is None:
                ask.append(key)
            elif leader < 0:
                failed[key] = "no leader (the metadata names none)"
            else:
                action = self._backoff.plan(leader, now)
                if action == "skip":
                    wait_s = self._backoff.retry_in_s(leader, now)
                    failed[key] = f"leader {leader} did not answer; asked again in {wait_s:.0f} s"
                else:
                    (probe if action == "probe" else ask).append(key)
        #: per leader: (any partition answered, any partition got no answer at all)
        heard: dict[int, tuple[bool, bool]] = {}
        pending = []
        for subset, timeout_s in ((ask, self._timeout_s), (probe, PROBE_TIMEOUT_S)):
            if not subset:
                continue
            request = {TopicPartition(t, p): self._latest for t, p in subset}
            timeout_s = min(timeout_s, self._timeout_s)
            try:
                futures = self._admin.list_offsets(
                    request,
                    isolation_level=self._isolation if isolation is None else isolation,
                    request_timeout=timeout_s,
                )
            except (KafkaException, ValueError) as exc:
                failed.update(dict.fromkeys(subset, f"list_offsets: {_describe(exc)}"))
                continue
            pending.append((futures, timeout_s))
        for futures, timeout_s in pending:
            for tp, future in futures.items():
                key = (tp.topic, tp.partition)
                answered = self._one_offset(key, future, timeout_s, results, failed)
                leader = self._leaders.get(key)
                if leader is not None:
                    seen = heard.get(leader, (False, False))
                    heard[leader] = (seen[0] or answered, seen[1] or not answered)
        self._judge_leaders(heard, self._monotonic())  # the requests may have taken long
        return failed

    def _one_offset(
        self,
        key: TopicPartitionKey,
        future: Any,
        timeout_s: float,
        results: dict[TopicPartitionKey, int | None],
        failed: dict[TopicPartitionKey, str],
    ) -> bool:
        """One partition's answer into `results` or `failed`; False if its leader gave no
        answer at all (as opposed to an answer, even an error)."""
        try:
            offset = int(future.result(timeout=timeout_s + 5).offset)
        except KafkaException as exc:
            kafka_error = exc.args[0] if exc.args else None
            code = kafka_error.code() if isinstance(kafka_error, KafkaError) else None
            if code in _UNKNOWN_CODES:
                results[key] = None  # deleted between the metadata call and this one
                return True
            failed[key] = _describe(exc)
            return code not in _NO_ANSWER_CODES
        except Exception as exc:  # a future timing out raises concurrent.futures errors
            failed[key] = repr(exc)
            return False
        if offset < 0:
            # confluent-kafka answers -1001 (OFFSET_INVALID), without an error, for a
            # partition whose leader just died: unknown for this round, so the last known
            # log end stays (with its age) instead of a round dropped
            failed[key] = f"no log end this round ({offset})"
            return False
        results[key] = offset
        return True

    def _note_refusals(self, leaders: set[int]) -> None:
        """Leaders librdkafka failed to connect to since the last round are left alone
        before they are asked: asking would cost a core until the request timed out."""
        refused, self._refusals.refused = self._refusals.refused, set()
        now = self._monotonic()
        for leader in sorted(refused & leaders):
            if leader not in self._backoff.silent_leaders:
                delay_s = self._backoff.silent(leader, now)
                _say_silent(leader, "lost or refused the connection", delay_s)

    def _judge_leaders(self, heard: dict[int, tuple[bool, bool]], now: float) -> None:
        for leader, (answered, silent) in sorted(heard.items()):
            if answered:
                if self._backoff.answered(leader):
                    log.warning("log-end sampler: broker %d answers again", leader)
            elif silent:
                first = leader not in self._backoff.silent_leaders
                delay_s = self._backoff.silent(leader, now)
                if first:
                    _say_silent(leader, "did not answer ListOffsets", delay_s)

    @property
    def silent_leaders(self) -> tuple[int, ...]:
        """Brokers the sampler leaves alone for now (they answered nothing lately)."""
        return self._backoff.silent_leaders

    def _own_topics(self) -> list[str]:
        """The topics the exporter itself reads whose log ends each round asks."""
        return [t for t in (self._source_topic, self._share_state_topic) if t is not None]

    def _sample_source(self, time_ms: int) -> None:
        """The log ends of the topics the exporter reads (`__consumer_offsets`, then
        `__share_group_state`), read_committed as their readers read them: what confirms that
        the exporter's state is complete (exporter/state/source_freshness.py)."""
        self._sample_own(self._source_topic, self._source_partitions, self._on_source_ends, time_ms)
        self._sample_own(
            self._share_state_topic,
            self._share_state_partitions,
            self._on_share_state_ends,
            time_ms,
        )

    def _sample_own(
        self,
        topic: str | None,
        partitions: Callable[[], Collection[int]] | None,
        on_ends: SourceEndsCallback | None,
        time_ms: int,
    ) -> None:
        if topic is None or partitions is None or on_ends is None:
            return
        # the share-state reader reads nothing while the topic does not exist: then no
        # partition is asked (and none is judged stale)
        keys = [(topic, p) for p in sorted(partitions())]
        if not keys:
            return
        results: dict[TopicPartitionKey, int | None] = {}
        failed = self._list_offsets(keys, results, IsolationLevel.READ_COMMITTED)
        ends = {partition: end for (_t, partition), end in results.items() if end is not None}
        errors = {partition: error for (_t, partition), error in failed.items()}
        for (_t, partition), end in results.items():
            if end is None:
                errors[partition] = "unknown topic or partition"
        try:
            on_ends(time_ms, ends, errors)
        except Exception:
            self.callback_errors += 1
            log.exception("the %s log-end callback failed", topic)

    def _finish(self, sample: SampleRound) -> SampleRound:
        with self._lock:
            self.rounds += 1
            if sample.error is not None and sample.resolved == 0 and sample.requested:
                self.failed_rounds += 1
            if sample.resolved or sample.unknown or not sample.requested:
                self._last_success_ms = sample.time_ms
            self._last_round = sample
        if sample.error:
            log.warning(
                "log-end round: %d/%d resolved, %d failed: %s",
                sample.resolved,
                sample.requested,
                sample.failed,
                sample.error,
            )
        return sample

    # -- state -----------------------------------------------------------------------------

    @property
    def last_round(self) -> SampleRound | None:
        with self._lock:
            return self._last_round

    @property
    def denied_topics(self) -> dict[str, str]:
        """Tracked topics the last round was not authorized to describe, with the error."""
        with self._lock:
            return dict(self._denied_topics)

    @property
    def last_success_ms(self) -> int | None:
        """Wall-clock time of the last round that learned anything."""
        with self._lock:
            return self._last_success_ms


#: librdkafka's lines for a lost or failed connection to a known broker (its thread names
#: the id); a leader the sampler asks every round never idles long enough to be disconnected
#: for idleness, and one that is wrongly left alone is probed again 5 s later
_CONNECTION_LOST = re.compile(r"\[thrd:[^\]]*/(\d+)\]: .*(?:Connect to \S+ failed|Disconnected)")


class _RefusedConnections(logging.Filter):
    """Notes the ids of the brokers librdkafka's log says it lost or could not make a
    connection to; every line goes on unchanged. librdkafka hands its lines over in `poll`,
    which the sampler calls at the start of each round."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[int] = set()

    def logger(self, name: str) -> logging.Logger:
        """A logger of its own (outside the registry: one per sampler), whose lines go to
        the handlers of the logger `name`."""
        own = logging.Logger(name)
        own.parent = logging.getLogger(name)
        own.addFilter(self)
        return own

    def filter(self, record: logging.LogRecord) -> bool:
        found = _CONNECTION_LOST.search(record.getMessage())
        if found:
            self.refused.add(int(found.group(1)))
        return True


def _say_silent(leader: int, what: str, delay_s: float) -> None:
    log.warning(
        "log-end sampler: broker %d, leader of sampled partitions, %s; their last log ends "
        "stay (with their age) and it is asked again in %.0f s, then less often (check that "
        "broker: it is down, hung or unreachable)",
        leader,
        what,
        delay_s,
    )


def _note_leaders(name: str, topic: Any, into: dict[TopicPartitionKey, int]) -> None:
    for partition, found in topic.partitions.items():
        leader = getattr(found, "leader", None)
        if isinstance(leader, int):
            into[(name, partition)] = leader


def _describe(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    return str(exc)
