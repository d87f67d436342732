"""deploy/kubernetes: the manifests parse, and say what the exporter really understands.

No cluster here: `kubectl apply --dry-run=server` and the Prometheus Operator's CRD validation
were not run. What is checked: every document parses, the container's flags and environment
variables are real options of `offsetwatch export`, the probes hit /readyz and /healthz on the
exporter's port, the pod runs as the image's non-root user, the ServiceMonitor scrapes the
Service's port, the kustomization lists files that exist, and the PrometheusRule holds the
rules file (tests/grafana/test_generated.py compares the whole spec).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from offsetwatch.exporter.config import DEFAULT_HTTP_PORT
from tests.deploy.cli_options import export_flags, flags_in, is_export_env

KUBERNETES = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def _load(name: str) -> Any:
    documents = list(yaml.safe_load_all((KUBERNETES / name).read_text()))
    assert len(documents) == 1, name
    return documents[0]


def _container() -> dict[str, Any]:
    (container,) = _load("deployment.yaml")["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def test_every_manifest_parses_with_kind_and_name() -> None:
    files = sorted(KUBERNETES.glob("*.yaml"))
    assert {f.name for f in files} >= {
        "deployment.yaml",
        "service.yaml",
        "servicemonitor.yaml",
        "prometheusrule.yaml",
        "kustomization.yaml",
    }
    for path in files:
        document = _load(path.name)
        assert document["apiVersion"] and document["kind"], path.name
        if document["kind"] != "Kustomization":
            assert document["metadata"]["name"] == "offsetwatch" or path.name.startswith(
                "secret"
            ), path.name


def test_kustomization_lists_existing_resources() -> None:
    resources = _load("kustomization.yaml")["resources"]
    assert all((KUBERNETES / name).is_file() for name in resources)
    assert "prometheusrule.yaml" in resources and "secret.example.yaml" not in resources


def test_container_flags_and_environment_are_real_options() -> None:
    container = _container()
    assert set(flags_in(container.get("args", []))) <= export_flags()
    names = [variable["name"] for variable in container["env"]]
    unknown = [name for name in names if not is_export_env(name)]
    assert not unknown, f"not options of offsetwatch export: {unknown}"
    # the password comes from a Secret, never inline
    password = next(v for v in container["env"] if v["name"].endswith("SASL_PASSWORD"))
    assert "valueFrom" in password and "value" not in password


def test_probes_use_readyz_and_healthz_on_the_exporter_port() -> None:
    container = _container()
    env = {v["name"]: v.get("value") for v in container["env"]}
    assert int(env.get("OFFSETWATCH_HTTP_PORT", DEFAULT_HTTP_PORT)) == DEFAULT_HTTP_PORT
    (port,) = container["ports"]
    assert port["containerPort"] == DEFAULT_HTTP_PORT and port["name"] == "http"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    # a Kafka outage makes the exporter unready, never restarted
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"


def test_pod_is_non_root_and_read_only() -> None:
    deployment = _load("deployment.yaml")
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the Dockerfile's user
    security = _container()["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"] for m in _container()["volumeMounts"]}
    checkpoint = _container()["args"][_container()["args"].index("--checkpoint-path") + 1]
    assert any(checkpoint.startswith(mount + "/") for mount in mounts)


def test_service_monitor_scrapes_the_service() -> None:
    service = _load("service.yaml")
    monitor = _load("servicemonitor.yaml")
    labels = _load("deployment.yaml")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    # the scrape-health alerts select job="offsetwatch": the operator names the job after
    # the Service
    assert service["metadata"]["name"] == "offsetwatch"


def test_prometheus_rule_carries_the_rules_file() -> None:
    rule = _load("prometheusrule.yaml")
    rules_file = yaml.safe_load(
        (KUBERNETES.parents[1] / "grafana" / "prometheus" / "offsetwatch-rules.yml").read_text()
    )
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == rules_file["groups"]
