"""Translations of the Prometheus rules file: Grafana-managed alerts and a PrometheusRule.

grafana/prometheus/offsetwatch-rules.yml stays the one source of the alert logic. Grafana's
version runs the same PromQL through the Prometheus data source: query A is the alert's
expression, and condition B fires for every series A returns, as Prometheus does (a value of
0 from `offsetwatch_ready == 0` fires too; +Inf and NaN as well).
"""

from __future__ import annotations

import re
from typing import Any, Final

import yaml

#: where the provisioned rules land in Grafana; the dashboards' provider uses the same folder
FOLDER: Final = "Kafka"
#: uid of the data source in grafana/provisioning/datasources/prometheus.yml
DATASOURCE_UID: Final = "prometheus"
#: Grafana evaluates every group at this interval (Prometheus' default evaluation_interval)
INTERVAL: Final = "1m"
#: the longest range an expression reads (OffsetwatchFleetReplicaNotReady's
#: max_over_time(...[1h]); increase(...[15m]) plus `offset 15m` elsewhere)
QUERY_RANGE_S: Final = 3600
CONDITION: Final = "is_number($A) || is_nan($A) || is_inf($A)"


def load(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def _block_strings(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (PromQL) as block scalars, readable in review."""


_Dumper.add_representer(str, _block_strings)


def dump(data: object, header: str) -> str:
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return header + body


def _grafana_template(text: str) -> str:
    """Prometheus' `$value` is Grafana's `$values.A.Value` (query A's value)."""
    return re.sub(r"\$value\b", "$values.A.Value", text)


def _uid(name: str, labels: dict[str, str], seen: set[str]) -> str:
    base = re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()
    uid = f"{base}-{labels['severity']}" if "severity" in labels else base
    if uid in seen:
        raise ValueError(f"two alerts map to the Grafana uid {uid}")
    seen.add(uid)
    return uid[:40]


def grafana_alerts(rules: dict[str, Any]) -> dict[str, Any]:
    """Grafana alerting file provisioning (apiVersion 1) of every alert of the rules file."""
    groups = []
    seen: set[str] = set()
    for group in rules["groups"]:
        alerts = [rule for rule in group["rules"] if "alert" in rule]
        if not alerts:
            continue
        out = []
        for rule in alerts:
            labels = dict(rule.get("labels", {}))
            out.append(
                {
                    "uid": _uid(rule["alert"], labels, seen),
                    "title": rule["alert"],
                    "condition": "B",
                    "data": [
                        {
                            "refId": "A",
                            "relativeTimeRange": {"from": QUERY_RANGE_S, "to": 0},
                            "datasourceUid": DATASOURCE_UID,
                            "model": {
                                "refId": "A",
                                "expr": rule["expr"],
                                "instant": True,
                                "range": False,
                            },
                        },
                        {
                            "refId": "B",
                            "datasourceUid": "__expr__",
                            "model": {"refId": "B", "type": "math", "expression": CONDITION},
                        },
                    ],
                    # a group's series vanish when it is deleted: that resolves, as in Prometheus
                    "noDataState": "OK",
                    "execErrState": "Error",
                    "for": rule.get("for", "0s"),
                    "labels": labels,
                    "annotations": {
                        key: _grafana_template(value)
                        for key, value in rule.get("annotations", {}).items()
                    },
                    "isPaused": False,
                }
            )
        groups.append(
            {
                "orgId": 1,
                "name": group["name"],
                "folder": FOLDER,
                "interval": INTERVAL,
                "rules": out,
            }
        )
    return {"apiVersion": 1, "groups": groups}


def prometheus_rule(rules: dict[str, Any]) -> dict[str, Any]:
    """The Prometheus Operator's PrometheusRule holding the rules file's groups unchanged."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "offsetwatch",
            "labels": {
                "app.kubernetes.io/name": "offsetwatch",
                "app.kubernetes.io/component": "alerting",
                # TUNE: the label your Prometheus' ruleSelector matches
                "release": "prometheus",
            },
        },
        "spec": {"groups": rules["groups"]},
    }
