"""One alert row (ALERTS_SCHEMA) as a Python record, and its JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import Row

from offsetwatch.spark_jobs.lake_schema import ALERTS_SCHEMA


@dataclass(frozen=True, slots=True)
class Alert:
    """Field for field an ALERTS_SCHEMA row; `ends_at` None while the episode is open."""

    alert_id: str
    name: str
    severity: str
    group: str
    topic: str | None
    partitions: str | None
    starts_at: int
    ends_at: int | None
    active: bool
    value: float | None
    summary: str
    description: str
    runbook_url: str | None

    @staticmethod
    def from_row(row: Row) -> Alert:
        return Alert(**{name: row[name] for name in ALERTS_SCHEMA.fieldNames()})

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Alert:
        return Alert(**{name: data[name] for name in ALERTS_SCHEMA.fieldNames()})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
