"""The real broker crashes (SIGKILL, then restart) or hangs (SIGSTOP, then SIGCONT) under a
running exporter.

Clients keep committing all along. After each fault: the API equals Kafka's OffsetFetch, the
republished topic holds every record of `__consumer_offsets` exactly once (counted by its
position there), the archive has no gap and no duplicate, and /readyz and
`offsetwatch_source_up` said "source down" while the broker was away and ready after.

The hung broker's exporter is `offsetwatch export` as a child process: a client library that
crashed on a hung broker would show as its exit status and log, and it is stopped with SIGTERM
as an operator would (its final flush delivers what is in flight).

One broker of the module's own (it is killed and stopped), with 3 partitions of
`__consumer_offsets` so that log recovery after the crash stays short.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.exporter.serve.api import group_detail, readiness
from offsetwatch.exporter.service import ExporterService
from offsetwatch.exporter.sources.kafka_source import OffsetsTopicSource
from tests.exporter.daemon_helpers import (
    api_group,
    exporter_config,
    readyz,
    running_exporter,
    scrape,
    wait_for,
)
from tests.exporter.exporter_process import ExporterProcess, Watcher, export_argv
from tests.exporter.exporter_process import api_offsets as child_api_offsets
from tests.exporter.exporter_process import metric as exporter_metric
from tests.exporter.real_broker_helpers import Committer
from tests.real_broker import Broker, own_broker, retry, unique

#: `cluster`: in `make test-cluster` (the long tier, with the 3-node faults), whose time it does
#: not add to `make test`: brokers of its own killed, hung and restarted
pytestmark = [pytest.mark.broker, pytest.mark.cluster]

OFFSETS_PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with own_broker(
        tmp_path_factory.mktemp("faults") / "broker",
        f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    ) as running:
        yield running


def positions_of(broker: Broker, topic: str, partitions: int) -> list[dict[str, Any]]:
    """Every record of `topic` (read_committed) as a decoded JSON value."""
    consumer = broker.consumer(
        unique("reader"), **{"enable.partition.eof": True, "isolation.level": "read_committed"}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ended: set[int] = set()
        out: list[dict[str, Any]] = []
        while len(ended) < partitions:
            message = consumer.poll(15)
            assert message is not None, f"{topic}: no end within 15 s"
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                ended.add(message.partition() or 0)
                continue
            out.append(
                {
                    "partition": message.partition(),
                    "offset": message.offset(),
                    "value": message.value(),
                }
            )
        return out
    finally:
        consumer.close()


def source_positions(broker: Broker) -> set[tuple[int, int]]:
    return {
        (r["partition"], r["offset"])
        for r in positions_of(broker, OFFSETS_TOPIC, OFFSETS_PARTITIONS)
    }


def republished_positions(broker: Broker, output: str) -> list[tuple[int, int]]:
    out = []
    for record in positions_of(broker, output, 3):
        value = json.loads(record["value"])
        if value.get("type") != "log_end":
            out.append((value["partition"], value["offset"]))
    return out


def archived_positions(directory: Path) -> list[tuple[int, int]]:
    out = []
    for file in sorted(directory.rglob("*.jsonl")):
        if not file.name.startswith("."):
            # "\n" only: a record's text may hold U+2028, which str.splitlines() splits at
            for line in filter(None, file.read_text(encoding="utf-8").split("\n")):
                value = json.loads(line)
                if value.get("type") != "log_end":
                    out.append((value["partition"], value["offset"]))
    return out


def api_offsets(service: ExporterService, group: str) -> dict[tuple[str, int], int] | None:
    answer = api_group(service, group)
    if answer.status != 200:
        return None
    return {(r["topic"], r["partition"]): r["committed"] for r in answer.json()["partitions"]}


def watch_readiness(
    service: ExporterService, seen: list[tuple[int, bool, float | None]], done: threading.Event
) -> None:
    """Samples (/readyz status, its source_up, offsetwatch_source_up) until `done`; the metric
    is scraped before and after /readyz, None if it changed in between (two requests: a sample
    at a flip would otherwise pair two moments)."""
    while not done.is_set():
        try:
            before = scrape(service).value("offsetwatch_source_up")
            body = readyz(service)
            after = scrape(service).value("offsetwatch_source_up")
            seen.append(
                (
                    body.status,
                    bool(body.json()["source_up"]),
                    after if before == after else None,
                )
            )
        except Exception:  # the HTTP server is ours and stays up; a slow answer is skipped
            pass
        time.sleep(0.3)


def fault_topics(broker: Broker, group_prefix: str) -> tuple[str, str, str]:
    """(a data topic of 100 partitions, a group name, a republish topic of 3 partitions)."""
    topic, group, output = unique("orders"), unique(group_prefix), unique("republished")
    broker.create_topic(topic, 100)
    broker.create_topic(output, 3)
    return topic, group, output


def assert_said_down(seen: list[tuple[int, bool, float | None]]) -> None:
    """While the broker was away, /readyz (503, source down) and offsetwatch_source_up (0)
    said so, and never claimed ready."""
    down = [(status, metric) for status, up, metric in seen if not up]
    assert down and all(status == 503 and metric != 1 for status, metric in down), down
    assert any(metric == 0 for _status, metric in down), down


def assert_each_record_once(broker: Broker, output: str, archive: Path) -> None:
    """The republished topic and the archive each hold every __consumer_offsets position
    once."""
    expected = source_positions(broker)
    republished = republished_positions(broker, output)
    assert len(republished) == len(set(republished)), "a record republished twice"
    assert set(republished) == expected
    archived = archived_positions(archive)
    assert len(archived) == len(set(archived)), "a record archived twice"
    assert set(archived) == expected


def settle(
    committer: Committer,
    broker: Broker,
    group: str,
    api: Callable[[], dict[tuple[str, int], int] | None],
    describe: Callable[[], object] | None = None,
) -> None:
    """After a fault: the client commits again, stops, and the exporter's API (`api`) comes
    to equal Kafka's OffsetFetch."""
    before = committer.commits
    wait_for(lambda: committer.commits > before + 5, "commits again after the fault")
    committer.stop()
    wait_for(
        lambda: api() == broker.committed(group),
        "the API equal to OffsetFetch after the fault",
        timeout_s=120,
        describe=describe,
    )


