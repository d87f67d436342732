"""Test data for the kafka source: conformance records on the mock cluster, expected rows."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from offsetwatch.decoder.avro import AvroCodec
from offsetwatch.decoder.canonical import Canonical, dumps
from offsetwatch.decoder.codec import Codec
from offsetwatch.spark_jobs.schema import CanonicalRows
from tests.kafka_fixtures import fast_producer

OFFSETS_PARTITIONS = 50
REPUBLISHED = "offsetwatch.records"


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One `__consumer_offsets` record of a conformance run, as captured from Kafka 4.0."""

    partition: int
    offset: int
    timestamp: int
    key: bytes
    value: bytes | None


def conformance_records(conformance_dir: Path, run: str = "main") -> list[RawRecord]:
    out = []
    with (conformance_dir / "runs" / run / "records.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            raw = json.loads(line)
            value = raw["value"]
            out.append(
                RawRecord(
                    raw["partition"],
                    raw["offset"],
                    raw["timestamp"],
                    bytes.fromhex(raw["key"]),
                    None if value is None else bytes.fromhex(value),
                )
            )
    return out


def produce(
    bootstrap: str,
    topic: str,
    messages: Iterable[tuple[int, bytes | None, bytes | None, int | None]],
    producer: Producer | None = None,
) -> None:
    """Write (partition, key, value, timestamp) messages; raises unless all were delivered."""
    owned = producer is None
    producer = producer or fast_producer(bootstrap)
    producer.list_topics(topic, timeout=10)
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for partition, key, value, timestamp in messages:
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            on_delivery=on_delivery,
            timestamp=timestamp or 0,  # 0: the producer's clock
        )
        producer.poll(0)
    if owned and producer.flush(30):
        raise RuntimeError("undelivered messages")
    if failures:
        raise RuntimeError(f"delivery failed: {failures[:3]}")


def produce_raw_records(bootstrap: str, records: Sequence[RawRecord]) -> None:
    produce(
        bootstrap,
        "__consumer_offsets",
        ((r.partition, r.key, r.value, r.timestamp) for r in records),
    )


def mock_positions(records: Iterable[RawRecord]) -> Iterator[tuple[RawRecord, int]]:
    """Each record with the offset the mock gives it: dense per partition, in produce order
    (the real log had gaps: transaction markers, compaction)."""
    next_offset: dict[int, int] = {}
    for record in records:
        offset = next_offset.get(record.partition, 0)
        next_offset[record.partition] = offset + 1
        yield record, offset


def canonicals(
    records: Iterable[RawRecord], offsets: Iterable[int] | None = None
) -> list[dict[str, Any]]:
    """Canonical dicts of the records, at their own offsets or at `offsets`."""
    codec, render = Codec(), Canonical()
    positions = (r.offset for r in records) if offsets is None else offsets
    return [
        render.to_dict(codec.decode(r.key, r.value, r.partition, offset, r.timestamp))
        for r, offset in zip(records, positions, strict=True)
    ]


def on_mock(records: Sequence[RawRecord]) -> list[dict[str, Any]]:
    """Canonical dicts at the offsets the mock gives the records when produced in order."""
    return canonicals(records, [offset for _, offset in mock_positions(records)])


def expected_rows(canonicals: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What every source yields for these records, sorted by position."""
    rows = CanonicalRows()
    ordered = sorted(canonicals, key=lambda c: (c["partition"], c["offset"]))
    return [rows.to_row(c) for c in ordered]


def republished_values(
    records: Iterable[dict[str, Any]], fmt: str, schema_id: int | None = None
) -> list[bytes]:
    """The exporter's republished message values (exporter/sinks/publisher.py formats)."""
    if fmt == "json":
        return [dumps(r).encode() for r in records]
    avro = AvroCodec()
    if schema_id is None:
        return [avro.encode(r) for r in records]
    return [avro.encode_confluent(r, schema_id) for r in records]
