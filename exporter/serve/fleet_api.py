"""The fleet's HTTP answers: `/api/v1/fleet`, and the group API of every group from any
replica (docs/fleet.md).

A replica holds only the groups of its partitions. A group it does not hold is asked of its
owner (`forward`), as the fleet view names it; `/api/v1/groups` is this replica's list plus
every other replica's own (`?local=1`), fetched in parallel. What could not be asked is said
in a header, never hidden: `X-Offsetwatch-Fleet-Incomplete` names the partitions whose groups
the answer lacks and why. A forwarded request carries `local=1`, so it is never forwarded
again (a view that lags a handover cannot bounce a request between replicas).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from offsetwatch.exporter.fleet.identity import ReplicaIdentity
from offsetwatch.exporter.fleet.view import FleetMember, FleetView

#: how long a replica waits for another's answer (Prometheus' scrape timeout is 10 s)
FORWARD_TIMEOUT_S: Final = 3.0
#: the largest answer taken from another replica
MAX_ANSWER_BYTES: Final = 256 * 1024 * 1024
SERVED_BY: Final = "X-Offsetwatch-Served-By"
INCOMPLETE: Final = "X-Offsetwatch-Fleet-Incomplete"


@dataclass(slots=True, frozen=True)
class Answer:
    status: int
    body: bytes
    served_by: str


def fleet_json(view: FleetView, me: ReplicaIdentity) -> dict[str, Any]:
    """The body of `/api/v1/fleet`: who owns which partition, and which none owns; each
    member's settings fingerprint, and the replicas whose fingerprint is not this one's."""
    mismatched = view.mismatched(me.fingerprint)
    return {
        "fleet": view.fleet,
        "replica": me.name,
        "url": me.url,
        "settings_fingerprint": me.fingerprint,
        "mismatched": sorted({m.replica.name for m in mismatched if m.replica is not None}),
        "state": view.state,
        "described_at_ms": view.time_ms or None,
        "error": view.error,
        "partition_count": view.partition_count,
        "unowned_partitions": list(view.unowned()),
        "members": [
            {
                "replica": None if m.replica is None else m.replica.name,
                "url": None if m.replica is None else m.replica.url,
                "settings_fingerprint": None if m.replica is None else m.replica.fingerprint,
                "client_id": m.client_id,
                "host": m.host,
                "member_id": m.member_id,
                "partitions": list(m.partitions),
                "is_self": m.replica is not None and m.replica.name == me.name,
            }
            for m in view.members
        ],
    }


def _ask(member: FleetMember, path: str, authorization: str | None) -> Answer:
    replica = member.replica
    assert replica is not None and replica.url is not None
    headers = {"Accept": "application/json"}
    if authorization is not None:
        # the fleet shares one web config: the client's credentials are the fleet's
        headers["Authorization"] = authorization
    request = urllib.request.Request(replica.url + path, headers=headers)
    context = ssl.create_default_context() if replica.url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=FORWARD_TIMEOUT_S, context=context) as r:
            return Answer(r.status, r.read(MAX_ANSWER_BYTES), replica.name)
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.read(MAX_ANSWER_BYTES), replica.name)


def forward_group(
    view: FleetView, me: ReplicaIdentity, group_id: str, rest: str, authorization: str | None
) -> Answer | None:
    """The owner's answer for `/api/v1/groups/{rest}` of a group this replica does not hold;
    None when this replica is the owner (its own 404 stands). An owner that cannot be asked
    is a 503 that says why."""
    owner = view.owner_of_group(group_id)
    if owner is None:
        return _unavailable(
            f"group {group_id!r} belongs to a __consumer_offsets partition no replica of fleet "
            f"{view.fleet} holds right now (a handover, or the fleet view is "
            f"{'failing: ' + view.error if view.error else 'not known yet'}); retry"
        )
    replica = owner.replica
    if replica is not None and replica.name == me.name:
        return None
    if replica is None or replica.url is None:
        return _unavailable(
            f"group {group_id!r} is held by member {owner.client_id!r} of fleet {view.fleet}, "
            "which announces no URL to forward to"
        )
    try:
        return _ask(owner, f"/api/v1/groups/{rest}?local=1", authorization)
    except (OSError, ValueError) as error:
        return _unavailable(f"replica {replica.name} ({replica.url}) did not answer: {error}")


def _unavailable(reason: str) -> Answer:
    return Answer(503, json.dumps({"error": reason}).encode(), "")


def merged_groups(
    view: FleetView, me: ReplicaIdentity, own: list[Any], authorization: str | None
) -> tuple[list[Any], str | None]:
    """Every group of the fleet (this replica's `own` list plus the others'), by group id,
    and what the list lacks (None when complete)."""
    others = [
        m
        for m in view.replicas()
        if m.replica is not None and m.replica.name != me.name and m.partitions
    ]
    missing: list[str] = []
    merged = list(own)
    asked = [m for m in others if m.replica is not None and m.replica.url is not None]
    missing += [_lack(m, "announces no URL") for m in others if m not in asked]
    if asked:
        with ThreadPoolExecutor(max_workers=min(8, len(asked))) as pool:
            answers = list(pool.map(lambda m: _list_of(m, authorization), asked))
        for member, (groups, problem) in zip(asked, answers, strict=True):
            if problem is not None:
                missing.append(_lack(member, problem))
            else:
                merged.extend(groups)
    unowned = view.unowned()
    if unowned:
        missing.append(f"partitions {_ranges(unowned)}: no owner")
    if view.error is not None:
        missing.append(f"the fleet view: {view.error}")
    merged.sort(key=lambda g: str(g.get("group", "")) if isinstance(g, dict) else "")
    return merged, "; ".join(missing) if missing else None


def _list_of(member: FleetMember, authorization: str | None) -> tuple[list[Any], str | None]:
    try:
        answer = _ask(member, "/api/v1/groups?local=1", authorization)
    except (OSError, ValueError) as error:
        return [], f"did not answer ({error})"
    if answer.status != 200:
        return [], f"answered {answer.status}"
    try:
        groups = json.loads(answer.body)
    except ValueError:
        return [], "answered something that is not JSON"
    if not isinstance(groups, list):
        return [], "answered JSON that is not a list of groups"
    return groups, None


def _lack(member: FleetMember, why: str) -> str:
    name = member.replica.name if member.replica is not None else member.client_id
    return f"partitions {_ranges(member.partitions)} of replica {name}: {why}"


def _ranges(partitions: Iterable[int]) -> str:
    """0-3,7 for [0, 1, 2, 3, 7]: a header line stays short however many partitions."""
    out: list[str] = []
    run: list[int] = []
    for p in sorted(partitions):
        if run and p == run[-1] + 1:
            run.append(p)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [p]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
