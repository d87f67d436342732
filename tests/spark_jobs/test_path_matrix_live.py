"""The path matrix's live row: real clients' commits on a real Kafka 4.0 broker, republished
by the exporter to a real topic, compacted from that topic, and `spark offsets-at` at the end
equal to Kafka's OffsetFetch for every group.

One run (module fixture) on the run's shared broker: classic and KIP-848 members, a simple
commit, a deleted group, transactional offset commits committed, aborted and still open while
the exporter reads (read_committed: the broker hands it neither), and a group that stalls in
real time. The exporter runs with `--publish-topic` and `--archive-dir` at once, so the
republished leg is checked against the archive leg on the same records; `spark stream` over
the republished topic finds the stall, as it does over the archive (test_streaming.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from confluent_kafka import IsolationLevel

from offsetwatch import cli
from offsetwatch.core.status import StatusConfig
from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.service import ExporterService
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings
from offsetwatch.spark_jobs.offsets_at import committed_at
from offsetwatch.spark_jobs.streaming import (
    AlertSinks,
    StreamSettings,
    kafka_stream,
    start_stream,
)
from tests.exporter.daemon_helpers import api_group, exporter_config, running_exporter, wait_for
from tests.real_broker import Broker, unique
from tests.spark_jobs import live_workload as live
from tests.spark_jobs.live_workload import Offsets, Workload

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: `cluster`: in `make test-cluster`, whose time it does not add to `make test` (its Spark JVM,
#: exporter and live workload took the CPU of the suite's Spark groups, its critical path, for 6
#: of make test's 14 minutes, 2026-12-07)
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.cluster]

REPUBLISH_PARTITIONS: Final = 3
#: the stall happens in seconds: the analytics look at windows of seconds too
TICK_MS: Final = 500
WINDOW_MS: Final = 2_000
HISTORY_MS: Final = 180_000


@dataclass(slots=True)
class LiveRun:
    broker: Broker
    work: Workload
    republished: str
    #: OffsetFetch while the open transaction was still open
    kafka: Offsets
    #: ListOffsets of __consumer_offsets then: high watermarks and last stable offsets
    high: dict[int, int]
    stable: dict[int, int]
    #: the open transaction's partition still had its last stable offset below the high
    #: watermark when the exporter had read everything and OffsetFetch had answered
    open_to_the_end: bool
    api: Offsets
    publisher_config: dict[str, object]
    end_ms: int
    lakes: dict[str, Path] = field(default_factory=dict)


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(argv))
    assert code in (0, None), (argv, code)
    return out.getvalue()


def _sampled(service: ExporterService) -> Any:
    """`sampled(group, end)`: the exporter's snapshot shows log end `end` for the group."""

    def sampled(group: str, end: int) -> bool:
        view = service.exporter.snapshot.group(group)
        return view is not None and any(end in rows.log_end for rows in view.topics)

    return sampled


def _api_offsets(service: ExporterService, work: Workload) -> Offsets:
    out: Offsets = {}
    for group in work.groups.values():
        answer = api_group(service, group)
        if answer.status == 200:
            rows = {
                (r["topic"], r["partition"]): r["committed"]
                for r in answer.json()["partitions"]
                if r["committed"] is not None
            }
            if rows:
                out[group] = rows
    return out


def _read_everything_stable(service: ExporterService, stable: dict[int, int]) -> None:
    """Until the exporter's reader is at the last stable offset of every partition."""
    source = service.exporter.source
    assert source is not None

    def behind() -> dict[int, tuple[int, int]]:
        at = source.positions()
        return {p: (at.get(p, 0), end) for p, end in stable.items() if at.get(p, 0) < end}

    wait_for(lambda: not behind(), "the exporter to read every stable record", describe=behind)


def _still_open(broker: Broker, work: Workload) -> bool:
    partition = partition_for(work.group("txn-open"), live.OFFSETS_PARTITIONS)
    high = live.offsets_ends(broker, IsolationLevel.READ_UNCOMMITTED)[partition]
    return live.offsets_ends(broker, IsolationLevel.READ_COMMITTED)[partition] < high


