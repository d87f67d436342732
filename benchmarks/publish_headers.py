"""What the source headers cost the producer, on a real broker (issue 30, `--publish-headers`).

    .venv/bin/python benchmarks/publish_headers.py              # 300,000 records, 3 rounds
    .venv/bin/python benchmarks/publish_headers.py --records 100000 --rounds 1

It starts its own broker (benchmarks/real_broker.py's `own_broker`, stopped at the end) and,
in this process, produces the same records with the exporter's producer settings
(`producer_config`: lz4, idempotent, acks=all, linger 50 ms) and a Python delivery callback
per record, as the publisher does, in four forms side by side, alternating, each round:

* `source`: canonical JSON of a commit (~400 bytes) with the four `offsetwatch.source.*`
  headers (`--publish-headers source`, the default);
* `compact`: the same with the one `offsetwatch.source` header (`--publish-headers compact`);
* `none`: the same without headers (`--publish-headers none`);
* `bare copy`: an 80-byte value without headers, the size of a raw `__consumer_offsets`
  commit: what the bare copy of benchmarks/republish_archive.py produces (its ceiling).

Printed per form and round: records/s from the first produce() to the last delivery, and CPU
us per record of this process (librdkafka's threads included; the broker's not). Nothing is
asserted; compare the rows of one round (the broker shares the machine's cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer

from benchmarks import real_broker as rb
from offsetwatch.exporter.sinks.publisher import (
    HEADER_SOURCE,
    HEADER_SOURCE_CLUSTER,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
    producer_config,
)

#: a commit's canonical JSON as the exporter republishes it (its size is what matters)
VALUE: Final = (
    b'{"type":"offset_commit","key_type":1,"value_version":3,"tombstone":false,'
    b'"newer_version":false,"partition":12,"offset":987654,"timestamp":1765000000000,'
    b'"group":"bench-republish-0042","key":{"group":"bench-republish-0042","topic":'
    b'"bench-data","partition":417},"value":{"offset":123456,"leader_epoch":-1,'
    b'"metadata":"","commit_timestamp":1765000000000,"expire_timestamp":null,'
    b'"topic_id":null,"unknown_tagged_fields":null},"transaction":null,"schema_version":2}'
)
BARE: Final = VALUE[:80]
CLUSTER: Final = b"MkU3OEVBNTcwNTJENDM2Qg"
PARTITIONS: Final = 12


class _Counter:
    __slots__ = ("delivered",)

    def __init__(self) -> None:
        self.delivered = 0

    def report(self, err: object, _msg: object) -> None:
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        self.delivered += 1


def _headers(form: str, offset: int) -> list[tuple[str, bytes]] | None:
    if form == "source":
        return [
            (HEADER_SOURCE_TOPIC, b"__consumer_offsets"),
            (HEADER_SOURCE_PARTITION, b"12"),
            (HEADER_SOURCE_OFFSET, b"%d" % offset),
            (HEADER_SOURCE_CLUSTER, CLUSTER),
        ]
    if form == "compact":
        return [(HEADER_SOURCE, b"%s/__consumer_offsets/12/%d" % (CLUSTER, offset))]
    return None


def produce_all(bootstrap: str, topic: str, form: str, records: int) -> tuple[float, float]:
    """(records/s, CPU us per record) of producing `records` in `form` until delivered."""
    producer: Any = Producer(producer_config({"bootstrap.servers": bootstrap, "log_level": 3}))
    producer.produce(topic, b"warm-up", b"k")
    producer.flush(30)
    value = BARE if form == "bare copy" else VALUE
    keys = [b'{"type":"offset_commit","group":"g%04d","partition":%d}' % (i % 300, i % 1000)
            for i in range(records)]  # fmt: skip
    counter = _Counter()
    report = counter.report
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(records):
        headers = _headers(form, i)
        while True:
            try:
                producer.produce(topic, value, keys[i], headers=headers, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(120)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    if counter.delivered != records:
        raise RuntimeError(f"{form}: {counter.delivered:,} of {records:,} delivered")
    return records / wall, cpu / records * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kafka", help="the Kafka release (a version or a line; default 4.4.0)")
    args = parser.parse_args(argv)
    if args.kafka:
        os.environ["OFFSETWATCH_BROKER_VERSION"] = args.kafka
    missing = rb.missing_reason()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    forms = ("source", "compact", "none", "bare copy")
    with (
        tempfile.TemporaryDirectory(prefix="offsetwatch-headers-") as tmp,
        rb.own_broker(Path(tmp)) as broker,
    ):
        print(f"broker {broker.bootstrap} ({rb.load()})", flush=True)
        print(f"{'round':>5}  {'form':<10} {'records/s':>10} {'CPU us/rec':>10}  x bare copy")
        for round_ in range(1, args.rounds + 1):
            results = {}
            for form in forms:
                topic = f"headers-{round_}-{form.replace(' ', '-')}"
                rb.create_topics(broker, {topic: PARTITIONS})
                results[form] = produce_all(broker.bootstrap, topic, form, args.records)
            ceiling = results["bare copy"][0]
            for form, (rate, cpu_us) in results.items():
                print(
                    f"{round_:>5}  {form:<10} {rate:>10,.0f} {cpu_us:>10.2f}  {rate / ceiling:.2f}",
                    flush=True,
                )
        print(f"({rb.load()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
