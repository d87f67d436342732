"""The `kafka` source: a live topic read through confluent-kafka in the executors.

    spark.read.format("offsetwatch").option("source", "kafka")
        .option("kafka.bootstrap.servers", "broker:9092")     # any kafka.<librdkafka property>
        .option("startingOffsets", "earliest").option("endingOffsets", "latest")
        .load()

The topic is `__consumer_offsets` (format raw, decoded in the executors) by default, or the
exporter's republished topic (`topic`, `format` json|avro). Batch reads plan one Spark
partition per Kafka partition range (`minPartitions` cuts big ranges); streaming reads use
the Kafka offsets themselves as the stream's offsets (`{"<topic>": {"<partition>": offset}}`),
so a query restarted from its checkpoint resumes exactly where its last batch ended.

The driver only asks for metadata, watermarks and timestamp lookups; the records never pass
through it. docs/spark-sources.md lists the options.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from offsetwatch.spark_jobs.schema import CanonicalRows
from offsetwatch.spark_jobs.sources.kafka_options import (
    LATEST,
    LATEST_SPEC,
    KafkaOptionError,
    KafkaSourceOptions,
    PositionSpec,
    parse_options,
)
from offsetwatch.spark_jobs.sources.kafka_ranges import (
    OffsetRange,
    StreamOffset,
    Watermarks,
    from_stream_offset,
    limit_ends,
    plan_ranges,
    resolve,
    split_ranges,
    timestamps_to_look_up,
    to_stream_offset,
)
from offsetwatch.spark_jobs.sources.kafka_read import READER_GROUP_ID, read_range

_METADATA_TIMEOUT_S = 30.0
#: a trigger's question for the latest offsets: unanswered, the trigger just has no new data
#: and the next one asks again, so it need not wait as long as a question that must succeed
_TRIGGER_TIMEOUT_S = 10.0
#: a planned batch's metadata question is asked again this often while the cluster is away
_RETRY_PAUSE_S = 1.0

log = logging.getLogger(__name__)
T = TypeVar("T")


class ClusterUnavailable(KafkaOptionError):
    """The cluster did not answer a metadata question (down, restarting, unreachable)."""


class KafkaRangePartition(InputPartition):
    """One Spark partition: an offset range of one Kafka partition (pickled to executors)."""

    def __init__(self, offsets: OffsetRange) -> None:
        super().__init__(offsets)
        self.offsets = offsets


def read_partition(
    options: KafkaSourceOptions, rows: CanonicalRows, partition: InputPartition
) -> Iterator[Any]:
    # with no range planned, Spark still runs one task on a placeholder partition
    if not isinstance(partition, KafkaRangePartition):
        return iter(())
    return read_range(options, rows, partition.offsets)


class TopicMetadata:
    """Driver-side questions to the cluster: partitions, watermarks, offsets by time."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._consumer = Consumer(options.consumer_config(READER_GROUP_ID))

    def partitions(self, timeout_s: float = _METADATA_TIMEOUT_S) -> list[int]:
        topic = self._options.topic
        try:
            metadata = self._consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as error:
            raise ClusterUnavailable(
                f"cannot read the metadata of topic {topic!r} from "
                f"{self._options.bootstrap_servers}: {error}"
            ) from None
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            reason = f" ({found.error.str()})" if found is not None and found.error else ""
            raise KafkaOptionError(
                f"topic {topic!r} does not exist on {self._options.bootstrap_servers}{reason}"
            )
        return sorted(found.partitions)

    def watermarks(
        self, partitions: Sequence[int], timeout_s: float = _METADATA_TIMEOUT_S
    ) -> dict[int, Watermarks]:
        out: dict[int, Watermarks] = {}
        for partition in partitions:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self._options.topic, partition), timeout=timeout_s
                )
            except KafkaException as error:
                raise ClusterUnavailable(
                    f"cannot read the offsets of {self._options.topic}[{partition}] from "
                    f"{self._options.bootstrap_servers}: {error}"
                ) from None
            out[partition] = Watermarks(low, high)
        return out

    def offsets_for_times(self, timestamps: Mapping[int, int]) -> dict[int, int]:
        if not timestamps:
            return {}
        found = self._consumer.offsets_for_times(
            [TopicPartition(self._options.topic, p, ts) for p, ts in timestamps.items()],
            timeout=_METADATA_TIMEOUT_S,
        )
        return {tp.partition: tp.offset for tp in found}

    def resolve(
        self, spec: PositionSpec, marks: Mapping[int, Watermarks], default: int
    ) -> dict[int, int]:
        """Concrete offsets of `spec` for every partition in `marks`."""
        lookups = self.offsets_for_times(timestamps_to_look_up(spec, marks))
        return {p: resolve(spec, p, m, lookups, default) for p, m in marks.items()}

    def close(self) -> None:
        self._consumer.close()


