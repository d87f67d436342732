"""Every path from a real broker's bytes to an answer, checked against the broker's own answer.

For each conformance run (../shared/conformance/kafka-4.0.0/runs/*: what a real Kafka 4.0.0
broker wrote to `__consumer_offsets`, and `groups-final.json`, its OffsetFetch answers at the
end of the run), the run's history goes into the Spark lake by every path offsetwatch has:

* `segments`: the segment files, through the segments source;
* `decode-json` / `decode-avro`: `offsetwatch decode --input segments` to canonical JSON lines
  and to an Avro container file, then the archive source;
* `exporter-jsonl` / `exporter-avro`: the records replayed into a mock cluster's
  `__consumer_offsets` (same partitions, order and timestamps), read by the running exporter,
  which writes its archive (JSON lines, then Avro).

The topic the exporter republishes to, through the kafka source, is the live row
(test_path_matrix_live.py): real clients' commits on a real broker, republished to a real
topic, equal to Kafka's OffsetFetch and to the archive path on the same records.

For every path, the offsets `spark offsets-at` gives at the end of the run equal Kafka's
answers for every group: aborted and still-open transactional commits excluded, offset
deletions, group deletions and expiry applied. The exporter's API and `offsetwatch groups
describe` give Kafka's committed offsets too, and every path yields the same `commits` and
`group_events` tables (`test_the_lake_is_the_same_whatever_the_path`).

What a path cannot carry, and how the test treats it:

* The exporter reads `__consumer_offsets` read_committed; a real broker then never hands it
  records of aborted or open transactions. The mock broker does not filter them (its Fetch
  reports no aborted transactions), so the replay leaves those records out, which is what a
  real broker would deliver. The exporter paths thus never see them: their exclusion is
  proven by the three segment-file paths, which see every record with its outcome.
* The mock numbers each partition densely and writes no transaction markers, so the exporter
  paths' `source_offset` differs from the broker's; and they know no outcomes (`txn` is
  "none" for every commit). Both columns are left out where the lakes are compared.
* The mock keeps no group coordinator state from the records: OffsetFetch on it answers only
  what is committed to it. `groups describe` is therefore checked on groups-final.json's
  offsets committed to the mock through the Admin API, against the log ends and lag Kafka
  reported: describe's fetch, ListOffsets and lag, not the coordinator.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from offsetwatch import cli
from offsetwatch.decoder import contract
from offsetwatch.exporter.service import ExporterService
from offsetwatch.mock_cluster import MockCluster
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.compact import compact
from offsetwatch.spark_jobs.offsets_at import committed_at
from tests.exporter.daemon_helpers import (
    ConformanceRun,
    api_group,
    create_data_topics,
    data_topic_log_ends,
    exporter_config,
    load_run,
    running_exporter,
    transaction_outcomes,
    wait_for,
    wait_ready_with_log_ends,
)
from tests.kafka_fixtures import OFFSETS_TOPIC, fast_producer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

RUNS: Final = ("main", "codec-gzip", "codec-snappy", "codec-lz4", "codec-zstd", "expiry")
SEGMENT_PATHS: Final = ("segments", "decode-json", "decode-avro")
EXPORTER_PATHS: Final = ("exporter-jsonl", "exporter-avro")
PATHS: Final = (*SEGMENT_PATHS, *EXPORTER_PATHS)
#: columns of the lake only the segment-file paths know (see the module docs)
SEGMENT_ONLY_COLUMNS: Final = {
    ls.COMMITS: ("txn", "source_offset"),
    ls.GROUP_EVENTS: ("source_offset",),
}

Offsets = dict[str, dict[tuple[str, int], int]]


#: run k's partition p of `__consumer_offsets` is partition k * SPREAD + p of the combined
#: history: every run goes through each path in one pass (one compaction per path), and no
#: two runs' records share a (partition, offset), the lake's identity of a record
SPREAD: Final = 10

Offsets = dict[str, dict[tuple[str, int], int]]


@dataclass(slots=True)
class Matrix:
    """The runs, and what each path and tool made of their combined history."""

    runs: dict[str, ConformanceRun]
    lakes: dict[str, Path] = field(default_factory=dict)
    #: the decode JSON lines (the reported example reads them directly)
    decoded_json: Path | None = None
    #: the exporter's API: committed offset per group and partition
    api: Offsets = field(default_factory=dict)
    #: `groups describe --format json` per run: (committed, log end, lag) per partition
    describe: dict[str, dict[str, dict[tuple[str, int], tuple[int, int, int]]]] = field(
        default_factory=dict
    )
    exported: int = 0
    replayed: int = 0

    def end_ms(self, run: str) -> int:
        return max(r["timestamp"] for r in self.runs[run].records)


def _kafka_offsets(run: ConformanceRun) -> Offsets:
    """groups-final.json: what OffsetFetch answered, for groups that have offsets."""
    out: Offsets = {}
    for group, info in run.groups_final.items():
        rows = {
            (o["topic"], o["partition"]): o["committed_offset"] for o in info.get("offsets") or ()
        }
        if rows:
            out[group] = rows
    return out


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(argv))
    assert code in (0, None), (argv, code)
    return out.getvalue()


def _replay_with_timestamps(bootstrap: str, runs: list[ConformanceRun]) -> int:
    """The records a read_committed reader of the real broker received, into their spread
    partitions in the same order, with their CreateTime (offsets-at works on record times)."""
    producer = fast_producer(bootstrap)
    producer.list_topics(OFFSETS_TOPIC, timeout=10)
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    count = 0
    for index, run in enumerate(runs):
        outcomes = transaction_outcomes(run.batches)
        for record in sorted(run.records, key=lambda r: (r["partition"], r["offset"])):
            if outcomes.get((record["partition"], record["offset"]), "COMMIT") != "COMMIT":
                continue
            value = record["value"]
            producer.produce(
                OFFSETS_TOPIC,
                key=bytes.fromhex(record["key"]),
                value=None if value is None else bytes.fromhex(value),
                partition=index * SPREAD + record["partition"],
                timestamp=record["timestamp"],
                on_delivery=delivered,
            )
            count += 1
    assert producer.flush(30) == 0 and not failures, failures[:3]
    return count


def _spread_segments(runs: list[ConformanceRun], target: Path) -> Path:
    """One log directory of every run's segment files, partitions spread (links, no copies)."""
    for index, run in enumerate(runs):
        for directory in sorted((run.directory / "segments").iterdir()):
            partition = int(directory.name.rsplit("-", 1)[1])
            spread = target / f"{OFFSETS_TOPIC}-{index * SPREAD + partition}"
            spread.mkdir(parents=True)
            for segment in directory.iterdir():
                (spread / segment.name).symlink_to(segment)
    return target


