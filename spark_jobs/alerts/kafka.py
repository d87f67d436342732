"""Alerts to a Kafka topic: one JSON message per alert state, keyed by alert id, so a compacted
topic keeps each episode's latest state (active, then ended)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, Producer

from offsetwatch.spark_jobs.alerts.model import Alert


class KafkaAlertError(Exception):
    """Some alerts were not delivered to the topic."""


class KafkaAlertSink:
    """An idempotent producer for `topic`; `send` returns once every alert is acknowledged."""

    def __init__(self, config: Mapping[str, object], topic: str, timeout_s: float = 30.0) -> None:
        merged: dict[str, object] = {"enable.idempotence": True, "linger.ms": 20}
        merged.update(config)
        self.topic = topic
        self.timeout_s = timeout_s
        self._producer = Producer(merged)

    def send(self, alerts: Iterable[Alert]) -> int:
        """Produce and wait; raises KafkaAlertError unless all were delivered. The caller
        (a batch job, or a micro-batch Spark retries) runs again after a failure, and the
        alert id keys make the repeat harmless."""
        errors: list[str] = []

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                errors.append(err.str())

        count = 0
        for alert in alerts:
            value = json.dumps(alert.to_dict(), separators=(",", ":")).encode("utf-8")
            self._producer.produce(
                self.topic, key=alert.alert_id.encode(), value=value, on_delivery=delivered
            )
            self._producer.poll(0)
            count += 1
        left = self._producer.flush(self.timeout_s)
        if left or errors:
            raise KafkaAlertError(
                f"{left + len(errors)} of {count} alerts not delivered to {self.topic}: "
                + (errors[0] if errors else "timed out")
            )
        return count

    def close(self) -> None:
        """Flush what is left and let the producer go (it stops reconnecting)."""
        self._producer.flush(self.timeout_s)
        del self._producer
