"""The Prometheus rules, their promtool unit tests, provisioning and the Alertmanager example.

promtool checks the rules and runs their unit tests; amtool checks the Alertmanager example
(marked `prometheus`: skipped locally without the binaries, failed under CI=true). Every metric
and label the rules and their tests use is one the exporter really exposes (tests/grafana/kit.py).
"""

from __future__ import annotations

import re

import pytest

from offsetwatch.exporter.judge.status import Status
from tests.grafana.kit import (
    ALERT_NAMES,
    ALERTMANAGER_EXAMPLE,
    DASHBOARD_PROVIDER,
    DATASOURCE,
    EXPOSED,
    README,
    RECORDS,
    RULE_LIST,
    RULE_TESTS,
    RULES,
    check_expr,
    created_labels,
    grouping_labels,
    labels_of,
    metric_names,
    require_tool,
    run,
    selector_labels,
)


def test_scanner_finds_names_not_functions_keywords_or_labels() -> None:
    expr = (
        "(sum without (partition) (offsetwatch_source_lag) / sum by (type) (rate("
        'offsetwatch_records_total{job=~"$job",type!="x{y}"}[$__rate_interval]))) > 60 '
        "and on (job, instance) offsetwatch_ready == 1 unless up offset 15m "
        'or count_values without (group) ("status", a:b:c) or vector(0) or time() - 1e3'
    )
    assert metric_names(expr) == {
        "offsetwatch_source_lag",
        "offsetwatch_records_total",
        "offsetwatch_ready",
        "up",
        "a:b:c",
    }
    assert selector_labels(expr) == [
        ("offsetwatch_records_total", "job"),
        ("offsetwatch_records_total", "type"),
    ]
    assert grouping_labels(expr) == {"partition", "type", "job", "instance", "group"}
    assert created_labels(expr) == {"status"}


def test_rules_file_scanned() -> None:
    # the scanner found what promtool finds (test_promtool_check_rules checks the count)
    assert len(RECORDS) >= 5
    assert {
        "OffsetwatchGroupLagHigh",
        "OffsetwatchGroupStatus",
        "OffsetwatchGroupLagGrowing",
        "OffsetwatchNotReady",
        "OffsetwatchSourceDown",
        "OffsetwatchDecodeErrors",
        "OffsetwatchExporterDown",
        "OffsetwatchExporterAbsent",
        "OffsetwatchSnapshotStale",
        "OffsetwatchLogEndSampleStale",
    } <= set(ALERT_NAMES)
    for rule in RULE_LIST:
        assert rule.kind == "record" or "severity:" in rule.text, rule.name
        if rule.kind == "alert":
            for key in ("summary:", "description:", "runbook:"):
                assert key in rule.text, f"{rule.name} has no {key[:-1]} annotation"


def _recorded_from(record: str) -> str:
    """The exporter series a `level:metric:operations` recording rule is named after."""
    parts = record.split(":")
    assert len(parts) == 3 and all(parts), f"{record} is not level:metric:operations"
    return parts[1]


def test_recording_rule_names_follow_the_convention() -> None:
    for name, rule in RECORDS.items():
        metric = _recorded_from(name)
        # rate()/increase() of a counter drop its _total in the name
        candidates = {metric, f"{metric}_total"}
        assert candidates & EXPOSED.keys(), f"{name}: {metric} is not an exporter metric"
        assert candidates & metric_names(rule.expr), f"{name} is not computed from {metric}"


def test_rules_use_only_exposed_metrics_and_documented_labels() -> None:
    problems = []
    for rule in RULE_LIST:
        problems += check_expr(f"{rule.kind} {rule.name}", rule.expr)
        if rule.kind == "alert":
            # annotations may only use labels the alert's series carry
            available = labels_of(metric_names(rule.expr)) | created_labels(rule.expr)
            for label in sorted(set(re.findall(r"\$labels\.(\w+)", rule.text)) - available):
                problems.append(f"alert {rule.name}: annotation uses $labels.{label}")
    assert not problems, "\n".join(problems)


def test_status_alert_names_the_statuses_like_the_exporter() -> None:
    rule = next(r for r in RULE_LIST if r.name == "OffsetwatchGroupStatus")
    expected = {s.value: s.name for s in (Status.STALL, Status.STOP, Status.ERR)}
    summary = rule.text[rule.text.index("summary:") : rule.text.index("description:")]
    named = {
        int(float(value)): name
        for value, name in re.findall(r"eq \$value (\d+(?:\.\d+)?) \}\}\s*(\w+)", summary)
    }
    assert named == expected
    description = rule.text[rule.text.index("description:") : rule.text.index("runbook:")]
    for name in expected.values():
        assert f"is {name}:" in description, name
    assert f">= {Status.STALL.value}" in rule.expr


