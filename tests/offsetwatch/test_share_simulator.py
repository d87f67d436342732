"""The demo's share groups: what the simulator writes decodes to the queues it means.

Pure and fast (no cluster): each queue steps against made-up log ends, its records go through
the decoders, and the exporter's own state (OffsetState, GroupViews, ShareStateStore) reads
them. The console and Prometheus tests show the same queues through a real exporter.
"""

from __future__ import annotations

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import Record, ShareStateRecord
from offsetwatch.decoder.share_state import ShareStateCodec
from offsetwatch.exporter.judge.group_views import GroupViews
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.state.share_state import ShareStateStore
from offsetwatch.record_factory import KeyValue, topic_id_for
from offsetwatch.share_simulator import IN_FLIGHT, SHARE_STATE_PARTITIONS, ShareQueue, ShareRecords


def _run(
    behaviour: str, ends: list[int], partitions: int = 2
) -> tuple[OffsetState, ShareStateStore]:
    """Step one queue once per log end; return the exporter's state of what it wrote."""
    queue = ShareQueue("q", behaviour, "orders", partitions, 10.0, ShareRecords())
    group_records: list[KeyValue] = []
    state_records: list[tuple[int, bytes, bytes | None]] = []

    def write_group(_group: str, records: list[KeyValue]) -> None:
        group_records.extend(records)

    def write_state(partition: int, key: bytes, value: bytes | None) -> None:
        state_records.append((partition, key, value))

    for end in ends:
        queue.step(lambda _topic, _partition: end, write_group, write_state)  # noqa: B023
    state = OffsetState()
    codec = Codec()
    for offset, (key, value) in enumerate(group_records):
        record = codec.decode(key, value, 0, offset, 1_000)
        assert isinstance(record, Record)
        state.apply(record)
    store = ShareStateStore()
    share_codec = ShareStateCodec()
    for offset, (partition, key, value) in enumerate(state_records):
        assert 0 <= partition < SHARE_STATE_PARTITIONS
        share = share_codec.decode(key, value, partition, offset, 1_000 + offset)
        assert isinstance(share, ShareStateRecord)
        # byte-exact: what the decoder reads, the encoder writes back
        assert share_codec.encode(share) == (key, value)
        store.apply(share)
    return state, store


def test_poison_queue_keeps_forty_in_flight_and_archives_at_the_limit() -> None:
    state, store = _run("share-poison", [100, 140, 180])
    view = GroupViews().view(state.groups["q"])
    assert view.kind == "SHARE" and view.state == "STABLE"
    assert [m.assignment for m in view.members] == [(("orders", (0, 1)),)] * 2
    topic_id = topic_id_for("orders")
    first = store.partitions[("q", topic_id, 0)]
    start = 180 - IN_FLIGHT
    assert first.start_offset == start
    assert first.batches == [
        (start, start + 9, 2, 0),  # available, delivered twice
        (start + 10, start + 14, 5, 4),  # archived at the delivery limit
        (start + 15, start + 29, 1, 2),  # acknowledged
    ]
    # partition 1 has no poison batch (POISON_PARTITIONS: 0 and 3)
    assert store.partitions[("q", topic_id, 1)].counts() == (10, 15, 0, 0)
    assert not any(store.errors.values())


def test_lagging_queue_moves_its_start_at_half_the_rate() -> None:
    _, store = _run("share-lagging", [100, 110, 120])
    # starts 40 behind, then 5 records a step (half of 10/s)
    assert store.partitions[("q", topic_id_for("orders"), 0)].start_offset == 60 + 5 * 3


def test_stuck_and_stopped_queues_write_their_state_once() -> None:
    for behaviour, members in (("share-stuck", 2), ("share-stopped", 0)):
        state, store = _run(behaviour, [100, 110, 120])
        assert store.applied == {"share_snapshot": 2}  # one per partition, never again
        assert store.partitions[("q", topic_id_for("orders"), 0)].start_offset == 60
        view = GroupViews().view(state.groups["q"])
        assert len(view.members) == members
        assert view.state == ("STABLE" if members else "EMPTY")


def test_no_queue_keeps_state_past_the_log_end() -> None:
    """A young topic holds fewer records than a queue's in-flight window: the demo showed
    batches past the log end, which no broker can write (issue 31 item 5)."""
    for behaviour in ("share-poison", "share-lagging", "share-stuck", "share-stopped"):
        for ends in ([0], [3], [12], [25, 31], [100, 140]):
            _, store = _run(behaviour, ends)
            for partition in store.partitions.values():
                end = ends[-1] if behaviour in ("share-poison", "share-lagging") else ends[0]
                assert all(last < end for _, last, _, _ in partition.batches), (
                    behaviour,
                    ends,
                    partition.batches,
                )
                assert partition.start_offset <= end
