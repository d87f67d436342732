"""Alerts to Prometheus Alertmanager's v2 API (`POST /api/v2/alerts`), through the outbox.

Alertmanager's contract: a firing alert (no `endsAt`) is taken as resolved once
`resolve_timeout` (default 5 min) passes without it being sent again, so active alerts are
re-sent every `resend_interval_ms` (keep it well below resolve_timeout); an alert whose
`endsAt` lies in the past is resolved. Each episode is one alert: its `episode` label (the
alert id) keeps two episodes of the same kind on the same partition apart, and
`--group-by`/routing work on the other labels (alertname, severity, group, topic, partition).

Nothing is dropped while Alertmanager is down: every alert goes to the outbox first; what a
POST did not deliver stays there and goes out with the next `deliver` call.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from offsetwatch.spark_jobs.alerts.model import Alert
from offsetwatch.spark_jobs.alerts.outbox import Outbox

log = logging.getLogger(__name__)

API_PATH: Final = "/api/v2/alerts"
SOURCE_LABEL: Final = "offsetwatch-spark"
DEFAULT_RESEND_INTERVAL_MS: Final = 60_000
#: an ended episode's id is remembered this long so a re-run does not resolve it again
DEFAULT_KEEP_RESOLVED_MS: Final = 7 * 24 * 3600 * 1000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def rfc3339(epoch_ms: int) -> str:
    stamp = datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def to_alertmanager(alert: Alert, generator_base: str) -> dict[str, Any]:
    """The v2 API's postable alert for one alert row."""
    labels = {
        "alertname": alert.name,
        "severity": alert.severity,
        "group": alert.group,
        "episode": alert.alert_id,
        "source": SOURCE_LABEL,
    }
    if alert.topic is not None:
        labels["topic"] = alert.topic
    if alert.partitions is not None:
        labels["partition"] = alert.partitions
    annotations = {"summary": alert.summary, "description": alert.description}
    if alert.runbook_url is not None:
        annotations["runbook_url"] = alert.runbook_url
    if alert.value is not None:
        annotations["value"] = f"{alert.value:g}"
    posted: dict[str, Any] = {
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339(alert.starts_at),
        "generatorURL": f"{generator_base.rstrip('/')}/api/v1/groups/"
        + urllib.parse.quote(alert.group, safe=""),
    }
    if alert.ends_at is not None:
        posted["endsAt"] = rfc3339(alert.ends_at)
    return posted


class AlertmanagerError(Exception):
    """Alertmanager did not take the alerts (down, refused, or answered an error)."""


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    #: alerts Alertmanager took in this call
    sent: int
    #: alerts left in the outbox (active ones always stay until their episode ends)
    pending: int
    #: why the POST failed (the alerts stay in the outbox); None when it did not
    error: str | None = None


@dataclass(slots=True)
class AlertmanagerSink:
    """Delivers alerts to one Alertmanager (`url`: its base, e.g. http://am:9093)."""

    url: str
    outbox_path: Path
    resend_interval_ms: int = DEFAULT_RESEND_INTERVAL_MS
    timeout_s: float = 10.0
    #: generatorURL is `<this>/api/v1/groups/<group>`: the exporter's group detail
    generator_base: str = "http://localhost:9380"
    keep_resolved_ms: int = DEFAULT_KEEP_RESOLVED_MS
    clock_ms: Callable[[], int] = field(default=_now_ms)

    def deliver(self, alerts: Iterable[Alert]) -> DeliveryReport:
        """Queue `alerts` in the outbox, then send what is due: new or changed alerts, ended
        ones not yet delivered, and active ones not sent for `resend_interval_ms`. Call it
        with no alerts to re-send on schedule."""
        outbox = Outbox.load(self.outbox_path)
        for alert in alerts:
            outbox.add(alert)
        now = self.clock_ms()
        due = [
            entry
            for entry in outbox.pending.values()
            if entry.sent_ms is None
            or (entry.alert.active and now - entry.sent_ms >= self.resend_interval_ms)
        ]
        error: str | None = None
        if due:
            try:
                self._post([to_alertmanager(entry.alert, self.generator_base) for entry in due])
            except AlertmanagerError as failure:
                error = str(failure)
                log.warning(
                    "%s; %d alerts kept in %s for the next try", error, len(due), self.outbox_path
                )
            else:
                for entry in due:
                    alert_id = entry.alert.alert_id
                    if entry.alert.active:
                        entry.sent_ms = now
                    else:
                        del outbox.pending[alert_id]
                        outbox.resolved[alert_id] = now
        outbox.forget_resolved_before(now - self.keep_resolved_ms)
        outbox.save()
        return DeliveryReport(0 if error else len(due), len(outbox.pending), error)

    def _post(self, payload: list[dict[str, Any]]) -> None:
        request = urllib.request.Request(
            self.url.rstrip("/") + API_PATH,
            data=json.dumps(payload).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                answer.read()
        except urllib.error.HTTPError as answer:
            body = answer.read(500).decode("utf-8", "replace").strip()
            raise AlertmanagerError(
                f"Alertmanager {self.url} answered {answer.code}: {body}"
            ) from None
        except (urllib.error.URLError, OSError) as failure:
            reason = getattr(failure, "reason", failure)
            raise AlertmanagerError(f"Alertmanager {self.url} unreachable: {reason}") from None
