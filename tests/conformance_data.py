"""Decoded records of the conformance runs, shared by the tests that need real Kafka records."""

from __future__ import annotations

import json
from pathlib import Path

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import AnyRecord


def decode_run(conformance_dir: Path, run: str = "main") -> list[AnyRecord]:
    """Every record of runs/<run>/records.jsonl, decoded with its position, in file order."""
    codec = Codec()
    out: list[AnyRecord] = []
    path = conformance_dir / "runs" / run / "records.jsonl"
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            raw = json.loads(line)
            out.append(
                codec.decode(
                    bytes.fromhex(raw["key"]),
                    None if raw["value"] is None else bytes.fromhex(raw["value"]),
                    raw["partition"],
                    raw["offset"],
                    raw["timestamp"],
                )
            )
    return out


def run_names(conformance_dir: Path) -> list[str]:
    return sorted(p.parent.name for p in conformance_dir.glob("runs/*/records.jsonl"))