def _run(
    broker: Broker, work: Workload, republished: str, archive: Path, raw_lake: Path
) -> LiveRun:
    config = exporter_config(
        broker.bootstrap,
        publish_topic=republished,
        publish_format="json",
        archive_dir=archive,
        archive_format="jsonl",
        # what the user asks is overridden: the delivery watermark needs acks=all
        kafka_properties={"acks": "1"},
    )
    with contextlib.ExitStack() as transaction:
        with running_exporter(config) as service:
            live.commit_everything_but_the_open_transaction(broker, work)
            live.stall(broker, work, _sampled(service))
            transaction.enter_context(live.open_transaction(broker, work))
            high = live.offsets_ends(broker, IsolationLevel.READ_UNCOMMITTED)
            stable = live.offsets_ends(broker, IsolationLevel.READ_COMMITTED)
            _read_everything_stable(service, stable)
            kafka = live.kafka_offsets(broker, work)
            wait_for(
                lambda: _api_offsets(service, work) == kafka,
                "the exporter's API to give Kafka's committed offsets",
                describe=lambda: (_api_offsets(service, work), kafka),
            )
            api = _api_offsets(service, work)
            open_to_the_end = _still_open(broker, work)
            publisher = service.exporter.sinks.publisher
            assert publisher is not None
            publisher_config = dict(publisher.config_for_logging)
        # stopped (the publisher flushed) while the transaction is still open
        stats = publisher.stats()
        assert stats.failed == 0 and stats.delivered == stats.produced, stats
    # the raw topic through the kafka source, once the transaction is aborted: kept open
    # longer, it would hold back other tests' read_committed readers of its partition
    _cli("spark", "compact", "--source", "kafka", "--lake", str(raw_lake),
         "--bootstrap-server", broker.bootstrap)  # fmt: skip
    return LiveRun(
        broker,
        work,
        republished,
        kafka,
        high,
        stable,
        open_to_the_end,
        api,
        publisher_config,
        live.now_ms(),
    )


@pytest.fixture(scope="module")
def run(
    kafka_broker: Broker, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> LiveRun:
    work_dir = tmp_path_factory.mktemp("live")
    work = live.prepare(kafka_broker)
    republished = unique("live-records")
    kafka_broker.create_topic(republished, REPUBLISH_PARTITIONS)
    result = _run(kafka_broker, work, republished, work_dir / "archive", work_dir / "lake-raw")
    result.lakes["raw"] = work_dir / "lake-raw"
    result.lakes["republished"] = work_dir / "lake-republished"
    _cli("spark", "compact", "--source", "kafka", "--lake", str(result.lakes["republished"]),
         "--bootstrap-server", kafka_broker.bootstrap,
         "--option", f"topic={republished}")  # fmt: skip
    result.lakes["archive"] = work_dir / "lake-archive"
    _cli("spark", "compact", "--input", str(work_dir / "archive"),
         "--lake", str(result.lakes["archive"]))  # fmt: skip
    return result


def test_the_run_holds_every_kind_of_commit(run: LiveRun) -> None:
    """Guards the row: Kafka's own answers show the open transaction still open while the
    exporter read, and count neither it nor the aborted one (else excluding them proves
    nothing); the deleted group has no offsets; the members' groups have all they read."""
    work, kafka = run.work, run.kafka
    open_partition = partition_for(work.group("txn-open"), live.OFFSETS_PARTITIONS)
    assert run.stable[open_partition] < run.high[open_partition]
    assert run.open_to_the_end
    for kind, plain in work.plain_before_transaction.items():
        assert list(kafka[work.group(kind)].values()) == [plain], kind
    assert kafka[work.group("txn-committed")] == {(work.topic, 0): 11}
    assert work.group("deleted") not in kafka
    everything = {(work.topic, p): live.RECORDS_PER_PARTITION for p in range(live.DATA_PARTITIONS)}
    assert kafka[work.group("classic")] == everything
    assert kafka[work.group("consumer")] == everything


@pytest.mark.parametrize("path", ["republished", "raw"])
def test_offsets_at_the_end_are_kafkas_answers(
    spark: SparkSession, run: LiveRun, path: str
) -> None:
    """What `spark offsets-at` computes, for every group in one query (as the matrix's other
    rows), on the lake compacted from the republished topic, and on the lake compacted from
    the raw `__consumer_offsets` (real transaction markers, aborted records filtered by the
    broker)."""
    lake = run.lakes[path]
    commits = spark.read.parquet(str(lake / ls.COMMITS))
    events = spark.read.parquet(str(lake / ls.GROUP_EVENTS))
    ours = set(run.work.groups.values())
    got: Offsets = {}
    for row in committed_at(commits, events, run.end_ms).collect():
        if row["group"] in ours:
            got.setdefault(row["group"], {})[(row["topic"], row["partition"])] = row["offset"]
    assert got == run.kafka


@pytest.mark.parametrize("kind", ["txn-aborted", "txn-open", "deleted"])
def test_the_offsets_at_command_gives_kafkas_answer(run: LiveRun, kind: str) -> None:
    """The command itself, for the groups whose last commits Kafka does not count."""
    group = run.work.group(kind)
    text = _cli("spark", "offsets-at", "--input", str(run.lakes["republished"]),
                "--group", group, "--time", str(run.end_ms), "--format", "json")  # fmt: skip
    got = {(r["topic"], r["partition"]): r["offset"] for r in json.loads(text)["offsets"]}
    assert got == run.kafka.get(group, {})


def test_the_exporter_api_gives_kafkas_committed_offsets(run: LiveRun) -> None:
    assert run.api == run.kafka


def test_the_publisher_is_idempotent_with_acks_all(run: LiveRun) -> None:
    """The producer config it used, and what the broker's log says: every batch of the
    republished topic carries a producer id (idempotence), as Kafka's dump-log prints it."""
    assert run.publisher_config["enable.idempotence"] is True
    assert run.publisher_config["acks"] == "all"
    files = sorted(
        str(segment)
        for p in range(REPUBLISH_PARTITIONS)
        for segment in (run.broker.data_dir / f"{run.republished}-{p}").glob("*.log")
    )
    dumped = live_tool_dump(files)
    producer_ids = re.findall(r"producerId: (-?\d+)", dumped)
    assert producer_ids and all(int(pid) >= 0 for pid in producer_ids), dumped[:2000]


def live_tool_dump(files: list[str]) -> str:
    from tests.real_broker import run_tool

    return run_tool("kafka-dump-log.sh", "--files", ",".join(files))


def _rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(row) for row in frame.collect()),
        key=lambda row: tuple((v is None, str(v)) for v in row),
    )