def _run_exporter(
    service_check: Any, bootstrap: str, replayed: int, **settings: Any
) -> ExporterService:
    config = exporter_config(bootstrap, **settings)
    with running_exporter(config) as service:
        wait_for(
            lambda: service.exporter.stats.total_records >= replayed,
            f"the exporter to read all {replayed} records",
        )
        wait_ready_with_log_ends(service)
        service_check(service)
    return service


def _api_offsets(service: ExporterService, groups: list[str]) -> Offsets:
    out: Offsets = {}
    for group in groups:
        answer = api_group(service, group)
        if answer.status == 404:
            continue
        assert answer.status == 200, (group, answer)
        rows = {
            (r["topic"], r["partition"]): r["committed"]
            for r in answer.json()["partitions"]
            if r["committed"] is not None
        }
        if rows:
            out[group] = rows
    return out


def _commit_kafka_answers(bootstrap: str, offsets: Offsets) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    requests = [
        ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(rows.items())]
        )
        for group, rows in offsets.items()
    ]
    for request in requests:  # the Admin API takes one group per call
        for future in admin.alter_consumer_group_offsets([request]).values():
            future.result(30)


def _describe(bootstrap: str, groups: list[str]) -> dict[str, Any]:
    text = _cli("groups", "describe", *groups, "--format", "json", "--bootstrap-server", bootstrap)
    described: dict[str, Any] = {}
    for report in json.loads(text):
        for row in report["partitions"]:
            described.setdefault(report["group"], {})[(row["topic"], row["partition"])] = (
                row["current_offset"],
                row["log_end_offset"],
                row["lag"],
            )
    return described


def _describe_run(run: ConformanceRun) -> dict[str, Any]:
    """`groups describe` on a mock holding the run's data topics and Kafka's answers."""
    answers = _kafka_offsets(run)
    with MockCluster() as mock:
        create_data_topics(mock, data_topic_log_ends(run.groups_final), mock.bootstrap_servers)
        _commit_kafka_answers(mock.bootstrap_servers, answers)
        return _describe(mock.bootstrap_servers, sorted(answers))


