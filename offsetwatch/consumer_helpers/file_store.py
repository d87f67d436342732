"""OffsetStore on a local (or shared) directory: one file per partition, replaced atomically."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from offsetwatch.consumer_helpers.assignment import PartitionKey
from offsetwatch.consumer_helpers.errors import ConsumerHelperError
from offsetwatch.consumer_helpers.offset_store import StoredPartition
from offsetwatch.core.atomic import fsync_directory

_FORMAT: Final = "offsetwatch-offset-store"
_VERSION: Final = 1


class FileOffsetStore:
    """`<directory>/<topic>-<partition>.offset`: a one-line JSON header (topic, partition,
    offset, length and CRC-32 of the state), a newline, then the state bytes.

    Each file is written to a temporary name, fsynced, renamed over the old one, and the
    directory is fsynced: a crash leaves the old file or the new one. Topic names are
    restricted by Kafka to [a-zA-Z0-9._-], so they are safe as file names.
    """

    __slots__ = ("directory",)

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_of(self, key: PartitionKey) -> Path:
        topic, partition = key
        return self.directory / f"{topic}-{partition}.offset"

    def load(self, keys: Iterable[PartitionKey]) -> dict[PartitionKey, StoredPartition]:
        found: dict[PartitionKey, StoredPartition] = {}
        for key in keys:
            try:
                data = self.path_of(key).read_bytes()
            except FileNotFoundError:
                continue
            found[key] = self._parse(key, data)
        return found

    def save(self, entries: Mapping[PartitionKey, StoredPartition]) -> None:
        for key, entry in entries.items():
            path = self.path_of(key)
            temporary = path.with_name(path.name + ".tmp")
            with open(temporary, "wb") as out:
                out.write(_encode(key, entry))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        if entries:
            fsync_directory(self.directory)

    def _parse(self, key: PartitionKey, data: bytes) -> StoredPartition:
        path = self.path_of(key)
        header_line, newline, state = data.partition(b"\n")
        try:
            header = json.loads(header_line) if newline else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != _FORMAT:
            raise ConsumerHelperError(f"{path}: not an offsetwatch offset-store file")
        if header.get("version") != _VERSION:
            raise ConsumerHelperError(f"{path}: unsupported version {header.get('version')!r}")
        if [header.get("topic"), header.get("partition")] != list(key):
            raise ConsumerHelperError(
                f"{path}: holds {header.get('topic')}[{header.get('partition')}], not "
                f"{key[0]}[{key[1]}]"
            )
        offset = header.get("offset")
        if (
            not isinstance(offset, int)
            or header.get("state_bytes") != len(state)
            or header.get("state_crc32") != zlib.crc32(state)
        ):
            raise ConsumerHelperError(f"{path}: damaged (offset, length or CRC do not match)")
        return StoredPartition(offset, state)


def _encode(key: PartitionKey, entry: StoredPartition) -> bytes:
    header = {
        "format": _FORMAT,
        "version": _VERSION,
        "topic": key[0],
        "partition": key[1],
        "offset": entry.offset,
        "state_bytes": len(entry.state),
        "state_crc32": zlib.crc32(entry.state),
    }
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + entry.state