class KafkaBatchReader(DataSourceReader):
    """`spark.read`: the records between startingOffsets and endingOffsets, at planning time."""

    def __init__(self, schema: StructType, options: Mapping[str, str]) -> None:
        self.options = parse_options(options)
        # the quarantine output's schema is not the records': records are still decoded
        self.rows = CanonicalRows() if self.options.quarantine_output else CanonicalRows(schema)

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        metadata = TopicMetadata(options)
        try:
            marks = metadata.watermarks(metadata.partitions())
            starts = metadata.resolve(options.starting, marks, default=-2)
            ends = metadata.resolve(options.ending or LATEST_SPEC, marks, default=LATEST)
        finally:
            metadata.close()
        ranges = plan_ranges(starts, ends, marks, options.topic, options.fail_on_data_loss)
        return [KafkaRangePartition(r) for r in split_ranges(ranges, options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.options, self.rows, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream`: micro-batches of Kafka offset ranges; the offsets are the stream's.

    Spark keeps the offsets of every planned batch in the checkpoint before running it, so a
    restarted query replays an unfinished batch with the very same ranges and continues from
    the last finished one: nothing read twice into the sink, nothing skipped. Nothing is
    committed to Kafka. Partitions added while the query runs are read from their start.
    """

    def __init__(self, schema: StructType, options: Mapping[str, str]) -> None:
        self.options = parse_options(options)
        if self.options.ending is not None:
            raise KafkaOptionError(
                "endingOffsets / endingTimestamp apply to batch reads only: a stream has no end"
            )
        # the quarantine output's schema is not the records': records are still decoded
        self.rows = CanonicalRows() if self.options.quarantine_output else CanonicalRows(schema)
        #: end of the data at prepareForTriggerAvailableNow (Trigger.AvailableNow)
        self.target: dict[int, int] | None = None
        self._metadata: TopicMetadata | None = None
        #: monotonic time the cluster stopped answering (None while it answers): one
        #: warning when it goes away and one when it is back, not one per trigger
        self._away_since: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        # the driver-side consumer stays on the driver; executors only need options and rows
        state = dict(self.__dict__)
        state["_metadata"] = None
        return state

    def _cluster(self) -> TopicMetadata:
        if self._metadata is None:
            self._metadata = TopicMetadata(self.options)
        return self._metadata

    def _latest(
        self, timeout_s: float = _METADATA_TIMEOUT_S
    ) -> tuple[dict[int, Watermarks], dict[int, int]]:
        cluster = self._cluster()
        marks = cluster.watermarks(cluster.partitions(timeout_s), timeout_s)
        return marks, {p: m.high for p, m in marks.items()}

    def initialOffset(self) -> StreamOffset:
        cluster = self._cluster()
        marks = cluster.watermarks(cluster.partitions())
        spec = self.options.starting if self.options.starting_given else LATEST_SPEC
        return to_stream_offset(self.options.topic, cluster.resolve(spec, marks, default=-2))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()[1]

    def _answered(self) -> None:
        if self._away_since is not None:
            away = time.monotonic() - self._away_since
            log.warning("kafka source: the cluster answers again (after %.0f s)", away)
            self._away_since = None

    def _away(self, error: ClusterUnavailable) -> None:
        if self._away_since is None:
            self._away_since = time.monotonic()
            log.warning("kafka source: %s; the stream waits for it (no new data meanwhile)", error)

    def _waiting(self, question: Callable[[], T]) -> T:
        """`question()`, asked again while the cluster is away, up to the read's own limit
        (kafkaConsumer.pollTimeoutMs): the batch is planned, Spark's checkpoint holds it."""
        deadline = time.monotonic() + self.options.poll_timeout_ms / 1000
        while True:
            try:
                answer = question()
            except ClusterUnavailable as error:
                if time.monotonic() >= deadline:
                    raise
                self._away(error)
                time.sleep(_RETRY_PAUSE_S)
                continue
            self._answered()
            return answer

    def latestOffset(self, start: StreamOffset, limit: ReadLimit) -> StreamOffset:
        topic = self.options.topic
        try:
            marks, latest = self._latest(
                _METADATA_TIMEOUT_S if self.target is not None else _TRIGGER_TIMEOUT_S
            )
        except ClusterUnavailable as error:
            if self.target is not None:
                # Trigger.AvailableNow ends at the first trigger without new data: carrying
                # on would end the run as if it had read everything
                raise
            # a stream outlives a broker's restart: this trigger has no new data, a later
            # one reads on from the same offsets (it failed the query before)
            self._away(error)
            return start
        self._answered()
        if self.target is not None:
            # Trigger.AvailableNow: nothing past what existed when the query started
            latest = {p: min(o, self.target.get(p, marks[p].low)) for p, o in latest.items()}
        if isinstance(limit, ReadMaxRows):
            known = from_stream_offset(topic, start)
            starts = {p: known.get(p, marks[p].low) for p in latest}
            latest = limit_ends(starts, latest, limit.max_rows)
        return to_stream_offset(topic, latest)

    def partitions(self, start: StreamOffset, end: StreamOffset) -> Sequence[InputPartition]:
        topic = self.options.topic
        ends = from_stream_offset(topic, end)
        if not ends:
            return []
        cluster = self._cluster()
        marks = self._waiting(lambda: cluster.watermarks(sorted(ends)))
        known = from_stream_offset(topic, start)
        starts = {p: known.get(p, marks[p].low) for p in ends}
        ranges = plan_ranges(starts, ends, marks, topic, self.options.fail_on_data_loss)
        return [KafkaRangePartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.options, self.rows, partition)

    def commit(self, end: StreamOffset) -> None:
        """Nothing to do: the stream's offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        if self._metadata is not None:
            self._metadata.close()
            self._metadata = None
