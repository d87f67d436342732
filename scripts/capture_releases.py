"""Capture what each supported Kafka release writes to `__consumer_offsets`, for the fast tests.

    python scripts/capture_releases.py [VERSION ...] [--out tests/data/releases]

For each release (default: the whole matrix of scripts/kafka/versions.toml) a broker of that
release (one `__consumer_offsets` partition, so one small log) takes real clients' work: a
simple commit with metadata, a classic member, a KIP-848 member (4.0+: 3.9's early access is
not joinable by librdkafka), a committed and an aborted transactional commit, a deleted group,
and on 4.1+ a real Kafka Streams application (tests/StreamsApp.java: two subtopologies, a
repartition and a changelog topic) that runs, commits and leaves (streams-group keys 17, 19-23
and their tombstones).
The broker is stopped (its segments flushed) and OUT/VERSION receives:

* `__consumer_offsets-0/<base>.log`: the segment files;
* `dumplog.txt`: that release's own `kafka-dump-log.sh --offsets-decoder --files` of them;
* `capture.json`: the release and the groups.

`tests/decoder/test_release_captures.py` decodes each capture and compares it with that text
without Java. A capture is a few KB; re-run the script when a release is added.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "scripts" / "kafka"))

import kafka_dist  # noqa: E402

DEFAULT_OUT: Final = REPO_ROOT / "tests" / "data" / "releases"
SETTINGS: Final = ("offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1")


def capture(version: str, out: Path) -> Path:
    os.environ["OFFSETWATCH_BROKER_VERSION"] = version
    os.environ.pop("OFFSETWATCH_TEST_KAFKA_HOME", None)
    # imported after the release is chosen: the tests' helpers read it
    from tests.offsetwatch.test_decode_real_broker import (
        _consume_and_commit,
        _transactional_commits,
    )
    from tests.real_broker import (
        group_kind_properties,
        kip848_groups,
        run_tool,
        start_broker,
        stop_broker,
        test_kafka,
        unique,
    )
    from tests.streams_app import STREAMS_TUNING, compile_app

    target = out / version
    if target.exists():
        shutil.rmtree(target)
    work = Path(tempfile.mkdtemp(prefix=f"capture-{version}-"))
    try:
        streams = test_kafka().at_least("4.1")
        extra = (*group_kind_properties("streams"), *STREAMS_TUNING) if streams else ()
        classes = compile_app(work / "streams-classes") if streams else None
        broker = start_broker(work / "broker", *SETTINGS, *extra)
        try:
            topic = unique("capture")
            broker.create_topic(topic, 2)
            broker.produce(topic, [3, 3])
            groups = {
                "simple": unique("simple"),
                "classic": unique("classic"),
                "transactional": unique("txn"),
                "deleted": unique("deleted"),
            }
            broker.commit(groups["simple"], {(topic, 0): 1, (topic, 1): 2}, metadata="m é")
            classic = {"group.protocol": "classic"}
            _consume_and_commit(broker, groups["classic"], topic, 6, **classic)
            if kip848_groups():
                groups["kip848"] = unique("kip848")
                _consume_and_commit(
                    broker, groups["kip848"], topic, 6, **{"group.protocol": "consumer"}
                )
            _transactional_commits(broker, groups["transactional"], topic)
            if classes is not None:
                groups["streams"] = _streams_application(broker, classes, work, topic)
            broker.commit(groups["deleted"], {(topic, 0): 1})
            admin = broker.admin()
            admin.delete_consumer_groups([groups["deleted"]], request_timeout=30)[
                groups["deleted"]
            ].result(60)
        finally:
            stop_broker(broker.directory)  # a clean stop flushes the segments
        source = broker.data_dir / "__consumer_offsets-0"
        (target / source.name).mkdir(parents=True)
        files = []
        for log in sorted(source.glob("*.log")):
            if log.stat().st_size:
                files.append(str(shutil.copyfile(log, target / source.name / log.name)))
        text = run_tool("kafka-dump-log.sh", "--offsets-decoder", "--files", ",".join(files))
        # the tool names the files it read: our copies, relative to the capture
        (target / "dumplog.txt").write_text(text.replace(str(target) + "/", ""))
        summary = {"release": version, "topic": topic, "groups": groups}
        (target / "capture.json").write_text(json.dumps(summary, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _streams_application(broker: Any, classes: Path, work: Path, topic: str) -> str:
    """A streams group's whole life: join, assign, commit what it read, leave."""
    from tests.real_broker import unique
    from tests.streams_app import start_instance

    application = unique("streams")
    sink = unique("counts")
    broker.create_topic(sink, 2)
    app = start_instance(
        classes, broker.bootstrap, application, "count", topic, sink, work, "capture-app"
    )
    try:
        app.wait_running()
        # the six records of the topic read and committed: the group's offsets equal the ends
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            committed = broker.committed(application)
            if {key: at for key, at in committed.items() if key[0] == topic} == {
                (topic, 0): 3,
                (topic, 1): 3,
            }:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"{application} did not commit {topic} within 120 s")
    finally:
        app.stop()
    return application


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", help="releases or lines (default: the matrix)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    books = kafka_dist.catalog()
    try:
        versions = [books.resolve(v) for v in args.versions] or list(books.matrix)
        for version in versions:
            kafka_dist.fetch(version)
    except kafka_dist.KafkaDistError as error:
        print(f"capture_releases: {error}", file=sys.stderr)
        return 2
    for version in versions:
        print(f"Kafka {version}: {capture(version, args.out)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
