"""The `kafka` source through Spark's own Kafka connector (`spark-sql-kafka-0-10`).

    records = read_connector(spark, {"kafka.bootstrap.servers": "broker:9092"})
    bad = read_connector(spark, {..., "output": "quarantine"})   # lake_schema.QUARANTINE_SCHEMA
    stream = read_connector(spark, {...}, stream=True)

takes the `kafka` source's options (kafka_connector_options.py translates them) and gives the
same rows as the Python reader. `decode_kafka_dataframe` decodes any DataFrame with the
connector's columns (`key`, `value`, `topic`, `partition`, `offset`, `timestamp`) through
`mapInArrow` into the same decoder the `kafka` source uses: the same rows, the same
quarantine rows; streaming DataFrames too (mapInArrow is a per-row map). A read of
`__consumer_offsets` made by hand must set `spark.sql.streaming.kafka.useDeprecatedOffsetFetching`
(see `read_connector`), or it reads nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from offsetwatch.spark_jobs.lake_schema import QUARANTINE_SCHEMA
from offsetwatch.spark_jobs.schema import CanonicalRows, arrow_schema
from offsetwatch.spark_jobs.sources import OUTPUT_QUARANTINE, Collector, output_of
from offsetwatch.spark_jobs.sources.kafka_connector_options import connector_read
from offsetwatch.spark_jobs.sources.kafka_decode import MessageDecoder
from offsetwatch.spark_jobs.sources.kafka_options import FORMATS, Format, KafkaOptionError
from offsetwatch.spark_jobs.sources.kafka_read import SOURCE, collect

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

#: the kafka source's option that chooses who reads the topic
READER_OPTION: Final = "reader"
READER_PYTHON: Final = "python"
READER_CONNECTOR: Final = "connector"
READERS: Final = (READER_PYTHON, READER_CONNECTOR)
#: Kafka's internal topics (which Spark's Admin-based offset reader skips)
INTERNAL_TOPICS: Final = frozenset(
    {"__consumer_offsets", "__share_group_state", "__transaction_state"}
)
CONSUMER_OFFSET_FETCHING: Final = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
#: the class Spark finds `format("kafka")` by
PROVIDER: Final = "org.apache.spark.sql.kafka010.KafkaSourceProvider"

#: the connector's columns this needs
CONNECTOR_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")


@dataclass(frozen=True, slots=True)
class _DecodeBatches:
    """The mapInArrow function (a picklable top-level class, run in the Python workers)."""

    format: Format
    quarantine: bool
    rows: CanonicalRows = field(default_factory=CanonicalRows)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoder = MessageDecoder(self.format, self.rows)
        collector = Collector(self.rows, SOURCE, self.quarantine)
        bad_schema = arrow_schema(QUARANTINE_SCHEMA)
        for batch in batches:
            columns = batch.to_pydict()
            messages = list(
                zip(
                    columns["key"],
                    columns["value"],
                    columns["partition"],
                    columns["offset"],
                    columns["timestamp_ms"],
                    strict=True,
                )
            )
            for topic in sorted(set(columns["topic"])):
                mine = [m for m, t in zip(messages, columns["topic"], strict=True) if t == topic]
                commits = collect(decoder, collector, topic, mine)
                if commits is not None:
                    yield commits
            yield from _as_batches(collector.drain(), bad_schema)


def _as_batches(items: Iterator[Any], bad_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Arrow batches as they come; quarantine rows (tuples) gathered into one batch."""
    bad: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
        else:
            bad.append(dict(zip(bad_schema.names, item, strict=True)))
    if bad:
        yield pa.RecordBatch.from_pylist(bad, schema=bad_schema)


def decode_kafka_dataframe(
    df: DataFrame, format: Format = "raw", output: str = "records"
) -> DataFrame:
    """The canonical DataFrame of a DataFrame with the Spark Kafka connector's columns.

    `format`: raw (`__consumer_offsets`) or json / avro (the exporter's republished topic).
    Undecodable records are skipped; `output="quarantine"` gives them instead, as rows of
    `lake_schema.QUARANTINE_SCHEMA` (file `<topic>-<partition>`, position = offset).
    """
    from pyspark.sql import functions as F

    if format not in FORMATS:
        raise KafkaOptionError(f"format must be one of {', '.join(FORMATS)} (got {format!r})")
    quarantine = output_of({"output": output}) == OUTPUT_QUARANTINE
    missing = [c for c in CONNECTOR_COLUMNS if c not in df.columns]
    if missing:
        raise KafkaOptionError(
            f"not a Kafka connector DataFrame: no column {', '.join(missing)} "
            f"(expected {', '.join(CONNECTOR_COLUMNS)})"
        )
    decode = _DecodeBatches(format, quarantine)
    source = df.select(
        "key",
        "value",
        "topic",
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
    )
    return source.mapInArrow(decode, QUARANTINE_SCHEMA if quarantine else decode.rows.struct)


def reader_of(options: Mapping[str, Any]) -> str:
    """The `reader` option of the kafka source: `python` (the offsetwatch data source,
    confluent-kafka in the executors, the default) or `connector` (Spark's own connector)."""
    reader = str(options.get(READER_OPTION, READER_PYTHON)).lower()
    if reader not in READERS:
        raise KafkaOptionError(
            f"option reader must be one of {', '.join(READERS)} (got {reader!r})"
        )
    return reader


class ConnectorMissing(KafkaOptionError):
    """The session has no spark-sql-kafka connector on its classpath."""


def has_connector(spark: SparkSession) -> bool:
    """Whether `format("kafka")` resolves in this session (spark.jars, --packages, a cluster's
    own jars)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    try:
        jvm.java.lang.Class.forName(PROVIDER, False, loader)
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException
        return False
    return True


def read_connector(
    spark: SparkSession, options: Mapping[str, str], *, stream: bool = False
) -> DataFrame:
    """The `kafka` source's read (same options, same rows: records, or the quarantine with
    `output=quarantine`) through Spark's own connector; `stream` for `spark.readStream`."""
    read = connector_read(options, stream=stream)
    if not has_connector(spark):
        raise ConnectorMissing(
            "this Spark session has no Kafka connector (spark-sql-kafka-0-10): start it with "
            "offsetwatch's --kafka-reader connector (fetched from Maven Central), spark-submit "
            "--packages, or read with --kafka-reader python"
        )
    if read.topic in INTERNAL_TOPICS:
        # Spark's default offset reader (Admin-based) leaves Kafka's internal topics out of
        # every plan (ConsumerStrategy.retrieveAllPartitions drops isInternal topics), so a
        # read of __consumer_offsets finds no partition and gives nothing, without an error.
        # The consumer-based reader has no such filter; it is a session setting, not an
        # option, and stays set: the read is planned again at each execution.
        spark.conf.set(CONSUMER_OFFSET_FETCHING, "true")
    reader = spark.readStream if stream else spark.read
    raw = reader.format("kafka").options(**read.options).load()
    return decode_kafka_dataframe(
        raw, format=read.format, output="quarantine" if read.quarantine else "records"
    )
