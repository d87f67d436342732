"""`offsetwatch decode` on a real Kafka 4.0.0 broker, against Kafka's own answers.

The module's workload makes real clients commit through the broker's group coordinator: a
classic group with a member, a KIP-848 group, simple commits with metadata, a committed and an
aborted transactional commit, and a deleted group (tombstones), half of it before a cutoff
time and half after. Then:

* the live topic read `--from` the cutoff (and from before / after everything) is, partition
  by partition, exactly what a plain confluent-kafka consumer reads from the offsets that
  `offsets_for_times` gives; `--isolation read_committed` hides aborted and open transactions;
* the broker's own segment files decoded with `--format dump-log` are, record by record, the
  text `kafka-dump-log.sh --offsets-decoder` prints for the same files (as in
  tests/decoder/test_conformance.py), with the same transaction outcomes; and the committed
  offsets that the JSON output ends with are what OffsetFetch answers;
* problems on the live topic are one line each.

The broker is shared with other tests that commit at the same time: every comparison is
bounded by high watermarks read before and after the command, never by counts.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)

from offsetwatch.cli import main
from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder import Canonical, Codec
from tests.real_broker import Broker, kip848_groups, retry, run_tool, test_kafka, unique

pytestmark = pytest.mark.broker

#: librdkafka waits up to 500 ms per fetch by default; every decode here reads to the end
FAST: Final = ("-X", "fetch.wait.max.ms=20")
#: generous: the machine is shared by several brokers and test runs
DEADLINE_S: Final = 90.0
#: how many mismatches a failure message quotes
SHOW: Final = 5
BEFORE_EVERYTHING: Final = "2000-01-01T00:00:00Z"
#: commit metadata after the cutoff: non-ASCII, control characters and JSON's own escapes,
#: which kafka-dump-log prints in its own way (raw UTF-8, \u0001, \")
METADATA: Final = 'after é 日本 \u2028 \x01 \t "q" \\ / 😀'


Position = tuple[int, int]
Committed = dict[tuple[str, int], tuple[int, int, str]]


def _lines(text: str) -> list[str]:
    """JSON lines end with \n only: str.splitlines() would also cut at a raw U+2028 inside a
    string (valid JSON, and what kafka-dump-log prints)."""
    if not text:
        return []
    *lines, last = text.split("\n")
    assert last == "", f"the last line has no newline: {last!r}"
    return lines


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- the workload ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    topic: str
    #: epoch ms: every record of the "before" commits is older, every "after" one is not
    cutoff: int
    #: simple commits made only before the cutoff
    early: str
    #: simple commits with metadata, "before" then "after" the cutoff
    simple: str
    classic: str
    kip848: str
    transactional: str
    deleted: str

    @property
    def groups(self) -> tuple[str, ...]:
        return (
            self.early,
            self.simple,
            self.classic,
            self.kip848,
            self.transactional,
            self.deleted,
        )


def _consume_and_commit(broker: Broker, group: str, topic: str, total: int, **config: Any) -> None:
    """A real member: subscribe, read `total` records, commit them, leave the group."""
    consumer = broker.consumer(group, **config)
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + DEADLINE_S
        while seen < total:
            if time.monotonic() > deadline:
                pytest.fail(f"group {group} read {seen} of {total} records in {DEADLINE_S}s")
            seen += sum(1 for m in consumer.consume(total, 0.5) if m.error() is None)
        retry(lambda: consumer.commit(asynchronous=False))
    finally:
        consumer.close()


def _transactional_commits(broker: Broker, group: str, topic: str) -> None:
    """One committed and one aborted TxnOffsetCommit (no member: a simple group's metadata)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(DEADLINE_S)
    consumer = broker.consumer(group)
    try:
        metadata = consumer.consumer_group_metadata()
        producer.begin_transaction()
        offsets = [TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 1)]
        producer.send_offsets_to_transaction(offsets, metadata, DEADLINE_S)
        producer.commit_transaction(DEADLINE_S)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 3)], metadata, DEADLINE_S)
        producer.abort_transaction(DEADLINE_S)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def workload(kafka_broker: Broker) -> Workload:
    broker = kafka_broker
    topic = unique("decode-data")
    broker.create_topic(topic, 2)
    broker.produce(topic, [3, 3])
    work = Workload(
        topic=topic,
        cutoff=0,
        early=unique("decode-early"),
        simple=unique("decode-simple"),
        classic=unique("decode-classic"),
        kip848=unique("decode-kip848"),
        transactional=unique("decode-txn"),
        deleted=unique("decode-deleted"),
    )
    broker.commit(work.early, {(topic, 0): 1})
    broker.commit(work.simple, {(topic, 0): 1}, metadata="before")
    # the broker stamps a record before it acknowledges it (same clock as ours): everything
    # above is older than `cutoff`, and what follows waits until the clock has reached it
    cutoff = _now_ms() + 1
    while _now_ms() <= cutoff:
        time.sleep(0.001)
    broker.commit(work.simple, {(topic, 0): 2, (topic, 1): 3}, metadata=METADATA)
    fast_classic = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    _consume_and_commit(
        broker, work.classic, topic, 6, **{"group.protocol": "classic"}, **fast_classic
    )
    if kip848_groups():
        _consume_and_commit(broker, work.kip848, topic, 6, **{"group.protocol": "consumer"})
    else:  # 3.9: the same commits by a classic member (see tests/real_broker.kip848_groups)
        _consume_and_commit(broker, work.kip848, topic, 6, **{"group.protocol": "classic"})
    _transactional_commits(broker, work.transactional, topic)
    broker.commit(work.deleted, {(topic, 0): 1, (topic, 1): 1})
    admin = broker.admin()  # kept alive until its future answers
    admin.delete_consumer_groups([work.deleted], request_timeout=30)[work.deleted].result(60)
    return dataclasses.replace(work, cutoff=cutoff)


