"""LogEndSampler against the mock cluster, plus its round logic with a fake admin client."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from offsetwatch.exporter.sources.log_end_sampler import LogEndSampler, TopicPartitionKey
from offsetwatch.exporter.state.store import StateStore
from offsetwatch.exporter.stats import PipelineStats
from tests.kafka_fixtures import MockCluster, create_data_topic, fill_partitions, wait_until

Samples = list[tuple[int, dict[TopicPartitionKey, int | None]]]


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster() as mock:
        yield mock


def _sampler(
    bootstrap: str, tracked: list[TopicPartitionKey], samples: Samples, **kwargs: Any
) -> LogEndSampler:
    return LogEndSampler(
        {"bootstrap.servers": bootstrap, "log_level": 3},
        partitions=lambda: list(tracked),
        on_sample=lambda t, offsets: samples.append((t, offsets)),
        **kwargs,
    )


@pytest.mark.kafka
def test_samples_log_ends_and_reports_missing_topics(cluster: MockCluster) -> None:
    create_data_topic(cluster, "orders", [5, 0, 12])
    create_data_topic(cluster, "payments", [3])
    tracked = [("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0)]
    tracked += [("orders", 9), ("never-existed", 0)]
    samples: Samples = []
    sampler = _sampler(cluster.bootstrap_servers, tracked, samples, chunk_size=2)

    result = sampler.sample_once()
    assert (result.requested, result.resolved, result.unknown, result.failed) == (6, 4, 2, 0)
    assert samples[-1][1] == {
        ("orders", 0): 5,
        ("orders", 1): 0,
        ("orders", 2): 12,
        ("payments", 0): 3,
        ("orders", 9): None,
        ("never-existed", 0): None,
    }
    assert abs(samples[-1][0] - time.time() * 1000) < 60_000

    fill_partitions(cluster.bootstrap_servers, "orders", {1: 4})
    cluster.delete_topic("payments")
    sampler.sample_once()
    offsets = samples[-1][1]
    assert offsets[("orders", 1)] == 4
    assert offsets[("payments", 0)] is None  # deleted: reported, not an exception


SourceRounds = list[tuple[int, dict[int, int], dict[int, str]]]


@pytest.mark.kafka
def test_each_round_asks_the_source_topics_own_log_ends(cluster: MockCluster) -> None:
    """What confirms the exporter's state (exporter/state/source_freshness.py): the source
    topic's partitions, each with its log end or the reason it has none this round."""
    create_data_topic(cluster, "orders", [2])
    create_data_topic(cluster, "offsets-source", [4, 0, 9])
    samples: Samples = []
    rounds: SourceRounds = []
    sampler = _sampler(
        cluster.bootstrap_servers,
        [("orders", 0)],
        samples,
        request_timeout_s=1.0,
        source_topic="offsets-source",
        source_partitions=lambda: {0, 1, 2, 7},
        on_source_ends=lambda t, ends, errors: rounds.append((t, ends, errors)),
    )
    sampler.sample_once()
    (time_ms, ends, errors) = rounds[-1]
    assert time_ms == samples[-1][0]
    assert ends == {0: 4, 1: 0, 2: 9}
    assert set(errors) == {7}
    # the data partitions' round is what it was: the source's partitions are not in it
    assert samples[-1][1] == {("orders", 0): 2}
    cluster.set_down()
    sampler.sample_once()
    (_t, ends, errors) = rounds[-1]
    assert ends == {} and set(errors) == {0, 1, 2, 7}