def _most_log_ends(runs: list[ConformanceRun]) -> dict[str, list[int]]:
    """Data topics for the combined replay: each partition as long as any run had it (the
    exporter needs every log end to be ready; the matrix checks committed offsets)."""
    topics: dict[str, list[int]] = {}
    for run in runs:
        for topic, counts in data_topic_log_ends(run.groups_final).items():
            mine = topics.setdefault(topic, [])
            mine.extend([0] * (len(counts) - len(mine)))
            for partition, count in enumerate(counts):
                mine[partition] = max(mine[partition], count)
    return topics


def _through_every_path(spark: SparkSession, matrix: Matrix, work: Path) -> None:
    runs = list(matrix.runs.values())
    segments = _spread_segments(runs, work / "segments")
    decoded_json = work / "decode-json"
    decoded_avro = work / "decode-avro"
    decoded_json.mkdir()
    decoded_avro.mkdir()
    matrix.decoded_json = decoded_json / "records.jsonl"
    # the reported example of issue 13: decode the segments to JSON, ask offsets-at
    _cli("decode", "--input", "segments", str(segments), "--format", "json",
         "-o", str(matrix.decoded_json))  # fmt: skip
    _cli("decode", "--input", "segments", str(segments), "--format", "avro",
         "-o", str(decoded_avro / "records.avro"))  # fmt: skip
    inputs: dict[str, tuple[str, Path | None, dict[str, str]]] = {
        "segments": ("segments", segments, {}),
        "decode-json": ("archive", decoded_json, {}),
        "decode-avro": ("archive", decoded_avro, {}),
        "exporter-jsonl": ("archive", work / "exporter-jsonl", {}),
        "exporter-avro": ("archive", work / "exporter-avro", {}),
    }
    groups = sorted(g for run in runs for g in run.groups_final)
    with MockCluster() as mock:
        bootstrap = mock.bootstrap_servers
        mock.create_topic(OFFSETS_TOPIC, SPREAD * len(runs))
        matrix.replayed = _replay_with_timestamps(bootstrap, runs)
        create_data_topics(mock, _most_log_ends(runs), bootstrap)

        def on_first(service: ExporterService) -> None:
            matrix.api = _api_offsets(service, groups)
            matrix.exported = service.exporter.stats.total_records

        _run_exporter(
            on_first,
            bootstrap,
            matrix.replayed,
            archive_dir=work / "exporter-jsonl",
            archive_format="jsonl",
        )
        _run_exporter(
            lambda _service: None,
            bootstrap,
            matrix.replayed,
            archive_dir=work / "exporter-avro",
            archive_format="avro",
        )
        for path, (source, where, options) in inputs.items():
            lake = work / "lakes" / path
            compact(spark, source, lake, where, options, progress=lambda _line: None)
            matrix.lakes[path] = lake
    for run in runs:
        matrix.describe[run.name] = _describe_run(run)


