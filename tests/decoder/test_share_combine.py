"""decoder/share_combine.py: share-partition state as Kafka's share coordinator combines it.

Checked three ways: the real Kafka 4.0 capture (tests/data/share_state) replayed record by
record against state hand-computed from Kafka's own dump-log text; synthetic records written
by the decoder's encoder (byte-exact round trip) through the canonical dict and the typed view
alike; and the combiner against a per-offset model (every offset takes the batch with the
highest delivery count, then state), which the exporter's store uses too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetwatch.decoder import share_combine as sc
from offsetwatch.decoder.records import (
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateValue,
    StateBatch,
)
from offsetwatch.decoder.segments import SegmentReader
from offsetwatch.decoder.share_state import ShareStateCodec, canonical, share_partition_state
from offsetwatch.spark_jobs.lake_share_state import share_rows, topic_names_of

CAPTURE = Path(__file__).resolve().parent.parent / "data" / "share_state"
TOPIC = json.loads((CAPTURE / "capture.json").read_text())


def capture_records() -> list[dict[str, Any]]:
    codec = ShareStateCodec()
    out = []
    for log in sorted((CAPTURE / "__share_group_state-0").glob("*.log")):
        for batch in SegmentReader(path=log):
            for r in batch.records:
                out.append(canonical(codec.decode(r.key, r.value, 0, r.offset, r.timestamp)))
    return out


def dump_log_payloads() -> list[dict[str, Any]]:
    """The `payload` of every record line of Kafka's kafka-dump-log text of the capture."""
    payloads = []
    for line in (CAPTURE / "dumplog-0-00000000000000000000.txt").read_text().splitlines():
        if line.startswith("| offset: "):
            payloads.append(json.loads(line.partition(" payload: ")[2])["data"])
    return payloads


def _kafka_record(key_type: int, data: dict[str, Any]) -> sc.ShareRecord:
    """A ShareRecord read straight from Kafka's dump-log JSON (camelCase), independently of
    our decoder."""
    return sc.ShareRecord(
        snapshot=key_type == 0,
        snapshot_epoch=data["snapshotEpoch"],
        state_epoch=data.get("stateEpoch"),
        leader_epoch=data["leaderEpoch"],
        start_offset=data["startOffset"],
        batches=tuple(
            (b["firstOffset"], b["lastOffset"], b["deliveryCount"], b["deliveryState"])
            for b in data["stateBatches"]
        ),
    )


#: after each record of the capture (by hand from the dump-log text):
#: (start offset, batches, (available, acknowledged, archived), max delivery count)
CAPTURE_STATES = [
    # 0 snapshot: the share partition initialised, start offset not yet known
    (-1, (), (0, 0, 0), 0),
    # 1 update start 0: offsets 0-1 rejected (archived) at their first delivery
    (0, ((0, 1, 1, 4),), (0, 0, 2), 1),
    # 2 update start 2: 0-1 pruned (before the start), 2-5 acquired (persisted as available)
    (2, ((2, 5, 1, 0),), (4, 0, 0), 1),
    # 3 update 2-3 redelivered (count 2): it wins 2-3, the older 4-5 part stays
    (2, ((2, 3, 2, 0), (4, 5, 1, 0)), (4, 0, 0), 2),
    # 4 update 4-5 count 2: replaces 4-5; Kafka leaves the contiguous equal batches apart
    #   (2-3 had left the merge window already)
    (2, ((2, 3, 2, 0), (4, 5, 2, 0)), (4, 0, 0), 2),
    # 5 snapshot (epoch 1): 2-5 acknowledged at the third delivery
    (2, ((2, 2, 3, 2), (3, 4, 3, 2), (5, 5, 3, 2)), (0, 4, 0), 3),
]


