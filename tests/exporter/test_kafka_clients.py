"""When a librdkafka client has no broker address left, from its statistics reports."""

from __future__ import annotations

import json

from offsetwatch.exporter.kafka_clients import (
    AddressWatch,
    ClientGenerations,
    has_broker_address,
)

LEARNED = {"nodename": "127.0.0.1:9092", "source": "learned", "state": "UP"}
#: the consumer's group coordinator stand-in once the broker it pointed at was forgotten
COORDINATOR = {"nodename": "", "source": "logical", "state": "TRY_CONNECT"}


def test_an_address_is_any_non_empty_node_name() -> None:
    assert has_broker_address({"127.0.0.1:9092/1": LEARNED, "GroupCoordinator": COORDINATOR})
    assert not has_broker_address({"GroupCoordinator": COORDINATOR})
    assert not has_broker_address({})  # a producer or admin client with every broker forgotten
    assert has_broker_address({"b1": {"state": "DOWN"}})  # no node name field: not librdkafka's


def test_two_reports_in_a_row_without_an_address_mean_replace() -> None:
    watch = AddressWatch()
    assert not watch.observe({"GroupCoordinator": COORDINATOR})
    assert not watch.observe({"b": LEARNED})  # back: counting starts again
    assert not watch.observe({})
    assert watch.observe({})
    assert watch.reports == 2
    watch.reset()
    assert not watch.observe({})


def test_raw_reports_and_unreadable_ones() -> None:
    watch = AddressWatch(after=1)
    assert not watch.observe_json("not json")
    assert not watch.observe_json(json.dumps([1, 2]))
    assert not watch.observe_json(json.dumps({"brokers": {"b": LEARNED}}))
    assert watch.observe_json(json.dumps({"brokers": {"GroupCoordinator": COORDINATOR}}))


def test_callbacks_of_a_client_given_up_on_do_nothing() -> None:
    generations = ClientGenerations()
    calls: list[tuple[str, object]] = []
    old = generations.callbacks(error_cb=lambda e: calls.append(("error", e)))
    old["error_cb"]("first")
    generations.advance()
    new = generations.callbacks(error_cb=lambda e: calls.append(("error", e)))
    old["error_cb"]("from the old client")
    new["error_cb"]("from the new client")
    assert calls == [("error", "first"), ("error", "from the new client")]