@pytest.fixture(scope="module")
def matrix(
    spark: SparkSession, conformance_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Matrix:
    built = Matrix({name: load_run(conformance_dir, name) for name in RUNS})
    _through_every_path(spark, built, tmp_path_factory.mktemp("paths"))
    return built


def _run_groups(run: ConformanceRun) -> set[str]:
    """Every group the run mentions: Kafka's final answers and the records' groups."""
    found = set(run.groups_final)
    for record in run.records:
        key = (record.get("expected") or {}).get("key") or {}
        data = key.get("data") or {}
        group = data.get("group") or data.get("groupId")
        if isinstance(group, str):
            found.add(group)
    return found


def _lake_table(spark: SparkSession, lake: Path, table: str) -> DataFrame:
    return spark.read.parquet(str(lake / table))


def _offsets_at_end(spark: SparkSession, lake: Path, end_ms: int) -> Offsets:
    commits = _lake_table(spark, lake, ls.COMMITS)
    events = _lake_table(spark, lake, ls.GROUP_EVENTS)
    out: Offsets = {}
    for row in committed_at(commits, events, end_ms).collect():
        out.setdefault(row["group"], {})[(row["topic"], row["partition"])] = row["offset"]
    return out


def _kafka_describe(run: ConformanceRun) -> dict[str, dict[tuple[str, int], tuple[int, int, int]]]:
    return {
        group: {
            (o["topic"], o["partition"]): (o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in info["offsets"]
        }
        for group, info in run.groups_final.items()
        if info.get("offsets")
    }


def _only(offsets: Offsets, groups: set[str]) -> Offsets:
    return {g: rows for g, rows in offsets.items() if g in groups}


def _differences(got: Offsets, want: Offsets) -> dict[str, Any]:
    return {g: (got.get(g), want.get(g)) for g in set(got) | set(want) if got.get(g) != want.get(g)}


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("path", PATHS)
def test_offsets_at_the_end_are_kafkas_answers(
    spark: SparkSession, matrix: Matrix, path: str, run: str
) -> None:
    at_end = _offsets_at_end(spark, matrix.lakes[path], matrix.end_ms(run))
    got = _only(at_end, _run_groups(matrix.runs[run]))
    wrong = _differences(got, _kafka_offsets(matrix.runs[run]))
    assert not wrong, f"{path}: (offsets-at, Kafka) differ for {sorted(wrong)}: {wrong}"


def test_the_matrix_sees_every_record_and_real_transactions(matrix: Matrix) -> None:
    """Guards the matrix: the replay holds every committed record, and the captures hold
    aborted and open transactions (else excluding them would prove nothing)."""
    outcomes = {run: transaction_outcomes(matrix.runs[run].batches).values() for run in matrix.runs}
    hidden = sum(1 for values in outcomes.values() for o in values if o != "COMMIT")
    assert matrix.replayed == sum(len(r.records) for r in matrix.runs.values()) - hidden
    assert matrix.exported == matrix.replayed
    assert list(outcomes["main"]).count("ABORT") >= 1
    assert list(outcomes["main"]).count("OPEN") >= 1


def test_offsets_at_on_decode_json_gives_kafkas_answer(matrix: Matrix) -> None:
    """The reported example: `decode --format json`, then `spark offsets-at` on the file, at
    the end of the run, for every group that committed in transactions (the ones it got
    wrong), in every run."""
    assert matrix.decoded_json is not None
    transactional = set()
    for line in matrix.decoded_json.read_text().splitlines():
        record = json.loads(line)
        if record[contract.TRANSACTION] is not None and record[contract.GROUP]:
            transactional.add(record[contract.GROUP])
    assert len(transactional) >= 5
    for name, run in matrix.runs.items():
        want = _kafka_offsets(run)
        for group in sorted(transactional & _run_groups(run)):
            text = _cli("spark", "offsets-at", "--input", str(matrix.decoded_json.parent),
                        "--group", group, "--time", str(matrix.end_ms(name)),
                        "--format", "json")  # fmt: skip
            answer = json.loads(text)
            got = {(r["topic"], r["partition"]): r["offset"] for r in answer["offsets"]}
            assert got == want.get(group, {}), (name, group)


@pytest.mark.parametrize("run", RUNS)
def test_the_exporter_api_gives_kafkas_committed_offsets(matrix: Matrix, run: str) -> None:
    got = _only(matrix.api, _run_groups(matrix.runs[run]))
    assert not _differences(got, _kafka_offsets(matrix.runs[run]))


@pytest.mark.parametrize("run", RUNS)
def test_groups_describe_gives_kafkas_offsets_log_ends_and_lag(matrix: Matrix, run: str) -> None:
    assert matrix.describe[run] == _kafka_describe(matrix.runs[run])


def _rows(frame: DataFrame, drop: tuple[str, ...]) -> list[tuple[Any, ...]]:
    kept = [c for c in frame.columns if c not in drop]
    return sorted(
        (tuple(row) for row in frame.select(*kept).collect()),
        key=lambda row: tuple((v is None, str(v)) for v in row),
    )


@pytest.mark.parametrize("table", [ls.COMMITS, ls.GROUP_EVENTS])
def test_the_lake_is_the_same_whatever_the_path(
    spark: SparkSession, matrix: Matrix, table: str
) -> None:
    from pyspark.sql import functions as F

    lakes = matrix.lakes
    reference = _lake_table(spark, lakes["segments"], table)
    assert reference.count() > 0
    for path in SEGMENT_PATHS[1:]:
        assert _rows(_lake_table(spark, lakes[path], table), ()) == _rows(reference, ()), path
    # what a read_committed reader receives: no records of aborted or open transactions
    if table == ls.COMMITS:
        reference = reference.where(~F.col("txn").isin(*contract.NOT_COUNTED))
    drop = SEGMENT_ONLY_COLUMNS[table]
    for path in EXPORTER_PATHS:
        frame = _lake_table(spark, lakes[path], table)
        if table == ls.COMMITS:
            assert {r["txn"] for r in frame.select("txn").distinct().collect()} <= {"none"}
        assert _rows(frame, drop) == _rows(reference, drop), path