def test_capture_replays_as_hand_computed_from_kafka_dump_log() -> None:
    records = capture_records()
    payloads = dump_log_payloads()
    assert len(records) == len(payloads) == len(CAPTURE_STATES)
    ours = kafka = None
    for record, payload, expected in zip(records, payloads, CAPTURE_STATES, strict=True):
        ours = sc.apply(ours, sc.from_canonical(record["type"], record["value"])).state
        kafka_record = _kafka_record(record["key_type"], payload)
        kafka = sc.apply(kafka, kafka_record).state
        assert ours == kafka
        assert ours is not None
        start, batches, (available, acknowledged, archived), max_count = expected
        assert (ours.start_offset, ours.batches) == (start, batches)
        tally = sc.counts(ours)
        assert (tally.available, tally.acknowledged, tally.archived, tally.unknown) == (
            available,
            acknowledged,
            archived,
            0,
        )
        assert sc.max_delivery_count(ours) == max_count
    assert ours is not None
    assert (ours.snapshot_epoch, ours.state_epoch, ours.leader_epoch) == (1, 0, 0)
    # 10 records produced (capture.json), the start offset at 2: 4 acknowledged past it
    assert sc.share_lag(ours, 6) == 0
    assert sc.share_lag(ours, 10) == 4
    assert sc.poison_batches(ours) == []


def test_capture_rows_for_the_lake_table() -> None:
    records = capture_records()
    key = (TOPIC["group"], TOPIC["topic_id"], 0)
    rows = list(share_rows(key, records, None, {TOPIC["topic_id"]: TOPIC["topic"]}))
    kinds = [row[4] for row in rows]
    assert kinds == ["snapshot", "update", "update", "update", "update", "snapshot"]
    for row, (start, batches, tally, max_count) in zip(rows, CAPTURE_STATES, strict=True):
        assert row[:4] == (TOPIC["group"], TOPIC["topic_id"], TOPIC["topic"], 0)
        assert row[12] == start
        # SHARE_BATCH rows are (first, last, delivery state, delivery count)
        assert row[16] == [(f, la, s, c) for f, la, c, s in batches]
        assert row[18:21] == tally
        assert row[22] == max_count
        assert row[23] is None
    # the lake's next run continues from the last row (PRIOR_SCHEMA columns by name)
    names = ["start_offset", "snapshot_epoch", "state_epoch", "leader_epoch", "batches"]
    prior = {"kind": "snapshot", "source_offset": rows[4][-1], "topic": TOPIC["topic"]}
    prior |= {f"state_{n}": rows[4][12 + i] for i, n in enumerate(names)}
    prior["state_delivery_complete_count"] = None
    again = list(share_rows(key, records[5:], prior, {}))
    assert again == rows[5:]
    # a record the lake applied already is late: kept, not combined
    late = list(share_rows(key, records[3:4], prior, {}))
    assert late[0][12:23] == (None,) * 11
    assert json.loads(late[0][23]) == {"late": 1}


def _encoded(key_type: int, value: Any, offset: int) -> dict[str, Any]:
    """A record written by the decoder's encoder, decoded back (bytes equal), as canonical."""
    codec = ShareStateCodec()
    key_of = SharePartitionKey("g", "AAAAAAAAAAAAAAAAAAAAAA", 3)
    record = ShareStateRecord(key_type, key_of, 0, value)
    key, raw = codec.encode(record)
    decoded = codec.decode(key, raw, 0, offset, 1_000 * offset)
    assert codec.encode(decoded) == (key, raw)
    assert isinstance(decoded, ShareStateRecord)
    state = share_partition_state(decoded)
    assert state is not None
    as_dict = canonical(decoded)
    # the typed view and the canonical dict give the same record
    typed = sc.from_canonical(as_dict["type"], as_dict["value"])
    assert typed is not None
    assert typed.batches == tuple(
        (b.first_offset, b.last_offset, b.delivery_count, b.delivery_state) for b in state.batches
    )
    assert (typed.start_offset, typed.leader_epoch, typed.state_epoch) == (
        state.start_offset,
        state.leader_epoch,
        state.state_epoch,
    )
    return as_dict


