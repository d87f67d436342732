"""Pure decoder of Kafka's `__consumer_offsets`: bytes in, typed records out, no I/O.

    >>> from decoder import Codec
    >>> codec = Codec()
    >>> record = codec.decode(key_bytes, value_bytes, partition=3, offset=42)

See `records` for the record types, `kafka_json` for Kafka-tool JSON, `canonical` for
offsetwatch's own JSON, `segments` for log segment files.
"""

from offsetwatch.decoder.canonical import Canonical, group_of, identity_key
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.codegen import EncodeError
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.kafka_json import KafkaJson
from offsetwatch.decoder.partitioner import partition_for
from offsetwatch.decoder.records import AnyRecord, Record, UnknownRecord

__all__ = [
    "AnyRecord",
    "Canonical",
    "Codec",
    "DecodeError",
    "EncodeError",
    "KafkaJson",
    "Record",
    "UnknownRecord",
    "group_of",
    "identity_key",
    "partition_for",
]
