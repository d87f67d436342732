"""Shared by the tests of the operator kit: paths, a PromQL scanner, the rules and dashboards.

* Every metric name is checked against what the exporter really exposes
  (`offsetwatch.exporter.serve.metrics.FAMILIES` / `ALIAS_FAMILIES`), the recording rules of
  the rules file, or a standard Prometheus series; label names against the documented ones.
* The rules file is read with a small scanner that understands the layout it is written in (one
  `- record:`/`- alert:` item per rule, `expr:` inline or as a block scalar), so a rule's text
  (annotations included) stays at hand; promtool is the real parser.
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

from offsetwatch.exporter.serve.metrics import ALIAS_FAMILIES, FAMILIES, FamilySpec

REPO_ROOT = Path(__file__).resolve().parents[2]
GRAFANA = REPO_ROOT / "grafana"
RULES = GRAFANA / "prometheus" / "offsetwatch-rules.yml"
RULE_TESTS = GRAFANA / "prometheus" / "offsetwatch-rules.test.yml"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
DASHBOARD_PROVIDER = GRAFANA / "provisioning" / "dashboards" / "offsetwatch.yml"
DATASOURCE = GRAFANA / "provisioning" / "datasources" / "prometheus.yml"
ALERTMANAGER_EXAMPLE = GRAFANA / "alertmanager" / "alertmanager.example.yml"
README = GRAFANA / "README.md"

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
#: labels the scrape adds to every series (the rules keep them with `without (...)`); `pod` is
#: the Prometheus Operator's, which tells a fleet's replicas apart beside `instance`
#: (deploy/kubernetes-fleet's PodMonitor)
TARGET_LABELS = frozenset({"job", "instance", "pod"})
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


def require_tool(name: str, package: str) -> str:
    """The binary's path; skip locally, fail under CI=true when it is missing."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} not found (Debian: apt-get install {package})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
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


def known(name: str) -> bool:
    return name in EXPOSED or name in STANDARD_SERIES or name in RECORDS


def labels_of(names: set[str]) -> set[str]:
    labels = set(TARGET_LABELS)
    for name in names:
        if name in EXPOSED:
            labels |= EXPOSED[name]
        elif name in RECORDS:
            labels |= labels_of(metric_names(RECORDS[name].expr))
    return labels


def check_expr(where: str, expr: str) -> list[str]:
    """Problems of one expression: unknown metric names, undocumented label names."""
    problems = []
    names = metric_names(expr)
    if not names:
        problems.append(f"{where}: no metric name in {expr!r}")
    for name in sorted(names):
        if not known(name):
            problems.append(f"{where}: {name} is not a metric offsetwatch exposes")
    for name, label in selector_labels(expr):
        if name in ANY_LABELS_SERIES or label == "__name__":
            continue
        if label not in labels_of({name}):
            problems.append(f"{where}: {name} has no label {label!r}")
    if not names & ANY_LABELS_SERIES:
        available = labels_of(names) | created_labels(expr)
        for label in sorted(grouping_labels(expr) - available):
            problems.append(f"{where}: label {label!r} is on none of {sorted(names)}")
    return problems


# ------------------------------------------------------------------ the dashboard


def load_dashboard(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # panels of collapsed rows


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def variable_query(variable: dict[str, Any]) -> str:
    query = variable["query"]
    text: str = query["query"] if isinstance(query, dict) else query
    return text


def dashboard_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, query variable and annotation."""
    exprs = []
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            exprs.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for name, variable in variables(dashboard).items():
        if variable["type"] == "query":
            query = variable_query(variable)
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
            assert match, f"variable {name}: {query}"
            exprs.append((f"variable {name}", match.group(1)))
    for annotation in dashboard["annotations"]["list"]:
        if annotation.get("expr"):
            exprs.append((f"annotation {annotation['name']!r}", annotation["expr"]))
    return exprs


def as_rules_file(exprs: list[tuple[str, str]]) -> str:
    """The expressions as recording rules, Grafana's variables replaced, for promtool."""
    replacements = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for n, (_, expr) in enumerate(exprs):
        for variable, value in replacements.items():
            expr = expr.replace(variable, value)
        lines += [f"      - record: dashboard:expr_{n}:check", f"        expr: {json.dumps(expr)}"]
    return "\n".join(lines) + "\n"
