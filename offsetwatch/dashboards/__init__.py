"""The operator kit as code: Grafana dashboards, Grafana-managed alert rules, and the
Kubernetes PrometheusRule, generated from one source each (`python -m offsetwatch.dashboards`).

The dashboards are built here; the alert rules of both Grafana and the Prometheus Operator
are translations of grafana/prometheus/offsetwatch-rules.yml, the one rules file.
"""
