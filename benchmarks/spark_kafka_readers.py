"""Spark's own Kafka connector beside offsetwatch's Python reader, on a real broker.

Both read the same topic of `__consumer_offsets` records (offset commits, a classic group
record every 1,000) on one real Apache Kafka broker started for the run (the tests' default
release, or OFFSETWATCH_BROKER_VERSION), in the same Spark session (local[2]):

* ceiling: one bare confluent-kafka consumer reads every partition to the end, no decoding;
* each reader, batch (`spark.read`, noop sink) and streaming (Trigger.AvailableNow, noop sink):
  every record decoded into the canonical schema.

Each figure: records/s (best of REPEATS after a warm-up run) and CPU microseconds per record,
summed over this process and every process under it (the Spark JVM, its Python workers) for
that best run, per process between two /proc snapshots (benchmarks/proc_cpu.py: a Python
worker Spark stops during the run keeps the ticks it used, and reaped children's ticks are
counted). Wall-clock figures on a shared 2-core machine: the load average is printed.

Run: `.venv/bin/python benchmarks/spark_kafka_readers.py [records]`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import offsets_workload, proc_cpu  # noqa: E402
from offsetwatch.spark_jobs.connector_jars import resolve  # noqa: E402
from offsetwatch.spark_jobs.session import SparkSettings, get_session  # noqa: E402
from offsetwatch.spark_jobs.sources.kafka_connector import read_connector  # noqa: E402
from offsetwatch.spark_jobs.streaming.sources import kafka_stream  # noqa: E402
from tests.real_broker import start_broker, stop_broker, test_kafka  # noqa: E402

TOPIC = "bench-offsets"
PARTITIONS = 4
REPEATS = 3
DEFAULT_RECORDS = 400_000


def process_tree() -> proc_cpu.Snapshot:
    """This process and every process under it (the Spark JVM, its Python workers)."""
    return proc_cpu.tree(proc_cpu.proc_table(), os.getpid())


def fill(bootstrap: str, records: int) -> None:
    config = {"linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4"}
    offsets_workload.fill(bootstrap, TOPIC, records, PARTITIONS, config, 1_780_000_000_000)


def bare_consume(bootstrap: str, records: int) -> None:
    offsets_workload.bare_consume(bootstrap, TOPIC, PARTITIONS, records)


def options(bootstrap: str, reader: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "topic": TOPIC,
        "format": "raw",
        "reader": reader,
    }


def batch(spark: object, bootstrap: str, reader: str) -> None:
    source = options(bootstrap, reader)
    if reader == "connector":
        df = read_connector(spark, source)  # type: ignore[arg-type]
    else:
        df = spark.read.format("offsetwatch").option("source", "kafka").options(**source).load()  # type: ignore[attr-defined]
    df.write.format("noop").mode("overwrite").save()


def stream(spark: object, bootstrap: str, reader: str) -> None:
    with tempfile.TemporaryDirectory(prefix="offsetwatch-bench-") as checkpoint:
        df = kafka_stream(spark, {**options(bootstrap, reader), "startingOffsets": "earliest"})  # type: ignore[arg-type]
        query = (
            df.writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()


def count(spark: object, bootstrap: str, reader: str) -> int:
    source = options(bootstrap, reader)
    if reader == "connector":
        return int(read_connector(spark, source).count())  # type: ignore[arg-type]
    return int(
        spark.read.format("offsetwatch").option("source", "kafka").options(**source).load().count()
    )  # type: ignore[attr-defined]


def best(run: Callable[[], None], repeats: int = REPEATS) -> tuple[float, float]:
    """(seconds, CPU seconds of the process tree) of the fastest of `repeats` runs."""
    out: list[tuple[float, float]] = []
    for _ in range(repeats):
        before, start = process_tree(), time.perf_counter()
        run()
        seconds = time.perf_counter() - start
        out.append((seconds, proc_cpu.cpu_between(before, process_tree())))
    return min(out)


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RECORDS
    kafka = test_kafka()
    connector = resolve()
    print(
        f"Kafka readers: {records:,} records in {PARTITIONS} partitions, a real Kafka "
        f"{kafka.version} broker; Spark connector {connector.version}; local[2], best of {REPEATS}"
    )
    if connector.note:
        print(f"note: {connector.note}")
    print(
        "cpus: {}, load average at start: {:.1f} {:.1f} {:.1f}".format(
            os.cpu_count(), *os.getloadavg()
        )
    )
    with tempfile.TemporaryDirectory(prefix="offsetwatch-bench-broker-") as directory:
        broker = start_broker(Path(directory) / "broker")
        try:
            broker.create_topic(TOPIC, PARTITIONS)
            fill(broker.bootstrap, records)
            rows = [
                (
                    "bare confluent-kafka consume (ceiling)",
                    *best(lambda: bare_consume(broker.bootstrap, records)),
                )
            ]
            spark = get_session(
                SparkSettings(
                    master="local[2]",
                    shuffle_partitions=2,
                    conf={"spark.jars": connector.spark_jars},
                )
            )
            try:
                for reader in ("connector", "python"):
                    got = count(spark, broker.bootstrap, reader)  # also the warm-up
                    if got != records:
                        raise RuntimeError(f"{reader} read {got} of {records}")
                    rows.append(
                        (
                            f"{reader}, batch",
                            *best(lambda r=reader: batch(spark, broker.bootstrap, r)),
                        )
                    )
                    rows.append(
                        (
                            f"{reader}, streaming AvailableNow",
                            *best(lambda r=reader: stream(spark, broker.bootstrap, r)),
                        )
                    )
            finally:
                spark.stop()
        finally:
            stop_broker(Path(directory) / "broker")
    ceiling = records / rows[0][1]
    print(f"{'':<40} {'seconds':>8} {'records/s':>12} {'x ceiling':>9} {'CPU us/rec':>10}")
    for name, seconds, cpu in rows:
        rate = records / seconds
        print(
            f"{name:<40} {seconds:8.2f} {rate:12,.0f} {rate / ceiling:9.2f} "
            f"{cpu / records * 1e6:10.2f}"
        )
    print("load average at end: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
