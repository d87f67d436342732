"""A small persistent outbox: what Alertmanager still has to hear, kept across runs.

One JSON file, replaced atomically (offsetwatch.core.atomic), so a crash leaves the old or the new
content, never half of one. It holds:
* `pending`: alert id -> the latest alert row and when it was last delivered (null: never).
  Active alerts stay until their episode ends (they are re-sent on a schedule); ended ones
  until delivered once;
* `resolved`: ids whose end was delivered, with the time, so that a re-run that finds the
  same ended episode does not resolve it again; forgotten after `keep_resolved_ms`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offsetwatch.core.atomic import atomic_write
from offsetwatch.spark_jobs.alerts.model import Alert


@dataclass(slots=True)
class Entry:
    alert: Alert
    #: epoch ms of the last successful delivery; None: never delivered in this state
    sent_ms: int | None = None


@dataclass(slots=True)
class Outbox:
    path: Path
    pending: dict[str, Entry] = field(default_factory=dict)
    resolved: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def load(path: Path) -> Outbox:
        if not path.exists():
            return Outbox(path)
        data = json.loads(path.read_text(encoding="utf-8"))
        pending = {
            alert_id: Entry(Alert.from_dict(item["alert"]), item["sent_ms"])
            for alert_id, item in data["pending"].items()
        }
        return Outbox(path, pending, {k: int(v) for k, v in data["resolved"].items()})

    def save(self) -> None:
        data: dict[str, Any] = {
            "pending": {
                alert_id: {"alert": entry.alert.to_dict(), "sent_ms": entry.sent_ms}
                for alert_id, entry in sorted(self.pending.items())
            },
            "resolved": dict(sorted(self.resolved.items())),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(self.path, "w") as out:
            json.dump(data, out, separators=(",", ":"))

    def add(self, alert: Alert) -> None:
        """Take the latest state of an episode; an end already delivered is not taken again."""
        if alert.alert_id in self.resolved:
            return
        current = self.pending.get(alert.alert_id)
        if current is None or current.alert != alert:
            # new content (a new episode, or this one ended or grew) must be delivered anew
            self.pending[alert.alert_id] = Entry(alert, None)

    def forget_resolved_before(self, cutoff_ms: int) -> None:
        self.resolved = {k: t for k, t in self.resolved.items() if t >= cutoff_ms}
