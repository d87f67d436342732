"""The fleet's HTTP answers without Kafka: replicas are small local HTTP servers, the fleet
view is built by hand. Forwarding reaches the owner and never loops, a merged list says what
it lacks, and an owner that cannot be asked is a 503 with the reason."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.exporter.fleet.identity import ReplicaIdentity
from offsetwatch.exporter.fleet.view import FleetMember, FleetView
from offsetwatch.exporter.serve import fleet_api

PARTITIONS = 4


class _Replica(BaseHTTPRequestHandler):
    #: set per test on a subclass of its own (the `replica` fixture)
    answers: ClassVar[dict[str, tuple[int, Any]]]
    seen: ClassVar[list[tuple[str, str | None]]]

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        status, body = self.answers.get(self.path, (404, {"error": "unknown group"}))
        encoded = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        self.end_headers()
        self.wfile.write(encoded)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def replica() -> Iterator[tuple[str, type[_Replica]]]:
    handler = type("Handler", (_Replica,), {"answers": {}, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


ME = ReplicaIdentity("me", "http://127.0.0.1:1")


def _view(other: ReplicaIdentity, mine: tuple[int, ...], theirs: tuple[int, ...]) -> FleetView:
    members = [
        FleetMember("m1", ME.client_id(), "/h1", ME, mine),
        FleetMember("m2", other.client_id(), "/h2", other, theirs),
    ]
    return FleetView.of("fleet", 1000, "STABLE", members, PARTITIONS)


def _group_in(partition: int) -> str:
    return next(
        g for g in (f"g{i}" for i in range(1000)) if partition_for(g, PARTITIONS) == partition
    )


def test_a_group_of_another_replica_is_asked_of_it_once(
    replica: tuple[str, type[_Replica]],
) -> None:
    url, handler = replica
    group = _group_in(2)
    handler.answers[f"/api/v1/groups/{group}?local=1"] = (200, {"group": group, "status": "OK"})
    view = _view(ReplicaIdentity("other", url), (0, 1), (2, 3))
    answer = fleet_api.forward_group(view, ME, group, group, "Basic abc")
    assert answer is not None and answer.status == 200 and answer.served_by == "other"
    assert json.loads(answer.body)["group"] == group
    # the owner is asked for its own answer only (local=1): it never forwards it again
    assert handler.seen == [(f"/api/v1/groups/{group}?local=1", "Basic abc")]
    assert fleet_api.forward_group(view, ME, _group_in(0), _group_in(0), None) is None


def test_an_owner_that_cannot_be_asked_is_a_503_with_the_reason() -> None:
    gone = ReplicaIdentity("gone", "http://127.0.0.1:9")  # nothing listens on port 9
    view = _view(gone, (0, 1), (2, 3))
    answer = fleet_api.forward_group(view, ME, _group_in(3), _group_in(3), None)
    assert answer is not None and answer.status == 503
    assert "replica gone (http://127.0.0.1:9) did not answer" in json.loads(answer.body)["error"]
    unowned = _view(gone, (0,), (1,))
    answer = fleet_api.forward_group(unowned, ME, _group_in(2), _group_in(2), None)
    assert answer is not None and answer.status == 503
    assert "no replica of fleet fleet holds right now" in json.loads(answer.body)["error"]


def test_the_merged_list_has_every_replica_and_says_what_it_lacks(
    replica: tuple[str, type[_Replica]],
) -> None:
    url, handler = replica
    handler.answers["/api/v1/groups?local=1"] = (200, [{"group": "b"}, {"group": "d"}])
    other = ReplicaIdentity("other", url)
    groups, missing = fleet_api.merged_groups(
        _view(other, (0, 1), (2, 3)), ME, [{"group": "c"}, {"group": "a"}], None
    )
    assert [g["group"] for g in groups] == ["a", "b", "c", "d"] and missing is None
    groups, missing = fleet_api.merged_groups(_view(other, (0,), (2,)), ME, [], None)
    assert missing == "partitions 1,3: no owner"
    handler.answers["/api/v1/groups?local=1"] = (503, {"error": "not ready"})
    groups, missing = fleet_api.merged_groups(
        _view(other, (0, 1), (2, 3)), ME, [{"group": "a"}], None
    )
    assert [g["group"] for g in groups] == ["a"]
    assert missing == "partitions 2-3 of replica other: answered 503"


def test_the_fleet_json_marks_this_replica() -> None:
    other = ReplicaIdentity("other", "http://o:1")
    body = fleet_api.fleet_json(_view(other, (0, 1), (2,)), ME)
    assert body["unowned_partitions"] == [3]
    assert [(m["replica"], m["partitions"], m["is_self"]) for m in body["members"]] == [
        ("me", [0, 1], True),
        ("other", [2], False),
    ]


def test_the_fleet_json_gives_each_settings_fingerprint_and_the_mismatched() -> None:
    me = ReplicaIdentity("me", "http://127.0.0.1:1", "aaaaaaaaaaaa")
    other = ReplicaIdentity("other", "http://o:1", "bbbbbbbbbbbb")
    members = [
        FleetMember("m1", me.client_id(), "/h1", me, (0, 1)),
        FleetMember("m2", other.client_id(), "/h2", other, (2, 3)),
    ]
    body = fleet_api.fleet_json(FleetView.of("fleet", 1000, "STABLE", members, PARTITIONS), me)
    assert body["settings_fingerprint"] == "aaaaaaaaaaaa"
    assert body["mismatched"] == ["other"]
    assert [m["settings_fingerprint"] for m in body["members"]] == [
        "aaaaaaaaaaaa",
        "bbbbbbbbbbbb",
    ]
    agreeing = [FleetMember("m1", me.client_id(), "/h1", me, (0, 1, 2, 3))]
    view = FleetView.of("fleet", 1000, "STABLE", agreeing, PARTITIONS)
    assert fleet_api.fleet_json(view, me)["mismatched"] == []
