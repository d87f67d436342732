"""Streaming figure: time from an archive file arriving to its alert reaching Alertmanager.

Runs `offsetwatch.spark_jobs.streaming` (local[2]) over an archive directory with a
processing-time trigger and a real Alertmanager (Debian's prometheus-alertmanager) on
loopback. Several files are published, each at a random moment of the trigger cycle, each
holding the history of a new stalled group; for each, the wall time from its rename into the
archive to the stall alert showing in Alertmanager's API is printed, beside the trigger
interval (the goal: at most 2 trigger intervals).

    .venv/bin/python benchmarks/spark_streaming.py [--trigger-s 30] [--files 3]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # tests.* helpers (run as a script, benchmarks/ is path[0])
    sys.path.insert(0, str(REPO))

from offsetwatch.spark_jobs.alerts.alertmanager import AlertmanagerSink  # noqa: E402
from offsetwatch.spark_jobs.session import SparkSettings, get_session  # noqa: E402
from offsetwatch.spark_jobs.streaming import (  # noqa: E402
    AlertSinks,
    StreamSettings,
    archive_stream,
    start_stream,
    warm_up,
)
from tests.spark_jobs.alertmanager_kit import BINARY, alertmanager  # noqa: E402
from tests.spark_jobs.stream_data import minutes, publish  # noqa: E402

T0 = 1_767_225_600_000


def _stall_history(group_index: int) -> list[dict[str, object]]:
    # a fresh pair of groups per file (renamed), so each file brings one new stall
    out = []
    for record in minutes(T0, 0, 25, stuck_until=40):
        group = record.get("group")
        if group is not None:
            renamed = f"{group}-{group_index}"
            record = {**record, "group": renamed, "key": {**record["key"], "group": renamed}}
            record["offset"] = int(record["offset"]) + 1000 * group_index
        out.append(record)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trigger-s", type=float, default=30.0)
    parser.add_argument("--files", type=int, default=3)
    args = parser.parse_args()
    if shutil.which(BINARY) is None:
        print(f"{BINARY} not found (apt-get install prometheus-alertmanager)", file=sys.stderr)
        return 2
    spark = get_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    with tempfile.TemporaryDirectory() as tmp, alertmanager(Path(tmp)) as am:
        base = Path(tmp)
        archive = base / "archive"
        archive.mkdir()
        sinks = AlertSinks(alertmanager=AlertmanagerSink(am.url, base / "outbox.json"))
        settings = StreamSettings(
            str(base / "checkpoint"), str(base / "alerts"), trigger_s=args.trigger_s
        )
        warmed = time.monotonic()
        warm_up(spark, settings)  # what `offsetwatch spark stream` does before it starts
        print(f"warm-up (before the query starts): {time.monotonic() - warmed:.1f} s", flush=True)
        query = start_stream(archive_stream(spark, str(archive)), settings, sinks)
        latencies = []
        try:
            # file 0 is the first of the stream: reported and counted like the others
            for index in range(args.files + 1):
                time.sleep(random.uniform(0, args.trigger_s))
                seen = {a["labels"]["group"] for a in am.alerts()}
                publish(archive, _stall_history(index), index)
                arrived = time.monotonic()
                while f"stuck-{index}" not in seen:
                    if query.exception() is not None:
                        raise RuntimeError(query.exception())
                    time.sleep(0.1)
                    seen = {a["labels"]["group"] for a in am.alerts()}
                latency = time.monotonic() - arrived
                latencies.append(latency)
                batches = [
                    p["durationMs"].get("triggerExecution", 0) / 1000
                    for p in query.recentProgress
                    if p.get("numInputRows")
                ]
                print(
                    f"file {index}{' (first batch)' if not index else ''}: alert in Alertmanager "
                    f"{latency:.1f} s after the file arrived = "
                    f"{latency / args.trigger_s:.2f} trigger intervals; batches with input so "
                    f"far took {', '.join(f'{b:.1f}' for b in batches)} s",
                    flush=True,
                )
        finally:
            query.stop()
    worst = max(latencies)
    print(
        f"streaming: trigger {args.trigger_s:g} s, file -> Alertmanager worst {worst:.1f} s "
        f"= {worst / args.trigger_s:.2f} trigger intervals (goal <= 2), "
        f"mean {sum(latencies) / len(latencies):.1f} s over {len(latencies)} files "
        f"(the first batch of the stream included)"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
