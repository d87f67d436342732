"""`spark compact` of the republished topic and of the archive, beside plain Spark reads of
the same topic and files (issue 30, item 6: Spark reads what it is given at the same pace).

    .venv/bin/python benchmarks/spark_lake_pace.py --records 300000        # a few minutes
    .venv/bin/python benchmarks/spark_lake_pace.py                          # 10,000,000 records
    .venv/bin/python benchmarks/spark_lake_pace.py --archives jsonl,gzip,avro --readers python

Inputs (made first, not timed): `--records` `__consumer_offsets` records (offset commits of 40
groups in 40 `__consumer_offsets` partitions, a classic group-metadata record every 1,000;
benchmarks/offsets_workload.py's shape, encoded by offsetwatch.record_factory), turned into
the exporter's outputs by the exporter's own code, as `offsetwatch export` does on its C fast
path: `encode_commits` (exporter/state/_ingest_speedups.c: each commit's canonical JSON and
identity key; the group records `Canonical.to_json` and `identity_key` on the Python path),
then

* `RecordPublisher.publish_encoded` / `publish` (exporter/sinks/publisher.py): the same value
  bytes, key and three source headers the exporter publishes, with its producer settings
  (lz4, idempotent, acks=all, linger 50 ms), to a topic of `--partitions` (12) partitions on a
  real broker started for the run (benchmarks/real_broker.py's `own_broker`: the tests'
  default release, or OFFSETWATCH_BROKER_VERSION);
* `ArchiveWriter.write_encoded` / `write` (exporter/sinks/archive.py): an archive directory
  per `--archives` entry (jsonl plain by default; gzip: JSON lines gzipped; avro: deflate
  blocks, the bodies from `EncodedBatch.avro_items` as the exporter builds them).

Then, in one Spark session as `offsetwatch spark compact` builds it (local[2], shuffle
partitions 2 x CPUs, Spark's Kafka connector jars on the classpath), warmed first by the same
actions over a small topic and archive, each as its own action, side by side:

* `compact --source kafka` (format json) of the topic into a fresh lake, per `--readers`
  entry (`--kafka-reader python`, `connector`): `offsetwatch.spark_jobs.compact.compact`, the
  function the command calls;
* plain read of the topic with Spark's own connector (`format("kafka")`, includeHeaders),
  every column as it comes written as Parquet: no decoding (the ceiling of the kafka rows);
* `compact --source archive` of each archive directory into a fresh lake;
* plain read of the same files written as Parquet (`spark.read.text` of JSON lines, plain or
  gzip; `binaryFile` of Avro files), no decoding (the ceiling of the archive rows).

Each figure: wall seconds of the action, records/s, and records per CPU second of the Spark
processes (the JVM and everything under it, the Python workers; and this driver process;
per process between two /proc snapshots, benchmarks/proc_cpu.py's `cpu_between`), beside
its plain-read ceiling and the ratio. One run of each (10M records do not fit a best-of-3
in the time a run should take); the load average is printed before and after. Each lake's
`commits` table is counted afterwards (not timed) and must hold one row per commit written,
or the run stops: the figures measure a correct run. Nothing is asserted about speed; tests
never time anything. The broker, the Spark JVM and its workers are stopped at the end, also
on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import proc_cpu  # noqa: E402
from benchmarks import real_broker as rb  # noqa: E402
from offsetwatch.decoder.canonical import Canonical, identity_key  # noqa: E402
from offsetwatch.decoder.codec import Codec  # noqa: E402
from offsetwatch.exporter.sinks.archive import ArchiveWriter  # noqa: E402
from offsetwatch.exporter.sinks.publisher import RecordPublisher  # noqa: E402
from offsetwatch.exporter.state.ingest import (  # noqa: E402
    AvroForm,
    Encoded,
    EncodedBatch,
    RawMessage,
    ingest_accelerator,
)
from offsetwatch.record_factory import Member, RecordFactory  # noqa: E402
from tests.real_broker import Broker, missing_reason, test_kafka  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from offsetwatch.spark_jobs.compact import CompactResult

TOPIC: Final = "offsetwatch.records"
WARM_TOPIC: Final = "offsetwatch.records.warm"
GROUPS: Final = 40
#: a classic group-metadata record every this many records, the rest offset commits
GROUP_EVERY: Final = 1000
#: messages per encode/publish/archive batch (the exporter's fetch batches are of this size)
BATCH: Final = 10_000
WARM_RECORDS: Final = 20_000
NOW_MS: Final = 1_780_000_000_000
ARCHIVES: Final = ("jsonl", "gzip", "avro")
READERS: Final = ("python", "connector")


# -- inputs -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Message:
    """One `__consumer_offsets` record as a fetched message offers it (RawMessage)."""

    _partition: int
    _offset: int
    _timestamp: int
    _key: bytes
    _value: bytes | None

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp  # TIMESTAMP_CREATE_TIME

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def workload(records: int) -> Iterator[list[RawMessage]]:
    """`records` messages in batches: group g's records in `__consumer_offsets` partition g
    at consecutive offsets (one coordinator partition per group, as a broker places them)."""
    factory = RecordFactory()
    members = [Member(f"member-{i}", "client", "/10.0.0.1", (("orders", (i,)),)) for i in range(3)]
    next_offset = [0] * GROUPS
    batch: list[RawMessage] = []
    for n in range(records):
        g = n % GROUPS
        group, ts = f"group-{g}", NOW_MS + n
        if n % GROUP_EVERY == 0:
            key, value = factory.classic_group(group, n // GROUP_EVERY, members, ts)
        else:
            key, value = factory.commit(group, "orders", n % 12, n, ts)
        batch.append(Message(g, next_offset[g], ts, key, value))
        next_offset[g] += 1
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def commits_of(records: int) -> int:
    return records - (records + GROUP_EVERY - 1) // GROUP_EVERY


@dataclass(slots=True)
class Outputs:
    """The exporter's two sinks, fed as its C fast path feeds them (module doc)."""

    publisher: RecordPublisher
    archives: list[ArchiveWriter]
    codec: Codec
    canonical: Canonical
    encode: Callable[[list[RawMessage], int, list[Encoded]], int] | None
    #: each Avro archive's AvroForm, by id()
    forms: dict[int, AvroForm] = field(default_factory=dict)

    def take(self, messages: list[RawMessage]) -> None:
        n, i = len(messages), 0
        while i < n:
            end = i
            items: list[Encoded] = []
            if self.encode is not None:
                end = self.encode(messages, i, items)
            if end > i:
                chunk = messages[i:end]
                self.publisher.publish_encoded(items)
                batch = EncodedBatch(items, chunk, self.codec)
                for archive in self.archives:
                    if archive.format == "avro":
                        archive.write_encoded(batch.avro_items(self._avro_form(archive)))
                    else:
                        archive.write_encoded(items)
                i = end
                continue
            self._one(messages[i])
            i += 1
        self.publisher.poll(0)

    def _one(self, message: RawMessage) -> None:
        """The Python path of one record (what the exporter does with a record the C
        encoder does not cover: here the classic group records)."""
        partition, offset = message.partition() or 0, message.offset() or 0
        record = self.codec.decode(
            message.key(), message.value(), partition, offset, message.timestamp()[1]
        )
        value = self.canonical.to_json(record).encode("utf-8")
        self.publisher.publish(partition, offset, identity_key(record), value)
        for archive in self.archives:
            archive.write(self.canonical.to_dict(record), (partition, offset))

    def _avro_form(self, archive: ArchiveWriter) -> AvroForm:
        """record_sinks.RecordSinks' form of an Avro archive (no framing header)."""
        from offsetwatch.decoder.avro import commit_branches

        form = self.forms.get(id(archive))
        if form is None:
            avro = archive._avro
            canonical = self.canonical
            form = self.forms[id(archive)] = AvroForm(
                b"",
                commit_branches(avro.schema),
                lambda record: bytes(avro.encode(canonical.to_dict(record))),
            )
        return form


