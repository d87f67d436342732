"""Alerts from episodes (docs/spark-alerts.md).

* `build.alerts_from_episodes`: episodes (EPISODES_SCHEMA) -> alert rows (ALERTS_SCHEMA), one
  per episode, a pure DataFrame function;
* sinks: `files.write_alert_files` (JSON lines / Parquet), `kafka.KafkaAlertSink` (a topic),
  `alertmanager.AlertmanagerSink` (Prometheus Alertmanager's v2 API, with a persistent outbox
  so that nothing is dropped while Alertmanager is down);
* `model.Alert`: one alert row on the driver, what the Kafka and Alertmanager sinks take.
"""
