"""A new Kafka cluster behind the same address, on real brokers.

An operator wipes a broker and starts a fresh one on the same port while the exporter runs, or
points the exporter at another cluster with an old checkpoint. Before, the exporter kept serving
the dead cluster's groups (and said it was ready), or resumed the new cluster's topic from the
old cluster's positions, skipping its first records. Now the cluster id (Kafka's metadata) is
part of the state and of the checkpoint: a change is one WARNING naming both ids, the old
state is dropped, and the state is rebuilt from the new cluster's topic.

The brokers here are the test's own (one partition of __consumer_offsets, so that every group
shares the one partition whose positions the checkpoint records).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from offsetwatch.exporter.service import ExporterService
from offsetwatch.exporter.sinks.checkpoint import load_checkpoint
from tests.exporter.daemon_helpers import (
    api_group,
    exporter_config,
    readyz,
    running_exporter,
    wait_for,
)
from tests.real_broker import (
    Broker,
    free_port_pair,
    require_broker,
    start_broker,
    stop_broker,
    unique,
)

#: `cluster`: in `make test-cluster` (the long tier), whose time it does not add to `make
#: test`: brokers of its own wiped and replaced
pytestmark = [pytest.mark.broker, pytest.mark.cluster]

ONE_PARTITION = "offsets.topic.num.partitions=1"


def offsets_in_api(service: ExporterService, group: str) -> dict[tuple[str, int], int] | None:
    answer = api_group(service, group)
    if answer.status != 200:
        return None
    body = answer.json()
    return {(row["topic"], row["partition"]): row["committed"] for row in body["partitions"]}


@pytest.fixture
def port() -> Iterator[int]:
    require_broker()
    yield free_port_pair()


def _recovered(record: Callable[[str, object], None], fault: str, since: float) -> None:
    """Measured, never asserted: the README's Reliability table reports it."""
    recovery_s = round(time.monotonic() - since, 1)
    record("recovery_s", recovery_s)
    print(f"{fault}: the new cluster's state served {recovery_s} s after it was there")


def test_a_cluster_replaced_behind_the_same_address_is_rebuilt_not_served_stale(
    tmp_path: Path,
    port: int,
    caplog: pytest.LogCaptureFixture,
    record_property: Callable[[str, object], None],
) -> None:
    first = start_broker(tmp_path / "first", ONE_PARTITION, port=port)
    second: Broker | None = None
    try:
        topic, old_group, new_group = unique("orders"), unique("old"), unique("new")
        first.create_topic(topic, 2)
        first.produce(topic, [5, 5])
        first.commit(old_group, {(topic, 0): 3, (topic, 1): 4})
        first_id = first.cluster_id()
        checkpoint = tmp_path / "state.ckpt"
        config = exporter_config(
            first.bootstrap, checkpoint_path=checkpoint, checkpoint_interval_s=0.5
        )
        with caplog.at_level(logging.WARNING), running_exporter(config) as service:
            wait_for(
                lambda: offsets_in_api(service, old_group) == {(topic, 0): 3, (topic, 1): 4},
                "the first cluster's group in the API",
            )
            first.control("kill")
            second = start_broker(tmp_path / "second", ONE_PARTITION, port=port)
            back = time.monotonic()  # measured for the README's Reliability table
            second_id = second.cluster_id()
            assert second_id != first_id
            second.create_topic(topic, 2)
            second.produce(topic, [7, 7])
            second.commit(new_group, {(topic, 0): 6})

            wait_for(
                lambda: offsets_in_api(service, new_group) == {(topic, 0): 6},
                "the new cluster's group in the API",
                describe=lambda: service.exporter.stats,
            )
            # the dead cluster's group is gone, not served beside the new one
            assert api_group(service, old_group).status == 404
            wait_for(lambda: readyz(service).status == 200, "ready again, on the new cluster")
            _recovered(record_property, "new cluster behind the address", back)
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            changed = [
                w
                for w in warnings
                if w.startswith("the Kafka cluster behind") and first_id in w and second_id in w
            ]
            assert len(changed) == 1, warnings
            wait_for(
                lambda: load_checkpoint(checkpoint).meta.cluster_id == second_id,
                "a checkpoint of the new cluster",
            )
        assert set(load_checkpoint(checkpoint).state.groups) == {new_group}
    finally:
        stop_broker(tmp_path / "first")
        if second is not None:
            stop_broker(second.directory)


def test_a_checkpoint_of_another_cluster_is_never_used(
    tmp_path: Path,
    port: int,
    caplog: pytest.LogCaptureFixture,
    record_property: Callable[[str, object], None],
) -> None:
    """The new cluster's topic is longer than the checkpoint's positions: a position check
    alone would accept them, skip the new cluster's first records and serve the old groups."""
    checkpoint = tmp_path / "state.ckpt"
    topic, old_group, new_group = unique("orders"), unique("old"), unique("new")
    first = start_broker(tmp_path / "first", ONE_PARTITION, port=port)
    try:
        first.create_topic(topic, 1)
        first.produce(topic, [10])
        first.commit(old_group, {(topic, 0): 2})
        config = exporter_config(first.bootstrap, checkpoint_path=checkpoint)
        with running_exporter(config) as service:
            wait_for(lambda: offsets_in_api(service, old_group) == {(topic, 0): 2}, "old group")
        first_id = load_checkpoint(checkpoint).meta.cluster_id
        assert first_id == first.cluster_id()
    finally:
        stop_broker(tmp_path / "first")

    second = start_broker(tmp_path / "second", ONE_PARTITION, port=port)
    try:
        second.create_topic(topic, 1)
        second.produce(topic, [10])
        for offset in range(1, 9):  # far more records than the old checkpoint's position
            second.commit(new_group, {(topic, 0): offset})
        second_id = second.cluster_id()
        config = exporter_config(second.bootstrap, checkpoint_path=checkpoint)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING), running_exporter(config) as service:
            wait_for(lambda: readyz(service).status == 200, "ready on the new cluster")
            wait_for(
                lambda: offsets_in_api(service, new_group) == {(topic, 0): 8},
                "the new cluster's group, read from its first record",
            )
            _recovered(record_property, "checkpoint of another cluster", started)
            assert api_group(service, old_group).status == 404
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(first_id in w and second_id in w for w in warnings), warnings
        assert load_checkpoint(checkpoint).meta.cluster_id == second_id
    finally:
        stop_broker(second.directory)
