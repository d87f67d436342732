"""Lint of the generated dashboards (grafana/dashboards/*.json).

Every panel: a unique id, a unit and a description, the `${DS_PROMETHEUS}` data source, targets
with PromQL that uses only metrics the exporter exposes *and* docs/metrics.md documents (or
standard Prometheus series and the rules' recordings), and only labels those series carry.
promtool parses every expression (marked `prometheus`). tests/grafana/test_e2e.py runs them
against a real Prometheus.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.exporter.judge.status import Status
from tests.grafana.kit import (
    DASHBOARDS,
    REPO_ROOT,
    STANDARD_SERIES,
    as_rules_file,
    check_expr,
    dashboard_exprs,
    labels_of,
    load_dashboard,
    metric_names,
    panels,
    require_tool,
    run,
    variable_query,
    variables,
)

DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}  # the data source variable
METRICS_DOC = REPO_ROOT / "docs" / "metrics.md"

#: dashboard file name -> the variables it must have
EXPECTED_VARIABLES = {
    "offsetwatch-overview.json": {"job", "instance", "group", "topic"},
    "offsetwatch-group-detail.json": {"job", "instance", "group", "topic"},
    "offsetwatch-exporter-health.json": {"job", "instance"},
}

by_file = pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])


def documented_metrics() -> set[str]:
    """Metric names in the tables of docs/metrics.md."""
    return set(re.findall(r"^\| `((?:offsetwatch|kafka)_\w+)`", METRICS_DOC.read_text(), re.M))


def test_the_three_dashboards_are_there() -> None:
    assert {p.name for p in DASHBOARDS} == set(EXPECTED_VARIABLES)


@by_file
def test_every_panel_has_unique_id_unit_description_datasource_targets(path: Path) -> None:
    dashboard = load_dashboard(path)
    assert dashboard["uid"] == path.stem and dashboard["title"]
    assert 36 <= dashboard["schemaVersion"] <= 41
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    content = [p for p in panels(dashboard) if p["type"] != "row"]
    assert len(content) >= 15
    for panel in content:
        title = panel["title"]
        assert panel["datasource"] == DS, title
        assert panel.get("description", "").strip(), f"{title} has no description"
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{title} has no unit"
        assert panel["targets"], f"{title} has no targets"
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), title
        for target in panel["targets"]:
            assert target["datasource"] == DS, title
            assert target["expr"].strip(), title
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, title


@by_file
def test_panels_do_not_overlap(path: Path) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in panels(load_dashboard(path)):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


@by_file
def test_variables(path: Path) -> None:
    found = variables(load_dashboard(path))
    source = found.pop("DS_PROMETHEUS")
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    assert set(found) == EXPECTED_VARIABLES[path.name]
    for name, variable in found.items():
        assert variable["type"] == "query", name
        assert variable["datasource"] == DS, name
        assert variable_query(variable).startswith("label_values("), name
        assert variable_query(variable).endswith(f", {name})"), name
        if variable["multi"]:
            assert variable["includeAll"] and variable["allValue"] == ".*", name
    if "group" in found:
        # the group detail shows one group; the overview any number
        assert found["group"]["multi"] == (path.name == "offsetwatch-overview.json")


@by_file
def test_links_to_the_other_dashboards(path: Path) -> None:
    links = {link["url"] for link in load_dashboard(path)["links"]}
    others = {f"/d/{p.stem}" for p in DASHBOARDS if p != path}
    assert links == others
    for link in load_dashboard(path)["links"]:
        assert link["includeVars"] and link["keepTime"], link["title"]


def _mapping_texts(panel: dict[str, Any]) -> list[dict[str, str]]:
    config = panel.get("fieldConfig", {})
    mapping_lists = [config.get("defaults", {}).get("mappings", [])]
    for override in config.get("overrides", []):
        for prop in override["properties"]:
            if prop["id"] == "mappings":
                mapping_lists.append(prop["value"])
    return [
        {k: v["text"] for k, v in mapping.get("options", {}).items()}
        for mappings in mapping_lists
        for mapping in mappings
    ]


def test_status_mappings_match_the_exporter() -> None:
    expected = {str(s.value): s.name for s in Status}
    found = 0
    for path in DASHBOARDS:
        for panel in panels(load_dashboard(path)):
            for texts in _mapping_texts(panel):
                if set(texts.values()) & {"STALL", "STOP"}:
                    assert texts == expected, panel["title"]
                    found += 1
    assert found >= 5  # overview table and history, group detail stat, timeline and table


@by_file
def test_queries_use_only_exposed_and_documented_metrics_and_labels(path: Path) -> None:
    dashboard = load_dashboard(path)
    documented = documented_metrics()
    problems = []
    for where, expr in dashboard_exprs(dashboard):
        problems += check_expr(where, expr)
        for name in metric_names(expr) - STANDARD_SERIES:
            if name not in documented:
                problems.append(f"{where}: {name} is not in docs/metrics.md")
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            legend = target.get("legendFormat", "")
            available = labels_of(metric_names(target["expr"])) | {"__name__"}
            for label in sorted(set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend)) - available):
                problems.append(f"panel {panel['title']!r}: legend uses {label!r}")
    assert not problems, "\n".join(problems)


def test_dashboards_show_what_the_issue_asks_for() -> None:
    def used(name: str) -> set[str]:
        exprs = dashboard_exprs(load_dashboard(next(p for p in DASHBOARDS if p.name == name)))
        return set().union(*(metric_names(expr) for _, expr in exprs))

    assert {
        "offsetwatch_group_status",
        "offsetwatch_group_lag",
        "offsetwatch_group_lag_seconds",
        "offsetwatch_group_partition_lag",
        "offsetwatch_group_partition_lag_seconds",
        "offsetwatch_group_commits_total",
        "offsetwatch_group_seconds_since_last_commit",
        "offsetwatch_group_members",
        "offsetwatch_group_state",
        "offsetwatch_ready",
        "offsetwatch_source_up",
    } <= used("offsetwatch-overview.json")
    # per partition committed vs log end, lag, lag seconds, status, members and assignments,
    # commit rate, rebalances
    assert {
        "offsetwatch_group_partition_committed_offset",
        "offsetwatch_partition_log_end_offset",
        "offsetwatch_group_partition_lag",
        "offsetwatch_group_partition_lag_seconds",
        "offsetwatch_group_partition_status",
        "offsetwatch_group_members",
        "kafka_consumergroup_group_lag",
        "offsetwatch_group_commits_total",
        "offsetwatch_group_generation",
    } <= used("offsetwatch-group-detail.json")
    # ingest by type, decode errors, own lag, ages, scrape size and duration, publish, archive
    assert {
        "offsetwatch_records_total",
        "offsetwatch_decode_errors_total",
        "offsetwatch_source_lag",
        "offsetwatch_snapshot_age_seconds",
        "offsetwatch_log_end_sample_age_seconds",
        "offsetwatch_checkpoint_age_seconds",
        "scrape_samples_scraped",
        "scrape_duration_seconds",
        "offsetwatch_published_total",
        "offsetwatch_archive_records_total",
    } <= used("offsetwatch-exporter-health.json")


@pytest.mark.prometheus
@by_file
def test_promql_parses(path: Path, tmp_path: Path) -> None:
    promtool = require_tool("promtool", "prometheus")
    rules = tmp_path / "dashboard-exprs.yml"
    rules.write_text(as_rules_file(dashboard_exprs(load_dashboard(path))))
    result = run([promtool, "check", "rules", str(rules)])
    assert result.returncode == 0, result.stdout + result.stderr