@pytest.mark.parametrize("table", [ls.COMMITS, ls.GROUP_EVENTS, ls.LOG_ENDS])
def test_the_republished_lake_is_the_archive_lake(
    spark: SparkSession, run: LiveRun, table: str
) -> None:
    """The same records through the topic and through the archive files: the same rows, with
    the real `__consumer_offsets` positions."""
    republished = spark.read.parquet(str(run.lakes["republished"] / table))
    archive = spark.read.parquet(str(run.lakes["archive"] / table))
    assert republished.count() > 0
    assert _rows(republished) == _rows(archive.select(*republished.columns))


def test_stream_over_the_republished_topic_finds_the_stall(
    spark: SparkSession, run: LiveRun, tmp_path: Path
) -> None:
    """`spark stream`'s query over the real republished topic: the stuck group stalls and no
    other group of the run does (as over the archive, test_streaming.py); what it stored is
    the lake `compact` made of the same topic, and its offsets are the topic's log ends."""
    status = StatusConfig(window_ms=WINDOW_MS)
    analytics = AnalyticsSettings(
        status=status,
        tick_ms=TICK_MS,
        window_sizes_ms=(WINDOW_MS,),
        rate_window_ms=WINDOW_MS,
        rebalance_grace_ms=WINDOW_MS,
    )
    checkpoint, alerts_dir = tmp_path / "checkpoint", tmp_path / "alerts"
    # the run's shared broker holds every other test's history too: the detection looks at
    # the last minutes only (the stall is seconds before the end), not at all of it
    settings = StreamSettings(
        str(checkpoint), str(alerts_dir), history_ms=HISTORY_MS, analytics=analytics
    )
    options = {
        "kafka.bootstrap.servers": run.broker.bootstrap,
        "topic": run.republished,
        "startingOffsets": "earliest",
    }
    query = start_stream(kafka_stream(spark, options), settings, AlertSinks(), available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    alerts = [
        json.loads(line)
        for path in sorted(alerts_dir.glob("batch-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    ours = set(run.work.groups.values())
    stalled = {a["group"] for a in alerts if a["name"] == "OffsetwatchConsumerStalled"}
    assert stalled & ours == {run.work.group("stuck")}, alerts
    state = checkpoint / "offsetwatch" / ls.COMMITS
    stored = spark.read.parquet(*map(str, state.glob("batch=*")))
    lake = spark.read.parquet(str(run.lakes["republished"] / ls.COMMITS))
    assert _rows(stored) == _rows(lake.select(*stored.columns))
    last = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1]
    recorded = json.loads(last.read_text().splitlines()[-1])[run.republished]
    ends = run.broker.log_ends(run.republished, REPUBLISH_PARTITIONS)
    assert {int(p): o for p, o in recorded.items()} == ends
    assert OFFSETS_TOPIC not in recorded
