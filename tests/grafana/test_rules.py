"""The operator kit in grafana/: Prometheus rules, their promtool tests, the dashboard.

* promtool checks the rules and runs their unit tests; the dashboard's PromQL goes through the
  same parser; amtool checks the Alertmanager example (marked `prometheus`: skipped locally
  without the binaries, failed under CI=true).
* Every metric name the rules, the rule tests and the dashboard use is one the exporter really
  exposes (`offsetwatch.exporter.metrics.FAMILIES` / `ALIAS_FAMILIES`), a recording rule of
  the rules file,
  or a standard Prometheus series; label names are the documented ones.
* The dashboard JSON is well formed: a data source and targets on every panel, the
  `${DS_PROMETHEUS}` variable, group/topic variables, status mappings equal to `Status`.

No YAML library is a dependency of the project, so the rules file is read with a small scanner
that understands the layout it is written in (one `- record:`/`- alert:` item per rule, `expr:`
inline or as a block scalar); promtool is the real parser.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.exporter.metrics import ALIAS_FAMILIES, FAMILIES, FamilySpec
from offsetwatch.exporter.status import Status

REPO_ROOT = Path(__file__).resolve().parents[2]
GRAFANA = REPO_ROOT / "grafana"
RULES = GRAFANA / "prometheus" / "offsetwatch-rules.yml"
RULE_TESTS = GRAFANA / "prometheus" / "offsetwatch-rules.test.yml"
DASHBOARD = GRAFANA / "dashboards" / "offsetwatch-overview.json"
DASHBOARD_PROVIDER = GRAFANA / "provisioning" / "dashboards" / "offsetwatch.yml"
DATASOURCE = GRAFANA / "provisioning" / "datasources" / "prometheus.yml"
ALERTMANAGER_EXAMPLE = GRAFANA / "alertmanager" / "alertmanager.example.yml"
README = GRAFANA / "README.md"

DS_UID = "${DS_PROMETHEUS}"

#: series Prometheus itself creates: scrape health and alert state
STANDARD_SERIES = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
        "ALERTS",
        "ALERTS_FOR_STATE",
    }
)
#: labels the scrape adds to every series (the rules keep them with `without (...)`)
TARGET_LABELS = frozenset({"job", "instance"})
#: labels of ALERTS besides the alert's own: anything goes
ANY_LABELS_SERIES = frozenset({"ALERTS", "ALERTS_FOR_STATE"})

#: PromQL words that look like identifiers but are not metric names
PROMQL_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "inf",
        "nan",
    }
)


def _require_tool(name: str, package: str) -> str:
    """The binary's path; skip locally, fail under CI=true when it is missing."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} not found (Debian: apt-get install {package})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)


# ------------------------------------------------------------------ exposed series names


def _series_names(spec: FamilySpec) -> set[str]:
    """The sample names a family puts in the exposition.

    Counters are declared with their `_total` sample name (FamilySpec enforces it); a
    histogram or summary family exposes its `_bucket`/`_sum`/`_count` samples.
    """
    kind: str = spec.type
    if kind == "histogram":
        return {f"{spec.name}_bucket", f"{spec.name}_sum", f"{spec.name}_count"}
    if kind == "summary":
        return {spec.name, f"{spec.name}_sum", f"{spec.name}_count"}
    return {spec.name}


#: sample name -> labels, for everything the exporter can expose
EXPOSED: dict[str, frozenset[str]] = {
    name: frozenset(spec.labels)
    for spec in (*FAMILIES, *ALIAS_FAMILIES)
    for name in _series_names(spec)
}