def make_inputs(
    bootstrap: str, topic: str, archive_dirs: dict[str, Path], records: int
) -> tuple[float, str]:
    """Publish and archive `records` records; (seconds, which encoder path)."""
    started = time.perf_counter()
    module, why = ingest_accelerator()
    encode = None if module is None else module.encode_commits
    publisher = RecordPublisher(
        {"bootstrap.servers": bootstrap, "statistics.interval.ms": 0, "log_level": 3},
        output_topic=topic,
    )
    archives = [
        ArchiveWriter(directory, "avro" if kind == "avro" else "jsonl", gzip=kind == "gzip")
        for kind, directory in archive_dirs.items()
    ]
    outputs = Outputs(publisher, archives, Codec(), Canonical(), encode)
    try:
        for batch in workload(records):
            outputs.take(batch)
    finally:
        for archive in archives:
            archive.close()
        left = publisher.close(300)
    stats = publisher.stats()
    if left or stats.delivered != records or publisher.delivery_failures:
        raise RuntimeError(
            f"publish: {stats.delivered} of {records} delivered, {left} left, "
            f"{publisher.delivery_failures} failed"
        )
    path = "C encoder (encode_commits)" if encode is not None else f"Python path ({why})"
    return time.perf_counter() - started, path


# -- measuring ----------------------------------------------------------------------------------