@pytest.mark.kafka
def test_each_round_asks_the_share_state_topics_log_ends_too(cluster: MockCluster) -> None:
    """`__share_group_state`'s partitions the share reader reads, after the source's own, to
    their own callback; none asked (no callback) while the reader reads none: the topic does
    not exist (no share group yet, or Kafka 3.9)."""
    create_data_topic(cluster, "offsets-source", [4])
    create_data_topic(cluster, "share-state", [2, 0, 7])
    source: SourceRounds = []
    share: SourceRounds = []
    reading: set[int] = set()
    sampler = _sampler(
        cluster.bootstrap_servers,
        [],
        [],
        request_timeout_s=1.0,
        source_topic="offsets-source",
        source_partitions=lambda: {0},
        on_source_ends=lambda t, ends, errors: source.append((t, ends, errors)),
        share_state_topic="share-state",
        share_state_partitions=lambda: set(reading),
        on_share_state_ends=lambda t, ends, errors: share.append((t, ends, errors)),
    )
    sampler.sample_once()
    assert source[-1][1] == {0: 4}
    assert share == []
    reading.update({0, 1, 2, 5})
    sampler.sample_once()
    (time_ms, ends, errors) = share[-1]
    assert time_ms == source[-1][0]
    assert ends == {0: 2, 1: 0, 2: 7}
    assert set(errors) == {5}
    cluster.set_down()
    sampler.sample_once()
    (_t, ends, errors) = share[-1]
    assert ends == {} and set(errors) == {0, 1, 2, 5}


@pytest.mark.kafka
def test_background_thread_samples_and_stops(cluster: MockCluster) -> None:
    create_data_topic(cluster, "t", [1, 2])
    tracked: list[TopicPartitionKey] = [("t", 0), ("t", 1)]
    samples: Samples = []
    sampler = _sampler(cluster.bootstrap_servers, tracked, samples, interval_s=0.1)
    with sampler:
        assert wait_until(lambda: len(samples) >= 3, 10)
        tracked.append(("t", 5))  # the tracked set is re-read every round
        assert wait_until(lambda: ("t", 5) in samples[-1][1], 10)
    rounds = sampler.rounds
    time.sleep(0.3)
    assert sampler.rounds == rounds  # stopped for good
    assert samples[-1][1] == {("t", 0): 1, ("t", 1): 2, ("t", 5): None}
    assert sampler.last_success_ms is not None
    assert not [t for t in threading.enumerate() if t.name == "log-end-sampler"]


@pytest.mark.kafka
def test_unreachable_cluster_skips_the_callback(cluster: MockCluster) -> None:
    create_data_topic(cluster, "t", [3])
    samples: Samples = []
    sampler = _sampler(cluster.bootstrap_servers, [("t", 0)], samples, request_timeout_s=1.0)
    sampler.sample_once()
    assert samples[-1][1] == {("t", 0): 3}
    cluster.set_down()
    result = sampler.sample_once()
    assert result.failed == 1 and result.resolved == 0 and result.error
    assert len(samples) == 1  # no sample rather than a misleading empty one
    assert sampler.failed_rounds == 1
    cluster.set_up()
    assert wait_until(lambda: sampler.sample_once().resolved == 1, 20, 0.2)
    assert samples[-1][1] == {("t", 0): 3}