# ------------------------------------------------------------------ PromQL scanning

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_SELECTOR = re.compile(r"(?<![\w:$.])([A-Za-z_:][\w:]*)\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_IDENTIFIER = re.compile(r"(?<![\w:$.{])([A-Za-z_:][\w:]*)(?!\w)")
_COUNT_VALUES = re.compile(r"count_values\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(\s*\"(\w+)\"")
_LABEL_REPLACE = re.compile(r"label_(?:replace|join)\s*\([^,]+,\s*\"(\w+)\"")


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers before `{`, and bare ones.

    String literals, label matchers, label lists (`by (...)`, `on (...)`, ...), ranges and
    subqueries (`[5m]`, `[$__rate_interval]`) and function calls are not metric names.
    """
    text = _STRING.sub('""', expr)
    names = {m.group(1) for m in _SELECTOR.finditer(text)}
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = _LABEL_LIST.sub(" ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    for match in _IDENTIFIER.finditer(text):
        name = match.group(1)
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or name.lower() in PROMQL_KEYWORDS:
            continue  # a function or aggregation call, or a keyword
        names.add(name)
    return names


def selector_labels(expr: str) -> list[tuple[str, str]]:
    """(metric name, label name) of every label matcher of a `name{...}` selector."""
    text = _STRING.sub('""', expr)  # a brace inside a matcher's value ends no selector
    pairs = []
    for selector in _SELECTOR.finditer(text):
        pairs += [(selector.group(1), label) for label in _MATCHER_LABEL.findall(selector.group(2))]
    return pairs


def grouping_labels(expr: str) -> set[str]:
    """Label names in `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`, `group_*`."""
    text = _STRING.sub('""', expr)
    labels: set[str] = set()
    for match in _LABEL_LIST.finditer(text):
        labels |= {label.strip() for label in match.group(2).split(",") if label.strip()}
    return labels


def created_labels(expr: str) -> set[str]:
    """Labels an expression adds itself (count_values, label_replace, label_join)."""
    return set(_COUNT_VALUES.findall(expr)) | set(_LABEL_REPLACE.findall(expr))


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


# ------------------------------------------------------------------ the rules file


@dataclass(frozen=True)
class Rule:
    kind: str  # "record" or "alert"
    name: str
    expr: str
    text: str  # the whole YAML item (labels, annotations)


_ITEM = re.compile(r"^(\s*)- (record|alert):\s*(\S+)\s*$")
_KEY = re.compile(r"^(\s*)expr:\s*(.*)$")


def _block_scalar(lines: list[str], start: int, indent: int) -> str:
    """The lines of a block scalar after `key: |` whose key is indented `indent`."""
    out = []
    for line in lines[start:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        out.append(line.strip())
    return "\n".join(out).strip()


def _unquote(value: str) -> str:
    value = value.strip()
    if value.startswith('"'):
        loaded: str = json.loads(value)
        return loaded
    if value.startswith("'"):
        return value[1:-1].replace("''", "'")
    return value


def load_rules(path: Path = RULES) -> list[Rule]:
    lines = path.read_text().splitlines()
    starts = [(i, m) for i, line in enumerate(lines) if (m := _ITEM.match(line))]
    rules = []
    for n, (i, item) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        body = lines[i:end]
        expr = None
        for j, line in enumerate(body):
            key = _KEY.match(line)
            if key is None:
                continue
            value = key.group(2).strip()
            if value[:1] in ("|", ">"):
                expr = _block_scalar(body, j + 1, len(key.group(1)))
            else:
                expr = _unquote(value)
            break
        assert expr, f"no expr in rule {item.group(3)}"
        rules.append(Rule(item.group(2), item.group(3), expr, "\n".join(body)))
    return rules


RULE_LIST = load_rules()
RECORDS = {rule.name: rule for rule in RULE_LIST if rule.kind == "record"}
ALERT_NAMES = sorted({rule.name for rule in RULE_LIST if rule.kind == "alert"})


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


def _known(name: str) -> bool:
    return name in EXPOSED or name in STANDARD_SERIES or name in RECORDS


def _labels_of(names: set[str]) -> set[str]:
    labels = set(TARGET_LABELS)
    for name in names:
        if name in EXPOSED:
            labels |= EXPOSED[name]
        elif name in RECORDS:
            labels |= _labels_of(metric_names(RECORDS[name].expr))
    return labels


def _check_expr(where: str, expr: str) -> list[str]:
    """Problems of one expression: unknown metric names, undocumented label names."""
    problems = []
    names = metric_names(expr)
    if not names:
        problems.append(f"{where}: no metric name in {expr!r}")
    for name in sorted(names):
        if not _known(name):
            problems.append(f"{where}: {name} is not a metric offsetwatch exposes")
    for name, label in selector_labels(expr):
        if name in ANY_LABELS_SERIES or label == "__name__":
            continue
        if label not in _labels_of({name}):
            problems.append(f"{where}: {name} has no label {label!r}")
    if not names & ANY_LABELS_SERIES:
        available = _labels_of(names) | created_labels(expr)
        for label in sorted(grouping_labels(expr) - available):
            problems.append(f"{where}: label {label!r} is on none of {sorted(names)}")
    return problems


def test_rules_use_only_exposed_metrics_and_documented_labels() -> None:
    problems = []
    for rule in RULE_LIST:
        problems += _check_expr(f"{rule.kind} {rule.name}", rule.expr)
        if rule.kind == "alert":
            # annotations may only use labels the alert's series carry
            available = _labels_of(metric_names(rule.expr)) | created_labels(rule.expr)
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
        problems += _check_expr("test series", selector)
    exprs = re.findall(r"^\s*- expr: (.+)$", text, flags=re.M)
    assert set(exprs) == set(RECORDS), "every recording rule has a promql_expr_test"
    assert not problems, "\n".join(problems)


@pytest.mark.prometheus
def test_promtool_check_rules() -> None:
    promtool = _require_tool("promtool", "prometheus")
    result = _run([promtool, "check", "rules", str(RULES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULE_LIST)} rules found" in result.stdout, result.stdout


@pytest.mark.prometheus
def test_promtool_test_rules() -> None:
    promtool = _require_tool("promtool", "prometheus")
    result = _run([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


# ------------------------------------------------------------------ the dashboard


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # panels of collapsed rows


def _variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def _variable_query(variable: dict[str, Any]) -> str:
    query = variable["query"]
    text: str = query["query"] if isinstance(query, dict) else query
    return text


def dashboard_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, query variable and annotation."""
    exprs = []
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            exprs.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for name, variable in _variables(dashboard).items():
        if variable["type"] == "query":
            query = _variable_query(variable)
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
            assert match, f"variable {name}: {query}"
            exprs.append((f"variable {name}", match.group(1)))
    for annotation in dashboard["annotations"]["list"]:
        if annotation.get("expr"):
            exprs.append((f"annotation {annotation['name']!r}", annotation["expr"]))
    return exprs


def test_dashboard_is_valid_json_with_datasource_and_targets_on_every_panel() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] and dashboard["title"]
    assert 36 <= dashboard["schemaVersion"] <= 41
    ids = [panel["id"] for panel in _panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    panels = [p for p in _panels(dashboard) if p["type"] != "row"]
    assert len(panels) >= 20
    for panel in panels:
        title = panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": DS_UID}, title
        assert panel["targets"], f"{title} has no targets"
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), title
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], title
            assert target["expr"].strip(), title
        assert panel.get("description"), f"{title} has no description"
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, title