def spark_processes() -> proc_cpu.Snapshot:
    """This driver process (its own ticks only: what it reaped is earlier tooling, the
    broker scripts) and the Spark JVM with everything under it (the Python workers). The
    broker is no descendant of either and is left out."""
    table = proc_cpu.proc_table()
    me = os.getpid()
    processes = {me: replace(table[me], reaped=0)} if me in table else {}
    processes.update(proc_cpu.tree(table, proc_cpu.spark_jvm_pid()))
    return processes


@dataclass(slots=True)
class Row:
    name: str
    seconds: float
    cpu_s: float
    #: the name of this row's plain-read ceiling (None: the row is a ceiling)
    ceiling: str | None = None
    note: str = ""


def measured(name: str, action: Callable[[], str], ceiling: str | None = None) -> Row:
    before, started = spark_processes(), time.perf_counter()
    note = action()
    seconds = time.perf_counter() - started
    row = Row(name, seconds, proc_cpu.cpu_between(before, spark_processes()), ceiling, note)
    print(f"  {name}: {row.seconds:.1f} s, {row.cpu_s:.1f} CPU s {note} ({rb.load()})", flush=True)
    return row


def kafka_options(bootstrap: str, topic: str, reader: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "format": "json",
        "reader": reader,
    }


def compact_kafka(
    spark: SparkSession, bootstrap: str, topic: str, reader: str, lake: Path, expect: int
) -> str:
    from offsetwatch.spark_jobs.compact import compact

    result = compact(
        spark, "kafka", lake, options=kafka_options(bootstrap, topic, reader), progress=_quiet
    )
    return _check(result, expect)


def compact_archive(spark: SparkSession, directory: Path, lake: Path, expect: int) -> str:
    from offsetwatch.spark_jobs.compact import compact

    result = compact(spark, "archive", lake, directory, progress=_quiet)
    return _check(result, expect)


def _quiet(_line: str) -> None:
    pass


def _check(result: CompactResult, expect: int) -> str:
    """The run's commit rows must be the commits written, with nothing quarantined; the
    note says the rows and the seconds of each stage (where the time goes)."""
    commits = result.rows.get("commits", 0)
    if commits != expect or result.quarantined:
        raise RuntimeError(
            f"compact: {commits:,} commit rows of {expect:,}; bad: {result.quarantined}"
        )
    stages = ", ".join(f"{name} {seconds:.1f}" for name, seconds in result.stages.items())
    return f"(commits +{commits:,}, group_events +{result.rows.get('group_events', 0):,}; {stages})"


def plain_kafka(spark: SparkSession, bootstrap: str, topic: str, target: Path) -> str:
    """The topic through Spark's own connector, every column as it comes, to Parquet."""
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )
    frame.write.mode("overwrite").parquet(str(target))
    return ""


