"""The generated files are up to date, and the alert translations say what the rules say.

`python -m offsetwatch.dashboards` writes the dashboards, Grafana's alert provisioning and the
Kubernetes PrometheusRule; a change to the code or to the rules file without regenerating
fails here.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from offsetwatch.dashboards.__main__ import main
from offsetwatch.dashboards.outputs import GRAFANA_ALERTS, PROMETHEUS_RULE, render, stale
from offsetwatch.dashboards.rules import QUERY_RANGE_S
from tests.grafana.kit import REPO_ROOT, RULES


def _yaml(path: Any) -> Any:
    return yaml.safe_load((REPO_ROOT / path).read_text())


def test_checked_in_files_are_what_the_code_generates() -> None:
    assert stale(REPO_ROOT) == [], "run: python -m offsetwatch.dashboards"
    assert main(["--root", str(REPO_ROOT), "--check"]) == 0


def test_generator_writes_every_file(tmp_path: Any) -> None:
    (tmp_path / RULES.relative_to(REPO_ROOT)).parent.mkdir(parents=True)
    (tmp_path / RULES.relative_to(REPO_ROOT)).write_text(RULES.read_text())
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert main(["--root", str(tmp_path)]) == 0
    assert stale(tmp_path) == []
    assert set(render(tmp_path)) == {
        path.relative_to(tmp_path) for path in tmp_path.rglob("*") if path.is_file()
    } - {RULES.relative_to(REPO_ROOT)}


def test_prometheus_rule_holds_the_rules_file_unchanged() -> None:
    resource = _yaml(PROMETHEUS_RULE)
    assert resource["apiVersion"] == "monitoring.coreos.com/v1"
    assert resource["kind"] == "PrometheusRule"
    assert resource["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


def test_grafana_alerts_are_the_prometheus_alerts() -> None:
    source = [
        rule
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]
    provisioned = _yaml(GRAFANA_ALERTS)
    assert provisioned["apiVersion"] == 1
    rules = [rule for group in provisioned["groups"] for rule in group["rules"]]
    assert len(rules) == len(source)
    uids = [rule["uid"] for rule in rules]
    assert len(uids) == len(set(uids)) and all(len(uid) <= 40 for uid in uids)
    for mine, theirs in zip(rules, source, strict=True):
        assert mine["title"] == theirs["alert"]
        query, condition = mine["data"]
        assert query["model"]["expr"] == theirs["expr"]
        assert query["model"]["instant"] is True
        assert query["datasourceUid"] == "prometheus"
        assert mine["condition"] == condition["refId"] == "B"
        assert condition["datasourceUid"] == "__expr__"
        assert mine["for"] == theirs.get("for", "0s")
        assert mine["labels"] == theirs["labels"]
        # deleted groups' series vanish: no data must resolve, as it does in Prometheus
        assert mine["noDataState"] == "OK"
        assert set(mine["annotations"]) == set(theirs["annotations"])
        for key, text in mine["annotations"].items():
            assert "$value " not in text and "$value}" not in text, (mine["title"], key)
            assert re.sub(r"\$values\.A\.Value", "$value", text) == theirs["annotations"][key]


def test_grafana_alerts_use_the_provisioned_datasource_and_dashboards_folder() -> None:
    datasources = _yaml("grafana/provisioning/datasources/prometheus.yml")["datasources"]
    provider = _yaml("grafana/provisioning/dashboards/offsetwatch.yml")["providers"][0]
    for group in _yaml(GRAFANA_ALERTS)["groups"]:
        assert group["folder"] == provider["folder"]
        for rule in group["rules"]:
            assert rule["data"][0]["datasourceUid"] == datasources[0]["uid"]


def test_grafana_query_range_covers_every_range_and_offset_of_the_rules() -> None:
    """Query A's relative time range is at least the longest range plus offset a rule reads."""
    seconds = {"s": 1, "m": 60, "h": 3600}
    longest = 0
    for group in _yaml(RULES.relative_to(REPO_ROOT))["groups"]:
        for rule in group["rules"]:
            ranges = [int(n) * seconds[u] for n, u in re.findall(r"\[(\d+)([smh])\]", rule["expr"])]
            offsets = [
                int(n) * seconds[u] for n, u in re.findall(r"offset (\d+)([smh])", rule["expr"])
            ]
            longest = max(longest, max(ranges, default=0) + max(offsets, default=0))
    assert longest == QUERY_RANGE_S
