"""Log-end samples in the canonical envelope: Avro round trip, union branches after the unknown
ones (existing branch numbers unchanged), and the decoder never producing one from Kafka bytes."""

from __future__ import annotations

import io
import json

from offsetwatch.decoder.avro import AvroCodec, avro_schema, key_classes, value_classes
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.log_end import IDS_PER_MS, SampleIds, log_end_record
from offsetwatch.decoder.records import UnknownRecord

T0 = 1_767_225_600_123


def test_log_end_round_trips_through_avro_bodies_and_container_files() -> None:
    codec = AvroCodec()
    sample = log_end_record("orders", 3, 48_213, T0, T0 * IDS_PER_MS)
    assert codec.decode(codec.encode(sample)) == sample
    buffer = io.BytesIO()
    codec.write_container(buffer, [sample, sample | {"offset": T0 * IDS_PER_MS + 1}])
    buffer.seek(0)
    assert [r["offset"] for r in codec.read_container(buffer)] == [
        T0 * IDS_PER_MS,
        T0 * IDS_PER_MS + 1,
    ]


def test_log_end_branches_come_after_the_unknown_ones() -> None:
    fields = {f["name"]: f["type"] for f in avro_schema()["fields"]}

    def names(union: list[object]) -> list[str]:
        return [str(b["name"] if isinstance(b, dict) else b).split(".")[-1] for b in union]

    keys = names(fields["key"])
    values = names(fields["value"])
    assert keys[: len(key_classes()) + 1] == [c.__name__ for c in key_classes()] + ["UnknownKey"]
    # appended after them, so that no earlier branch number moves: the log-end branches,
    # then __share_group_state's (added later still)
    assert keys[len(key_classes()) + 1] == "LogEndKey"
    assert values[len(value_classes()) + 1] == "UnknownValue"
    assert values[len(value_classes()) + 2] == "LogEndValue"
    assert keys[len(key_classes()) + 2 :] == ["SharePartitionKey"]
    assert all(v.startswith("Share") for v in values[len(value_classes()) + 3 :])


def test_key_type_minus_one_on_the_wire_is_an_unknown_record_not_a_sample() -> None:
    record = Codec().decode(b"\xff\xff\x00\x01a", b"\x00\x00", partition=0, offset=5)
    assert isinstance(record, UnknownRecord)


def test_sample_ids_grow_and_stay_unique_within_a_millisecond() -> None:
    ids = SampleIds()
    taken = [ids.take(T0) for _ in range(3)] + [ids.take(T0 - 5), ids.take(T0 + 1)]
    assert taken == [
        T0 * IDS_PER_MS,
        T0 * IDS_PER_MS + 1,
        T0 * IDS_PER_MS + 2,
        T0 * IDS_PER_MS + 3,  # the clock stepped back: still unique
        (T0 + 1) * IDS_PER_MS,
    ]
    assert json.loads(json.dumps(log_end_record("t", 0, 1, T0, taken[-1])))["offset"] == taken[-1]