def slow_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exporter's source hands out at most 200 records per call and waits 20 ms first: a
    catch-up over a few thousand records then lasts seconds, long enough to crash into."""
    real = OffsetsTopicSource.poll_batch

    def poll_batch(
        source: OffsetsTopicSource, max_messages: int = 10_000, timeout_s: float = 1.0
    ) -> Any:
        time.sleep(0.02)
        return real(source, min(max_messages, 200), timeout_s)

    monkeypatch.setattr(OffsetsTopicSource, "poll_batch", poll_batch)


def backlog(broker: Broker, topic: str, group: str, rounds: int) -> None:
    """`rounds` commits of the topic's 100 partitions: 100 * rounds records to catch up on."""
    consumer = broker.consumer(group)
    try:
        for offset in range(1, rounds + 1):
            retry(
                lambda o=offset: consumer.commit(  # type: ignore[misc]
                    offsets=[TopicPartition(topic, p, o) for p in range(100)],
                    asynchronous=False,
                )
            )
    finally:
        consumer.close()


@pytest.mark.parametrize("fault", ["kill", "kill-during-catch-up"])
def test_a_broker_crash_loses_nothing_and_duplicates_nothing(
    broker: Broker,
    tmp_path: Path,
    fault: str,
    record_property: Callable[[str, object], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic, group, output = fault_topics(broker, "busy")
    archive = tmp_path / "archive"
    config = exporter_config(
        broker.bootstrap,
        publish_topic=output,
        archive_dir=archive,
        kafka_properties={"socket.timeout.ms": "5000", "reconnect.backoff.max.ms": "500"},
    )
    catching_up = fault == "kill-during-catch-up"
    if catching_up:
        backlog(broker, topic, unique("backlog"), 40)
        slow_source(monkeypatch)
    committer = Committer(broker, topic, group, 2)
    seen: list[tuple[int, bool, float | None]] = []
    done = threading.Event()
    with running_exporter(config) as service:
        if catching_up:
            ingestor = service.exporter.store.ingestor
            wait_for(
                lambda: sum(ingestor.positions.values()) > 500 and readyz(service).status == 503,
                "the first pass under way, not finished",
            )
        else:
            wait_for(lambda: readyz(service).status == 200 and committer.commits > 5, "ready")
        watcher = threading.Thread(target=watch_readiness, args=(service, seen, done), daemon=True)
        watcher.start()
        if catching_up:
            assert readyz(service).status == 503  # the crash comes before the first pass ends
        broker.control("kill")
        wait_for(lambda: any(not up for _s, up, _m in seen), "/readyz: source down")
        broker.control("restart")
        # measured, never asserted: the README's Reliability table reports it
        back = time.monotonic()
        settle(committer, broker, group, lambda: api_offsets(service, group))
        wait_for(lambda: readyz(service).status == 200, "ready again")
        # the watcher's own latest sample too: on a loaded machine a request to the restarted
        # broker may still time out (socket.timeout.ms) after the first ready answer, and the
        # source then honestly says "down" again for a moment
        wait_for(
            lambda: bool(seen) and seen[-1][0] == 200,
            "the watcher's latest sample ready",
            describe=lambda: seen[-5:],
        )
        recovery_s = round(time.monotonic() - back, 1)
        record_property("recovery_s", recovery_s)
        print(f"broker {fault}: ready with the API = OffsetFetch {recovery_s} s after it was back")
        wait_for(
            lambda: (
                service.exporter.sinks.publisher is not None
                and service.exporter.sinks.publisher.flush(1) == 0
                and service.exporter.sinks.publisher.stats().in_flight == 0
            ),
            "every republished record delivered",
        )
        done.set()
        watcher.join(10)
    assert_said_down(seen)
    assert not catching_up or seen[0][0] == 503
    assert_each_record_once(broker, output, archive)


def test_a_hung_broker_loses_nothing_and_duplicates_nothing(
    broker: Broker,
    tmp_path: Path,
    children: list[ExporterProcess],
    record_property: Callable[[str, object], None],
) -> None:
    """SIGSTOP past every timeout of the exporter's clients: until it says "source down" (its
    requests time out after 5 s) and its republishing has failed deliveries (the producer's
    message.timeout.ms, 8 s here); then SIGCONT. The exporter lives on, catches up, and is
    stopped (SIGTERM) and started again from its checkpoint, which a failed delivery held
    back: the restart republishes what the output topic does not hold yet, exactly once."""
    topic, group, output = fault_topics(broker, "hung")
    archive = tmp_path / "archive"
    argv = export_argv(
        broker.bootstrap,
        output,
        archive,
        tmp_path / "state" / "offsetwatch.ckpt",
        *("--snapshot-interval-s", "0.2", "--sample-interval-s", "0.5"),
        *("-X", "socket.timeout.ms=5000", "-X", "message.timeout.ms=8000"),
        *("-X", "reconnect.backoff.max.ms=500"),
        # the publisher holds what it read in the last 3 s before sending it, and the broker
        # is stopped just after the exporter read a fresh commit (below): records are waiting
        # when it stops, so some deliveries must fail (with the default 50 ms a caught-up
        # exporter often had nothing in flight at SIGSTOP; with 1 s, a loaded machine once
        # stalled the committer for longer than that just before SIGSTOP)
        *("-X", "linger.ms=3000"),
    )
    committer = Committer(broker, topic, group, 2)
    watcher = Watcher()
    watching = threading.Thread(target=watcher.run, daemon=True)
    watching.start()
    try:
        exporter = ExporterProcess.start(argv, tmp_path / "export.log", children)

        at_stop: dict[str, object] = {}

        def describe() -> str:
            published = {
                name: exporter_metric(exporter, f"offsetwatch_{name}")
                for name in ("published_total", "publish_errors_total")
            }
            return (
                f"commits {committer.commits}, at SIGSTOP {at_stop}, now {published}; "
                + exporter.stacks()
            )

        wait_for(
            lambda: exporter.get("/readyz").status == 200 and committer.commits > 5,
            "ready",
            describe=describe,
        )
        watcher.current = exporter
        pid = int((broker.directory / "broker.pid").read_text())
        at_stop["published"] = exporter_metric(exporter, "offsetwatch_published_total")
        # a commit the exporter read (and handed to the publisher) a moment ago
        read = child_api_offsets(exporter, group)
        wait_for(
            lambda: child_api_offsets(exporter, group) != read,
            "the exporter reading a fresh commit",
            describe=describe,
        )
        at_stop["commits"] = committer.commits
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for(
                lambda: any(not up for _pid, _status, up, _metric in watcher.seen),
                "/readyz: source down",
                describe=describe,
            )
            wait_for(
                lambda: (exporter_metric(exporter, "offsetwatch_publish_errors_total") or 0) > 0,
                "deliveries failed (message.timeout.ms passed)",
                describe=describe,
            )
        finally:
            os.kill(pid, signal.SIGCONT)
        back = time.monotonic()
        settle(committer, broker, group, lambda: child_api_offsets(exporter, group), describe)
        wait_for(
            lambda: bool(watcher.seen) and watcher.seen[-1][1] == 200,
            "ready again",
            describe=describe,
        )
        recovery_s = round(time.monotonic() - back, 1)
        record_property("recovery_s", recovery_s)
        print(f"broker hang: ready with the API = OffsetFetch {recovery_s} s after SIGCONT")
        watcher.current = None
        # a failed delivery makes the exit status 1 (a supervisor must see it), never a crash
        assert exporter.end(signal.SIGTERM) in (0, 1), describe()
        assert "Traceback" not in exporter.tail(), describe()
        again = ExporterProcess.start(argv, tmp_path / "again.log", children)
        wait_for(
            lambda: (
                again.get("/readyz").status == 200
                and child_api_offsets(again, group) == broker.committed(group)
            ),
            "the restarted exporter ready with the API equal to OffsetFetch",
            timeout_s=120,
            describe=again.tail,
        )
        assert again.end(signal.SIGTERM) == 0, again.tail()
    finally:
        watcher.done.set()
        committer.stop()
    assert_said_down([(status, up, metric) for _pid, status, up, metric in watcher.seen])
    assert_each_record_once(broker, output, archive)


#: how long the schedule test keeps the broker stopped: past the source's metadata lookup
#: timeout (5 s) and the socket timeout, so a call on the main loop would show as a gap
HANG_S = 12.0


def test_a_hung_broker_never_holds_the_snapshots_back(
    broker: Broker, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """The main loop never waits on Kafka: with the broker SIGSTOPped, snapshots are still
    built at their interval (1 s here). When the source's metadata lookups ran on the main
    loop, a hung broker held them back to one every ~10 s. The publisher and the archive are
    on, so their calls are on the path too.

    And what is served is never called fresh while nothing confirms it: once the broker has
    been silent for longer than --stale-after-s, /readyz says not ready (stale, or source
    down) in every answer, and the committing group is marked stale; ready again after."""
    topic, group, output = fault_topics(broker, "schedule")
    stale_after_s = 3.0
    config = exporter_config(
        broker.bootstrap,
        snapshot_interval_s=1.0,
        sample_interval_s=1.0,
        stale_after_s=stale_after_s,
        publish_topic=output,
        archive_dir=tmp_path / "archive",
        kafka_properties={"socket.timeout.ms": "5000", "reconnect.backoff.max.ms": "500"},
    )
    committer = Committer(broker, topic, group, 2)
    built: list[int] = []
    #: (seconds since SIGSTOP, ready, reason) of every readiness answer during the hang
    answers: list[tuple[float, bool, str]] = []
    marked_stale = False
    try:
        with running_exporter(config) as service:
            stats = service.exporter.stats
            wait_for(lambda: stats.ready and committer.commits > 3, "ready, commits flowing")
            wait_for(lambda: readiness(stats)[0], "/readyz ready: every partition confirmed")
            pid = int((broker.directory / "broker.pid").read_text())
            os.kill(pid, signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                until = stopped + HANG_S
                while time.monotonic() < until:
                    if not built or stats.snapshot_time_ms != built[-1]:
                        built.append(stats.snapshot_time_ms)
                        detail = group_detail(service.exporter.snapshot, group)
                        freshness = None if detail is None else detail["freshness"]
                        marked_stale = marked_stale or bool(freshness and freshness["stale"])
                    ready, body = readiness(stats)
                    answers.append((time.monotonic() - stopped, ready, body.get("reason", "")))
                    time.sleep(0.05)
            finally:
                os.kill(pid, signal.SIGCONT)
            wait_for(lambda: stats.source_up, "the source up again after SIGCONT")
            wait_for(lambda: readiness(stats)[0], "/readyz ready again after SIGCONT")
            assert stats.loop_errors_total == 0
    finally:
        committer.stop()
    gaps = [b - a for a, b in itertools.pairwise(built)]
    record_property("snapshots_while_hung", len(built))
    largest = max(gaps, default=0)
    record_property("largest_gap_ms", largest)
    print(f"broker hung {HANG_S:g} s: {len(built)} snapshots, largest gap {largest} ms")
    # one a second expected; a call on the main loop shows as a gap of its timeout: the
    # source's metadata lookup waited 5 s (before the readers: 7 snapshots in 12 s, one gap
    # of 6.0 s), so a gap of 4 intervals is far from both
    assert len(built) >= 2 and largest < 4 * 1000, built
    # the last confirmation came before the SIGSTOP (an end of partition already fetched may
    # be taken a moment after it: 1 s of slack); from then on, never ready
    late = [(at, reason) for at, ready, reason in answers if at > stale_after_s + 1.0]
    assert late and not any(ready for at, ready, _r in answers if at > stale_after_s + 1.0)
    reasons = {reason.split(":", 1)[0] for _at, reason in late}
    assert reasons <= {"stale", "source down"}, reasons
    assert marked_stale, "the committing group was never marked stale while the broker hung"
    first_stale = next((at for at, ready, _r in answers if not ready), None)
    record_property("not_ready_after_s", first_stale)
    print(f"not ready {first_stale:.1f} s after SIGSTOP (--stale-after-s {stale_after_s:g})")
