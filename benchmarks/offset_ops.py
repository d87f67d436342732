"""Offset operations at scale on librdkafka's mock cluster: time and Admin API requests.

1. `groups describe` of 1,000 groups x 100 partitions: offsetwatch's batched rounds (one
   DescribeGroups call for all groups, every group's OffsetFetch issued before any answer
   is awaited, one ListOffsets call for every partition) beside the naive way, one group
   after another (describe, fetch its offsets, list its log ends, wait for each).
2. `offsets reset --execute` of one group over 10,000 partitions (100 topics x 100): the
   planned reset (EARLIEST + LATEST lookups in one call each, one OffsetCommit) beside a
   naive script that looks up and commits one partition at a time.

"Requests" counts Admin API calls (what the code waits on); librdkafka may split a call
per broker (one broker here). The mock has no ListGroups or DescribeGroups: the groups are
named, and the describe call answers "unsupported" at once (counted, as on a real broker it
is one call). The in-process mock answers in microseconds, which flatters one-at-a-time
code; `--rtt-ms 1` delays each response by 1 ms, a modest network (both are run by default).
Run: `.venv/bin/python benchmarks/offset_ops.py [--groups 1000] [--partitions 100] [--rtt-ms N]`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402

from offsetwatch.cli import build_parser  # noqa: E402
from offsetwatch.commands import groups as groups_cmd  # noqa: E402
from offsetwatch.commands import offsets as offsets_cmd  # noqa: E402
from offsetwatch.mock_cluster import MockCluster  # noqa: E402
from offsetwatch.offset_ops.admin import AdminBroker  # noqa: E402
from offsetwatch.offset_ops.model import Committed  # noqa: E402
from tests.kafka_fixtures import fill_partitions  # noqa: E402


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _quiet(action: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return action()

    return run


class NaiveDescribe:
    """One group at a time, each call awaited before the next (a loop over kafka-python-like
    per-group calls)."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        self.requests = 0

    def describe(self, group_ids: list[str], partitions: list[TopicPartition]) -> int:
        total_lag = 0
        for group in group_ids:
            self.requests += 1
            with contextlib.suppress(KafkaException):  # the mock has no DescribeGroups
                self.admin.describe_consumer_groups([group])[group].result()
            self.requests += 1
            request = ConsumerGroupTopicPartitions(group, partitions)
            found = self.admin.list_consumer_group_offsets([request])[group].result()
            self.requests += 1
            ends = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions})
            end = {(tp.topic, tp.partition): f.result().offset for tp, f in ends.items()}
            total_lag += sum(
                end[(tp.topic, tp.partition)] - tp.offset
                for tp in found.topic_partitions
                if tp.offset >= 0
            )
        return total_lag


def bench_describe(groups: int, partitions: int, rtt_ms: int) -> None:
    with MockCluster() as cluster:
        cluster.create_topic("bench", partitions)
        fill_partitions(cluster.bootstrap_servers, "bench", dict.fromkeys(range(partitions), 20))
        setup = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
        group_ids = [f"group-{i:04d}" for i in range(groups)]
        started = time.perf_counter()
        for i, group in enumerate(group_ids):
            setup.alter(group, {("bench", p): Committed((i + p) % 20) for p in range(partitions)})
        print(
            f"setup: {groups} groups x {partitions} partitions committed in "
            f"{time.perf_counter() - started:.1f} s"
        )
        cluster.set_rtt(rtt_ms)
        args = build_parser().parse_args(
            ["groups", "describe", *group_ids, "--topic", "bench", "--format", "csv"]
        )
        broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
        ours = _timed(_quiet(lambda: groups_cmd.describe_groups(args, broker)))
        naive = NaiveDescribe(cluster.bootstrap_servers)
        tps = [TopicPartition("bench", p) for p in range(partitions)]
        naive_s = _timed(lambda: naive.describe(group_ids, tps))
        rows = groups * partitions
        print(
            f"[rtt {rtt_ms} ms] groups describe, {groups} groups x {partitions} partitions "
            f"({rows:,} rows): "
            f"offsetwatch {ours:.2f} s, {broker.requests} Admin requests "
            f"({rows / ours:,.0f} rows/s, output rendered) | naive one group at a time "
            f"{naive_s:.2f} s, {naive.requests} requests ({naive_s / ours:.1f}x slower)"
        )


def bench_reset(topics: int, partitions: int, rtt_ms: int) -> None:
    with MockCluster() as cluster:
        names = [f"t{i:03d}" for i in range(topics)]
        for name in names:
            cluster.create_topic(name, partitions)
            fill_partitions(cluster.bootstrap_servers, name, dict.fromkeys(range(partitions), 3))
        keys = [(t, p) for t in names for p in range(partitions)]
        setup = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
        setup.alter("big", {key: Committed(1) for key in keys})
        cluster.set_rtt(rtt_ms)
        args = build_parser().parse_args(
            [
                "offsets",
                "reset",
                "--group",
                "big",
                "--all-topics",
                "--to-latest",
                "--execute",
                "--force",
            ]
        )
        broker = AdminBroker({"bootstrap.servers": cluster.bootstrap_servers})
        ours = _timed(_quiet(lambda: offsets_cmd.reset_offsets(args, broker)))
        after = setup.committed({"big": None})["big"]
        assert all(c.offset == 3 for c in after.values()) and len(after) == len(keys)

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        requests = 0

        def naive() -> None:
            nonlocal requests
            for topic, partition in keys:
                tp = TopicPartition(topic, partition)
                requests += 1
                end = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result().offset
                requests += 1
                request = ConsumerGroupTopicPartitions(
                    "big", [TopicPartition(topic, partition, end)]
                )
                admin.alter_consumer_group_offsets([request])["big"].result()

        naive_s = _timed(naive)
        print(
            f"[rtt {rtt_ms} ms] offsets reset --execute, {len(keys):,} partitions: "
            f"offsetwatch {ours:.2f} s, "
            f"{broker.requests} Admin requests (plan, checks and commit) | naive per partition "
            f"{naive_s:.2f} s, {requests:,} requests ({naive_s / ours:.1f}x slower)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--reset-topics", type=int, default=100)
    parser.add_argument(
        "--rtt-ms",
        type=int,
        action="append",
        help="response delay of the mock broker, like a network (repeatable; default 0 and 1)",
    )
    args = parser.parse_args()
    for rtt_ms in args.rtt_ms or [0, 1]:
        bench_describe(args.groups, args.partitions, rtt_ms)
        bench_reset(args.reset_topics, args.partitions, rtt_ms)


if __name__ == "__main__":
    main()