@pytest.mark.kafka
def test_list_offsets_versus_watermarks(
    cluster: MockCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both ways agree; chunked list_offsets is much faster (why the sampler uses it)."""
    topics = [f"data-{i}" for i in range(10)]
    for topic in topics:
        cluster.create_topic(topic, 50)
    fill_partitions(cluster.bootstrap_servers, topics[0], {p: p % 7 for p in range(50)})
    tracked = [(t, p) for t in topics for p in range(50)]
    samples: Samples = []
    sampler = _sampler(cluster.bootstrap_servers, tracked, samples)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "wm"})
    sampler.sample_once()  # warm-up: connections and metadata
    list_offsets_s = watermarks_s = float("inf")
    for _ in range(3):  # best of three: the machine is shared
        started = time.perf_counter()
        sampler.sample_once()
        list_offsets_s = min(list_offsets_s, time.perf_counter() - started)
        started = time.perf_counter()
        watermarks = {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
            for t, p in tracked
        }
        watermarks_s = min(watermarks_s, time.perf_counter() - started)
    consumer.close()
    assert samples[-1][1] == watermarks
    with capsys.disabled():
        print(
            f"\n  {len(tracked)} partitions: sampler round (metadata + list_offsets) "
            f"{list_offsets_s * 1000:.1f} ms, "
            f"get_watermark_offsets {watermarks_s * 1000:.1f} ms"
        )


# --------------------------------------------------------------------------------------------
# Round logic with a fake admin client (no Kafka)
# --------------------------------------------------------------------------------------------


class _FakeMetadata:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = {name: _FakeTopic(n) for name, n in topics.items()}


class _FakeTopic:
    def __init__(self, partitions: int) -> None:
        self.partitions = {p: object() for p in range(partitions)}
        self.error = None


class _FakeOffset:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class _FakeAdmin:
    """Topic "flaky" fails with a retriable error; "raced" vanishes after the metadata call."""

    def __init__(self, config: object) -> None:
        self.config = config
        self.requests: list[int] = []

    def poll(self, timeout: float) -> int:
        return 0

    def list_topics(self, timeout: float) -> _FakeMetadata:
        return _FakeMetadata({"ok": 3, "flaky": 1, "raced": 1, "leaderless": 1})

    def list_offsets(
        self, request: dict[TopicPartition, object], **_: object
    ) -> dict[TopicPartition, Future[_FakeOffset]]:
        self.requests.append(len(request))
        out: dict[TopicPartition, Future[_FakeOffset]] = {}
        for tp in request:
            future: Future[_FakeOffset] = Future()
            if tp.topic == "flaky":
                future.set_exception(KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT)))
            elif tp.topic == "raced":
                future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            elif tp.topic == "leaderless":
                # what confluent-kafka answers for a partition whose leader just died
                future.set_result(_FakeOffset(-1001))
            else:
                future.set_result(_FakeOffset(100 + tp.partition))
            out[tp] = future
        return out


def test_round_classifies_results_and_chunks() -> None:
    samples: Samples = []
    admin: list[_FakeAdmin] = []

    def factory(config: object) -> _FakeAdmin:
        admin.append(_FakeAdmin(config))
        return admin[-1]

    tracked = [("ok", 0), ("ok", 1), ("ok", 2), ("ok", 3), ("flaky", 0), ("raced", 0)]
    sampler = LogEndSampler(
        {},
        partitions=lambda: tracked,
        on_sample=lambda t, o: samples.append((t, o)),
        chunk_size=2,
        wall_clock_ms=lambda: 1234,
        admin_factory=factory,
    )
    result = sampler.sample_once()
    assert samples == [
        (
            1234,
            {("ok", 3): None, ("ok", 0): 100, ("ok", 1): 101, ("ok", 2): 102, ("raced", 0): None},
        )
    ]
    assert (result.resolved, result.unknown, result.failed) == (3, 2, 1)
    assert result.error is not None and "flaky" in result.error
    assert admin[0].requests == [2, 2, 1]  # 5 existing partitions in chunks of 2


def test_failing_callback_and_provider_do_not_kill_the_thread() -> None:
    calls = {"provider": 0, "callback": 0}

    def provider() -> list[TopicPartitionKey]:
        calls["provider"] += 1
        if calls["provider"] == 1:
            raise RuntimeError("state store not ready")
        return [("ok", 0)]

    def callback(_t: int, _o: dict[TopicPartitionKey, int | None]) -> None:
        calls["callback"] += 1
        raise RuntimeError("consumer bug")

    sampler = LogEndSampler(
        {},
        partitions=provider,
        on_sample=callback,
        interval_s=0.05,
        admin_factory=_FakeAdmin,
    )
    with sampler:
        assert wait_until(lambda: calls["callback"] >= 2, 5)
    assert sampler.callback_errors >= 2
    assert sampler.stop()  # idempotent


def test_an_admin_client_left_without_a_broker_address_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two statistics reports without a broker address (exporter/kafka_clients.py): the
    next round asks through a new admin client, and says so once."""
    admins: list[_FakeAdmin] = []

    def factory(config: object) -> _FakeAdmin:
        admins.append(_FakeAdmin(config))
        return admins[-1]

    sampler = LogEndSampler(
        {}, partitions=lambda: [("ok", 0)], on_sample=lambda _t, _o: None, admin_factory=factory
    )
    config = admins[0].config
    assert isinstance(config, dict) and callable(config["stats_cb"])
    addressless = json.dumps({"brokers": {}})
    config["stats_cb"](addressless)
    sampler.sample_once()
    assert len(admins) == 1
    config["stats_cb"](addressless)
    with caplog.at_level(logging.WARNING):
        sampler.sample_once()
    assert len(admins) == 2 and sampler.admins_replaced == 1
    assert admins[1].requests == [1]
    assert "no broker address for 2 statistics reports" in caplog.text
    config["stats_cb"](json.dumps({"brokers": {"b/1": {"nodename": "127.0.0.1:9092"}}}))
    sampler.sample_once()
    assert len(admins) == 2


def test_a_negative_log_end_is_unknown_for_the_round_and_never_raises() -> None:
    samples: Samples = []
    sampler = LogEndSampler(
        {},
        partitions=lambda: [("ok", 0), ("leaderless", 0)],
        on_sample=lambda t, o: samples.append((t, o)),
        wall_clock_ms=lambda: 1234,
        admin_factory=_FakeAdmin,
    )
    result = sampler.sample_once()
    # the round goes on without it: the other partition's log end is handed over, and the
    # leaderless one is left out, so its last known log end stays
    assert samples == [(1234, {("ok", 0): 100})]
    assert (result.resolved, result.unknown, result.failed) == (1, 0, 1)
    assert (
        result.error is not None and "leaderless[0]: no log end this round (-1001)" in result.error
    )


def test_the_state_keeps_the_last_log_end_when_a_round_has_none() -> None:
    store = StateStore(PipelineStats())
    store.apply_sample(1_000, {("t", 0): 50})
    store.apply_sample(2_000, {("t", 0): -1001})
    history = store.histories[("t", 0)]
    assert history.latest() == (1_000, 50)


class _Leader:
    def __init__(self, leader: int) -> None:
        self.leader = leader


class _LedTopic:
    def __init__(self, leaders: list[int]) -> None:
        self.partitions = {p: _Leader(leader) for p, leader in enumerate(leaders)}
        self.error = None


class _ClusterWithADeadLeader(_FakeAdmin):
    """Topic "t": partition 0 led by broker 1, partition 1 by broker 2 (dead: -1001 after
    the whole request timeout, as librdkafka answers), partition 2 without a leader."""

    def __init__(self, config: object) -> None:
        super().__init__(config)
        self.dead = {2}
        self.asked: list[tuple[list[int], float]] = []

    def list_topics(self, timeout: float) -> Any:
        metadata = _FakeMetadata({})
        metadata.topics = {"t": _LedTopic([1, 2, -1])}  # type: ignore[dict-item]
        return metadata

    def list_offsets(
        self, request: dict[TopicPartition, object], **options: Any
    ) -> dict[TopicPartition, Future[_FakeOffset]]:
        self.asked.append((sorted(tp.partition for tp in request), options["request_timeout"]))
        out: dict[TopicPartition, Future[_FakeOffset]] = {}
        for tp in request:
            future: Future[_FakeOffset] = Future()
            leader = 1 if tp.partition == 0 else 2
            future.set_result(_FakeOffset(-1001 if leader in self.dead else 7))
            out[tp] = future
        return out


def test_a_leader_that_answered_nothing_is_left_alone_then_probed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """librdkafka spins a core while it waits for a dead leader: the sampler asks such a
    leader again only after a backoff, with a short timeout, and never asks for a partition
    the metadata gives no leader."""
    admins: list[_ClusterWithADeadLeader] = []
    now = [0.0]

    def factory(config: object) -> _ClusterWithADeadLeader:
        admins.append(_ClusterWithADeadLeader(config))
        return admins[-1]

    samples: Samples = []
    sampler = LogEndSampler(
        {},
        partitions=lambda: [("t", 0), ("t", 1), ("t", 2)],
        on_sample=lambda t, o: samples.append((t, o)),
        admin_factory=factory,
        monotonic=lambda: now[0],
        request_timeout_s=10.0,
    )
    admin = admins[0]
    with caplog.at_level(logging.WARNING):
        first = sampler.sample_once()
    assert admin.asked == [([0, 1], 10.0)]  # partition 2 has no leader: not asked
    assert first.failed == 2 and sampler.silent_leaders == (2,)
    assert "broker 2, leader of sampled partitions, did not answer" in caplog.text
    now[0] = 4.0
    second = sampler.sample_once()
    assert admin.asked[-1] == ([0], 10.0)  # broker 2 left alone
    assert second.error is not None and "leader 2 did not answer; asked again in 1 s" in (
        second.error
    )
    now[0] = 5.0
    sampler.sample_once()
    assert admin.asked[-2:] == [([0], 10.0), ([1], 3.0)]  # the probe, with a short timeout
    assert sampler.silent_leaders == (2,)
    now[0] = 15.0
    admin.dead.clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        sampler.sample_once()
    assert sampler.silent_leaders == ()
    assert "broker 2 answers again" in caplog.text
    assert samples[-1][1] == {("t", 0): 7, ("t", 1): 7}
    now[0] = 16.0
    sampler.sample_once()
    assert admin.asked[-1] == ([0, 1], 10.0)


def test_a_leader_librdkafka_could_not_connect_to_is_not_asked_at_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """librdkafka's log names the broker it failed to connect to: that leader is left alone
    from the next round on, before any request could spin on it."""
    admins: list[_ClusterWithADeadLeader] = []

    def factory(config: object) -> _ClusterWithADeadLeader:
        admins.append(_ClusterWithADeadLeader(config))
        return admins[-1]

    sampler = LogEndSampler(
        {},
        partitions=lambda: [("t", 0), ("t", 1)],
        on_sample=lambda _t, _o: None,
        admin_factory=factory,
        monotonic=lambda: 0.0,
    )
    config = admins[0].config
    assert isinstance(config, dict)
    with caplog.at_level(logging.WARNING):
        config["logger"].log(
            logging.ERROR,
            "%s [%s] %s",
            "FAIL",
            "offsetwatch-log-end-sampler#producer-1",
            "[thrd:127.0.0.1:9092/2]: 127.0.0.1:9092/2: Connect to ipv4#127.0.0.1:9092 "
            "failed: Connection refused (after 0ms in state CONNECT)",
        )
        sampler.sample_once()
    assert admins[0].asked == [([0], 10.0)]
    assert sampler.silent_leaders == (2,)
    assert "Connect to ipv4#127.0.0.1:9092 failed" in caplog.text  # the line itself goes on
    assert "broker 2, leader of sampled partitions, lost or refused the connection" in caplog.text


def test_partitions_sampled_first_get_their_history_rebuilt_once() -> None:
    """A fleet replica's gained partitions: the window before their first round is rebuilt
    from record timestamps and handed over before that round; a partition that leaves and
    comes back (another owner meanwhile) is rebuilt again."""
    events: list[tuple[str, object]] = []
    tracked = [("ok", 0)]
    clock = [100_000]
    sampler = LogEndSampler(
        {},
        partitions=lambda: tracked,
        on_sample=lambda t, o: events.append(("sample", (t, dict(o)))),
        interval_s=10.0,
        wall_clock_ms=lambda: clock[0],
        admin_factory=_FakeAdmin,
        backfill_window_s=30.0,
        on_backfill=lambda points: events.append(("backfill", [t for t, _ in points])),
    )
    sampler.sample_once()
    # the fake answers every timestamp with the partition's end (100): one point per interval
    assert events == [
        ("backfill", [70_000, 80_000, 90_000]),
        ("sample", (100_000, {("ok", 0): 100})),
    ]
    events.clear()
    clock[0] += 10_000
    tracked.append(("ok", 1))
    sampler.sample_once()
    assert events[0] == ("backfill", [80_000, 90_000, 100_000])  # ("ok", 1) only
    assert [k for k in events[1][1][1]] == [("ok", 0), ("ok", 1)]  # type: ignore[index]
    events.clear()
    tracked.remove(("ok", 0))
    clock[0] += 10_000
    sampler.sample_once()
    assert [kind for kind, _ in events] == ["sample"]
    tracked.append(("ok", 0))
    clock[0] += 10_000
    sampler.sample_once()
    assert [kind for kind, _ in events] == ["sample", "backfill", "sample"]
