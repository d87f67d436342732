"""`offsetwatch decode` loses nothing when it is stopped or cannot write.

The installed script runs as a child process, as an operator runs it. Before: a `--follow
--format avro -o FILE` stopped by Ctrl-C or SIGTERM left a valid container with no records, and
a full disk left a file cut in the middle of a line that looked complete.

The live topic is librdkafka's mock cluster (our own I/O code is what is tested here); the
sample's records are produced into its `__consumer_offsets`.
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path

import pytest

from offsetwatch.decode_inputs import SAMPLE_FILE
from offsetwatch.decoder.avro import AvroCodec
from tests.kafka_fixtures import mock_cluster, produce_raw

pytestmark = pytest.mark.kafka

SCRIPT = Path(sys.executable).with_name("offsetwatch")
FAST = ("-X", "fetch.wait.max.ms=20", "-X", "log_level=3")


def sample_records() -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    sample = files("offsetwatch").joinpath("samples", SAMPLE_FILE)
    for line in sample.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        value = None if row["value"] is None else bytes.fromhex(row["value"])
        out.append((0, bytes.fromhex(row["key"]), value))
    return out


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, int]]:
    """A mock cluster whose __consumer_offsets (one partition) holds the sample's records."""
    with mock_cluster(topics={"__consumer_offsets": 1}) as bootstrap:
        count = produce_raw(bootstrap, sample_records())
        yield bootstrap, count


def avro_count(path: Path) -> int:
    """Records in the complete blocks of a container (one being written included)."""
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in AvroCodec().read_container(handle))
    except Exception:  # header or a block not complete yet
        return -1


def json_count(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return -1


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("fmt", "stop", "count"),
    [
        ("avro", signal.SIGTERM, avro_count),
        ("avro", signal.SIGINT, avro_count),
        ("json", signal.SIGTERM, json_count),
    ],
)
def test_a_stopped_follow_keeps_every_record_in_a_whole_file(
    live: tuple[str, int], tmp_path: Path, fmt: str, stop: int, count: Callable[[Path], int]
) -> None:
    bootstrap, produced = live
    target = tmp_path / f"out.{fmt}"
    partial = Path(f"{target}.partial")
    process = subprocess.Popen(
        [
            *(str(SCRIPT), "decode", "--bootstrap-server", bootstrap, "--follow"),
            *("--format", fmt, "-o", str(target), *FAST),
        ],
        stderr=subprocess.PIPE,
    )
    try:
        # written as it goes: every record is in the partial file before the signal
        wait_until(lambda: count(partial) == produced, f"{produced} records in {partial}")
        process.send_signal(stop)
        process.wait(timeout=60)
    finally:
        process.kill()
    assert process.stderr is not None
    err = process.stderr.read().decode()
    assert process.returncode == 0, err
    assert not partial.exists()
    assert count(target) == produced


def limit_file_size() -> None:
    # a file-size limit fails writes past it with EFBIG, as a full disk fails them with ENOSPC
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_a_write_error_is_one_line_and_never_a_cut_file_that_looks_whole(
    conformance_dir: Path, tmp_path: Path, fmt: str
) -> None:
    segments = conformance_dir / "runs" / "main" / "segments"
    target = tmp_path / f"out.{fmt}"
    done = subprocess.run(
        [str(SCRIPT), "decode", "--format", fmt, "-o", str(target), str(segments)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_file_size,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"offsetwatch: cannot write --output {target}: File too large")
    assert f"{target}.partial" in lines[0] and "Traceback" not in done.stderr
    assert not target.exists()
    assert Path(f"{target}.partial").stat().st_size <= 20_000
