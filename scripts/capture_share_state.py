"""Capture real `__share_group_state` records from Apache Kafka 4.0+ (KIP-932 share groups).

    python scripts/capture_share_state.py OUT_DIR [--kafka-dir scripts/kafka] [--records 6]

The release: OFFSETWATCH_BROKER_VERSION for `scripts/kafka/broker` (default 4.4.0), or a
`--kafka-dir` of the same interface such as `../shared/kafka` (the vendored 4.0.0).

Starts a broker of its own with share groups enabled, produces a few records to a new topic,
sets `share.auto.offset.reset=earliest` for a share group (kafka-configs.sh), then drives
`kafka-console-share-consumer.sh` three times - rejecting, releasing, then accepting what it
gets - so the share coordinator writes ShareSnapshot and ShareUpdate records. The broker is
stopped (its logs flushed), and OUT_DIR receives:

* `__share_group_state-<p>/<base>.log`: the segment files of `__share_group_state`;
* `dumplog-<p>-<base>.txt`: `kafka-dump-log.sh --share-group-state-decoder --files` of each;
* `capture.json`: the topic, its id, the group and the counts.

The state topic gets one partition and a snapshot every 3 updates, so a capture is a few KB.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

STATE_TOPIC: Final = "__share_group_state"
#: one state partition and frequent snapshots keep the capture small and varied
SHARE_TUNING: Final = (
    "share.coordinator.state.topic.num.partitions=1",
    "share.coordinator.snapshot.update.records.per.snapshot=3",
)
DEFAULT_KAFKA_DIR: Final = Path(__file__).resolve().parent / "kafka"
sys.path.insert(0, str(DEFAULT_KAFKA_DIR))

import kafka_launcher  # noqa: E402

#: generous: up to 8 engineers share 2 cores
TOOL_TIMEOUT_S: Final = 180.0


@dataclass(frozen=True, slots=True)
class Capture:
    topic: str
    topic_id: str
    group: str
    records: int
    segments: tuple[Path, ...]


def _broker(kafka_dir: Path, *args: str, timeout: float = TOOL_TIMEOUT_S) -> str:
    done = subprocess.run(
        [str(kafka_dir / "broker"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"broker {' '.join(args[:2])} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _kafka_uuid(text: str) -> str:
    """confluent-kafka's topic id text -> Kafka's URL-safe base64 form (as dump-log prints)."""
    raw = uuid.UUID(text).bytes if "-" in text else base64.urlsafe_b64decode(text + "==")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _wait_topic_id(admin: AdminClient, topic: str, deadline: float) -> str:
    while True:
        try:
            described = admin.describe_topics(_topic_collection([topic]), request_timeout=10)[
                topic
            ].result(timeout=15)
            return _kafka_uuid(str(described.topic_id))
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _topic_collection(topics: list[str]) -> object:
    from confluent_kafka import TopicCollection

    return TopicCollection(topics)


#: what the console share consumer does, run after run: reject two (archived), release two
#: (available again, delivery count 1), accept the rest (it acknowledges implicitly)
MODES: Final = (("--reject", 2), ("--release", 2), (None, 0))


def drive(
    kafka_dir: Path,
    bootstrap: str,
    records: int,
    modes: tuple[tuple[str | None, int], ...] = MODES,
) -> tuple[str, str, str]:
    """Make the share coordinator write its records; (topic, topic id, group).
    `modes`: (console consumer flag or None, messages; 0: all) per run."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-capture-{suffix}", f"share-capture-g-{suffix}"
    deadline = time.monotonic() + TOOL_TIMEOUT_S
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while True:
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    topic_id = _wait_topic_id(admin, topic, deadline)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(records):
        producer.produce(topic, key=f"k{n}".encode(), value=f"v{n}".encode())
    if producer.flush(60) != 0:
        raise RuntimeError("records not delivered within 60 s")
    _broker(
        kafka_dir,
        "tool",
        "kafka-configs.sh",
        "--bootstrap-server",
        bootstrap,
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        group,
        "--add-config",
        "share.auto.offset.reset=earliest",
    )
    # each acknowledgement is a state write: a ShareUpdate, a ShareSnapshot every 3 updates
    for mode, count in modes:
        argv = [
            "tool",
            "kafka-console-share-consumer.sh",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--max-messages",
            str(count or records),
            "--timeout-ms",
            "30000",
        ]
        if mode is not None:
            argv.append(mode)
        _broker(kafka_dir, *argv)
    return topic, topic_id, group


def capture(out_dir: Path, kafka_dir: Path = DEFAULT_KAFKA_DIR, records: int = 6) -> Capture:
    """Run the whole capture into `out_dir` (created; must be empty if it exists)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise RuntimeError(f"{out_dir} is not empty")
    work = Path(tempfile.mkdtemp(prefix="share-capture-"))
    directory = work / "broker"
    port = kafka_launcher.free_port_pair()
    # the launcher knows what each release needs; a vendored script is Kafka 4.0.0
    launcher = (kafka_dir / "kafka_launcher.py").exists()
    enable = ("--enable", "share") if launcher else kafka_launcher.SHARE_4_0
    _broker(kafka_dir, "start", str(directory), str(port), *enable, *SHARE_TUNING)
    try:
        topic, topic_id, group = drive(kafka_dir, f"127.0.0.1:{port}", records)
    finally:
        # a clean stop flushes the segments
        _broker(kafka_dir, "stop", str(directory))
    segments: list[Path] = []
    for state_dir in sorted((directory / "data").glob(f"{STATE_TOPIC}-*")):
        target = out_dir / state_dir.name
        target.mkdir()
        for log in sorted(state_dir.glob("*.log")):
            if log.stat().st_size == 0:
                continue
            copied = target / log.name
            shutil.copyfile(log, copied)
            segments.append(copied)
            dump = _broker(
                kafka_dir,
                "tool",
                "kafka-dump-log.sh",
                "--share-group-state-decoder",
                "--files",
                str(copied),
            )
            partition = state_dir.name.rsplit("-", 1)[1]
            (out_dir / f"dumplog-{partition}-{log.stem}.txt").write_text(dump)
    summary = {"topic": topic, "topic_id": topic_id, "group": group, "records": records}
    (out_dir / "capture.json").write_text(json.dumps(summary, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return Capture(topic, topic_id, group, records, tuple(segments))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="where the segments and dump-log text go")
    parser.add_argument("--kafka-dir", type=Path, default=DEFAULT_KAFKA_DIR)
    parser.add_argument("--records", type=int, default=6, help="records to produce (>= 4)")
    args = parser.parse_args(argv)
    if args.records < 4:
        parser.error("--records must be at least 4 (two rejected, two released)")
    os.environ.setdefault("KAFKA_JMX_OPTS", "-Dkafka.jmx.disabled=true")
    try:
        done = capture(args.out_dir, args.kafka_dir, args.records)
    except (RuntimeError, KafkaException, subprocess.TimeoutExpired, OSError) as error:
        print(f"capture_share_state: error: {error}", file=sys.stderr)
        return 2
    print(f"{len(done.segments)} segment file(s) of {STATE_TOPIC} in {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
