"""When the cluster confirms a `__share_group_state` partition's state (the share groups'):
the same rules as for `__consumer_offsets`, kept apart in the store's `share_freshness`."""

from __future__ import annotations

from offsetwatch.exporter.state.source_freshness import SourceFreshness
from offsetwatch.exporter.state.store import StateStore
from offsetwatch.exporter.stats import Freshness, PipelineStats

STALE_AFTER_MS = 30_000


class _Message:
    """The accessors of confluent_kafka.Message the share ingest reads; undecodable bytes
    (quarantined, counted) move the position as any record does."""

    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000)

    def key(self) -> bytes:
        return b"\x00"

    def value(self) -> bytes | None:
        return None


def test_share_state_is_confirmed_by_its_own_rounds_and_reads() -> None:
    store = StateStore(PipelineStats())
    fresh = store.share_freshness
    fresh.since_ms = 1_000
    fresh.on_log_ends(2_000, {0: 3, 1: 0}, {})
    # partition 1 is empty: at its end at once; partition 0 waits for the reader
    assert fresh.confirmed_ms == {1: 2_000}
    store.ingest_share([_Message(0, 0), _Message(0, 1)])
    assert 0 not in fresh.confirmed_ms
    store.ingest_share([_Message(0, 2)])
    assert fresh.confirmed_ms[0] == 2_000
    # a fetch that reached the end (past a marker no record stands for) confirms at its time
    fresh.on_log_ends(3_000, {0: 5}, {})
    store.ingest_share([], {0: 5}, 3_500)
    assert fresh.confirmed_ms[0] == 3_500
    # the consumer offsets' freshness is its own
    assert store.freshness.confirmed_ms == {}
    assert store.freshness.pending == {}


def test_a_share_state_partition_without_answers_goes_stale_with_its_cause() -> None:
    fresh = SourceFreshness(since_ms=0)
    fresh.on_positions({0: 4, 1: 4})
    fresh.on_log_ends(1_000, {0: 4, 1: 4}, {})
    fresh.on_log_ends(2_000, {1: 9}, {0: "NOT_LEADER_OR_FOLLOWER: no leader"})
    view = fresh.view({0, 1}, 2, STALE_AFTER_MS, "TOPIC_AUTHORIZATION_FAILED: denied")
    now = 1_000 + STALE_AFTER_MS + 1
    assert [s.partition for s in view.stale(now)] == [0, 1]
    assert "did not answer" in view.cause_of(0)
    assert "TOPIC_AUTHORIZATION_FAILED" in view.cause_of(1)


def test_a_rebuilt_share_state_is_confirmed_again_from_scratch() -> None:
    store = StateStore(PipelineStats())
    store.share_freshness.on_log_ends(2_000, {0: 0}, {})
    store.freshness.on_log_ends(2_000, {0: 0}, {})
    store.clear_share(9_000)
    assert store.share_freshness.confirmed_ms == {}
    assert store.share_freshness.since_ms == 9_000
    assert store.share_positions == {}
    # the offsets' freshness is untouched
    assert store.freshness.confirmed_ms == {0: 2_000}


def test_no_share_state_topic_tracks_nothing_and_nothing_is_stale() -> None:
    """No `__share_group_state` (no share group yet, or Kafka 3.9): the share reader is
    assigned nothing, so nothing is tracked, and no share partition has a state partition."""
    view = SourceFreshness(since_ms=0).view(set(), 0, STALE_AFTER_MS)
    assert view.tracked == () and view.stale(10**12) == []
    assert view.of_share("orders-queue", "Ka5iZpX1TpOuKhN2w1Q3vA", 7) is None


def test_a_share_partition_is_found_in_the_share_coordinators_partition() -> None:
    # tests/decoder/test_partitioner.py: answered by Kafka's own code
    assert Freshness(partition_count=50).of_share("orders-queue", "Ka5iZpX1TpOuKhN2w1Q3vA", 7) == 43


def test_a_share_state_topic_created_later_is_aged_from_then() -> None:
    """`__share_group_state` appears with the first share group, maybe hours after the start:
    its partitions are not stale the moment they appear, before a round could confirm them."""
    fresh = SourceFreshness(since_ms=0)
    fresh.track(set(), 1_000)  # no topic yet: nothing tracked
    assert fresh.view(set(), 0, STALE_AFTER_MS).stale(7_200_000) == []
    fresh.track({0, 1}, 7_200_000)
    fresh.track({0, 1}, 7_250_000)  # seen again: still aged from when it appeared
    view = fresh.view({0, 1}, 2, STALE_AFTER_MS)
    assert view.age_s(0, 7_210_000) == 10.0
    assert view.stale(7_200_000 + STALE_AFTER_MS) == []
    # never confirmed since: stale once --stale-after-s has passed since it appeared
    assert [s.partition for s in view.stale(7_200_001 + STALE_AFTER_MS)] == [0, 1]
    fresh.on_log_ends(7_205_000, {0: 0}, {})
    assert [s.partition for s in fresh.view({0, 1}, 2, STALE_AFTER_MS).stale(7_231_000)] == [1]
    # rebuilt: aged from the rebuild again
    fresh.reset(8_000_000)
    assert fresh.tracked_since == {}
    fresh.track({0}, 8_000_500)
    assert fresh.view({0}, 1, STALE_AFTER_MS).age_s(0, 8_001_500) == 1.0