def plain_files(spark: SparkSession, kind: str, directory: Path, target: Path) -> str:
    """The archive's files as they are (lines of text; whole Avro files), to Parquet."""
    reader = spark.read.option("recursiveFileLookup", "true")
    if kind == "avro":
        frame = reader.format("binaryFile").load(str(directory))
    else:
        frame = reader.text(str(directory))
    frame.write.mode("overwrite").parquet(str(target))
    return ""


def lake_commits(spark: SparkSession, lake: Path) -> int:
    return int(spark.read.parquet(str(lake / "commits")).count())


def parquet_rows(spark: SparkSession, target: Path) -> int:
    return int(spark.read.parquet(str(target)).count())


# -- the run ------------------------------------------------------------------------------------


def session(connector_jars: str | None) -> SparkSession:
    """The session `offsetwatch spark compact --master local[2]` builds (settings_from_args:
    shuffle partitions 2 x CPUs in local mode; the connector's jars for --kafka-reader
    connector), which the plain reads share."""
    from offsetwatch.spark_jobs.session import SparkSettings, get_session

    conf = {} if connector_jars is None else {"spark.jars": connector_jars}
    return get_session(
        SparkSettings(
            master="local[2]",
            app_name="offsetwatch-compact",
            conf=conf,
            shuffle_partitions=2 * (os.cpu_count() or 1),
        )
    )


def bench(args: argparse.Namespace, root: Path, broker: Broker) -> list[Row]:
    from offsetwatch.spark_jobs.connector_jars import ConnectorUnavailable, resolve

    records, kinds, readers = args.records, args.archives, list(args.readers)
    try:
        connector = resolve()
        jars: str | None = connector.spark_jars
        note = f" ({connector.note})" if connector.note else ""
        print(f"Spark's Kafka connector {connector.version}{note}")
    except ConnectorUnavailable as error:
        print(f"Spark's Kafka connector unavailable ({error}): no connector rows")
        jars = None
        readers = [r for r in readers if r != "connector"]
    rb.create_topics(broker, {TOPIC: args.partitions, WARM_TOPIC: args.partitions})
    warm_dirs = {kind: root / f"warm-archive-{kind}" for kind in kinds}
    dirs = {kind: root / f"archive-{kind}" for kind in kinds}
    make_inputs(broker.bootstrap, WARM_TOPIC, warm_dirs, WARM_RECORDS)
    print(f"making {records:,} records (not timed) ...", flush=True)
    seconds, path = make_inputs(broker.bootstrap, TOPIC, dirs, records)
    sizes = ", ".join(f"{kind} {_du(d) / 2**20:,.0f} MiB" for kind, d in dirs.items())
    print(
        f"  published to {TOPIC} ({args.partitions} partitions) and archived ({sizes}) in "
        f"{seconds:.0f} s through the exporter's {path}",
        flush=True,
    )
    spark = session(jars)
    try:
        return measure(spark, args, root, broker, readers, warm_dirs, dirs, jars is not None)
    finally:
        spark.stop()