# -- reading the topic the plain way -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Raw:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _plain_consumer(broker: Broker) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("decode-reference"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 20,
        }
    )


def _partitions(consumer: Consumer) -> list[int]:
    return sorted(consumer.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC].partitions)


def _watermarks(broker: Broker) -> dict[int, tuple[int, int]]:
    consumer = _plain_consumer(broker)
    try:
        return {
            p: consumer.get_watermark_offsets(
                TopicPartition(OFFSETS_TOPIC, p), timeout=30, cached=False
            )
            for p in _partitions(consumer)
        }
    finally:
        consumer.close()


def _offsets_for_time(broker: Broker, timestamp: int) -> dict[int, int]:
    """Kafka's ListOffsets by time: each partition's first offset at or after `timestamp`,
    or its high watermark when it has none."""
    consumer = _plain_consumer(broker)
    try:
        partitions = _partitions(consumer)
        found = consumer.offsets_for_times(
            [TopicPartition(OFFSETS_TOPIC, p, timestamp) for p in partitions], timeout=30
        )
        starts = {}
        for tp in found:
            assert tp.error is None, tp
            starts[tp.partition] = tp.offset
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, p), timeout=30)[1]
            for p in partitions
            if starts[p] < 0
        }
        return {p: ends.get(p, starts[p]) if starts[p] < 0 else starts[p] for p in partitions}
    finally:
        consumer.close()


def _read(broker: Broker, starts: dict[int, int], ends: dict[int, int]) -> dict[int, list[Raw]]:
    """Every record of each partition from `starts[p]` up to `ends[p]` (exclusive)."""
    out: dict[int, list[Raw]] = {p: [] for p in starts}
    todo = {p for p in starts if starts[p] < ends[p]}
    consumer = _plain_consumer(broker)
    try:
        consumer.assign([TopicPartition(OFFSETS_TOPIC, p, starts[p]) for p in sorted(todo)])
        deadline = time.monotonic() + DEADLINE_S
        while todo:
            if time.monotonic() > deadline:
                pytest.fail(f"partitions {sorted(todo)} not read to their end in {DEADLINE_S}s")
            for message in consumer.consume(1000, 0.5):
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None, message
                error = message.error()
                if error is not None:
                    # the end: the last offsets may be transaction markers, never delivered
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    if offset >= ends[partition]:
                        todo.discard(partition)
                    continue
                if offset >= ends[partition]:
                    todo.discard(partition)
                    continue
                out[partition].append(
                    Raw(partition, offset, message.timestamp()[1], message.key(), message.value())
                )
                if offset >= ends[partition] - 1:
                    todo.discard(partition)
    finally:
        consumer.close()
    return out


