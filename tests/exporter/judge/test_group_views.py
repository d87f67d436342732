"""KIP-848 assignments name topics by id: named by the group's own partition metadata record
(Kafka 4.0) or, from 4.1 on, where Kafka no longer writes it, by the exporter's lookups."""

from __future__ import annotations

import pytest

from offsetwatch.decoder.codec import Codec
from offsetwatch.exporter.judge.group_views import GroupViews
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.record_factory import Member, RecordFactory, topic_id_for

MEMBERS = [
    Member("m-1", "c-1", "/10.0.0.1", (("orders", (0, 1)), ("audit", (0,)))),
    Member("m-2", "c-2", "/10.0.0.2", (("orders", (2,)),)),
]
TOPICS = {"orders": 3, "audit": 1}


def _state(with_partition_metadata: bool) -> OffsetState:
    codec, state = Codec(), OffsetState()
    records = RecordFactory().consumer_group("g", 5, MEMBERS, TOPICS)
    for offset, (key, value) in enumerate(records):
        record = codec.decode(key, value, 0, offset, 1_000)
        if record.key_type == 4 and not with_partition_metadata:
            continue  # what 4.1+ coordinators write: no ConsumerGroupPartitionMetadata
        state.apply(record)
    return state


def _assignments(views: GroupViews, state: OffsetState) -> dict[str, tuple[object, ...]]:
    view = views.view(state.groups["g"])
    assert view.kind == "CONSUMER"
    return {m.member_id: m.assignment for m in view.members}


NAMED = {"m-1": (("orders", (0, 1)), ("audit", (0,))), "m-2": (("orders", (2,)),)}


def test_the_partition_metadata_record_names_the_topics() -> None:
    views = GroupViews()
    assert _assignments(views, _state(with_partition_metadata=True)) == NAMED
    assert views.take_unnamed() == frozenset()


@pytest.mark.parametrize("learned", [set(), {"orders"}, {"orders", "audit"}])
def test_without_it_ids_are_shown_until_a_lookup_names_them(learned: set[str]) -> None:
    state = _state(with_partition_metadata=False)
    views = GroupViews(topic_names={topic_id_for(t): t for t in learned})
    got = _assignments(views, state)
    expected = {
        member: tuple((t if t in learned else topic_id_for(t), ps) for t, ps in assignment)
        for member, assignment in NAMED.items()
    }
    assert got == expected
    # the unnamed ids are handed to the sampler's lookup once, then forgotten
    assert views.take_unnamed() == {topic_id_for(t) for t in TOPICS if t not in learned}
    assert views.take_unnamed() == frozenset()