def test_dashboard_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in _panels(_dashboard()):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_dashboard_variables() -> None:
    variables = _variables(_dashboard())
    source = variables["DS_PROMETHEUS"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    for name in ("job", "instance", "group", "topic"):
        variable = variables[name]
        assert variable["type"] == "query", name
        assert variable["datasource"] == {"type": "prometheus", "uid": DS_UID}, name
        assert _variable_query(variable).startswith("label_values("), name
        assert _variable_query(variable).endswith(f", {name})"), name
    for name in ("group", "topic"):
        assert variables[name]["multi"] and variables[name]["includeAll"], name
        assert variables[name]["allValue"] == ".*", name


def test_dashboard_status_mappings_match_the_exporter() -> None:
    expected = {str(s.value): s.name for s in Status}
    found = 0
    for panel in _panels(_dashboard()):
        config = panel.get("fieldConfig", {})
        mapping_lists = [config.get("defaults", {}).get("mappings", [])]
        for override in config.get("overrides", []):
            for prop in override["properties"]:
                if prop["id"] == "mappings":
                    mapping_lists.append(prop["value"])
        for mappings in mapping_lists:
            for mapping in mappings:
                texts = {k: v["text"] for k, v in mapping.get("options", {}).items()}
                if set(texts.values()) & {"STALL", "STOP"}:
                    assert texts == expected, panel["title"]
                    found += 1
    assert found >= 2  # the group status table and the status history at least


def test_dashboard_uses_only_exposed_metrics_and_documented_labels() -> None:
    dashboard = _dashboard()
    exprs = dashboard_exprs(dashboard)
    problems = []
    for where, expr in exprs:
        problems += _check_expr(where, expr)
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            legend = target.get("legendFormat", "")
            available = _labels_of(metric_names(target["expr"])) | {"__name__"}
            for label in sorted(set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend)) - available):
                problems.append(f"panel {panel['title']!r}: legend uses {label!r}")
    assert not problems, "\n".join(problems)
    used = set().union(*(metric_names(expr) for _, expr in exprs))
    # the dashboard shows what the brief of each row promises
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
        "offsetwatch_source_lag",
        "offsetwatch_decode_errors_total",
        "offsetwatch_snapshot_age_seconds",
        "scrape_samples_scraped",
    } <= used