def _canonical(raws: list[Raw]) -> list[dict[str, Any]]:
    """Our decoding of the plain read, in one go (building a codec takes a good part of a
    second)."""
    codec, canonical = Codec(), Canonical()
    return [
        json.loads(
            canonical.to_json(
                codec.decode(raw.key, raw.value, raw.partition, raw.offset, raw.timestamp)
            )
        )
        for raw in raws
    ]


def _decode(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = main(["decode", *argv])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in _lines(captured.out)], captured.err


def _assert_is_the_topic_from(
    broker: Broker,
    decoded: list[dict[str, Any]],
    starts: dict[int, int],
    floor: dict[int, tuple[int, int]],
) -> None:
    """`decoded` (one run of `decode` on the live topic) is, per partition, the plain read
    from `starts`: all of it up to the high watermarks seen before the run (`floor`) and
    nothing but it after (other tests commit meanwhile: the run stops somewhere between)."""
    ceiling = _watermarks(broker)
    reference = _read(broker, starts, {p: high for p, (_low, high) in ceiling.items()})
    got: dict[int, list[dict[str, Any]]] = {p: [] for p in reference}
    for record in decoded:
        assert record["partition"] in got, record
        got[record["partition"]].append(record)
    read = [raw for p, records in got.items() for raw in reference[p][: len(records)]]
    ours = iter(_canonical(read))
    problems = []
    for partition, records in got.items():
        want = reference[partition]
        expected = [next(ours) for _ in want[: len(records)]]
        if records != expected:
            if len(records) > len(expected):
                problems.append(f"partition {partition}: {len(records)} records of {len(want)}")
            else:
                pairs = enumerate(zip(records, expected, strict=True))
                first = next(i for i, (ours, theirs) in pairs if ours != theirs)
                problems.append(
                    f"partition {partition} record {first}: got {records[first]}, "
                    f"expected {expected[first]}"
                )
            continue
        must = sum(1 for raw in want if raw.offset < floor[partition][1])
        if len(records) < must:
            problems.append(
                f"partition {partition}: {len(records)} records from offset {starts[partition]}, "
                f"the high watermark before the run ({floor[partition][1]}) needs {must}"
            )
    assert not problems, "\n".join(problems[:SHOW])


