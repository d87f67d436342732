"""Shared helpers of the exporter's end-to-end tests (daemon + sampler + HTTP on a mock cluster).

Everything here drives the real components: `ExporterService` (daemon main loop, log-end
sampler, HTTP server) with real librdkafka clients against librdkafka's mock cluster, and real
HTTP requests with urllib. Read `tests/kafka_fixtures.py` for what the mock can and cannot do.

Waiting is always `wait_for(...)` (a `wait_until` with a generous timeout that fails with a
description of what was awaited and what was seen last): nothing here asserts a duration.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.service import ExporterService
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.record_factory import Member, RecordFactory
from tests.kafka_fixtures import OFFSETS_TOPIC, ClusterControl, fill_partitions, produce_raw

#: generous: the tests must pass on a loaded 2-core machine
TIMEOUT_S = 90.0

#: librdkafka properties for every client of the exporter under test: the mock holds an empty
#: fetch for the whole fetch.wait.max.ms, so keep it short; quiet logs.
FAST_KAFKA: dict[str, str] = {"fetch.wait.max.ms": "50", "log_level": "3"}

Raw = tuple[int, bytes | None, bytes | None]


# --------------------------------------------------------------------------------------------
# Waiting
# --------------------------------------------------------------------------------------------


def wait_for(
    predicate: Callable[[], object],
    what: str,
    timeout_s: float = TIMEOUT_S,
    interval_s: float = 0.1,
    describe: Callable[[], object] | None = None,
) -> None:
    """Poll `predicate()` until true; fail with `what` (and `describe()`) after timeout_s.

    A predicate that raises (e.g. an HTTP request while the server restarts) counts as false.
    """
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            if predicate():
                return
            last_error = None
        except Exception as error:  # reported below if it never passes
            last_error = error
        if time.monotonic() >= deadline:
            seen = describe() if describe is not None else None
            raise AssertionError(
                f"timed out after {timeout_s:g} s waiting for {what}"
                + (f"; last error: {last_error!r}" if last_error is not None else "")
                + (f"; last seen: {seen!r}" if seen is not None else "")
            )
        time.sleep(interval_s)


# --------------------------------------------------------------------------------------------
# The exporter under test
# --------------------------------------------------------------------------------------------


def exporter_config(bootstrap_servers: str, **overrides: Any) -> ExporterConfig:
    """A config for tests: local HTTP on a free port, fast sampling and snapshots."""
    kafka = dict(FAST_KAFKA)
    kafka.update(overrides.pop("kafka_properties", {}))
    settings: dict[str, Any] = {
        "bootstrap_servers": bootstrap_servers,
        "http_host": "127.0.0.1",
        "http_port": 0,
        "sample_interval_s": 0.5,
        "snapshot_interval_s": 0.2,
        "status_window_s": 60.0,
        "kafka_properties": kafka,
    }
    settings.update(overrides)
    return ExporterConfig(**settings)


@contextlib.contextmanager
def running_exporter(
    config: ExporterConfig, opened: Callable[[ExporterService], None] | None = None
) -> Iterator[ExporterService]:
    """An ExporterService with HTTP, sampler and main loop running; stopped (and the final
    checkpoint written) on exit. `opened` sees the service after open() (checkpoint restored,
    clients created) and before anything runs."""
    service = ExporterService(config)
    running = False
    try:
        if opened is not None:
            opened(service)
        service.start()
        service.run_in_background()
        running = True
        yield service
    finally:
        # stop() joins the main loop and then shuts everything down (final checkpoint)
        if running:
            service.stop()
        else:
            service.shutdown()


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def http_get(base_url: str, path: str, timeout_s: float = 15.0) -> HttpAnswer:
    """A real HTTP GET; error statuses are answers too (no exception)."""
    request = urllib.request.Request(base_url + path, headers={"Accept-Encoding": "identity"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return HttpAnswer(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as error:
        with error:
            return HttpAnswer(error.code, error.read(), dict(error.headers))


def group_path(group_id: str) -> str:
    return "/api/v1/groups/" + urllib.parse.quote(group_id, safe="")


def readyz(service: ExporterService) -> HttpAnswer:
    return http_get(service.http.url, "/readyz")


def api_group(service: ExporterService, group_id: str) -> HttpAnswer:
    return http_get(service.http.url, group_path(group_id))


def api_groups(service: ExporterService) -> list[dict[str, Any]]:
    answer = http_get(service.http.url, "/api/v1/groups")
    assert answer.status == 200, answer
    groups: list[dict[str, Any]] = answer.json()
    return groups


MetricKey = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class Scrape:
    """One /metrics answer parsed with prometheus_client's own parser."""

    samples: dict[MetricKey, float] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def series(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def by(self, name: str, *label_names: str) -> dict[tuple[str, ...], float]:
        """Series of `name` keyed by the values of `label_names` (in that order)."""
        out: dict[tuple[str, ...], float] = {}
        for labels, value in self.series(name).items():
            as_dict = dict(labels)
            out[tuple(as_dict[n] for n in label_names)] = value
        return out


def scrape(service: ExporterService) -> Scrape:
    answer = http_get(service.http.url, "/metrics")
    assert answer.status == 200, answer
    samples: dict[MetricKey, float] = {}
    for family in text_string_to_metric_families(answer.body.decode("utf-8")):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Scrape(samples)


def snapshot_has_all_log_ends(service: ExporterService) -> bool:
    """The served snapshot is ready and knows the log end of every committed partition."""
    snapshot = service.exporter.snapshot
    if not snapshot.ready or not snapshot.groups:
        return False
    return all(
        end >= 0 for group in snapshot.groups for rows in group.topics for end in rows.log_end
    )


def wait_ready_with_log_ends(service: ExporterService, timeout_s: float = TIMEOUT_S) -> None:
    """/readyz 200 and a served snapshot in which every partition's log end is known."""
    wait_for(
        lambda: readyz(service).status == 200,
        "/readyz 200",
        timeout_s,
        describe=lambda: readyz(service).body,
    )
    wait_for(
        lambda: snapshot_has_all_log_ends(service),
        "a snapshot with every log end known",
        timeout_s,
        describe=lambda: service.exporter.stats,
    )


# --------------------------------------------------------------------------------------------
# Kafka-side helpers
# --------------------------------------------------------------------------------------------


def log_ends(bootstrap_servers: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermark of each partition of `topic`."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "offsetwatch-test-probe", **FAST_KAFKA}
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


@dataclass(frozen=True, slots=True)
class Consumed:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def consume_all(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    expected: int | None = None,
    timeout_s: float = TIMEOUT_S,
) -> list[Consumed]:
    """Every record of `topic` from the start up to its current end (or `expected` records)."""
    ends = log_ends(bootstrap_servers, topic, partitions)
    if expected is None:
        expected = sum(ends.values())
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "offsetwatch-test-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **FAST_KAFKA,
        }
    )
    out: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.2):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"reading {topic}: {error}")
                raw_headers: Any = message.headers() or ()
                headers = tuple((name, bytes(v or b"")) for name, v in raw_headers)
                partition, offset = message.partition(), message.offset()
                key, value = message.key(), message.value()
                assert partition is not None and offset is not None
                assert not isinstance(key, str) and not isinstance(value, str)
                out.append(Consumed(partition, offset, message.timestamp()[1], key, value, headers))
    finally:
        consumer.close()
    assert len(out) >= expected, f"read {len(out)} of {expected} records of {topic}"
    return out


