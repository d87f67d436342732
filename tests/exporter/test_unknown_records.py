"""Records of a key type or value version offsetwatch does not know never stop ingestion:
each is counted, named (partition, offset, key type, value version) and skipped, and the known
records around it apply. As Kafka's own coordinator loader does for a key type it does not
know ("a left-over of an aborted upgrade", or a Kafka newer than the reader).

Injected two ways: into a real segment (Kafka 4.4.0's own `__consumer_offsets` capture, with
a batch appended as the broker would append it), and into a real broker's live
`__consumer_offsets` (produced as `__admin_client`, the one client id Kafka lets write an
internal topic), read by the exporter among the records real clients commit.
"""

from __future__ import annotations

import json
import shutil
import struct
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from offsetwatch.cli import main as cli_main
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.decoder.records import (
    ConsumerGroupMetadataValue,
    GroupKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from offsetwatch.decoder.segments import RecordSpec, read_segment, write_batch
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.serve.http_server import ExporterHttpServer
from offsetwatch.exporter.serve.metrics import SnapshotCollector
from offsetwatch.exporter.state.ingest import Ingestor
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.stats import PipelineStats
from offsetwatch.record_factory import RecordFactory
from tests.exporter.stepped_exporter import until, watch
from tests.real_broker import Broker, own_broker, unique

CAPTURE: Final = (
    Path(__file__).resolve().parents[1] / "data" / "releases" / "4.4.0" / "__consumer_offsets-0"
)
#: a key type no release up to 4.4 writes (Kafka's are 0-23)
FUTURE_TYPE: Final = 25
#: a ConsumerGroupMetadataValue version no release up to 4.4 writes (all write 0)
FUTURE_VERSION: Final = 1
#: an OffsetCommitValue version above 4: Kafka reads it as its newest version (KIP-915: the
#: offset and group records' later versions only add tagged fields), and so does offsetwatch
NEWER_COMMIT: Final = 9


def _future_records(group: str, topic: str, offset: int) -> list[tuple[bytes, bytes]]:
    """An unknown key type, a KIP-848 group record of an unknown value version, an offset
    commit of a newer version (read as v4), then a plain commit of `group` at `offset`."""
    unknown_key = struct.pack(">h", FUTURE_TYPE) + b"\x00\x05" + group.encode()[:5]
    unknown_value = struct.pack(">h", 0) + b"a record of a later Kafka"
    codec = Codec()
    future_key, current = codec.encode(
        Record(3, GroupKey(group), 0, ConsumerGroupMetadataValue(5, 0, -1))
    )
    assert current is not None
    future_value = struct.pack(">h", FUTURE_VERSION) + current[2:] + b"\x00\x07"
    commit_key = OffsetCommitKey(group, topic, 0)
    v4 = OffsetCommitValue(offset - 1, 0, "", 1_700_000_000_000, -1, "A" * 22)
    newer_key, newer = codec.encode(Record(1, commit_key, 4, v4))
    assert newer is not None
    newer_value = struct.pack(">h", NEWER_COMMIT) + newer[2:]
    key, value = RecordFactory().commit(group, topic, 0, offset, 1_700_000_000_000)
    assert value is not None
    return [
        (unknown_key, unknown_value),
        (future_key, future_value),
        (newer_key, newer_value),
        (key, value),
    ]


@dataclass(frozen=True, slots=True)
class _Message:
    """A segment's record as the exporter's source hands it over (confluent-kafka's shape)."""

    _key: bytes | None
    _value: bytes | None
    _partition: int
    _offset: int
    _timestamp: int

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp

    def error(self) -> None:
        return None


def test_a_real_segment_with_future_records_injected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    segments = tmp_path / "__consumer_offsets-0"
    shutil.copytree(CAPTURE, segments)
    (log,) = sorted(segments.glob("*.log"))
    last = max(r.offset for b in read_segment(log) for r in b.records)
    injected = _future_records("after-the-future", "orders", 42)
    specs = [RecordSpec(i, 1_700_000_000_000, k, v) for i, (k, v) in enumerate(injected)]
    with log.open("ab") as segment:
        segment.write(write_batch(specs, base_offset=last + 1))
    # a real batch after the injected one: the segment's first, renumbered past them
    first = next(iter(read_segment(log)))
    tail = [RecordSpec(i, r.timestamp, r.key, r.value) for i, r in enumerate(first.records)]
    with log.open("ab") as segment:
        segment.write(write_batch(tail, base_offset=last + 1 + len(injected)))

    # decode: the unknown type is kept whole (type "unknown"), the newer version is named on
    # stderr with its partition and offset, and every other record decodes
    code = cli_main(["decode", "--input", "segments", str(segments)])
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    total = sum(len(b.records) for b in read_segment(log))
    assert len(lines) == total - 1, err  # all but the unknown version
    by_offset = {x["offset"]: x for x in lines}
    assert by_offset[last + 1]["type"] == "unknown" and by_offset[last + 1]["key_type"] == 25
    assert last + 2 not in by_offset
    assert f"partition 0 offset {last + 2}" in err
    assert "unsupported value version 1 for record type 3" in err
    assert by_offset[last + 3]["value_version"] == NEWER_COMMIT
    assert by_offset[last + 3]["value"]["offset"] == 41
    assert by_offset[last + 4]["group"] == "after-the-future"
    assert by_offset[last + 4]["value"]["offset"] == 42
    assert code != 0  # decode says something was skipped

    # the exporter's ingest: counted, named, skipped; the records around them applied
    stats = PipelineStats()
    state = OffsetState()
    ingestor = Ingestor(state, stats)
    messages = [
        _Message(r.key, r.value, 0, r.offset, r.timestamp)
        for b in read_segment(log)
        for r in b.records
    ]
    assert ingestor.ingest(messages) == total
    assert ingestor.positions == {0: last + 1 + len(injected) + len(first.records)}
    totals, seen = stats.unknown()
    assert totals == {(FUTURE_TYPE, 0): 1, (3, FUTURE_VERSION): 1}
    assert [(s.partition, s.offset, s.key_type, s.value_version, s.what) for s in seen] == [
        (0, last + 1, FUTURE_TYPE, 0, "key_type"),
        (0, last + 2, 3, FUTURE_VERSION, "value_version"),
    ]
    assert stats.decode_errors_total == {"version": 1}
    assert stats.records_total[("offset_commit", str(NEWER_COMMIT))] == 1
    assert state.groups["after-the-future"].topics["orders"].committed[0] == 42
    # the capture's own groups are all there, as without the injected records
    summary = json.loads((CAPTURE.parent / "capture.json").read_text())
    assert set(summary["groups"].values()) - {summary["groups"]["deleted"]} <= set(state.groups)


# -- the live topic ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    # its own: the records injected into __consumer_offsets stay out of the shared broker
    with own_broker(tmp_path_factory.mktemp("unknown-records") / "broker") as b:
        yield b


def test_future_records_in_the_live_topic_are_counted_named_and_skipped(broker: Broker) -> None:
    topic = unique("future-orders")
    broker.create_topic(topic, 1)
    broker.produce(topic, [50])
    before, future, after = unique("before"), unique("future"), unique("after")
    broker.commit(before, {(topic, 0): 10})
    partition = partition_for(future, 50)
    producer = broker.producer(**{"client.id": "__admin_client"})
    for key, value in _future_records(future, topic, 20):
        producer.produce("__consumer_offsets", value, key, partition=partition)
    assert producer.flush(60) == 0
    broker.commit(after, {(topic, 0): 30})

    exp = Exporter(ExporterConfig(bootstrap_servers=broker.bootstrap))
    exp.open()
    # the log-end sampler's rounds on the test's thread (readiness needs one)
    watched = watch(exp)
    try:

        def everything() -> dict[str, dict[str, Any] | None] | None:
            found = {g: watched.detail(g) for g in (before, future, after)}
            return found if exp.stats.ready and all(found.values()) else None

        found = until(everything, "the exporter ready with the three groups", watched.step)
        snapshot = exp.build_snapshot(exp.clock_ms())
        committed = {
            g: [(r["topic"], r["partition"], r["committed"]) for r in d["partitions"]]
            for g, d in found.items()
            if d is not None
        }
        assert committed == {
            before: [(topic, 0, 10)],
            future: [(topic, 0, 20)],
            after: [(topic, 0, 30)],
        }
        totals, seen = exp.stats.unknown()
        assert totals == {(FUTURE_TYPE, 0): 1, (3, FUTURE_VERSION): 1}
        assert {(s.partition, s.key_type, s.value_version) for s in seen} == {
            (partition, FUTURE_TYPE, 0),
            (partition, 3, FUTURE_VERSION),
        }
        collector = SnapshotCollector(lambda: (snapshot, exp.stats))
        with ExporterHttpServer(collector, "127.0.0.1", 0) as server:
            url = f"http://127.0.0.1:{server.port}"
            with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
                metrics = response.read().decode()
        assert 'offsetwatch_unknown_records_total{key_type="25",value_version="0"} 1' in metrics
        assert 'offsetwatch_unknown_records_total{key_type="3",value_version="1"} 1' in metrics
    finally:
        exp.close()