def _as_rules_file(exprs: list[tuple[str, str]]) -> str:
    """The expressions as recording rules, Grafana's variables replaced, for promtool."""
    replacements = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for n, (_, expr) in enumerate(exprs):
        for variable, value in replacements.items():
            expr = expr.replace(variable, value)
        lines += [f"      - record: dashboard:expr_{n}:check", f"        expr: {json.dumps(expr)}"]
    return "\n".join(lines) + "\n"


@pytest.mark.prometheus
def test_dashboard_promql_parses(tmp_path: Path) -> None:
    promtool = _require_tool("promtool", "prometheus")
    exprs = dashboard_exprs(_dashboard())
    rules = tmp_path / "dashboard-exprs.yml"
    rules.write_text(_as_rules_file(exprs))
    result = _run([promtool, "check", "rules", str(rules)])
    assert result.returncode == 0, result.stdout + result.stderr


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
    amtool = _require_tool("amtool", "prometheus-alertmanager")
    config = str(ALERTMANAGER_EXAMPLE)
    result = _run([amtool, "check-config", config])
    assert result.returncode == 0, result.stdout + result.stderr
    expected = {
        ("OffsetwatchGroupLagHigh", "critical"): "kafka-team-pager",
        ("OffsetwatchGroupStatus", "warning"): "kafka-team-chat",
        ("OffsetwatchGroupRewound", "info"): "kafka-team-chat",
        ("SomeoneElsesAlert", "critical"): "default",
    }
    for (alertname, severity), receiver in expected.items():
        labels = [f"alertname={alertname}", f"severity={severity}", "group=billing"]
        routed = _run([amtool, "config", "routes", "test", f"--config.file={config}", *labels])
        assert routed.stdout.strip() == receiver, (alertname, severity, routed.stdout)
    # every alert of the rules file reaches one of the kafka team's receivers
    for rule in RULE_LIST:
        if rule.kind != "alert":
            continue
        severity = re.search(r"severity: (\w+)", rule.text)
        assert severity, rule.name
        labels = [f"alertname={rule.name}", f"severity={severity.group(1)}"]
        routed = _run([amtool, "config", "routes", "test", f"--config.file={config}", *labels])
        assert routed.stdout.strip().startswith("kafka-team-"), (rule.name, routed.stdout)