def test_synthetic_poison_and_problems() -> None:
    b = StateBatch
    records = [
        _encoded(0, ShareSnapshotValue(0, 1, 5, 100, (b(100, 109, 0, 1),)), 0),
        # 100-101 acknowledged, 102 rejected, 103-104 back for the 5th time
        _encoded(
            1,
            ShareUpdateValue(0, -1, -1, (b(100, 101, 2, 1), b(102, 102, 4, 1), b(103, 104, 0, 5))),
            1,
        ),
        # start moves to 102; an unknown state 3 on 120-121; a backwards batch 130-129
        _encoded(1, ShareUpdateValue(0, 7, 102, (b(120, 121, 3, 1), b(130, 129, 0, 1))), 2),
    ]
    rows = list(share_rows(("g", "AAAAAAAAAAAAAAAAAAAAAA", 3), records, None, {}))
    first, second, third = rows
    assert first[12:23] == (100, 0, 1, 5, [(100, 109, 0, 1)], None, 10, 0, 0, 0, 1)
    assert second[16] == [(100, 101, 2, 1), (102, 102, 4, 1), (103, 104, 0, 5), (105, 109, 0, 1)]
    assert second[18:23] == (7, 2, 1, 0, 5)
    assert third[12] == 102 and third[15] == 7 and third[13:15] == (0, 1)
    assert third[16] == [
        (102, 102, 4, 1),
        (103, 104, 0, 5),
        (105, 109, 0, 1),
        (120, 121, 3, 1),
    ]
    assert third[18:23] == (7, 0, 1, 2, 5)
    assert json.loads(third[23]) == {"backwards_batch": 1, "unknown_delivery_state": 1}
    state = sc.apply(None, sc.from_canonical(records[0]["type"], records[0]["value"])).state
    for record in records[1:]:
        state = sc.apply(state, sc.from_canonical(record["type"], record["value"])).state
    assert state is not None
    assert sc.poison_batches(state) == [(102, 102, 1, 4), (103, 104, 5, 0)]
    assert sc.poison_batches(state, limit=6) == [(102, 102, 1, 4)]
    # an update first: applied as Kafka applies it, and said
    alone = sc.apply(None, sc.from_canonical("share_update", records[1]["value"]))
    assert alone.problems == {"update_without_snapshot": 1}
    assert alone.state is not None and alone.state.start_offset == -1
    assert sc.apply(state, None).state is None


def test_topic_names_from_partition_metadata_text() -> None:
    topic = {"topic_id": "id1", "topic_name": "orders", "num_partitions": 3}
    as_text = json.dumps({"topics": [json.dumps(topic)]})
    as_objects = json.dumps({"topics": [{"topic_id": "id2", "topic_name": "audit"}]})
    assert topic_names_of([as_text, as_objects, None]) == {"id1": "orders", "id2": "audit"}


# -- the combiner against a model --------------------------------------------------------------

_batch = st.tuples(
    st.integers(0, 30), st.integers(0, 6), st.integers(1, 4), st.sampled_from([0, 2, 4])
).map(lambda t: (t[0], t[0] + t[1], t[2], t[3]))


def _per_offset(batches: list[sc.Batch], start: int) -> dict[int, tuple[int, int]]:
    """offset -> (delivery count, state) of the highest-priority batch covering it."""
    out: dict[int, tuple[int, int]] = {}
    for first, last, count, state in batches:
        for offset in range(max(first, start), last + 1):
            out[offset] = max(out.get(offset, (0, -1)), (count, state))
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_batch, max_size=6),
    st.lists(_batch, max_size=6),
    st.integers(-1, 20),
)
def test_combine_is_the_per_offset_winner(
    old: list[sc.Batch], new: list[sc.Batch], start: int
) -> None:
    combined = sc.combine(old, new, start)
    assert combined == sorted(combined)
    covered = [o for b in combined for o in range(b[0], b[1] + 1)]
    assert len(covered) == len(set(covered)), "batches overlap"
    low = 0 if start == -1 else start
    assert _per_offset(combined, low) == _per_offset([*old, *new], low)
