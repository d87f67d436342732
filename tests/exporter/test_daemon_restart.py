"""Restarting the exporter: resume from the checkpoint, or rebuild when it no longer fits.

Real `ExporterService`s (daemon loop, sampler, HTTP) against an in-process mock cluster; the
checkpoint is written by `stop()` (the daemon's close() saves it at shutdown).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from offsetwatch.exporter.service import ExporterService
from offsetwatch.exporter.sinks.checkpoint import load_checkpoint
from offsetwatch.mock_cluster import MockCluster
from tests.exporter.daemon_helpers import (
    Raw,
    Workload,
    api_group,
    create_workload_topics,
    exporter_config,
    log_ends,
    running_exporter,
    state_projection,
    wait_for,
    wait_ready_with_log_ends,
)
from tests.kafka_fixtures import OFFSETS_TOPIC, produce_raw

pytestmark = pytest.mark.kafka

PARTITIONS = 3


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        yield mock


def _first_phase(workload: Workload) -> list[Raw]:
    records: list[Raw] = []
    for index in range(6):
        group = f"billing-{index}"
        records += workload.join(group)
        records += workload.commits(group, 8)
    return records


#: groups the second phase writes records for
SECOND_PHASE_GROUPS = frozenset(
    {"billing-0", "billing-1", "billing-2", "billing-3", "billing-4", "audit"}
)


def _second_phase(workload: Workload) -> list[Raw]:
    records: list[Raw] = []
    for index in range(4):
        records += workload.commits(f"billing-{index}", 3)
    records += workload.delete("billing-4")
    records += workload.join("audit")
    records += workload.commits("audit", 2)
    return records


def _caught_up(service: ExporterService, ends: dict[int, int]) -> bool:
    exporter = service.exporter
    positions = exporter.store.ingestor.positions
    return all(positions.get(p, 0) >= end for p, end in ends.items() if end) and bool(
        exporter.stats.ready
    )


def _run_to_end(
    cluster: MockCluster, checkpoint: Path | None
) -> tuple[dict[str, object], int, dict[int, int] | None]:
    """Start an exporter, wait until it has applied the whole topic, stop it.

    Returns the state projection, how many records it ingested, and (with a checkpoint) the
    positions the source was told to start from.
    """
    ends = log_ends(cluster.bootstrap_servers, OFFSETS_TOPIC, PARTITIONS)
    config = exporter_config(
        cluster.bootstrap_servers, checkpoint_path=checkpoint, checkpoint_interval_s=3600.0
    )
    restored: dict[int, int] = {}

    def remember_start(service: ExporterService) -> None:
        # the positions open() restored from the checkpoint, handed to the source as its start
        restored.update(service.exporter.store.ingestor.positions)

    with running_exporter(config, opened=remember_start) as service:
        wait_ready_with_log_ends(service)
        wait_for(lambda: _caught_up(service, ends), f"positions at the log ends {ends}")
        assert api_group(service, "billing-0").status == 200
    # read once the main loop has stopped: nothing mutates the state any more
    projection = state_projection(service.exporter.store.offsets)
    ingested = service.exporter.stats.total_records
    return projection, ingested, (restored if checkpoint is not None else None)


def test_restart_resumes_from_the_checkpoint(cluster: MockCluster, tmp_path: Path) -> None:
    """Stop (the final checkpoint), more records, start again with the same checkpoint path.

    The second exporter starts at the checkpointed positions (= the log ends at the stop) and
    ingests only the records written since - it did not re-read from offset 0 - and ends with
    exactly the state of a fresh exporter that reads the whole topic from the start.
    """
    create_workload_topics(cluster, cluster.bootstrap_servers, PARTITIONS)
    workload = Workload(PARTITIONS)
    first = _first_phase(workload)
    produce_raw(cluster.bootstrap_servers, first)
    checkpoint = tmp_path / "exporter.ckpt"

    _, ingested, start = _run_to_end(cluster, checkpoint)
    assert ingested == len(first)
    assert start == {}  # no checkpoint yet: read from the beginning
    saved = load_checkpoint(checkpoint)
    ends_at_stop = log_ends(cluster.bootstrap_servers, OFFSETS_TOPIC, PARTITIONS)
    assert saved.positions == {p: end for p, end in ends_at_stop.items() if end}
    assert "billing-4" in saved.state.groups

    second = _second_phase(workload)
    produce_raw(cluster.bootstrap_servers, second)
    resumed, ingested, start = _run_to_end(cluster, checkpoint)
    assert start == saved.positions
    assert ingested == len(second)  # only the new records were read

    fresh, ingested, _ = _run_to_end(cluster, None)
    assert ingested == len(first) + len(second)
    assert resumed == fresh
    assert "billing-4" not in fresh and "audit" in fresh
    # the checkpoint written by the second stop has moved on to the new log ends
    assert load_checkpoint(checkpoint).positions == {
        p: end
        for p, end in log_ends(cluster.bootstrap_servers, OFFSETS_TOPIC, PARTITIONS).items()
        if end
    }


def test_checkpoint_out_of_range_falls_back_to_a_full_rebuild(
    cluster: MockCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log start moved past a checkpointed position (retention, DeleteRecords): the
    checkpoint's state cannot be completed any more, so the exporter throws it away and
    rebuilds from the log start. Proven by the result: it equals a fresh exporter's state of
    the truncated log, which lacks groups whose only records were deleted - a resume would
    still have them from the checkpoint."""
    create_workload_topics(cluster, cluster.bootstrap_servers, PARTITIONS)
    workload = Workload(PARTITIONS)
    first = _first_phase(workload)
    produce_raw(cluster.bootstrap_servers, first)
    checkpoint = tmp_path / "exporter.ckpt"
    _run_to_end(cluster, checkpoint)
    saved = load_checkpoint(checkpoint)

    second = _second_phase(workload)
    produce_raw(cluster.bootstrap_servers, second)
    # billing-5 lives in a partition that the second phase also writes to: delete everything
    # up to the first record written after the checkpoint there
    victim = workload.partition_of("billing-5")
    assert any(p == victim for p, _, _ in second)
    cut = saved.positions[victim] + 1
    cluster.delete_records(OFFSETS_TOPIC, victim, cut)
    gone = {
        group
        for group in saved.state.groups
        if workload.partition_of(group) == victim and group not in SECOND_PHASE_GROUPS
    }
    assert "billing-5" in gone

    caplog.set_level(logging.WARNING, logger="offsetwatch.exporter.daemon")
    rebuilt, ingested, start = _run_to_end(cluster, checkpoint)
    assert start == saved.positions  # it did try the checkpoint
    assert any("out of range" in r.getMessage() for r in caplog.records)
    fresh, fresh_ingested, _ = _run_to_end(cluster, None)
    assert rebuilt == fresh
    assert not gone & set(fresh)
    remaining = len(first) + len(second) - cut
    assert fresh_ingested == remaining
    assert ingested == remaining  # everything from the log start, once
