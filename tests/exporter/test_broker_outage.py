"""The only broker dies (SIGKILL) under a running exporter and a new one takes its place.

The mock cluster runs in a child process (`ChildMockCluster`) so it can be killed like a
broker; every client connects through a `TcpForwarder` on a fixed local port, which the mock
advertises, so a new mock started later behind the same forwarder is the "same" broker address
(see tests/kafka_fixtures.py). The exporter is a real `ExporterService` with publishing on.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.exporter.service import ExporterService
from offsetwatch.exporter.sinks.checkpoint import load_checkpoint
from tests.exporter.daemon_helpers import (
    DATA_LOG_ENDS,
    DATA_TOPIC,
    Raw,
    Workload,
    api_group,
    api_groups,
    consume_all,
    create_data_topics,
    exporter_config,
    log_ends,
    readyz,
    running_exporter,
    scrape,
    source_positions_of,
    wait_for,
    wait_ready_with_log_ends,
)
from tests.kafka_fixtures import ChildMockCluster, TcpForwarder, produce_raw

pytestmark = pytest.mark.kafka

PARTITIONS = 3
OUTPUT = "offsets-canonical"
OUTPUT_PARTITIONS = 3
#: the publisher holds records this long before sending them (see the test's docstring)
LINGER_MS = 5000


@pytest.fixture
def forwarder() -> Iterator[TcpForwarder]:
    with TcpForwarder() as proxy:
        yield proxy


def _start_cluster(forwarder: TcpForwarder, records: list[Raw]) -> ChildMockCluster:
    """A new, empty mock behind the forwarder, with the topics and `records` replayed."""
    cluster = ChildMockCluster(advertise_port=forwarder.port)
    try:
        cluster.create_topic(OFFSETS_TOPIC, PARTITIONS)
        cluster.create_topic(OUTPUT, OUTPUT_PARTITIONS)
        forwarder.retarget(cluster.address)
        create_data_topics(cluster, {DATA_TOPIC: list(DATA_LOG_ENDS)}, forwarder.address)
        produce_raw(forwarder.address, records)
    except BaseException:
        cluster.kill()
        raise
    return cluster


def _ends(forwarder: TcpForwarder) -> dict[int, int]:
    return {
        p: end for p, end in log_ends(forwarder.address, OFFSETS_TOPIC, PARTITIONS).items() if end
    }


def _ingested_up_to(service: ExporterService, ends: dict[int, int]) -> bool:
    positions = service.exporter.store.ingestor.positions
    return all(positions.get(p, 0) >= end for p, end in ends.items())


def _source_up(service: ExporterService) -> float | None:
    return scrape(service).value("offsetwatch_source_up")


def _committed_rows(service: ExporterService, group: str) -> list[tuple[str, int, int]]:
    answer = api_group(service, group)
    assert answer.status == 200, answer
    return [(r["topic"], r["partition"], r["committed"]) for r in answer.json()["partitions"]]


def test_broker_outage_keeps_serving_and_loses_nothing(
    forwarder: TcpForwarder, tmp_path: Path
) -> None:
    """Kill the broker, keep serving the last state, recover, and lose no record.

    During the outage the daemon keeps running: /api/v1/groups and /api/v1/groups/{id} answer
    with the last state, /metrics says offsetwatch_source_up 0 and /readyz is 503 with the
    reason. A new mock behind the same forwarder (topics re-created, the same records
    replayed, so the same offsets) brings offsetwatch_source_up back to 1 and /readyz to 200.

    What "nothing lost" means when the cluster itself is replaced: the output topic lives on
    the same cluster as `__consumer_offsets`, so the records the publisher had delivered to the
    first cluster die with it - that is the loss of the output cluster, not of the exporter,
    and no client can prevent it. The exporter's promise is about delivery confirmations: a
    source record counts as done only once the cluster acknowledged its output, and every
    record not confirmed when the broker died is delivered after recovery. So the test checks:

    * phase A (before the outage, delivered): the delivery-confirmed positions reach the log
      ends and the first cluster's output topic holds one record for every source offset
      below them - read from the first cluster before it is killed;
    * phase B (written and ingested before the outage, not yet delivered - the publisher's
      linger.ms holds them in its queue, so they are in flight when the broker dies): the
      confirmed positions do not move during the outage, and after recovery the output topic
      of the cluster alive at the end holds every source offset at or above the positions
      confirmed at the kill;
    * phase C (written after recovery) is republished as well, and in the end the confirmed
      positions (and the final checkpoint) reach the new cluster's log ends.

    Together: every source offset is in the first cluster's output (confirmed before the kill)
    or in the last cluster's output (at-least-once; duplicates would be allowed, gaps are
    not). If the new mock is reached before the replay is complete, the source sees its
    position out of range and rebuilds from the start, republishing everything: the checks
    hold for that path too.
    """
    workload = Workload(PARTITIONS)
    phase_a: list[Raw] = []
    for index in range(4):
        phase_a += workload.join(f"billing-{index}")
        phase_a += workload.commits(f"billing-{index}", 3)
    phase_b: list[Raw] = []
    for index in range(4):
        phase_b += workload.commits(f"billing-{index}", 1)
    phase_c = workload.commits("billing-0", 1) + workload.join("late") + workload.commits("late", 1)

    checkpoint = tmp_path / "exporter.ckpt"
    config = exporter_config(
        forwarder.address,
        publish_topic=OUTPUT,
        checkpoint_path=checkpoint,
        checkpoint_interval_s=3600.0,  # only at shutdown: a checkpoint flushes the publisher
        kafka_properties={"linger.ms": str(LINGER_MS), "statistics.interval.ms": "500"},
    )
    with contextlib.ExitStack() as clusters:
        first = _start_cluster(forwarder, phase_a)
        clusters.callback(first.kill)
        with running_exporter(config) as service:
            exporter = service.exporter
            publisher = exporter.sinks.publisher
            assert publisher is not None

            # -- phase A: ingested, delivered, visible in the first cluster's output --------
            wait_ready_with_log_ends(service)
            ends_a = _ends(forwarder)
            wait_for(
                lambda: publisher.confirmed_positions() == ends_a,
                f"phase A confirmed up to {ends_a}",
                describe=publisher.confirmed_positions,
            )
            out_first = source_positions_of(
                consume_all(forwarder.address, OUTPUT, OUTPUT_PARTITIONS)
            )
            assert out_first == {(p, o) for p, end in ends_a.items() for o in range(end)}
            groups_before = {g["group"] for g in api_groups(service)}
            rows_before = _committed_rows(service, "billing-0")

            # -- phase B: ingested but still in the publisher's queue when the broker dies --
            produce_raw(forwarder.address, phase_b)
            ends_b = _ends(forwarder)
            wait_for(
                lambda: _ingested_up_to(service, ends_b),
                f"phase B ingested up to {ends_b}",
                interval_s=0.01,
            )
            first.kill()
            killed_ms = time.time_ns() // 1_000_000
            # the main loop keeps running: snapshots are still being built after the kill
            wait_for(
                lambda: exporter.stats.snapshot_time_ms > killed_ms + 1000,
                "a snapshot built after the kill",
            )
            confirmed_at_kill = publisher.confirmed_positions()
            assert confirmed_at_kill == ends_a  # phase B was in flight
            in_flight = {
                (p, o) for p, end in ends_b.items() for o in range(confirmed_at_kill.get(p, 0), end)
            }
            assert len(in_flight) == len(phase_b)

            # -- the outage: last state served, source down, not ready ----------------------
            wait_for(lambda: _source_up(service) == 0.0, "offsetwatch_source_up 0")
            wait_for(lambda: readyz(service).status == 503, "/readyz 503")
            body = readyz(service).json()
            assert body["ready"] is False and body["source_up"] is False
            assert body["reason"].startswith("source down"), body
            assert service._thread is not None and service._thread.is_alive()  # the main loop
            assert {g["group"] for g in api_groups(service)} == groups_before
            rows_during = _committed_rows(service, "billing-0")
            # the last state: phase B's commits were applied before the kill
            assert {(t, p) for t, p, _ in rows_during} == {(t, p) for t, p, _ in rows_before}
            assert all(
                now > before
                for (_, _, now), (_, _, before) in zip(rows_during, rows_before, strict=True)
            )
            assert publisher.confirmed_positions() == confirmed_at_kill

            # -- recovery: a new, empty broker behind the same address, same records --------
            second = _start_cluster(forwarder, phase_a + phase_b)
            clusters.callback(second.kill)
            assert _ends(forwarder) == ends_b  # the same offsets as on the first cluster
            wait_for(lambda: _source_up(service) == 1.0, "offsetwatch_source_up 1")
            wait_for(
                lambda: readyz(service).status == 200,
                "/readyz 200 again",
                describe=lambda: readyz(service).body,
            )
            wait_for(
                lambda: publisher.confirmed_positions() == ends_b,
                f"phase B confirmed up to {ends_b}",
                describe=publisher.confirmed_positions,
            )

            # -- phase C: new records after recovery ------------------------------------------
            produce_raw(forwarder.address, phase_c)
            ends_c = _ends(forwarder)
            wait_for(
                lambda: publisher.confirmed_positions() == ends_c,
                f"phase C confirmed up to {ends_c}",
                describe=publisher.confirmed_positions,
            )
            wait_for(lambda: api_group(service, "late").status == 200, "group 'late' served")
            assert publisher.stats().failed == 0

        # stopped: the final checkpoint covers exactly what was confirmed
        assert load_checkpoint(checkpoint).positions == ends_c
        out_last = source_positions_of(consume_all(forwarder.address, OUTPUT, OUTPUT_PARTITIONS))
        after_kill = {
            (p, o) for p, end in ends_c.items() for o in range(confirmed_at_kill.get(p, 0), end)
        }
        assert in_flight <= out_last
        assert after_kill <= out_last
        every_offset = {(p, o) for p, end in ends_c.items() for o in range(end)}
        assert out_first | out_last == every_offset