def _mine(decoded: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    return [r for r in decoded if r["group"] == group]


def _metadata_of(records: list[dict[str, Any]]) -> set[str]:
    return {r["value"]["metadata"] for r in records if r["type"] == "offset_commit" and r["value"]}


# -- 1. the live topic, --from ---------------------------------------------------------------


def test_live_from_a_time_is_every_record_at_or_after_it(
    capsys: pytest.CaptureFixture[str], kafka_broker: Broker, workload: Workload
) -> None:
    floor = _watermarks(kafka_broker)
    code, decoded, err = _decode(
        capsys, "--bootstrap-server", kafka_broker.bootstrap, "--from", str(workload.cutoff), *FAST
    )
    assert (code, err) == (0, "")
    starts = _offsets_for_time(kafka_broker, workload.cutoff)
    _assert_is_the_topic_from(kafka_broker, decoded, starts, floor)
    assert all(r["timestamp"] >= workload.cutoff for r in decoded)
    # what the workload did after the cutoff is there, what it did before is not
    assert not _mine(decoded, workload.early)
    assert _metadata_of(_mine(decoded, workload.simple)) == {METADATA + "\x00"}
    for group in workload.groups[1:]:
        assert _mine(decoded, group), group
    assert {r["type"] for r in _mine(decoded, workload.classic)} >= {"group_metadata"}
    if kip848_groups():
        assert {r["type"] for r in _mine(decoded, workload.kip848)} >= {
            "consumer_group_metadata",
            "consumer_group_member_metadata",
            "consumer_group_current_member_assignment",
        }
    deleted = _mine(decoded, workload.deleted)
    tombstones = {("offset_commit", True)}
    if test_kafka().at_least("4.0"):
        # the new group coordinator writes a group tombstone for a simple group too; 3.9's
        # default (classic) coordinator only the offsets'
        tombstones.add(("group_metadata", True))
    assert {(r["type"], r["tombstone"]) for r in deleted} >= tombstones


def test_live_from_before_everything_is_the_whole_topic(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    kafka_broker: Broker,
    workload: Workload,
) -> None:
    # the connection from the environment variables offsetwatch export reads too
    monkeypatch.setenv("OFFSETWATCH_BOOTSTRAP_SERVERS", kafka_broker.bootstrap)
    monkeypatch.setenv("OFFSETWATCH_KAFKA_FETCH_WAIT_MAX_MS", "20")
    monkeypatch.setenv("OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES", "true")  # export's own
    floor = _watermarks(kafka_broker)
    code, decoded, err = _decode(capsys, "--from", BEFORE_EVERYTHING)
    assert (code, err) == (0, "")
    starts = {p: low for p, (low, _high) in floor.items()}  # the log start offsets
    _assert_is_the_topic_from(kafka_broker, decoded, starts, floor)
    assert _mine(decoded, workload.early)
    assert _metadata_of(_mine(decoded, workload.simple)) == {"before\x00", METADATA + "\x00"}


def test_live_from_after_everything_is_only_what_comes_later(
    capsys: pytest.CaptureFixture[str], kafka_broker: Broker, workload: Workload
) -> None:
    # a time after every record written so far (a future one is refused: see below); other
    # tests may commit after it, and those records, only those, are read
    after = _now_ms()
    floor = _watermarks(kafka_broker)
    argv = ("--bootstrap-server", kafka_broker.bootstrap, *FAST)
    code, decoded, err = _decode(capsys, *argv, "--from", str(after))
    assert (code, err) == (0, "")
    _assert_is_the_topic_from(kafka_broker, decoded, _offsets_for_time(kafka_broker, after), floor)
    assert all(r["timestamp"] >= after for r in decoded)
    assert not {r["group"] for r in decoded} & set(workload.groups)
    # from the end: the high watermarks seen at start are where it starts and stops
    assert _decode(capsys, *argv, "--from", "end") == (0, [], "")


# -- 2. the broker's segment files, against kafka-dump-log -----------------------------------


@dataclass(frozen=True, slots=True)
class KafkaDump:
    """What kafka-dump-log.sh --offsets-decoder printed."""

    #: (partition, offset) -> `{"key":<key: text>,"payload":<payload: text>}`
    records: dict[Position, str]
    #: transactional record -> committed / aborted / pending (from its batch and the markers)
    outcomes: dict[Position, str]


_FIELD: Final = re.compile(r"(\w+): (\S+)")
_MARKER: Final = {"COMMIT": "committed", "ABORT": "aborted"}


def _parse_dump_log(text: str) -> KafkaDump:
    records: dict[Position, str] = {}
    outcomes: dict[Position, str] = {}
    open_txn: dict[tuple[int, str], list[int]] = {}
    decoder = json.JSONDecoder()
    partition = -1
    batch: dict[str, str] = {}
    for line in _lines(text):
        if line.startswith("Dumping "):
            partition = int(Path(line.removeprefix("Dumping ")).parent.name.rsplit("-", 1)[1])
        elif line.startswith("baseOffset: "):
            batch = dict(_FIELD.findall(line))
        elif line.startswith("| offset: "):
            offset = int(line.split()[2])
            producer = (partition, batch["producerId"])
            if batch["isControl"] == "true":
                marker = _MARKER[line.rsplit("endTxnMarker: ", 1)[1].split()[0]]
                for pending in open_txn.pop(producer, []):
                    outcomes[(partition, pending)] = marker
                continue
            # the key's JSON may hold any text: find its end by parsing it
            start = line.index(" key: ") + len(" key: ")
            _key, end = decoder.raw_decode(line, start)
            assert line[end:].startswith(" payload: "), line
            payload = line[end + len(" payload: ") :]
            payload = '"<DELETE>"' if payload == "<DELETE>" else payload
            records[(partition, offset)] = f'{{"key":{line[start:end]},"payload":{payload}}}'
            if batch["isTransactional"] == "true":
                open_txn.setdefault(producer, []).append(offset)
    for (part, _producer), offsets in open_txn.items():
        for offset in offsets:
            outcomes[(part, offset)] = "pending"
    return KafkaDump(records, outcomes)


@dataclass(frozen=True, slots=True)
class Segments:
    """A copy of the broker's __consumer_offsets segment files, decoded both ways."""

    directory: Path
    kafka: KafkaDump
    #: offsetwatch decode --format json, in output order
    canonical: list[dict[str, Any]]
    #: offsetwatch decode --format dump-log, the same records in the same order
    dump_log: list[str]


def _decode_to_file(target: Path, *argv: str) -> list[str]:
    code = main(["decode", *argv, "--output", str(target)])
    # 1 would mean a record or batch could not be decoded (its line is on stderr)
    assert code == 0
    return _lines(target.read_bytes().decode("utf-8"))


@pytest.fixture(scope="module")
def segments(
    kafka_broker: Broker, workload: Workload, tmp_path_factory: pytest.TempPathFactory
) -> Segments:
    # a copy, so that Kafka's tool and ours read the same bytes while the broker appends: the
    # workload's records were acknowledged, so they are in the files. A batch being written
    # at the copy's end is skipped by both tools (ours says so in a note on stderr)
    root = tmp_path_factory.mktemp("segments")
    files = []
    for source in sorted(kafka_broker.data_dir.glob(f"{OFFSETS_TOPIC}-*")):
        target = root / source.name
        target.mkdir()
        for log in sorted(source.glob("*.log")):
            files.append(str(shutil.copyfile(log, target / log.name)))
    assert files, f"no {OFFSETS_TOPIC} segments in {kafka_broker.data_dir}"
    kafka = _parse_dump_log(
        run_tool("kafka-dump-log.sh", "--offsets-decoder", "--files", ",".join(files))
    )
    canonical = _decode_to_file(root.parent / "canonical.jsonl", "--input", "segments", str(root))
    dump_log = _decode_to_file(
        root.parent / "dump-log.jsonl", "--format", "dump-log", "--input", "segments", str(root)
    )
    return Segments(root, kafka, [json.loads(line) for line in canonical], dump_log)


def test_segments_dump_log_is_kafka_dump_log(segments: Segments, workload: Workload) -> None:
    assert len(segments.canonical) == len(segments.dump_log)
    ours = {
        (record["partition"], record["offset"]): line
        for record, line in zip(segments.canonical, segments.dump_log, strict=True)
    }
    kafka = segments.kafka.records
    problems = [
        f"p{p}@{o}:\n    ours  {ours.get((p, o))}\n    kafka {kafka.get((p, o))}"
        for p, o in sorted(ours.keys() | kafka.keys())
        if ours.get((p, o)) != kafka.get((p, o))
    ]
    assert not problems, f"{len(problems)} records differ:\n  " + "\n  ".join(problems[:SHOW])
    # the workload is in there: every group, both transaction outcomes
    groups = {r["group"] for r in segments.canonical}
    assert set(workload.groups) <= groups
    ours_outcomes = {
        (r["partition"], r["offset"]): r["transaction"]
        for r in segments.canonical
        if r["transaction"] is not None
    }
    assert ours_outcomes == segments.kafka.outcomes
    assert {r["transaction"] for r in _mine(segments.canonical, workload.transactional)} == {
        "committed",
        "aborted",
    }


def test_live_dump_log_of_one_partition_is_kafka_dump_log(
    capsys: pytest.CaptureFixture[str],
    kafka_broker: Broker,
    workload: Workload,
    segments: Segments,
) -> None:
    """The live topic in Kafka's dump-log shapes, one partition, from the cutoff: the text
    kafka-dump-log printed for the same offsets of the segment copy."""
    (partition,) = {r["partition"] for r in _mine(segments.canonical, workload.simple)}
    start = _offsets_for_time(kafka_broker, workload.cutoff)[partition]
    argv = ("--bootstrap-server", kafka_broker.bootstrap, "--partition", str(partition))
    code = main(["decode", *argv, "--from", str(workload.cutoff), "--format", "dump-log", *FAST])
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    lines = _lines(captured.out)
    # the live read is in offset order; markers take offsets but are no records
    offsets = sorted(o for p, o in segments.kafka.records if p == partition and o >= start)
    # the copy was made before this run: the run reads all of it, and what others committed
    # since
    assert lines[: len(offsets)] == [segments.kafka.records[(partition, o)] for o in offsets]
    mine = {r["offset"] for r in _mine(segments.canonical, workload.simple)}
    assert {o for o in mine if o >= start} <= set(offsets)
    assert len(mine & set(offsets)) == 2  # the commit after the cutoff, both partitions


def _offset_fetch(broker: Broker, group: str) -> Committed:
    """Kafka's OffsetFetch: (topic, partition) -> (offset, leader epoch, metadata)."""
    admin = broker.admin()  # kept alive until its future answers
    answer = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=30
    )[group].result(timeout=60)
    return {
        (tp.topic, tp.partition): (
            tp.offset,
            -1 if tp.leader_epoch is None else tp.leader_epoch,
            tp.metadata or "",
        )
        for tp in answer.topic_partitions
        if tp.offset >= 0
    }


