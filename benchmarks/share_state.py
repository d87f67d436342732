"""Share groups (KIP-932) in figures, each beside a baseline measured in the same run.

    .venv/bin/python benchmarks/share_state.py            # ~1 minute on a loaded 2-core box
    .venv/bin/python benchmarks/share_state.py --quick    # smaller inputs

* decode: `ShareStateCodec.decode` of `__share_group_state` records (a ShareSnapshot of 10
  batches per share partition, then ShareUpdates of 2 batches each moving the start offset,
  as Kafka's share coordinator writes them after acknowledgements), records/s, beside
  `Codec.decode` of as many `__consumer_offsets` OffsetCommit v3 records (the exporter's
  main input);
* apply: CPU seconds per record of `ShareStateStore.apply` (the combining of Kafka's
  PersisterStateBatchCombiner, bad-input checks, window evidence) on those decoded records,
  beside `OffsetState.apply` of the decoded commits;
* memory: bytes per share partition holding a snapshot of 100 in-flight batches (tracemalloc,
  the store only: records are decoded one at a time and dropped), beside bytes per consumer
  group partition with one committed offset in `OffsetState`.

Best of N for times (CPU time of this process: the machine is shared); nothing here is
asserted anywhere, tests never time.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateValue,
    StateBatch,
)
from offsetwatch.decoder.share_state import ShareStateCodec
from offsetwatch.exporter.state.offset_state import OffsetState
from offsetwatch.exporter.state.share_state import ShareStateStore

TS = 1_795_000_000_000
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

Message = tuple[bytes, bytes | None, int, int, int]


def _topic_id(i: int) -> str:
    # a valid base64url Kafka Uuid (22 characters, 16 bytes)
    return (f"T{i:03d}" + "A" * 22)[:21] + "A"


def share_corpus(partitions: int, updates: int, batches: int = 10) -> list[Message]:
    """Per share partition one snapshot of `batches` batches, then `updates` updates of 2."""
    codec = ShareStateCodec()
    out: list[Message] = []
    offset = 0
    for p in range(partitions):
        key = SharePartitionKey(f"queue-{p // 10:04d}", _topic_id(p % 10), p % 10)
        snapshot = tuple(
            StateBatch(100 + 10 * b, 109 + 10 * b, (0, 2, 4)[b % 3], 1 + b % 3)
            for b in range(batches)
        )
        record = ShareStateRecord(0, key, 0, ShareSnapshotValue(0, 1, 0, 100, snapshot), 0, 0, 0)
        k, v = codec.encode(record)
        out.append((k, v, 0, offset, TS + offset))
        offset += 1
        for u in range(updates):
            start = 100 + 10 * (u + 1)
            changed = (
                StateBatch(start, start + 4, 2, 1),
                StateBatch(start + 5, start + 9, 0, 2),
            )
            value = ShareUpdateValue(0, 0, start, changed)
            k, v = codec.encode(ShareStateRecord(1, key, 0, value, 0, 0, 0))
            out.append((k, v, 0, offset, TS + offset))
            offset += 1
    return out


def commit_corpus(count: int) -> list[Message]:
    codec = Codec()
    out: list[Message] = []
    for n in range(count):
        key = OffsetCommitKey(f"svc-{n % 1000:05d}", f"orders-{n % 40:02d}", n % 25)
        value = OffsetCommitValue(1000 + n, 5, "", TS + n, -1, ZERO_UUID)
        k, v = codec.encode(Record(1, key, 3, value))
        out.append((k, v, n % 50, n, TS + n))
    return out


def best_cpu(runs: int, action: Callable[[], object]) -> float:
    """The least CPU time (this process) of `runs` calls."""
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        before = time.process_time()
        action()
        best = min(best, time.process_time() - before)
    return best


def _decode_all(decode: Callable[..., object], corpus: Iterable[Message]) -> None:
    for message in corpus:
        decode(*message)


@dataclass(slots=True)
class Row:
    what: str
    share: str
    baseline: str
    ratio: str


def memory_per_partition(build: Callable[[], object], count: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return (after - before) / count


def share_store_of(partitions: int, batches: int) -> ShareStateStore:
    codec = ShareStateCodec()
    store = ShareStateStore()
    for k, v, p, o, t in share_corpus(partitions, 0, batches):
        record = codec.decode(k, v, p, o, t)
        assert isinstance(record, ShareStateRecord)
        store.apply(record)
    return store


def offset_state_of(partitions: int) -> OffsetState:
    codec = Codec()
    state = OffsetState()
    for n in range(partitions):
        key = OffsetCommitKey(f"svc-{n // 100:05d}", f"orders-{(n // 25) % 4:02d}", n % 25)
        value = OffsetCommitValue(1000 + n, 5, "", TS + n, -1, ZERO_UUID)
        k, v = codec.encode(Record(1, key, 3, value))
        record = codec.decode(k, v, n % 50, n, TS + n)
        assert isinstance(record, Record)
        state.apply(record)
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer runs")
    args = parser.parse_args()
    partitions, updates, runs = (200, 49, 2) if args.quick else (1_000, 99, 3)
    memory_partitions = 500 if args.quick else 2_000

    shares = share_corpus(partitions, updates)
    commits = commit_corpus(len(shares))
    n = len(shares)
    share_codec, codec = ShareStateCodec(), Codec()
    share_s = best_cpu(runs, lambda: _decode_all(share_codec.decode, shares))
    commit_s = best_cpu(runs, lambda: _decode_all(codec.decode, commits))
    rows = [
        Row(
            f"decode, records/s ({n:,} records)",
            f"{n / share_s:,.0f}",
            f"{n / commit_s:,.0f} (OffsetCommit v3)",
            f"{commit_s / share_s:.2f}x",
        )
    ]

    decoded_shares = [share_codec.decode(*m) for m in shares]
    decoded_commits = [codec.decode(*m) for m in commits]

    def apply_shares() -> None:
        store = ShareStateStore()
        for record in decoded_shares:
            store.apply(record)  # type: ignore[arg-type]

    def apply_commits() -> None:
        state = OffsetState()
        for record in decoded_commits:
            state.apply(record)  # type: ignore[arg-type]

    share_apply = best_cpu(runs, apply_shares)
    commit_apply = best_cpu(runs, apply_commits)
    rows.append(
        Row(
            "apply, CPU us per record",
            f"{share_apply / n * 1e6:.2f}",
            f"{commit_apply / n * 1e6:.2f} (OffsetState.apply)",
            f"{share_apply / commit_apply:.2f}x",
        )
    )

    share_mem = memory_per_partition(
        lambda: share_store_of(memory_partitions, 100), memory_partitions
    )
    commit_mem = memory_per_partition(lambda: offset_state_of(memory_partitions), memory_partitions)
    rows.append(
        Row(
            f"memory, bytes per partition ({memory_partitions:,})",
            f"{share_mem:,.0f} (100 in-flight batches)",
            f"{commit_mem:,.0f} (one committed offset)",
            f"{share_mem / commit_mem:.1f}x",
        )
    )

    load = os.getloadavg()
    print(f"share state benchmark, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    header = Row("figure", "share groups", "baseline (same run)", "share/base")
    widths = [max(len(getattr(r, f)) for r in [header, *rows]) for f in Row.__slots__]
    for row in [header, *rows]:
        cells = [getattr(row, f).ljust(w) for f, w in zip(Row.__slots__, widths, strict=True)]
        print("  ".join(cells).rstrip())


if __name__ == "__main__":
    main()
