"""Decode + apply for `__share_group_state`: the share-state twin of exporter/state/ingest.py.

Every message becomes a decoded record applied to the `ShareStateStore`, or - when its bytes
are bad - is counted by reason and handed to the same quarantine callbacks as undecodable
`__consumer_offsets` records (log line, quarantine file or dead-letter topic). A record of a
key type this offsetwatch does not know is counted as `unknown`. Nothing stops the stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.records import ShareStateRecord
from offsetwatch.decoder.share_state import ShareStateCodec
from offsetwatch.exporter.state.ingest import Quarantined, QuarantineSink, RawMessage
from offsetwatch.exporter.state.share_state import ShareStateStore


@dataclass(slots=True)
class ShareIngestor:
    store: ShareStateStore
    codec: ShareStateCodec = field(default_factory=ShareStateCodec)
    quarantine: list[QuarantineSink] = field(default_factory=list)
    #: next offset to read per __share_group_state partition, after what was applied
    positions: dict[int, int] = field(default_factory=dict)
    #: undecodable records by DecodeError kind
    decode_errors: dict[str, int] = field(default_factory=dict)

    def ingest(self, messages: Iterable[RawMessage]) -> int:
        handled = 0
        store = self.store
        decode = self.codec.decode
        for message in messages:
            partition = message.partition() or 0
            offset = message.offset() or 0
            timestamp = message.timestamp()[1]
            key, value = message.key(), message.value()
            try:
                record = decode(key, value, partition, offset, timestamp)
            except DecodeError as error:
                kind = error.kind
                self.decode_errors[kind] = self.decode_errors.get(kind, 0) + 1
                item = Quarantined(partition, offset, timestamp, key, value, error)
                for sink in self.quarantine:
                    sink(item)
            else:
                if isinstance(record, ShareStateRecord):
                    store.apply(record)
                else:
                    store.applied["unknown"] = store.applied.get("unknown", 0) + 1
            self.positions[partition] = offset + 1
            handled += 1
        return handled