def _replayed(records: list[dict[str, Any]], group: str) -> Committed:
    """The committed offsets the group's records end with, applied in output order (the
    order the coordinator applies them: transactional ones at their marker)."""
    state: Committed = {}
    for record in records:
        if record["type"] != "offset_commit" or record["group"] != group:
            continue
        if record["transaction"] in ("aborted", "pending"):
            continue
        where = (record["key"]["topic"], record["key"]["partition"])
        value = record["value"]
        if value is None:
            state.pop(where, None)
            continue
        # confluent-kafka sends metadata with a trailing NUL (stored and decoded as such) and
        # drops it when it reads OffsetFetch back
        metadata = value["metadata"].removesuffix("\x00")
        state[where] = (value["offset"], value["leader_epoch"], metadata)
    return state


def test_segments_json_ends_with_the_offsets_of_offset_fetch(
    segments: Segments, kafka_broker: Broker, workload: Workload
) -> None:
    for group in workload.groups:
        assert _replayed(segments.canonical, group) == _offset_fetch(kafka_broker, group), group
    # the workload's expectations, so that an empty answer on both sides cannot pass
    topic = workload.topic
    assert _offset_fetch(kafka_broker, workload.deleted) == {}
    assert _offset_fetch(kafka_broker, workload.simple) == {
        (topic, 0): (2, -1, METADATA),
        (topic, 1): (3, -1, METADATA),
    }
    assert {k: v[0] for k, v in _offset_fetch(kafka_broker, workload.transactional).items()} == {
        (topic, 0): 2,
        (topic, 1): 1,
    }


