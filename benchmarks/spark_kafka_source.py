"""The Spark `kafka` source on librdkafka's mock cluster beside a bare confluent-kafka consumer.

Both read the same `__consumer_offsets` topic of the same mock cluster in the same run:

* bare: one confluent-kafka consumer assigns every partition and consumes to the end, with no
  decoding at all (the ceiling of what the client delivers here);
* kafka source: `spark.read.format("offsetwatch").option("source", "kafka")` in local[2],
  every record decoded into the canonical schema and materialised (`noop` sink), one Spark
  task per Kafka partition; and the same through Structured Streaming (Trigger.AvailableNow).

Also the read path alone (`read_range`, what each task runs) in this process without Spark,
with its CPU time. Target (issue 6): the kafka source >= 0.5x the bare consume rate. Records
are offset commits written with the decoder's encoder (with a few group-metadata records, as a
real coordinator writes). Each figure is the best of REPEATS runs after a warm-up (the first
Spark job of a session pays for the Python workers and code generation). Wall-clock figures on
a shared 2-core machine: the CPU column shows when other work competed.

Run: `.venv/bin/python benchmarks/spark_kafka_source.py [records]`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import offsets_workload  # noqa: E402
from offsetwatch.core.topics import OFFSETS_TOPIC  # noqa: E402
from offsetwatch.mock_cluster import MockCluster  # noqa: E402
from offsetwatch.spark_jobs.schema import CanonicalRows  # noqa: E402
from offsetwatch.spark_jobs.session import SparkSettings, get_session  # noqa: E402
from offsetwatch.spark_jobs.sources.kafka_options import parse_options  # noqa: E402
from offsetwatch.spark_jobs.sources.kafka_ranges import OffsetRange  # noqa: E402
from offsetwatch.spark_jobs.sources.kafka_read import read_range  # noqa: E402

TOPIC = OFFSETS_TOPIC
PARTITIONS = 4
REPEATS = 3
#: the mock keeps ~180k records per partition: stay well below
DEFAULT_RECORDS = 400_000


def fill(bootstrap: str, records: int) -> None:
    config = {
        "linger.ms": 50,
        "batch.num.messages": 100_000,
        "batch.size": 8_000_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_000_000,
    }
    offsets_workload.fill(bootstrap, TOPIC, records, PARTITIONS, config)


def bare_consume(bootstrap: str, records: int) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    offsets_workload.bare_consume(bootstrap, TOPIC, PARTITIONS, records)
    return time.perf_counter() - start, time.process_time() - cpu


def read_path(bootstrap: str, records: int) -> tuple[float, float]:
    """What the source's tasks run (`read_range` per partition), here in one process, no Spark:
    consume, decode, Arrow batches. Separates the read path's cost from Spark's scheduling."""
    options = parse_options({"kafka.bootstrap.servers": bootstrap})
    rows = CanonicalRows()
    start, cpu = time.perf_counter(), time.process_time()
    count = 0
    for partition in range(PARTITIONS):
        offsets = OffsetRange(partition, 0, records // PARTITIONS)
        count += sum(batch.num_rows for batch in read_range(options, rows, offsets))
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    if count != records:
        raise RuntimeError(f"read path gave {count} of {records}")
    return elapsed, used


def spark_batch(spark: object, bootstrap: str) -> float:
    df = (
        spark.read.format("offsetwatch")  # type: ignore[attr-defined]
        .option("source", "kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .load()
    )
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def spark_stream(spark: object, bootstrap: str) -> float:
    with tempfile.TemporaryDirectory(prefix="offsetwatch-bench-") as checkpoint:
        df = (
            spark.readStream.format("offsetwatch")  # type: ignore[attr-defined]
            .option("source", "kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("startingOffsets", "earliest")
            .load()
        )
        start = time.perf_counter()
        query = (
            df.writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return time.perf_counter() - start


def count_rows(spark: object, bootstrap: str) -> int:
    df = (
        spark.read.format("offsetwatch")  # type: ignore[attr-defined]
        .option("source", "kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .load()
    )
    return int(df.count())


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RECORDS
    print(f"kafka source benchmark: {records:,} records in {PARTITIONS} partitions, mock cluster")
    print(f"cpus: {os.cpu_count()}, Spark local[2], best of {REPEATS}")
    print("load average at start: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    with MockCluster() as cluster:
        cluster.create_topic(TOPIC, PARTITIONS)
        bootstrap = cluster.bootstrap_servers
        fill(bootstrap, records)
        bare_s, bare_cpu = min(bare_consume(bootstrap, records) for _ in range(REPEATS))
        path_s, path_cpu = min(read_path(bootstrap, records) for _ in range(REPEATS))
        spark = get_session(SparkSettings(master="local[2]", shuffle_partitions=2))
        try:
            if count_rows(spark, bootstrap) != records:
                raise RuntimeError("the kafka source did not read every record")
            batch_s = min(spark_batch(spark, bootstrap) for _ in range(REPEATS))
            stream_s = min(spark_stream(spark, bootstrap) for _ in range(REPEATS))
        finally:
            spark.stop()
    bare_rate = records / bare_s
    rows = [
        ("bare confluent-kafka consume (no decoding)", bare_s, bare_rate, f"cpu {bare_cpu:.2f} s"),
        (
            "read path alone (one process, no Spark)",
            path_s,
            records / path_s,
            f"cpu {path_cpu:.2f} s",
        ),
        ("kafka source, batch (decoded, noop sink)", batch_s, records / batch_s, ""),
        ("kafka source, streaming AvailableNow", stream_s, records / stream_s, ""),
    ]
    for name, seconds, rate, note in rows:
        print(f"{name:<44} {seconds:7.2f} s {rate:>12,.0f} rec/s  {note}")
    print("load average at end: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    ratio = (records / batch_s) / bare_rate
    verdict = "meets" if ratio >= 0.5 else "BELOW"
    print(f"batch / bare = {ratio:.2f}x ({verdict} the >= 0.5x target)")
    print(f"streaming / bare = {(records / stream_s) / bare_rate:.2f}x")


if __name__ == "__main__":
    main()