def measure(
    spark: SparkSession,
    args: argparse.Namespace,
    root: Path,
    broker: Broker,
    readers: Sequence[str],
    warm_dirs: dict[str, Path],
    dirs: dict[str, Path],
    connector: bool,
) -> list[Row]:
    records, expect = args.records, commits_of(args.records)
    boot = broker.bootstrap
    lakes = iter(range(1_000))

    def fresh(what: str) -> Path:
        return root / f"{what}-{next(lakes)}"

    print("warming the session (the same actions over 20,000 records) ...", flush=True)
    warm_expect = commits_of(WARM_RECORDS)
    for reader in readers:
        compact_kafka(spark, boot, WARM_TOPIC, reader, fresh("lake"), warm_expect)
    if connector:
        plain_kafka(spark, boot, WARM_TOPIC, fresh("plain"))
    for kind, directory in warm_dirs.items():
        compact_archive(spark, directory, fresh("lake"), warm_expect)
        plain_files(spark, kind, directory, fresh("plain"))
    print(f"measuring ({rb.load()}):", flush=True)
    rows: list[Row] = []
    kafka_ceiling = "plain kafka read -> parquet" if connector else None
    for reader in readers:
        lake = fresh("lake")
        rows.append(
            measured(
                f"compact --source kafka --kafka-reader {reader}",
                partial(compact_kafka, spark, boot, TOPIC, reader, lake, expect),
                kafka_ceiling,
            )
        )
        print(f"    lake commits table: {lake_commits(spark, lake):,} rows", flush=True)
    if connector:
        target = fresh("plain")
        rows.append(
            measured(
                "plain kafka read -> parquet", partial(plain_kafka, spark, boot, TOPIC, target)
            )
        )
        got = parquet_rows(spark, target)
        print(f"    parquet rows: {got:,}", flush=True)
        if got != records:
            raise RuntimeError(f"plain kafka read: {got:,} rows of {records:,}")
    for kind, directory in dirs.items():
        lake = fresh("lake")
        ceiling = f"plain {kind} files read -> parquet"
        rows.append(
            measured(
                f"compact --source archive ({kind})",
                partial(compact_archive, spark, directory, lake, expect),
                ceiling,
            )
        )
        print(f"    lake commits table: {lake_commits(spark, lake):,} rows", flush=True)
        target = fresh("plain")
        rows.append(measured(ceiling, partial(plain_files, spark, kind, directory, target)))
        if kind != "avro":  # a binaryFile row is a whole file
            got = parquet_rows(spark, target)
            print(f"    parquet rows: {got:,}", flush=True)
            if got != records:
                raise RuntimeError(f"plain {kind} read: {got:,} rows of {records:,}")
    return rows


def _du(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def report(rows: Sequence[Row], records: int) -> None:
    by_name = {row.name: row for row in rows}
    print(
        f"\n{records:,} records, one run each, local[2]\n"
        f"{'':<46} {'seconds':>8} {'records/s':>11} {'rec/CPU s':>10} "
        f"{'x ceiling':>9} {'x ceil CPU':>10}"
    )
    for row in rows:
        rate, per_cpu = records / row.seconds, records / row.cpu_s
        ratio = ratio_cpu = ""
        ceiling = by_name.get(row.ceiling or "")
        if ceiling is not None:
            ratio = f"{rate / (records / ceiling.seconds):.2f}"
            ratio_cpu = f"{per_cpu / (records / ceiling.cpu_s):.2f}"
        print(
            f"{row.name:<46} {row.seconds:8.1f} {rate:11,.0f} {per_cpu:10,.0f} "
            f"{ratio:>9} {ratio_cpu:>10}"
        )


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in ARCHIVES]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"archives: a comma-separated subset of {ARCHIVES}")
    return kinds


def _readers(text: str) -> list[str]:
    readers = [r.strip() for r in text.split(",") if r.strip()]
    if any(r not in READERS for r in readers):
        raise argparse.ArgumentTypeError(f"readers: a comma-separated subset of {READERS}")
    return readers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=12, help="of the republished topic")
    parser.add_argument(
        "--archives", type=_kinds, default=["jsonl"], help="comma-separated: jsonl,gzip,avro"
    )
    parser.add_argument(
        "--readers", type=_readers, default=list(READERS), help="--kafka-reader values to run"
    )
    parser.add_argument("--workdir", type=Path, help="where the broker, inputs and lakes go")
    args = parser.parse_args(argv)
    reason = missing_reason()
    if reason is not None:
        print(f"spark_lake_pace: {reason}", file=sys.stderr)
        return 2

    def on_term(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    print(
        f"Spark lake pace on a real Kafka {test_kafka().version} broker ({rb.load()})", flush=True
    )
    with tempfile.TemporaryDirectory(prefix="offsetwatch-lake-pace-", dir=args.workdir) as tmp:
        root = Path(tmp)
        try:
            with rb.own_broker(root) as broker:
                rows = bench(args, root, broker)
        except KeyboardInterrupt:
            print("\ninterrupted: Spark and the broker stopped", file=sys.stderr)
            return 130
    report(rows, args.records)
    print(f"\ndone ({rb.load()})")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        raise SystemExit(main())