# -- 3. problems on the live topic: one line each ---------------------------------------------


def _one_line_each(err: str) -> list[str]:
    lines = _lines(err)
    assert lines and all(line.startswith("offsetwatch: ") for line in lines), err
    return lines


def _noted_topic(err: str, topic: str) -> str:
    """stderr without the one note that says a --topic of other records is decoded anyway."""
    note = f"offsetwatch: note: --topic {topic} is not __consumer_offsets"
    lines = _lines(err)
    assert [line for line in lines if line.startswith(note)] != [], err
    return "".join(f"{line}\n" for line in lines if not line.startswith(note))


def test_live_problems_are_one_line(
    capsys: pytest.CaptureFixture[str], kafka_broker: Broker
) -> None:
    bootstrap = ("--bootstrap-server", kafka_broker.bootstrap, *FAST)
    # a commit first: run alone on a new broker, __consumer_offsets does not exist yet, and
    # partition 0 is then as absent as any other
    topic = unique("decode-problems")
    kafka_broker.create_topic(topic, 1)
    kafka_broker.commit(unique("decode-problems"), {(topic, 0): 0})
    partitions = len(_watermarks(kafka_broker))
    assert partitions > 0
    code, out, err = _decode(capsys, *bootstrap, "--partition", str(partitions))
    assert (code, out) == (2, [])
    assert _one_line_each(err) == [
        f"offsetwatch: error: topic {OFFSETS_TOPIC} has no partition {partitions} "
        f"(it has 0..{partitions - 1}); check --partition"
    ]
    code, out, err = _decode(capsys, *bootstrap, "--from", "2100-01-01T00:00:00Z")
    assert (code, out) == (2, [])
    (line,) = _one_line_each(err)
    assert "is in the future" in line
    missing = unique("decode-missing")
    code, out, err = _decode(capsys, *bootstrap, "--topic", missing)
    assert (code, out) == (2, [])
    (line,) = _one_line_each(_noted_topic(err, missing))
    assert line.startswith(f"offsetwatch: error: topic {missing} is not available on ")

    # a topic of other records: each bad one is a line on stderr, the good one is decoded
    topic = unique("decode-not-offsets")
    kafka_broker.create_topic(topic, 1)
    good_key = bytes.fromhex("000100016700017400000000")  # OffsetCommitKey g/t/0
    good_value = bytes.fromhex("0003" + "0000000000000007" + "ffffffff" + "0000" + "00" * 8)
    bad = [
        (None, b"x"),
        (b"\x00\x01\x00\x03a\nb", b"\x00\x03"),  # cut short; a newline in the group
        (good_key, b"\x00\x03\x00"),
        (b"x", None),
    ]
    producer = kafka_broker.producer()
    for key, value in [*bad, (good_key, good_value)]:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(60) == 0
    code, out, err = _decode(capsys, *bootstrap, "--topic", topic)
    assert code == 1
    lines = _one_line_each(_noted_topic(err, topic))
    assert [line.split(":", 2)[1] for line in lines] == [
        f" partition 0 offset {offset}" for offset in range(len(bad))
    ]
    assert [(r["offset"], r["value"]["offset"]) for r in out] == [(len(bad), 7)]


