"""deploy/kubernetes-fleet: the fleet variant, as `kubectl kustomize` renders it.

No cluster here (see test_kubernetes.py). What is checked on the rendered manifests: a
Deployment of 3 replicas whose environment, with the downward API's values put in as the
kubelet would, is a configuration `offsetwatch export` accepts with --fleet (the replica named
after its pod, its URL the pod IP on the exporter's port, no sink); a PodDisruptionBudget of
maxUnavailable 1 and a PodMonitor over the same pods, the ServiceMonitor gone (it would scrape
the ready replicas a second time), job="offsetwatch" as the scrape-health alerts select it;
and the single exporter's PrometheusRule and Service carried along.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from offsetwatch.exporter.config import load_config
from tests.deploy.cli_options import export_parser, is_export_env

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "deploy" / "kubernetes-fleet"
LABELS = {"app.kubernetes.io/name": "offsetwatch"}


def _kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        message = "kubectl not found (its kustomize renders deploy/kubernetes-fleet)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def rendered() -> dict[str, Any]:
    out = subprocess.run(
        [_kubectl(), "kustomize", str(FLEET)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    documents = [d for d in yaml.safe_load_all(out) if d]
    kinds = [d["kind"] for d in documents]
    assert len(kinds) == len(set(kinds)), kinds
    return {d["kind"]: d for d in documents}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def _kubelet_env(container: dict[str, Any], pod_name: str, pod_ip: str) -> dict[str, str]:
    """The container's environment as the kubelet gives it: the downward API's fields, and
    $(NAME) of a variable defined above it expanded."""
    fields = {"metadata.name": pod_name, "status.podIP": pod_ip}
    env: dict[str, str] = {}
    for variable in container["env"]:
        if "value" in variable:

            def expand(match: re.Match[str]) -> str:
                return env.get(match.group(1), match.group(0))

            env[variable["name"]] = re.sub(
                r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", expand, variable["value"]
            )
        elif "fieldRef" in variable["valueFrom"]:
            env[variable["name"]] = fields[variable["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[variable["name"]] = "from-a-secret"
    return env


def test_renders_the_fleet_and_drops_the_service_monitor(rendered: dict[str, Any]) -> None:
    assert set(rendered) == {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "PodMonitor",
        "PrometheusRule",
    }
    single = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "prometheusrule.yaml").read_text())
    assert rendered["PrometheusRule"]["spec"] == single["spec"]


def test_deployment_is_three_fleet_replicas_rolled_one_at_a_time(
    rendered: dict[str, Any],
) -> None:
    deployment = rendered["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert deployment["spec"]["template"]["metadata"]["labels"].items() >= LABELS.items()


def test_each_replica_is_named_after_its_pod_and_reached_at_its_ip(
    rendered: dict[str, Any],
) -> None:
    container = _container(rendered["Deployment"])
    names = [v["name"] for v in container["env"]]
    # POD_IP is the kubelet's, for $(POD_IP) below it; every other name is an export option
    assert [n for n in names if not is_export_env(n)] == ["POD_IP"]
    assert names.index("POD_IP") < names.index("OFFSETWATCH_FLEET_URL")
    by_name = {v["name"]: v for v in container["env"]}
    assert by_name["OFFSETWATCH_FLEET_REPLICA"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.name"}
    }
    assert by_name["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}

    env = _kubelet_env(container, "offsetwatch-6d5f8b9c7d-x2k4q", "10.244.1.17")
    config = load_config(export_parser().parse_args(container.get("args", [])), environ=env)
    assert config.fleet == "offsetwatch-prod"
    assert config.fleet_replica == "offsetwatch-6d5f8b9c7d-x2k4q"
    assert config.fleet_url == f"http://10.244.1.17:{config.http_port}"
    (port,) = container["ports"]
    assert port["containerPort"] == config.http_port
    # the sinks are refused with --fleet: a separate single exporter runs them
    assert config.publish_topic is None and config.archive_dir is None


def test_disruption_budget_and_pod_monitor_cover_every_replica(
    rendered: dict[str, Any],
) -> None:
    pod_labels = rendered["Deployment"]["spec"]["template"]["metadata"]["labels"]
    budget = rendered["PodDisruptionBudget"]
    assert budget["apiVersion"] == "policy/v1"
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()

    monitor = rendered["PodMonitor"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    port_names = {p["name"] for p in _container(rendered["Deployment"])["ports"]}
    assert endpoint["port"] in port_names and endpoint["path"] == "/metrics"
    # the job label is the pods' label of that name: job="offsetwatch", as the rules select
    assert pod_labels[monitor["spec"]["jobLabel"]] == "offsetwatch"
    assert (
        'up{job="offsetwatch"}'
        in (ROOT / "grafana" / "prometheus" / "offsetwatch-rules.yml").read_text()
    )
