"""End to end: the demo workload, the exporter, a real Prometheus, every query of the kit.

The exporter runs on the demo's simulated groups (librdkafka's mock cluster, in-process);
/usr/bin/prometheus scrapes it every second on loopback with the project's rules, every window,
`for` and lag-seconds threshold divided by 30 (10m -> 20 s). Then, through Prometheus' HTTP
API:

* every panel query of every dashboard, its variables filled with real values, returns data,
  and every query variable lists the value used;
* every rule is evaluated without error; every recording rule records data; every series an
  alert reads exists;
* the stalled group's STALL alert (OffsetwatchGroupStatus) fires, as do the stopped group's
  lag alert, the rewound group's REWIND alert and the decode error alert (a record the decoder
  rejects is written to __consumer_offsets); the healthy groups never have an alert, not even
  pending;
* the demo's share groups (queues written as a 4.0 broker writes them) fire the share alerts:
  STALL and STOP (OffsetwatchShareGroupStatus), a growing backlog, poison records; and never
  the consumer-group status alerts;
* deleting the stalled group (tombstones, as kafka-consumer-groups --delete writes them) makes
  its series disappear and its alerts resolve.

The status window is 20 s, longer than the scaled `for` of the status alert (10 s), as in
production (10 minutes and 5). Marked `prometheus`: skipped without the binary locally, failed
under CI=true. Waits have generous limits; nothing asserts a duration.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from offsetwatch.dashboards.live import DemoStack, Prometheus, shorten_rules, wait_until
from tests.grafana.kit import (
    ANY_LABELS_SERIES,
    DASHBOARDS,
    RULES,
    load_dashboard,
    metric_names,
    panels,
    require_tool,
    variable_query,
    variables,
)

pytestmark = [pytest.mark.prometheus, pytest.mark.kafka]

SCALE = 1 / 30
STATUS_WINDOW_S = 20.0
TIMEOUT_S = 150.0
#: what Grafana would put in $__rate_interval at a 1 s scrape interval (4 x scrape interval)
RATE_INTERVAL = "4s"

STALLED = "etl-stalled"
HEALTHY = ("billing-healthy", "audit-idle", "kip848-consumers")
#: alerts the demo must raise: (alertname, group label or "" for exporter alerts)
EXPECTED_FIRING = {
    ("OffsetwatchGroupStatus", STALLED),
    ("OffsetwatchGroupLagHigh", "search-stopped"),
    ("OffsetwatchGroupRewound", "replay-rewound"),
    ("OffsetwatchDecodeErrors", ""),
    ("OffsetwatchShareGroupStatus", "thumbnails-queue"),
    ("OffsetwatchShareGroupStatus", "exports-queue"),
    ("OffsetwatchShareBacklogGrowing", "emails-queue"),
    ("OffsetwatchSharePoisonRecords", "jobs-queue"),
}
#: the demo's share groups (offsetwatch/share_simulator.py)
SHARE_GROUPS = ("jobs-queue", "emails-queue", "thumbnails-queue", "exports-queue")


@dataclass(frozen=True)
class Run:
    stack: DemoStack
    prometheus: Prometheus
    rules: dict[str, Any]
    started: float


def _firing(prometheus: Prometheus) -> set[tuple[str, str]]:
    return {
        (a["metric"]["alertname"], a["metric"].get("group", ""))
        for a in prometheus.query('ALERTS{alertstate="firing"}')
    }


def _fired_since(prometheus: Prometheus, start: float) -> set[tuple[str, str]]:
    """Alerts that fired at any time since `start` (REWIND and a first decode error pass)."""
    series = prometheus.query_range('ALERTS{alertstate="firing"}', start, time.time(), 1)
    return {(s["metric"]["alertname"], s["metric"].get("group", "")) for s in series}


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    binary = require_tool("prometheus", "prometheus")
    rules = shorten_rules(yaml.safe_load(RULES.read_text()), SCALE)
    with DemoStack(status_window_s=STATUS_WINDOW_S) as stack:
        prometheus = Prometheus(binary, stack.target, rules)
        started = time.time()
        prometheus.start()
        try:
            # OffsetwatchDecodeErrors ignores errors of the exporter's first (scaled) 15
            # minutes, the replay after a restart: the bad record arrives after them
            wait_until(
                lambda: prometheus.query("time() - offsetwatch_start_time_seconds > 31"),
                "the exporter to run for 31 s",
                TIMEOUT_S,
            )
            stack.inject_undecodable_record()
            seen: set[tuple[str, str]] = set()

            def all_fired() -> bool:
                seen.update(_fired_since(prometheus, started))
                return seen >= EXPECTED_FIRING and ("OffsetwatchGroupStatus", STALLED) in (
                    _firing(prometheus)
                )

            wait_until(
                all_fired,
                f"alerts {sorted(EXPECTED_FIRING)} to fire (log: {prometheus.log_path})",
                TIMEOUT_S,
                describe=lambda: sorted(seen),
            )
            yield Run(stack, prometheus, rules, started)
        finally:
            prometheus.stop()


# ------------------------------------------------------------------ dashboards


def _fill(expr: str, values: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$__interval", "1s")
    for name, value in values.items():
        expr = expr.replace(f"${name}", value)
    assert "$" not in expr.replace("$__", ""), expr
    return expr


def _returns_data(prometheus: Prometheus, target: dict[str, Any], expr: str) -> bool:
    if target["instant"]:
        return bool(prometheus.query(expr))
    now = time.time()
    return bool(prometheus.query_range(expr, now - 30, now, 1))


#: the group each dashboard is looked at with; the group detail with three kinds of group: a
#: classic group has no assignment epoch, a KIP-848 group no classic generation history, and
#: only a share group (with poison records) has share partitions
GROUPS = {
    "offsetwatch-overview.json": (STALLED, "jobs-queue"),
    "offsetwatch-group-detail.json": (STALLED, "kip848-consumers", "jobs-queue"),
    "offsetwatch-exporter-health.json": (STALLED,),
}


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_every_panel_query_returns_data(run: Run, path: Any) -> None:
    dashboard = load_dashboard(path)
    empty = []
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            answered = False
            for group in GROUPS[path.name]:
                values = {
                    "job": "offsetwatch",
                    "instance": run.stack.target,
                    "group": group,
                    "topic": "payments" if group == STALLED else "orders",
                }
                if _returns_data(run.prometheus, target, _fill(target["expr"], values)):
                    answered = True
                    break
            if not answered:
                empty.append(f"{panel['title']!r} {target['refId']}: {target['expr']}")
    assert not empty, "panel queries without data:\n" + "\n".join(empty)


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_variables_and_annotations_answer(run: Run, path: Any) -> None:
    dashboard = load_dashboard(path)
    values = {
        "job": "offsetwatch",
        "instance": run.stack.target,
        "group": STALLED,
        "topic": "payments",
    }
    for name, variable in variables(dashboard).items():
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable_query(variable))
        assert match, name
        found = run.prometheus.label_values(match.group(2), _fill(match.group(1), values))
        assert values[name] in found, (name, found)
    for annotation in dashboard["annotations"]["list"]:
        if annotation.get("expr"):
            assert run.prometheus.query(_fill(annotation["expr"], values)), annotation["name"]


# ------------------------------------------------------------------ rules

#: exported by `export --fleet` replicas only; the demo's exporter runs alone (promtool's
#: tests in offsetwatch-rules.test.yml feed them from three replicas)
FLEET_ONLY = frozenset(
    {
        "offsetwatch_fleet_owned_partitions",
        "offsetwatch_fleet_members",
        "offsetwatch_fleet_unowned_partitions",
        "offsetwatch_fleet_settings_mismatch",
    }
)


def test_every_rule_evaluates_and_reads_existing_series(run: Run) -> None:
    groups = run.prometheus.rule_groups()
    loaded = [rule for group in groups for rule in group["rules"]]
    expected = sum(len(group["rules"]) for group in run.rules["groups"])
    assert len(loaded) == expected
    for rule in loaded:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
    problems = []
    for group in run.rules["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                if not run.prometheus.query(rule["record"]):
                    problems.append(f"recording rule {rule['record']} recorded nothing")
                continue
            run.prometheus.query(rule["expr"])  # raises on an error
            for name in metric_names(rule["expr"]) - ANY_LABELS_SERIES - FLEET_ONLY:
                if not run.prometheus.query(name):
                    problems.append(f"alert {rule['alert']} reads {name}, which has no data")
    assert not problems, "\n".join(problems)


def test_the_stalled_group_fires_the_stall_alert(run: Run) -> None:
    alerts = run.prometheus.query(f'ALERTS{{alertname="OffsetwatchGroupStatus",group="{STALLED}"}}')
    assert [a["metric"]["alertstate"] for a in alerts] == ["firing"]
    # the status is STALL (3), the value the alert names in its summary
    window = f"{STATUS_WINDOW_S:.0f}s"
    (status,) = run.prometheus.query(
        f'max_over_time(offsetwatch_group_status{{group="{STALLED}"}}[{window}])'
    )
    assert status["value"][1] == "3"


def test_healthy_groups_never_have_an_alert(run: Run) -> None:
    now = time.time()
    for group in HEALTHY:
        seen = run.prometheus.query_range(f'ALERTS{{group="{group}"}}', run.started, now, 1)
        assert seen == [], f"{group} had alerts: {[s['metric'] for s in seen]}"
        status = run.prometheus.query_range(
            f'offsetwatch_group_status{{group="{group}"}}', run.started, now, 1
        )
        assert status, f"{group} was never exported"


def test_share_groups_alert_as_queues_only(run: Run) -> None:
    """A queue's status is also offsetwatch_group_status; the consumer-group status alerts,
    whose texts speak of commits, leave it to the share alerts."""
    consumer_alerts = "OffsetwatchGroupStatus|OffsetwatchGroupLagGrowing"
    now = time.time()
    for group in SHARE_GROUPS:
        seen = run.prometheus.query_range(
            f'ALERTS{{alertname=~"{consumer_alerts}",group="{group}"}}', run.started, now, 1
        )
        assert seen == [], f"{group} had consumer-group alerts: {[s['metric'] for s in seen]}"
    (stuck,) = run.prometheus.query('offsetwatch_share_group_status{group="thumbnails-queue"}')
    assert stuck["value"][1] == "3"


def test_a_deleted_groups_alerts_resolve(run: Run) -> None:
    # runs last in this module: the stalled group is gone afterwards
    assert ("OffsetwatchGroupStatus", STALLED) in _firing(run.prometheus)
    run.stack.delete_group(STALLED)
    wait_until(
        lambda: not run.prometheus.query(f'ALERTS{{group="{STALLED}"}}'),
        f"the alerts of the deleted group {STALLED} to resolve",
        TIMEOUT_S,
    )
    assert not run.prometheus.query(f'{{__name__=~"offsetwatch_group.*",group="{STALLED}"}}')
    # the others are untouched
    assert ("OffsetwatchGroupLagHigh", "search-stopped") in _firing(run.prometheus)
