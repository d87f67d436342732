"""`--publish-headers`: the three forms of the source headers on republished records, and
the read-back that finds their positions again (exporter/sinks/resume_dedup.py).

Every form is checked the same way, by class: the C produce loop and the Python path
publish the same records with the same headers, and for every record a form publishes, what
the restart's read-back reads from it (headers, or the value alone with `none`) is the
source position the four-header form names for the same record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.avro import AvroCodec
from offsetwatch.decoder.canonical import Canonical
from offsetwatch.exporter.config import ConfigError, ExporterConfig, PublishFormat
from offsetwatch.exporter.sinks.publisher import (
    HEADER_FORMS,
    HEADER_SOURCE,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    RecordPublisher,
)
from offsetwatch.exporter.sinks.resume_dedup import (
    avro_value_position,
    source_position,
    value_position_reader,
)
from tests.exporter.sinks.encoded_harness import (
    FakeProducer,
    accelerator,
    decoded,
    feed,
    open_exporter,
    real_messages,
)
from tests.exporter.state.test_ingest_speedups import Message, _random_stream

CLUSTER = "cluster-1"  # what encoded_harness.open_exporter sets as the source cluster
FORMATS: list[tuple[PublishFormat, int | None]] = [("json", None), ("avro", None), ("avro", 7)]


def _published(
    tmp_path: Path,
    form: str,
    publish_format: PublishFormat,
    schema_id: int | None,
    batches: list[list[Message]],
    accelerate: bool,
) -> FakeProducer:
    config = ExporterConfig(
        bootstrap_servers="127.0.0.1:9",
        publish_topic="offsets-out",
        publish_dlq_topic="offsets-dlq",
        publish_format=publish_format,
        publish_schema_id=schema_id,
        publish_headers=form,  # type: ignore[arg-type]
    )
    ingestor, sinks, producer = open_exporter(config, accelerate)
    feed(ingestor, sinks, batches)
    assert sinks.drain() and producer is not None
    if accelerate:
        assert ingestor.stats.fast_path_records_total > 0
    return producer


def _batches(seed: int) -> list[list[Message]]:
    return _random_stream(seed)


@pytest.mark.parametrize(("publish_format", "schema_id"), FORMATS)
@pytest.mark.parametrize("form", HEADER_FORMS)
@pytest.mark.parametrize("seed", range(2))
def test_the_c_loop_publishes_every_form_as_the_python_path(
    tmp_path: Path, form: str, publish_format: PublishFormat, schema_id: int | None, seed: int
) -> None:
    accelerator()
    batches = _batches(seed)
    fast = _published(tmp_path, form, publish_format, schema_id, batches, True)
    slow = _published(tmp_path, form, publish_format, schema_id, batches, False)
    assert fast.produced == slow.produced


def _named(headers: list[tuple[str, bytes]]) -> tuple[int, int]:
    named = dict(headers)
    return int(named[HEADER_SOURCE_PARTITION]), int(named[HEADER_SOURCE_OFFSET])


@pytest.mark.parametrize(("publish_format", "schema_id"), FORMATS)
@pytest.mark.parametrize("form", HEADER_FORMS)
def test_the_read_back_finds_the_position_of_every_record_a_form_publishes(
    tmp_path: Path, form: str, publish_format: PublishFormat, schema_id: int | None
) -> None:
    """Random streams with tombstones, group metadata and undecodable bytes (dead letters),
    on the C path: the read-back's position of every published record equals the four-header
    form's; dead letters carry the four headers in every form."""
    accelerator()
    batches = _batches(0)
    reference = _published(tmp_path, "source", publish_format, schema_id, batches, True)
    published = _published(tmp_path, form, publish_format, schema_id, batches, True)
    assert len(published.produced) == len(reference.produced)
    values = value_position_reader(publish_format, schema_id is not None)
    dead_letters = 0
    for (topic, key, value, headers), (ref_topic, ref_key, ref_value, ref_headers) in zip(
        published.produced, reference.produced, strict=True
    ):
        assert (topic, key, value) == (ref_topic, ref_key, ref_value)
        expected = _named(ref_headers)
        if topic == "offsets-dlq":
            dead_letters += 1
            assert headers == ref_headers
            continue
        found = source_position(headers, OFFSETS_TOPIC, CLUSTER)
        if form == "none":
            assert headers == [] and found is None
            assert value is not None
            found = values(value)
        else:
            assert len(headers) == (4 if form == "source" else 1)
        assert found == expected
    assert dead_letters > 0


def test_the_compact_header_names_cluster_topic_partition_offset() -> None:
    producer = FakeProducer({})
    publisher = RecordPublisher(
        {},
        output_topic="out",
        header_form="compact",
        producer_factory=lambda _config: producer,
    )
    publisher.publish(3, 42, b"k", b"v")
    publisher.source_cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"
    publisher.publish(3, 43, b"k", b"v")
    assert [headers for *_record, headers in producer.produced] == [
        [(HEADER_SOURCE, b"/__consumer_offsets/3/42")],
        [(HEADER_SOURCE, b"MkU3OEVBNTcwNTJENDM2Qg/__consumer_offsets/3/43")],
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"ours/__consumer_offsets/3/42", (3, 42)),
        (b"/__consumer_offsets/3/42", (3, 42)),  # written before the cluster id was known
        (b"another/__consumer_offsets/3/42", None),  # another cluster's exporter
        (b"ours/other_offsets/3/42", None),  # another source topic
        (b"ours/__consumer_offsets/x/42", None),
        (b"ours/__consumer_offsets/3", None),
        (b"ours/__consumer_offsets/3/42/9", None),
    ],
)
def test_the_compact_header_is_read_back_for_our_source_alone(
    value: bytes, expected: tuple[int, int] | None
) -> None:
    assert source_position([(HEADER_SOURCE, value)], OFFSETS_TOPIC, "ours") == expected


def test_the_avro_envelope_position_is_fastavros_on_every_real_record(
    conformance_dir: Path,
) -> None:
    """avro_value_position reads only the envelope's first fields: on every conformance
    record (commits, group metadata, tombstones, share and streams records) it gives the
    partition and offset fastavro decodes from the whole body."""
    codec, canonical = AvroCodec(), Canonical()
    messages = real_messages(conformance_dir)
    assert messages
    for message in messages:
        record = canonical.to_dict(decoded(message))
        body = codec.encode(record)
        assert avro_value_position(body) == (record["partition"], record["offset"])
        framed = codec.encode_confluent(record, 7)
        assert value_position_reader("avro", True)(framed) == (
            record["partition"],
            record["offset"],
        )
        text = canonical.to_json(decoded(message)).encode()
        assert value_position_reader("json", False)(text) == (record["partition"], record["offset"])


@pytest.mark.parametrize("body", [b"", b"\x80", b"\x02", b"\x08type\x02\x04"])
def test_a_value_too_short_for_the_envelope_names_no_position(body: bytes) -> None:
    assert avro_value_position(body) is None


def test_a_header_form_that_does_not_exist_is_refused() -> None:
    form: Any = "some"
    with pytest.raises(ConfigError, match="--publish-headers"):
        ExporterConfig(bootstrap_servers="127.0.0.1:9", publish_headers=form)
