"""The exporter itself SIGKILLed and restarted from its checkpoint, on the real broker.

`offsetwatch export` runs as a child process (so the kill is real) with a publish topic, an
archive and a checkpoint every second, while a client commits all along. It is frozen
(SIGSTOP) until the frozen state shows records published AND archived after the last
checkpoint, then SIGKILLed there: without exactly-once restarts those records would be
written twice. Restarted from the same checkpoint, it catches up and is stopped (SIGTERM).
Then the API equals Kafka's OffsetFetch, the republished topic and the archive each hold every
`__consumer_offsets` position before the final checkpoint exactly once, and /readyz and
`offsetwatch_source_up` said the truth throughout (the broker never went away: source up in
every answer; the first "ready" after the restart already serves what was committed before it).

A second test reads an output topic back as a restart does, against Kafka's own timestamp
lookup, and checks exactly which positions it finds.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.exporter.sinks.checkpoint import load_checkpoint
from offsetwatch.exporter.sinks.publisher import (
    HEADER_SOURCE_CLUSTER,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
)
from offsetwatch.exporter.sinks.resume_dedup import scan_topics, source_position
from tests.exporter.daemon_helpers import wait_for
from tests.exporter.exporter_process import (
    ExporterProcess,
    Watcher,
    api_offsets,
    export_argv,
)
from tests.exporter.real_broker_helpers import Committer
from tests.exporter.test_broker_faults_real import positions_of
from tests.real_broker import Broker, unique

pytestmark = pytest.mark.broker

#: the shared broker's __consumer_offsets (../shared/kafka/broker's default)
OFFSETS_PARTITIONS = 50
DATA_PARTITIONS = 8
OUTPUT_PARTITIONS = 3
#: each exporter reads the shared broker's whole __consumer_offsets (every test's commits)
READY_TIMEOUT_S = 180.0

Position = tuple[int, int]


def output_records(broker: Broker, topic: str) -> list[tuple[Position, Position]]:
    """Every republished record of offsets-topic origin: (position in its value, position in
    its headers)."""
    consumer = broker.consumer(
        unique("reader"), **{"enable.partition.eof": True, "isolation.level": "read_committed"}
    )
    out: list[tuple[Position, Position]] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(OUTPUT_PARTITIONS)])
        ended: set[int] = set()
        while len(ended) < OUTPUT_PARTITIONS:
            message = consumer.poll(15)
            assert message is not None, f"{topic}: no end within 15 s"
            if message.error() is not None:
                ended.add(int(message.partition() or 0))
                continue
            value = json.loads(message.value() or b"{}")
            if value.get("type") == "log_end":
                continue
            own = (value["partition"], value["offset"])
            headers = message.headers()
            if headers is None:  # --publish-headers none: the value names the position
                out.append((own, own))
                continue
            named = source_position(headers, OFFSETS_TOPIC, None)
            assert named is not None, headers
            out.append((own, named))
        return out
    finally:
        consumer.close()


def archived(directory: Path, *, in_progress: bool = False) -> list[Position]:
    """Positions in the archive files; with `in_progress`, also in the hidden files a running
    (or frozen) exporter is writing, whose last line may be torn."""
    out = []
    for file in sorted(directory.rglob("*")):
        hidden = file.name.startswith(".")
        if not file.is_file() or (hidden and not in_progress):
            continue
        for line in file.read_bytes().split(b"\n"):
            try:
                value = json.loads(line)
            except ValueError:
                continue  # a torn last line of an in-progress file
            if value.get("type") != "log_end":
                out.append((value["partition"], value["offset"]))
    return out


def after(positions: list[Position], checkpoint: dict[int, int]) -> list[Position]:
    return [(p, o) for p, o in positions if o >= checkpoint.get(p, 0)]


def kill_after_unsaved_writes(
    exporter: ExporterProcess, broker: Broker, output: str, archive: Path, checkpoint: Path
) -> tuple[dict[int, int], int, int]:
    """Freeze the exporter until its frozen state holds records published and archived after
    its last checkpoint, then SIGKILL it; (checkpoint positions, published, archived after)."""
    for _ in range(30):
        time.sleep(0.5)
        exporter.proc.send_signal(signal.SIGSTOP)
        positions = load_checkpoint(checkpoint).positions
        published = after([header for _value, header in output_records(broker, output)], positions)
        archived_after = after(archived(archive, in_progress=True), positions)
        if published and archived_after:
            exporter.proc.send_signal(signal.SIGKILL)
            exporter.proc.wait(60)
            exporter.log.close()
            return positions, len(published), len(archived_after)
        exporter.proc.send_signal(signal.SIGCONT)
    raise AssertionError("never found records published and archived after a checkpoint")


@pytest.fixture
def committer_and_names(kafka_broker: Broker) -> Iterator[tuple[Committer, str, str]]:
    topic, group, output = unique("crash-orders"), unique("crash-busy"), unique("crash-out")
    kafka_broker.create_topic(topic, DATA_PARTITIONS)
    kafka_broker.create_topic(output, OUTPUT_PARTITIONS)
    # each commit writes DATA_PARTITIONS records, so a second of commits fills more than the
    # archive's write buffer (records after a checkpoint reach the files before the kill)
    committer = Committer(kafka_broker, topic, group, DATA_PARTITIONS)
    try:
        yield committer, group, output
    finally:
        committer.stop()


#: every form of the source headers (--publish-headers): each is read back its own way
@pytest.mark.parametrize("header_form", ["source", "compact", "none"])
def test_an_exporter_killed_and_restarted_writes_every_record_exactly_once(
    kafka_broker: Broker,
    tmp_path: Path,
    committer_and_names: tuple[Committer, str, str],
    children: list[ExporterProcess],
    record_property: Callable[[str, object], None],
    header_form: str,
) -> None:
    committer, group, output = committer_and_names
    archive, checkpoint = tmp_path / "archive", tmp_path / "state" / "offsetwatch.ckpt"
    argv = export_argv(
        kafka_broker.bootstrap,
        output,
        archive,
        checkpoint,
        *("--snapshot-interval-s", "0.5", "--sample-interval-s", "1"),
        *("--publish-headers", header_form),
    )
    watcher = Watcher()
    watching = threading.Thread(target=watcher.run, daemon=True)
    watching.start()
    first = ExporterProcess.start(argv, tmp_path / "first.log", children)
    watcher.current = first
    wait_for(
        lambda: first.get("/readyz").status == 200 and checkpoint.exists(),
        "the first exporter ready with a checkpoint",
        timeout_s=READY_TIMEOUT_S,
        describe=first.tail,
    )
    saved, published_after, archived_after = kill_after_unsaved_writes(
        first, kafka_broker, output, archive, checkpoint
    )
    watcher.current = None
    # what Kafka had before the restart: the restarted exporter's first "ready" must not be
    # older (its checkpoint is)
    before = kafka_broker.committed(group)

    restarted = time.monotonic()
    second = ExporterProcess.start(argv, tmp_path / "second.log", children)
    watcher.current = second
    wait_for(
        lambda: second.get("/readyz").status == 200,
        "ready again",
        timeout_s=READY_TIMEOUT_S,
        describe=second.tail,
    )
    # measured, never asserted: the README's Reliability table reports it (a new process:
    # it reads the shared broker's __consumer_offsets from its checkpoint's positions)
    recovery_s = round(time.monotonic() - restarted, 1)
    record_property("recovery_s", recovery_s)
    print(f"exporter SIGKILL: the restarted exporter ready {recovery_s} s after its start")
    first_ready = api_offsets(second, group)
    assert first_ready is not None
    assert all(first_ready.get(key, -1) >= offset for key, offset in before.items()), (
        "ready after the restart but serving offsets older than Kafka's before it",
        before,
        first_ready,
    )
    commits = committer.commits
    wait_for(lambda: committer.commits > commits + 5, "commits go on after the restart")
    committer.stop()
    wait_for(
        lambda: api_offsets(second, group) == kafka_broker.committed(group),
        "the API equal to OffsetFetch after the restart",
        describe=second.tail,
    )
    watcher.done.set()
    watching.join(10)
    assert second.end(signal.SIGTERM) == 0, second.tail()
    log = second.log_path.read_text(errors="replace")
    assert "already published" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]

    # the broker never went away: once an exporter reached it, every answer said source up;
    # before that (its first fetch) it was not ready; the last answer said ready
    for pid in (first.proc.pid, second.proc.pid):
        answers = [(status, up, metric) for run, status, up, metric in watcher.seen if run == pid]
        reached = next((i for i, (_s, up, _m) in enumerate(answers) if up), len(answers))
        assert all(status == 503 for status, _up, _m in answers[:reached]), answers
        # the first "up" answer may pair with a metric that flipped during the sample (None)
        after = answers[reached:]
        assert all(up and metric != 0 for _s, up, metric in after), answers
        assert all(metric == 1 for _s, _up, metric in after[1:]), answers
    assert watcher.seen[-1][0] == second.proc.pid and watcher.seen[-1][1] == 200

    # exactly once, by __consumer_offsets position, up to the final checkpoint
    final = load_checkpoint(checkpoint).positions
    assert all(final.get(p, 0) >= o for p, o in saved.items())
    expected = {
        (r["partition"], r["offset"])
        for r in positions_of(kafka_broker, OFFSETS_TOPIC, OFFSETS_PARTITIONS)
        if r["offset"] < final.get(r["partition"], 0)
    }
    records = output_records(kafka_broker, output)
    assert all(value == header for value, header in records), "headers name another record"
    republished = [value for value, _header in records]
    assert len(republished) == len(set(republished)), "a record republished twice"
    assert set(republished) == expected
    in_archive = archived(archive)
    assert len(in_archive) == len(set(in_archive)), "a record archived twice"
    assert set(in_archive) == expected
    # the kill came after unsaved writes to both sinks (else nothing was proved)
    assert published_after > 0 and archived_after > 0


def test_the_read_back_finds_exactly_our_positions_written_since_the_bound(
    kafka_broker: Broker,
) -> None:
    """scan_topics against Kafka's own timestamp lookup (which the mock cluster cannot do):
    what lies before the bound (minus the margin) is not read, and only records of our source
    topic and cluster at or after the checkpoint positions count."""
    topic = unique("scan-out")
    kafka_broker.create_topic(topic, 2)
    now = int(time.time() * 1000)

    Headers = list[tuple[str, str | bytes | None]]

    def headers(partition: int, offset: int, **other: bytes) -> Headers:
        return [
            (HEADER_SOURCE_TOPIC, other.get("source", OFFSETS_TOPIC.encode())),
            (HEADER_SOURCE_PARTITION, str(partition).encode()),
            (HEADER_SOURCE_OFFSET, str(offset).encode()),
            (HEADER_SOURCE_CLUSTER, other.get("cluster", b"ours")),
        ]

    sent: list[tuple[int, int, Headers | None]] = [
        (0, now - 600_000, headers(1, 50)),  # long before the bound: not read
        (0, now, headers(1, 9)),  # below the checkpoint position of partition 1
        (0, now, headers(1, 10)),
        (1, now, headers(2, 0)),  # a partition the checkpoint has no position for
        (1, now, headers(1, 11, cluster=b"another")),  # another cluster's exporter
        (1, now, headers(1, 12, source=b"other_offsets")),  # another source topic
        (1, now, None),  # a log-end sample
    ]
    producer = kafka_broker.producer()
    for partition, timestamp, record_headers in sent:
        producer.produce(
            topic, value=b"{}", partition=partition, timestamp=timestamp, headers=record_headers
        )
    assert producer.flush(60) == 0
    found = scan_topics(
        {"bootstrap.servers": kafka_broker.bootstrap},
        [topic, unique("never-created")],
        {1: 10},
        now - 60_000,
        source_topic=OFFSETS_TOPIC,
        cluster_id="ours",
    )
    assert found == {(1, 10), (2, 0)}