def test_live_read_committed_hides_aborted_and_open_transactions(
    capsys: pytest.CaptureFixture[str], kafka_broker: Broker
) -> None:
    """--isolation on a topic of our own (the mock cluster filters no aborted records, and on
    the shared __consumer_offsets another test's open transaction could hold the last stable
    offset back): four transactional records, committed, aborted, committed, still open."""
    topic = unique("decode-transactions")
    kafka_broker.create_topic(topic, 1)
    key = bytes.fromhex("000100016700017400000000")  # OffsetCommitKey g/t/0

    def value(offset: int) -> bytes:  # OffsetCommitValue v3, no metadata
        return bytes.fromhex(f"0003{offset:016x}ffffffff0000{0:016x}")

    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": unique("tx")}
    )
    producer.init_transactions(DEADLINE_S)
    try:
        for offset, end in [(1, "commit"), (2, "abort"), (3, "commit"), (4, "open")]:
            producer.begin_transaction()
            producer.produce(topic, key=key, value=value(offset))
            assert producer.flush(DEADLINE_S) == 0
            if end == "commit":
                producer.commit_transaction(DEADLINE_S)
            elif end == "abort":
                producer.abort_transaction(DEADLINE_S)
        argv = ("--bootstrap-server", kafka_broker.bootstrap, "--topic", topic, *FAST)
        code, out, err = _decode(capsys, *argv)
        assert (code, _noted_topic(err, topic)) == (0, "")
        assert [r["value"]["offset"] for r in out] == [1, 2, 3, 4]
        # the last stable offset ends the run: the open transaction is not waited for
        code, out, err = _decode(capsys, *argv, "--isolation", "read_committed")
        assert (code, _noted_topic(err, topic)) == (0, "")
        assert [r["value"]["offset"] for r in out] == [1, 3]
    finally:
        producer.abort_transaction(DEADLINE_S)