def without_log_ends(output: Iterable[Consumed]) -> list[Consumed]:
    """The republished records of `__consumer_offsets`, without the exporter's log-end
    samples (type log_end: published beside them, from no source record)."""
    return [m for m in output if m.value is None or json.loads(m.value)["type"] != "log_end"]


def source_positions_of(output: Iterable[Consumed]) -> set[tuple[int, int]]:
    """(source partition, source offset) of every republished canonical JSON record."""
    positions = set()
    for record in without_log_ends(output):
        assert record.value is not None
        canonical = json.loads(record.value)
        positions.add((canonical["partition"], canonical["offset"]))
    return positions


# --------------------------------------------------------------------------------------------
# Conformance runs (real Kafka 4.0.0 captures) replayed into a mock cluster
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConformanceRun:
    name: str
    directory: Path
    records: list[dict[str, Any]]
    batches: list[dict[str, Any]]
    groups_final: dict[str, dict[str, Any]]
    run: dict[str, Any]
    manifest: dict[str, Any]

    @property
    def partitions(self) -> int:
        return int(self.run["offsets.topic.num.partitions"])

    def groups_with_offsets(self) -> dict[str, dict[str, Any]]:
        return {g: v for g, v in self.groups_final.items() if v.get("offsets")}

    def gone_groups(self) -> set[str]:
        """Groups of the scenario that Kafka no longer lists (deleted or expired)."""
        return set(self.manifest["groups"]) - set(self.groups_final)