# ------------------------------------------------------------------ the rule unit tests


def _rule_test_items() -> list[tuple[str, bool]]:
    """(alertname, expects firing alerts) of every alert_rule_test item."""
    text = RULE_TESTS.read_text()
    items = re.findall(
        r"^\s*- eval_time: \S+\n\s*alertname: (\S+)\n(\s*exp_alerts:)?", text, flags=re.M
    )
    return [(name, bool(firing)) for name, firing in items]


def test_rule_tests_cover_every_alert_firing_and_not_firing() -> None:
    items = _rule_test_items()
    firing = {name for name, fires in items if fires}
    quiet = {name for name, fires in items if not fires}
    assert set(ALERT_NAMES) - firing == set(), "alerts never tested firing"
    assert set(ALERT_NAMES) - quiet == set(), "alerts never tested not firing"
    assert {name for name, _ in items} <= set(ALERT_NAMES)


def test_rule_tests_feed_only_exposed_series() -> None:
    text = RULE_TESTS.read_text()
    series = re.findall(r"^\s*- series: '([^']*)'", text, flags=re.M)
    assert series
    problems = []
    for selector in series:
        problems += check_expr("test series", selector)
    exprs = re.findall(r"^\s*- expr: (.+)$", text, flags=re.M)
    assert set(exprs) >= set(RECORDS), "every recording rule has a promql_expr_test"
    # the others aggregate recording rules, as a fleet's replicas are summed (quoted)
    for expr in set(exprs) - set(RECORDS):
        problems += check_expr("test expr", expr.strip("'"))
    assert not problems, "\n".join(problems)


@pytest.mark.prometheus
def test_promtool_check_rules() -> None:
    promtool = require_tool("promtool", "prometheus")
    result = run([promtool, "check", "rules", str(RULES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULE_LIST)} rules found" in result.stdout, result.stdout


@pytest.mark.prometheus
def test_promtool_test_rules() -> None:
    promtool = require_tool("promtool", "prometheus")
    result = run([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


# ------------------------------------------------------------------ provisioning, routing, docs


def test_provisioning_files() -> None:
    provider = DASHBOARD_PROVIDER.read_text()
    assert re.search(r"^apiVersion: 1$", provider, flags=re.M)
    assert re.search(r"^\s+type: file$", provider, flags=re.M)
    path = re.search(r"^\s+path: (\S+)$", provider, flags=re.M)
    assert path, "the dashboard provider names the directory of the JSON files"
    datasource = DATASOURCE.read_text()
    assert re.search(r"^apiVersion: 1$", datasource, flags=re.M)
    assert re.search(r"^\s+type: prometheus$", datasource, flags=re.M)
    readme = README.read_text()
    assert path.group(1) in readme, "the README says where to put the dashboard JSON"


def test_readme_lists_every_alert() -> None:
    readme = README.read_text()
    missing = [name for name in ALERT_NAMES if f"`{name}`" not in readme]
    assert not missing, f"grafana/README.md does not describe {missing}"


@pytest.mark.prometheus
def test_alertmanager_example_is_valid_and_routes_by_severity() -> None:
    amtool = require_tool("amtool", "prometheus-alertmanager")
    config = str(ALERTMANAGER_EXAMPLE)
    result = run([amtool, "check-config", config])
    assert result.returncode == 0, result.stdout + result.stderr
    expected = {
        ("OffsetwatchGroupLagHigh", "critical"): "kafka-team-pager",
        ("OffsetwatchGroupStatus", "warning"): "kafka-team-chat",
        ("OffsetwatchGroupRewound", "info"): "kafka-team-chat",
        ("SomeoneElsesAlert", "critical"): "default",
    }
    for (alertname, severity), receiver in expected.items():
        labels = [f"alertname={alertname}", f"severity={severity}", "group=billing"]
        routed = run([amtool, "config", "routes", "test", f"--config.file={config}", *labels])
        assert routed.stdout.strip() == receiver, (alertname, severity, routed.stdout)
    # every alert of the rules file reaches one of the kafka team's receivers
    for rule in RULE_LIST:
        if rule.kind != "alert":
            continue
        severity = re.search(r"severity: (\w+)", rule.text)
        assert severity, rule.name
        labels = [f"alertname={rule.name}", f"severity={severity.group(1)}"]
        routed = run([amtool, "config", "routes", "test", f"--config.file={config}", *labels])
        assert routed.stdout.strip().startswith("kafka-team-"), (rule.name, routed.stdout)
