"""A handover loses no history (issue 32 item 3), on the real broker: the replica that takes a
group over rebuilds its partitions' log-end history from Kafka's record timestamps, so its
lag in seconds is the previous owner's from its first sample, not one that starts again at
zero. Two replicas (classic protocol) as child processes; the group's owner is stopped."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.exporter.daemon_helpers import group_path, wait_for
from tests.exporter.exporter_process import ExporterProcess
from tests.exporter.fleet_processes import admin_commit, fleet_replica
from tests.real_broker import Broker, retry, unique

pytestmark = pytest.mark.broker

SAMPLE_S = 1.0


def _detail(exporter: ExporterProcess, group: str) -> dict[str, Any] | None:
    answer = exporter.get(group_path(group) + "?local=1")
    return dict(answer.json()) if answer.status == 200 else None


def _lag_seconds(exporter: ExporterProcess, group: str) -> float | None:
    detail = _detail(exporter, group)
    if detail is None or detail["total_lag"] != 10:
        return None
    return float(detail["max_lag_seconds"])


def test_the_new_owner_shows_the_lag_seconds_of_the_old_one(
    kafka_broker: Broker, tmp_path: Path, children: list[ExporterProcess]
) -> None:
    fleet, topic, group = unique("fleet"), unique("orders"), unique("stuck")
    kafka_broker.create_topic(topic, 1)
    replicas = [
        fleet_replica(kafka_broker, fleet, f"h{i}", "classic", tmp_path, children) for i in range(2)
    ]
    for replica in replicas:
        wait_for(lambda r=replica: r.get("/readyz").status == 200, "ready", describe=replica.tail)  # type: ignore[misc]
    # the records the group never reads, after the replicas started: both see them arrive
    produced_at = time.time()
    kafka_broker.produce(topic, [10])
    admin = kafka_broker.admin()  # kept alive until its futures answer

    retry(lambda: admin_commit(admin, group, topic, 0))
    wait_for(
        lambda: any(_lag_seconds(r, group) for r in replicas),
        "the owner shows the group's lag seconds",
        describe=lambda: [_detail(r, group) for r in replicas],
    )
    owner = next(r for r in replicas if _lag_seconds(r, group) is not None)
    other = next(r for r in replicas if r is not owner)
    wait_for(lambda: (_lag_seconds(owner, group) or 0) > 4, "lag seconds past 4")
    before = _lag_seconds(owner, group)
    assert before is not None
    assert abs(before - (time.time() - produced_at)) <= 2 * SAMPLE_S + 1, before
    owner.end(signal.SIGTERM)
    wait_for(
        lambda: _lag_seconds(other, group) is not None,
        "the other replica exports the group",
        describe=lambda: (_detail(other, group), other.tail()),
    )
    after = _lag_seconds(other, group)
    true_lag = time.time() - produced_at
    print(
        f"handover: lag seconds {before:.1f} at the old owner, {after} at the new "
        f"(true {true_lag:.1f})"
    )
    assert after is not None
    # what the old owner would show now, within a sampling interval of each, not from zero
    assert abs(after - true_lag) <= 2 * SAMPLE_S + 1, (after, true_lag)