def load_run(conformance_dir: Path, name: str) -> ConformanceRun:
    directory = conformance_dir / "runs" / name

    def lines(file: str) -> list[dict[str, Any]]:
        with (directory / file).open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def document(file: str) -> Any:
        return json.loads((directory / file).read_text(encoding="utf-8"))

    return ConformanceRun(
        name,
        directory,
        lines("records.jsonl"),
        lines("batches.jsonl"),
        document("groups-final.json"),
        document("run.json"),
        document("manifest.json"),
    )


def transaction_outcomes(batches: Iterable[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """(partition, offset) -> COMMIT / ABORT / OPEN for every transactional data record.

    A transactional record is decided by the first later control marker of the same producer
    id in the same partition; without one its transaction is still open.
    """
    by_partition: dict[int, list[dict[str, Any]]] = {}
    for batch in batches:
        by_partition.setdefault(batch["partition"], []).append(batch)
    outcomes: dict[tuple[int, int], str] = {}
    for partition, partition_batches in by_partition.items():
        partition_batches.sort(key=lambda b: b["baseOffset"])
        pending: dict[int, list[int]] = {}  # producer id -> offsets waiting for a marker
        for batch in partition_batches:
            if not batch["isTransactional"]:
                continue
            producer = batch["producerId"]
            if batch["isControl"]:
                [marker] = batch["control_records"]
                for offset in pending.pop(producer, []):
                    outcomes[(partition, offset)] = marker["endTxnMarker"]
            else:
                pending.setdefault(producer, []).extend(batch["records"])
        for offsets in pending.values():
            for offset in offsets:
                outcomes[(partition, offset)] = "OPEN"
    return outcomes


def committed_replay(run: ConformanceRun) -> list[Raw]:
    """The run's records as a read_committed consumer of a real broker sees them.

    Records of aborted and of still-open transactions are left out: the mock broker cannot
    filter them for read_committed (see tests/kafka_fixtures.py), a real broker does. Offsets
    shift (the mock writes no control records); partitions and order stay.
    """
    outcomes = transaction_outcomes(run.batches)
    out: list[Raw] = []
    for record in sorted(run.records, key=lambda r: (r["partition"], r["offset"])):
        if outcomes.get((record["partition"], record["offset"]), "COMMIT") != "COMMIT":
            continue
        value = record["value"]
        out.append(
            (
                record["partition"],
                bytes.fromhex(record["key"]),
                None if value is None else bytes.fromhex(value),
            )
        )
    return out


def data_topic_log_ends(groups_final: Mapping[str, Mapping[str, Any]]) -> dict[str, list[int]]:
    """topic -> log-end offset per partition, as groups-final.json reports them (partitions no
    group committed to are created empty)."""
    ends: dict[tuple[str, int], int] = {}
    for group in groups_final.values():
        for row in group.get("offsets") or ():
            ends[(row["topic"], row["partition"])] = row["log_end_offset"]
    topics: dict[str, list[int]] = {}
    for (topic, partition), end in ends.items():
        counts = topics.setdefault(topic, [])
        counts.extend([0] * (partition + 1 - len(counts)))
        counts[partition] = end
    return topics


def replay_run(cluster: ClusterControl, run: ConformanceRun, bootstrap_servers: str) -> int:
    """Create `__consumer_offsets` (run.json's partition count), write the committed records
    into their recorded partitions, and recreate the data topics' log ends. Returns how many
    offsets-topic records were written."""
    cluster.create_topic(OFFSETS_TOPIC, run.partitions)
    written = produce_raw(bootstrap_servers, committed_replay(run))
    create_data_topics(cluster, data_topic_log_ends(run.groups_final), bootstrap_servers)
    return written


def create_data_topics(
    cluster: ClusterControl, topics: Mapping[str, list[int]], bootstrap_servers: str
) -> None:
    """Create each topic with len(counts) partitions; partition p gets counts[p] messages."""
    for topic, counts in topics.items():
        cluster.create_topic(topic, len(counts))
        fill = {p: n for p, n in enumerate(counts) if n}
        if fill:
            fill_partitions(bootstrap_servers, topic, fill)


def expected_rows(group: Mapping[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(row["topic"], row["partition"]): row for row in group.get("offsets") or ()}


# --------------------------------------------------------------------------------------------
# A synthetic workload (real-format records from our encoder) and state comparison
# --------------------------------------------------------------------------------------------

DATA_TOPIC = "orders"
DATA_PARTITIONS = 4
#: log-end offset of each data partition (created by `create_workload_topics`)
DATA_LOG_ENDS = [500, 400, 300, 200]


@dataclass(slots=True)
class Workload:
    """Writes group records like a coordinator would: each group into its own
    `__consumer_offsets` partition (Kafka's formula), commits moving forward over time."""

    offsets_partitions: int = 3
    factory: RecordFactory = field(default_factory=RecordFactory)
    start_ms: int = 1_700_000_000_000
    #: group -> round counter (drives offsets and commit timestamps)
    rounds: dict[str, int] = field(default_factory=dict)

    def partition_of(self, group: str) -> int:
        return partition_for(group, self.offsets_partitions)

    def _raw(self, group: str, key_value: tuple[bytes, bytes | None]) -> Raw:
        key, value = key_value
        return (self.partition_of(group), key, value)

    def join(self, group: str, generation: int = 1) -> list[Raw]:
        """A classic group with one member owning every data partition."""
        member = Member(
            f"{group}-member-1",
            f"{group}-client",
            "/10.0.0.1",
            ((DATA_TOPIC, tuple(range(DATA_PARTITIONS))),),
        )
        return [self._raw(group, self.factory.classic_group(group, generation, [member], 1))]

    def commits(self, group: str, rounds: int) -> list[Raw]:
        """`rounds` commits of every data partition, offsets growing towards the log end."""
        out = []
        for _ in range(rounds):
            r = self.rounds.get(group, 0) + 1
            self.rounds[group] = r
            for partition in range(DATA_PARTITIONS):
                offset = min(DATA_LOG_ENDS[partition], 7 * r + partition)
                commit_ts = self.start_ms + 1000 * r
                out.append(
                    self._raw(
                        group,
                        self.factory.commit(
                            group,
                            DATA_TOPIC,
                            partition,
                            offset,
                            commit_ts,
                            metadata=f"{group}/{r}",
                            leader_epoch=r % 3,
                        ),
                    )
                )
        return out

    def delete(self, group: str) -> list[Raw]:
        """What DeleteGroups writes: offset tombstones, then the group metadata tombstone."""
        out = [
            self._raw(group, self.factory.commit_tombstone(group, DATA_TOPIC, partition))
            for partition in range(DATA_PARTITIONS)
        ]
        out.append(self._raw(group, self.factory.classic_group_tombstone(group)))
        return out


def create_workload_topics(
    cluster: ClusterControl, bootstrap_servers: str, partitions: int
) -> None:
    cluster.create_topic(OFFSETS_TOPIC, partitions)
    create_data_topics(cluster, {DATA_TOPIC: list(DATA_LOG_ENDS)}, bootstrap_servers)


_CANONICAL = Canonical()


def state_projection(state: OffsetState) -> dict[str, Any]:
    """Everything the state says that must not depend on how it was reached (resumed from a
    checkpoint or rebuilt): committed offsets with their commit time, epoch, metadata and
    rewind/move times, commit counts, and every non-commit record in canonical form. Only the
    status-window columns (which follow the wall clock) are left out."""
    out: dict[str, Any] = {}
    for group_id, group in state.groups.items():
        topics = {
            topic: {
                p: (
                    table.committed[p],
                    table.commit_ts[p],
                    table.leader_epoch[p],
                    table.metadata_of(p),
                    table.rewind_ts[p],
                    table.move_ts[p],
                )
                for p in table.partitions()
            }
            for topic, table in group.topics.items()
        }
        records = {slot: _CANONICAL.to_dict(record) for slot, record in group.records.items()}
        out[group_id] = {
            "kind": group.kind,
            "commits_total": group.commits_total,
            "last_record_ts": group.last_record_ts,
            "topics": topics,
            "records": records,
        }
    return out
