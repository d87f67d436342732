"""The alert ledger: every batch's emitted alerts in `<alerts_dir>/batch-<id>.jsonl` (written
atomically, so a batch Spark runs again writes the same file again), and `.ledger-index.json`,
which folds the earlier files so that a batch reads the index and the newest files rather than
every file ever written. The files stay: they are also the JSON-lines alert sink."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from offsetwatch.core.atomic import atomic_write, write_text_atomic
from offsetwatch.spark_jobs.alerts.model import Alert

_LEDGER_NAME: Final = re.compile(r"batch-(\d+)\.jsonl")
#: hidden, so that globs of the alert files (a JSON-lines sink) do not see it
_INDEX_NAME: Final = ".ledger-index.json"


@dataclass(slots=True)
class LedgerIndex:
    """What the ledger files of batches up to `upto` say, kept small: alert id -> [end
    emitted, ends_at]. Without it every batch re-read every earlier batch's file (one a
    batch, for ever); with it a batch reads the index and the files written since."""

    upto: int = -1
    alerts: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, row: Mapping[str, Any]) -> None:
        known = self.alerts.get(row["alert_id"], [False, None])
        ended = bool(known[0]) or not row["active"]
        self.alerts[row["alert_id"]] = [ended, row.get("ends_at") if ended else None]

    @staticmethod
    def read(alerts_dir: Path) -> LedgerIndex:
        try:
            data = json.loads((alerts_dir / _INDEX_NAME).read_text(encoding="utf-8"))
            return LedgerIndex(int(data["upto"]), dict(data["alerts"]))
        except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: rebuild
            return LedgerIndex()

    def write(self, alerts_dir: Path) -> None:
        write_text_atomic(
            alerts_dir / _INDEX_NAME, json.dumps({"upto": self.upto, "alerts": self.alerts})
        )


def _ledger_files(alerts_dir: Path, after: int, before: int) -> list[tuple[int, Path]]:
    """(batch id, path) of the ledger files of batches after < id < before, in order."""
    found = []
    for path in alerts_dir.iterdir():
        match = _LEDGER_NAME.fullmatch(path.name)
        if match is not None and after < int(match.group(1)) < before:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _with_files(index: LedgerIndex, alerts_dir: Path, before: int) -> LedgerIndex:
    """`index` plus the ledger files it does not cover yet, up to batch `before` (excluded)."""
    out = LedgerIndex(index.upto, {k: list(v) for k, v in index.alerts.items()})
    for batch, path in _ledger_files(alerts_dir, index.upto, before):
        for line in path.read_text(encoding="utf-8").splitlines():
            out.add(json.loads(line))
        out.upto = batch
    return out


def emitted_before(alerts_dir: Path, batch_id: int) -> dict[str, bool]:
    """alert id -> whether its end was emitted, from the ledger of earlier batches (the index
    and the files written after it)."""
    if not alerts_dir.is_dir():
        return {}
    index = LedgerIndex.read(alerts_dir)
    if index.upto >= batch_id:  # an index ahead of this batch cannot say what preceded it
        index = LedgerIndex()
    return {k: bool(v[0]) for k, v in _with_files(index, alerts_dir, batch_id).alerts.items()}


def update_ledger_index(alerts_dir: Path, batch_id: int, horizon_ms: int | None) -> None:
    """Fold the ledger files before `batch_id` into the index (never this batch's: a re-run
    of it must still see what preceded it), dropping alerts that ended before `horizon_ms`:
    their episodes lie outside the history every later batch reads, so they never recur."""
    index = _with_files(LedgerIndex.read(alerts_dir), alerts_dir, batch_id)
    if horizon_ms is not None:
        index.alerts = {
            k: v
            for k, v in index.alerts.items()
            if not (v[0] and v[1] is not None and v[1] < horizon_ms)
        }
    index.write(alerts_dir)


def new_alerts(alerts: Iterable[Alert], emitted: Mapping[str, bool]) -> list[Alert]:
    """Alerts not emitted in this state yet: a new open episode, or an end not yet emitted."""
    out = []
    for alert in alerts:
        ended_before = emitted.get(alert.alert_id)
        if ended_before is None or (not alert.active and not ended_before):
            out.append(alert)
    return sorted(out, key=lambda a: (a.starts_at, a.alert_id))


def write_ledger(alerts_dir: Path, batch_id: int, alerts: list[Alert]) -> Path:
    """`batch-<id>.jsonl`, replaced atomically (a re-run of the batch writes the same)."""
    alerts_dir.mkdir(parents=True, exist_ok=True)
    target = alerts_dir / f"batch-{batch_id:012d}.jsonl"
    with atomic_write(target, "w") as out:
        for alert in alerts:
            out.write(json.dumps(alert.to_dict(), separators=(",", ":")) + "\n")
    return target
