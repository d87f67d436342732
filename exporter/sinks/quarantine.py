"""The quarantine file: undecodable records kept on disk when no dead-letter topic takes them.

One JSON line per record (`quarantine.jsonl` beside the checkpoint, or in the archive
directory): where it was read, its key and value as hex, and why it could not be decoded,
so nothing the exporter cannot read is lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from offsetwatch.decoder.canonical import dumps
from offsetwatch.exporter.state.ingest import Quarantined

FILE_NAME = "quarantine.jsonl"


class QuarantineFile:
    """Appends quarantined records to `directory/quarantine.jsonl` (opened at the first)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._file: TextIO | None = None

    def write(self, item: Quarantined, topic: str | None = None) -> None:
        """`topic` names the source when it is not __consumer_offsets (the lines' old
        shape has no topic field)."""
        if self._file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._file = open(self.directory / FILE_NAME, "a", encoding="utf-8")  # noqa: SIM115
        line = dumps(
            {
                **({} if topic is None else {"topic": topic}),
                "partition": item.partition,
                "offset": item.offset,
                "timestamp": item.timestamp,
                "key": None if item.key is None else item.key.hex(),
                "value": None if item.value is None else item.value.hex(),
                "error": str(item.error),
                "reason": item.error.kind,
            }
        )
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
