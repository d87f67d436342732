"""`offsetwatch decode`: every input and format against Kafka's own decoding of the conformance
runs, filters, error reporting, environment variables, help, and --follow on librdkafka's mock
cluster. The live topic on a real broker (--from, dump-log, OffsetFetch) is
test_decode_real_broker.py."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.cli import main
from offsetwatch.commands import apply_env_defaults, kafka_properties_from_env
from offsetwatch.commands.decode.options import parse_start
from offsetwatch.decode_inputs import SAMPLE_FILE, Chunk, HexJsonlSource
from offsetwatch.decoder import Canonical, Codec
from offsetwatch.decoder.avro import AvroCodec

RUNS = ("main", "codec-gzip", "codec-snappy", "codec-lz4", "codec-zstd", "expiry")
SAMPLE = Path(__file__).resolve().parents[2] / "offsetwatch" / "samples" / SAMPLE_FILE
SCRIPT = Path(sys.executable).with_name("offsetwatch")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = main(["decode", *argv])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


@pytest.fixture(params=RUNS)
def run_dir(request: pytest.FixtureRequest, conformance_dir: Path) -> Path:
    return conformance_dir / "runs" / str(request.param)


def _hex_line(key: bytes, value: bytes | None, partition: int = 0, offset: int = 0) -> str:
    return json.dumps(
        {
            "partition": partition,
            "offset": offset,
            "timestamp": 1,
            "key": key.hex(),
            "value": None if value is None else value.hex(),
        }
    )


# -- conformance: every run, every format --------------------------------------------------


def test_hex_jsonl_dump_log_is_kafka_dump_log(
    capsys: pytest.CaptureFixture[str], run_dir: Path
) -> None:
    records = run_dir / "records.jsonl"
    code, out, err = _run(capsys, "--format", "dump-log", "--input", "hex-jsonl", str(records))
    assert (code, err) == (0, "")
    assert out == [row["expected"] for row in _rows(records)]


def test_hex_jsonl_console_is_kafka_formatter(
    capsys: pytest.CaptureFixture[str], run_dir: Path
) -> None:
    records = run_dir / "records.jsonl"
    code, out, err = _run(capsys, "--format", "console", str(records))  # input guessed
    assert (code, err) == (0, "")
    # one line per input line: null where Kafka's formatters print nothing
    assert out == [row["formatter"] for row in _rows(records)]


def test_segments_give_the_records_of_records_jsonl(
    capsys: pytest.CaptureFixture[str], run_dir: Path
) -> None:
    rows = {(r["partition"], r["offset"]): r for r in _rows(run_dir / "records.jsonl")}
    segments = str(run_dir / "segments")
    code, canonical, err = _run(capsys, "--input", "segments", segments)
    assert (code, err) == (0, "")
    code, dump_log, err = _run(capsys, "--format", "dump-log", "--input", "segments", segments)
    assert (code, err) == (0, "")
    assert len(canonical) == len(dump_log) == len(rows)
    positions = [(c["partition"], c["offset"]) for c in canonical]
    assert sorted(positions) == sorted(rows)
    for record, kafka in zip(canonical, dump_log, strict=True):
        row = rows[(record["partition"], record["offset"])]
        assert kafka == row["expected"]
        assert record["timestamp"] == row["timestamp"]


def _transaction_outcomes(batches_jsonl: Path) -> dict[tuple[int, int], str]:
    """(partition, offset) -> committed/aborted/pending of every transactional record, from
    the batch headers and control records kafka-dump-log printed."""
    outcomes: dict[tuple[int, int], str] = {}
    open_txn: dict[tuple[int, int], list[int]] = {}
    for batch in _rows(batches_jsonl):
        partition = batch["partition"]
        producer = (partition, batch["producerId"])
        if batch["isControl"]:
            for control in batch.get("control_records", []):
                status = {"COMMIT": "committed", "ABORT": "aborted"}[control["endTxnMarker"]]
                for offset in open_txn.pop(producer, []):
                    outcomes[(partition, offset)] = status
        elif batch["isTransactional"]:
            open_txn.setdefault(producer, []).extend(batch["records"])
    for (partition, _producer), offsets in open_txn.items():
        for offset in offsets:
            outcomes[(partition, offset)] = "pending"
    return outcomes


def test_segments_flag_transactions_and_skip_aborted(
    capsys: pytest.CaptureFixture[str], run_dir: Path
) -> None:
    outcomes = _transaction_outcomes(run_dir / "batches.jsonl")
    segments = str(run_dir / "segments")
    _code, out, _err = _run(capsys, "--input", "segments", segments)
    flagged = {(r["partition"], r["offset"]): r["transaction"] for r in out if r["transaction"]}
    assert flagged == outcomes
    _code, kept, _err = _run(capsys, "--input", "segments", "--skip-aborted", segments)
    aborted = {pos for pos, status in outcomes.items() if status == "aborted"}
    assert len(kept) == len(out) - len(aborted)
    assert not aborted & {(r["partition"], r["offset"]) for r in kept}


def test_segments_one_partition_file_by_file(
    capsys: pytest.CaptureFixture[str], conformance_dir: Path
) -> None:
    run = conformance_dir / "runs" / "main"
    partition_dir = run / "segments" / "__consumer_offsets-3"
    # two segment files, given in the wrong order: read in base-offset order
    files = sorted((str(p) for p in partition_dir.glob("*.log")), reverse=True)
    assert len(files) == 2
    expected = [r["expected"] for r in _rows(run / "records.jsonl") if r["partition"] == 3]
    code, out, err = _run(capsys, "--format", "dump-log", "--input", "segments", *files)
    assert (code, err) == (0, "")
    assert out == expected  # no transactions in partition 3: plain offset order
    # the same from the directory, and from the log directory with a partition filter
    assert _run(capsys, "--format", "dump-log", str(partition_dir))[1] == expected
    assert (
        _run(capsys, "--format", "dump-log", "--partition", "3", str(run / "segments"))[1]
        == expected
    )


# -- the built-in sample and the output formats --------------------------------------------


def test_sample_decodes_without_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--sample")
    assert (code, err) == (0, "")
    rows = _rows(SAMPLE)
    assert len(out) == len(rows) >= 30
    codec, canonical = Codec(), Canonical()
    for line, row in zip(out, rows, strict=True):
        record = codec.decode(
            bytes.fromhex(row["key"]),
            None if row["value"] is None else bytes.fromhex(row["value"]),
            row["partition"],
            row["offset"],
            row["timestamp"],
        )
        assert line == json.loads(canonical.to_json(record))
    types = {r["key_type"] for r in out}
    assert {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16} <= types
    assert any(r["tombstone"] for r in out) and any(r["value_version"] == 1 for r in out)
    # only raw fields in the packaged sample, never Kafka's expected decoding
    assert all(set(r) == {"partition", "offset", "timestamp", "key", "value"} for r in rows)


def test_sample_matches_the_conformance_run(
    capsys: pytest.CaptureFixture[str], conformance_dir: Path
) -> None:
    rows = {
        (r["partition"], r["offset"]): r
        for r in _rows(conformance_dir / "runs" / "main" / "records.jsonl")
    }
    _code, out, _err = _run(capsys, "--sample", "--format", "dump-log")
    sample = _rows(SAMPLE)
    assert out == [rows[(r["partition"], r["offset"])]["expected"] for r in sample]


def test_avro_container_holds_the_canonical_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "offsets.avro"
    code, out, err = _run(capsys, "--sample", "--format", "avro", "--output", str(target))
    assert (code, out, err) == (0, [], "")
    _code, canonical, _err = _run(capsys, "--sample")
    read = list(AvroCodec().read_container(target))
    assert json.loads(json.dumps(read, default=_b64)) == canonical


def _b64(value: Any) -> Any:
    import base64

    return base64.b64encode(value).decode()


def test_output_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    code, out, err = _run(capsys, "--sample", "--format", "dump-log", "-o", str(target))
    assert (code, out, err) == (0, [], "")
    assert len(target.read_text().splitlines()) == len(_rows(SAMPLE))


def test_a_failing_loop_still_stops_the_bar_and_closes_output_then_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a bar left running would leave the terminal without a cursor; a consumer left open
    # would hold its connections until the interpreter exits
    from offsetwatch.commands.decode import loop, output, progress

    opened: list[output.OutputFile] = []
    events: list[str] = []
    open_file = output.OutputFile.__init__
    stop_bar = progress.ProgressBar.__exit__

    def recorded_open(self: output.OutputFile, path: str) -> None:
        open_file(self, path)
        opened.append(self)

    def recorded_stop(bar: progress.ProgressBar, *exc: object) -> None:
        events.append("bar stopped")
        stop_bar(bar, *exc)

    def broken_loop(self: loop.DecodeLoop, chunk: Chunk) -> list[Any]:
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(output.OutputFile, "__init__", recorded_open)
    monkeypatch.setattr(progress.ProgressBar, "__exit__", recorded_stop)
    monkeypatch.setattr(
        HexJsonlSource, "close", lambda self: events.append(f"source closed {opened[0].closed}")
    )
    monkeypatch.setattr(loop.DecodeLoop, "__call__", broken_loop)
    with pytest.raises(RuntimeError, match="decoder bug"):
        main(["decode", "--sample", "--progress", "-o", str(tmp_path / "out.jsonl")])
    assert events == ["bar stopped", "source closed True"]
    # a run that failed half-way never leaves a file that looks complete
    assert not (tmp_path / "out.jsonl").exists() and (tmp_path / "out.jsonl.partial").exists()


# -- filters ---------------------------------------------------------------------------------


def test_filters_on_segments(capsys: pytest.CaptureFixture[str], conformance_dir: Path) -> None:
    segments = str(conformance_dir / "runs" / "main" / "segments")
    _code, everything, _err = _run(capsys, "--input", "segments", segments)

    _code, out, _err = _run(capsys, "--input", "segments", segments, "--group", "^cls-")
    assert out and out == [r for r in everything if r["group"].startswith("cls-")]

    _code, out, _err = _run(
        capsys, "--input", "segments", segments, "--type", "offset_commit", "--type", "2"
    )
    assert out == [r for r in everything if r["key_type"] in (0, 1, 2)]

    _code, out, _err = _run(
        capsys, "--input", "segments", segments, "--type", "ConsumerGroupMemberMetadata"
    )
    assert out and out == [r for r in everything if r["key_type"] == 5]

    _code, out, _err = _run(capsys, "--input", "segments", segments, "--exclude-tombstones")
    assert out == [r for r in everything if not r["tombstone"]]

    _code, out, _err = _run(
        capsys, "--input", "segments", segments, "--partition", "1", "--partition", "3"
    )
    assert out == [r for r in everything if r["partition"] in (1, 3)]


def test_filters_keep_one_line_per_hex_line(capsys: pytest.CaptureFixture[str]) -> None:
    _code, everything, _err = _run(capsys, "--sample")
    _code, out, _err = _run(capsys, "--sample", "--type", "group_metadata", "--group", "single")
    assert len(out) == len(everything)
    assert out == [r if r["key_type"] == 2 and "single" in r["group"] else None for r in everything]


# -- bad input -------------------------------------------------------------------------------


def test_bad_records_are_reported_and_the_rest_decoded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = SAMPLE.read_text().splitlines()[:3]
    key = bytes.fromhex(json.loads(good[2])["key"])
    lines = [
        good[0],
        # OffsetCommitValue v3 cut short in its commit timestamp
        _hex_line(key, bytes.fromhex("0003" + "00" * 14), partition=3, offset=120),
        "this is not json",
        good[1],
        '{"key": "0g"}',
        "",
        good[2],
    ]
    dump = tmp_path / "dump.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    code, out, err = _run(capsys, "--format", "dump-log", "--input", "hex-jsonl", str(dump))
    assert code == 1
    messages = err.splitlines()
    assert len(messages) == 3
    assert messages[0].startswith("offsetwatch: partition 3 offset 120: value at byte 16: ")
    assert messages[0].endswith(f"({dump} line 2)")
    assert messages[1].startswith(f"offsetwatch: {dump} line 3: not a JSON line")
    assert messages[2].startswith(f"offsetwatch: {dump} line 5: key/value is not a hex string")
    # exactly one output line per non-blank input line, in order
    assert len(out) == 6
    assert [o is not None and "key" in o for o in out] == [True, False, False, True, False, True]
    assert out[1] == {"error": messages[0].removeprefix("offsetwatch: ")}
    assert out[2]["error"].startswith(f"{dump} line 3: not a JSON line")


def test_corrupt_segment_is_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, conformance_dir: Path
) -> None:
    run = conformance_dir / "runs" / "codec-gzip"
    source = run / "segments" / "__consumer_offsets-2" / "00000000000000000000.log"
    target = tmp_path / "__consumer_offsets-2"
    target.mkdir()
    data = bytearray(source.read_bytes())
    damaged = len(data) - 40  # inside the last batch
    data[damaged] ^= 0xFF
    (target / source.name).write_bytes(bytes(data))
    batches = [b for b in _rows(run / "batches.jsonl") if b["partition"] == 2]
    intact = {
        offset
        for b in batches
        if not b["position"] <= damaged < b["position"] + b["size"]
        for offset in b["records"]
        if not b["isControl"]
    }
    code, out, err = _run(capsys, "--input", "segments", str(target))
    assert code == 1
    assert err.startswith("offsetwatch: ") and "batch at byte" in err
    assert intact <= {r["offset"] for r in out}  # every other batch is still decoded
    assert all(r["partition"] == 2 for r in out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sample", "--group", "("], "not a valid regular expression"),
        (["--input", "segments", "/nonexistent/dir"], "does not exist"),
        (["--input", "hex-jsonl", "/nonexistent.jsonl"], "does not exist"),
        ([], "nothing to decode"),
        (["--sample", "--format", "avro"], "give --output FILE"),
        (["--sample", "--type", "nonsense"], "unknown record type 'nonsense'"),
        (["--sample", "--from", "yesterday"], "not a start position"),
        (["--sample", "--follow"], "--follow only applies to the live topic"),
        (["--sample", "--output", "/nonexistent/dir/out.json"], "cannot write"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["decode", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err


def test_kafka_property_errors_never_echo_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--bootstrap-server", "x:1", "-X", "sasl.password:hunter2"]) == 2
    err = capsys.readouterr().err
    assert "KEY=VALUE" in err and "hunter2" not in err


# -- environment variables, help -------------------------------------------------------------


def test_options_from_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFSETWATCH_FORMAT", "console")
    monkeypatch.setenv("OFFSETWATCH_TYPE", "offset_commit,2")
    monkeypatch.setenv("OFFSETWATCH_EXCLUDE_TOMBSTONES", "yes")
    code, out, _err = _run(capsys, "--sample")
    assert code == 0
    kept = [o for o in out if o is not None]
    assert kept and all(o["key"]["type"] in (1, 2) and o["value"] is not None for o in kept)
    # the command line wins (and replaces the repeatable list)
    code, out, _err = _run(capsys, "--sample", "--format", "json", "--type", "5")
    kept = [o for o in out if o is not None]
    assert kept and {o["key_type"] for o in kept} == {5}


def test_bad_environment_value_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFSETWATCH_FORMAT", "yaml")
    assert main(["decode", "--sample"]) == 2
    assert "OFFSETWATCH_FORMAT" in capsys.readouterr().err


def test_environment_helper_conversions() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--flag", action="store_true")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction)
    parser.add_argument("--tag", action="append", default=[])
    parser.add_argument("--server", "--servers", default="x")
    parser.add_argument("--skipped", default="x")
    apply_env_defaults(
        parser,
        {
            "OFFSETWATCH_TIMEOUT": "2.5",
            "OFFSETWATCH_FLAG": "1",
            "OFFSETWATCH_PROGRESS": "off",
            "OFFSETWATCH_TAG": "a,b",
            "OFFSETWATCH_SERVERS": "s:1",  # any long name of the option
            "OFFSETWATCH_SKIPPED": "y",
        },
        exclude={"skipped"},
    )
    args = parser.parse_args(["--tag", "c"])
    assert (args.timeout, args.flag, args.progress) == (2.5, True, False)
    assert args.tag == ["a", "b", "c"]  # plain append extends the environment's list
    assert (args.server, args.skipped) == ("s:1", "x")
    assert args.env_errors == []


def test_kafka_properties_from_environment() -> None:
    environ = {
        "OFFSETWATCH_KAFKA_SASL_PASSWORD": "secret",
        "OFFSETWATCH_KAFKA_SSL_CA_LOCATION": "/ca.pem",
        "OFFSETWATCH_KAFKA_SOME__UNDERSCORE": "1",
        "OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES": "true",  # an option of offsetwatch export
        "OFFSETWATCH_FORMAT": "json",
    }
    assert kafka_properties_from_env(environ, {"OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES"}) == [
        ("sasl.password", "secret"),
        ("some_underscore", "1"),
        ("ssl.ca.location", "/ca.pem"),
    ]


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--help"]) == 0
    text = capsys.readouterr().out
    for needle in (
        "examples:",
        "--bootstrap-server broker1:9092 --from 2026-11-20T09:00:00Z",
        "--format dump-log --input segments",
        "--format dump-log --input hex-jsonl",
        "--format avro --output",
        "OFFSETWATCH_BOOTSTRAP_SERVER",
        "read_uncommitted",
        "exit status",
    ):
        assert needle in text, needle
    assert main(["--help"]) == 0
    assert "decode" in capsys.readouterr().out


def test_parse_start() -> None:
    assert parse_start("beginning").kind == "beginning"
    assert parse_start("end").kind == "end"
    assert parse_start("1795291757128").timestamp == 1795291757128
    assert parse_start("2026-11-20T09:00:00Z").timestamp == 1795165200000
    assert parse_start("2026-11-20T10:00:00+01:00").timestamp == 1795165200000
    assert parse_start("2026-11-20T09:00:00").timestamp == 1795165200000  # UTC


# -- the real script -------------------------------------------------------------------------


def test_script_runs_and_exits_quietly_on_a_closed_pipe(conformance_dir: Path) -> None:
    assert SCRIPT.exists(), f"console script not installed at {SCRIPT}"
    done = subprocess.run(
        [str(SCRIPT), "decode", "--sample", "--format", "dump-log"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert len(done.stdout.splitlines()) == len(_rows(SAMPLE))

    # | head -1 on a few MB of output
    records = conformance_dir / "runs" / "main" / "records.jsonl"
    process = subprocess.Popen(
        [str(SCRIPT), "decode", "--input", "hex-jsonl", str(records)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 0
    assert json.loads(first)["offset"] == 0
    assert stderr == b""


# -- the live topic: no cluster, and --follow on librdkafka's mock cluster ---------------------

FAST = ("-X", "fetch.wait.max.ms=20", "-X", "log_level=3")


def _mock_cluster() -> Any:
    from offsetwatch.mock_cluster import MockCluster

    return MockCluster()


@pytest.fixture
def live(conformance_dir: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A mock cluster whose __consumer_offsets (3 partitions) holds the codec-lz4 run's
    records, produced in their order with their timestamps."""
    from confluent_kafka import Producer

    rows = _rows(conformance_dir / "runs" / "codec-lz4" / "records.jsonl")
    with _mock_cluster() as cluster:
        cluster.create_topic("__consumer_offsets", 3)
        bootstrap = cluster.bootstrap_servers
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
        for row in rows:
            producer.produce(
                "__consumer_offsets",
                key=bytes.fromhex(row["key"]),
                value=None if row["value"] is None else bytes.fromhex(row["value"]),
                partition=row["partition"],
                timestamp=row["timestamp"],
            )
        assert producer.flush(30) == 0
        yield bootstrap, rows


def _by_partition(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["partition"], []).append(row)
    return out


def test_unreachable_cluster_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(
        capsys,
        "--bootstrap-server",
        "127.0.0.1:1",
        "--timeout",
        "1",
        "-X",
        "sasl.password=hunter2",
        *FAST,
    )
    assert code == 2
    assert len(err.splitlines()) == 1
    # librdkafka's reason as soon as it is known, not a metadata call's whole --timeout
    assert "cannot reach Kafka at 127.0.0.1:1 (from --bootstrap-server)" in err
    assert "Connection refused" in err and "security.protocol" in err
    assert "hunter2" not in err


def test_broker_down_mid_read_is_one_line_each(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cluster answers metadata and watermarks, then goes down before a record is
    fetched: the client's errors are notes and the early stop one failure, a line each."""
    import confluent_kafka

    with _mock_cluster() as cluster:
        cluster.create_topic("__consumer_offsets", 2)
        bootstrap = cluster.bootstrap_servers
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "log_level": 0})
        key = bytes.fromhex("000100016700017400000000")  # OffsetCommitKey g/t/0
        for partition in (0, 1):
            producer.produce("__consumer_offsets", key=key, value=b"\x00", partition=partition)
        assert producer.flush(30) == 0

        class DownOnAssign(confluent_kafka.Consumer):
            def assign(self, partitions: Any) -> None:
                cluster.set_down()
                super().assign(partitions)

        monkeypatch.setattr(confluent_kafka, "Consumer", DownOnAssign)
        argv = ("--bootstrap-server", bootstrap, "--timeout", "1", "-X", "fetch.wait.max.ms=20")
        code, out, err = _run(capsys, *argv)
    assert (code, out) == (1, [])
    lines = err.splitlines()
    assert all(line.startswith("offsetwatch: note: kafka: ") for line in lines[:-1]), err
    assert lines[-1].startswith(
        "offsetwatch: topic __consumer_offsets: no data for 1s from partition(s) 0, 1: "
        "stopped before their high watermark (last client error: "
    )


class _Lines:
    """Lines of a pipe, read by a thread so that a test fails instead of hanging."""

    def __init__(self, stream: Any) -> None:
        import queue
        import threading

        self._queue: queue.Queue[bytes] = queue.Queue()
        self._empty = queue.Empty
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            self._queue.put(line)

    def take(self, count: int, timeout: float) -> list[Any]:
        deadline = time.monotonic() + timeout
        out: list[Any] = []
        while len(out) < count:
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.01))
            except self._empty:
                pytest.fail(f"got {len(out)} of {count} lines within {timeout}s")
            out.append(json.loads(line))
        return out


# How the script is started: as pytest was, or with SIGINT ignored, as a shell without job
# control starts `cmd &` (Python then installs no KeyboardInterrupt handler of its own).
LAUNCHERS: dict[str, tuple[str, ...]] = {
    "inherited": (),
    "sigint-ignored": ("/bin/sh", "-c", 'trap "" INT; exec "$0" "$@"'),
}


@pytest.mark.kafka
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_live_follow_in_the_real_script(
    live: tuple[str, list[dict[str, Any]]], launcher: str
) -> None:
    """The installed script against the mock (over TCP, bootstrap from the environment):
    --follow prints what is there, then records produced later, until Ctrl-C (exit 0)."""
    from confluent_kafka import Producer

    bootstrap, rows = live
    env = {**os.environ, "OFFSETWATCH_BOOTSTRAP_SERVER": bootstrap}
    process = subprocess.Popen(
        [
            *LAUNCHERS[launcher],
            str(SCRIPT),
            *("decode", "--follow", "--partition", "0", "--format", "dump-log", *FAST),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        existing = [row["expected"] for row in _by_partition(rows)[0]]
        new = rows[:3]
        lines = _Lines(process.stdout)
        assert lines.take(len(existing), timeout=60) == existing
        producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
        for row in new:
            producer.produce(
                "__consumer_offsets",
                key=bytes.fromhex(row["key"]),
                value=None if row["value"] is None else bytes.fromhex(row["value"]),
                partition=0,
            )
        assert producer.flush(30) == 0
        assert lines.take(len(new), timeout=60) == [row["expected"] for row in new]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        finally:
            process.kill()
    assert process.stderr is not None
    err = process.stderr.read()
    assert process.returncode == 0, err
    assert err == b""


def test_what_the_output_name_already_is_decides_how_it_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o to a directory or a symlink loop is refused before any decoding; a symlink keeps
    pointing where it did; a FIFO is streamed to, never renamed over (as /dev/null would be,
    as root)."""
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    for bad in (tmp_path, loop):
        assert main(["decode", str(SAMPLE), "-o", str(bad)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and f"--output {bad}" in err, err
    assert not list(tmp_path.glob("*.partial"))

    real = tmp_path / "real.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(real.name)
    assert main(["decode", str(SAMPLE), "-o", str(link)]) == 0
    assert link.is_symlink() and real.read_text().count("\n") > 0

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as stream:
            got.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert main(["decode", str(SAMPLE), "-o", str(fifo)]) == 0
    reader.join(10)
    assert got == [real.read_bytes()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_pipe_is_an_input_and_a_loop_or_directory_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`decode <(kcat ...)` hands decode a pipe: it was refused as "does not exist"."""
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as stream:
            stream.write(SAMPLE.read_bytes())

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    assert main(["decode", str(fifo)]) == 0
    writer.join(10)
    piped = capsys.readouterr().out
    assert main(["decode", str(SAMPLE)]) == 0
    assert piped == capsys.readouterr().out != ""
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    for bad, why in ((loop, "Too many levels of symbolic links"), (tmp_path, "is a directory")):
        assert main(["decode", "--input", "hex-jsonl", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(bad) in err and why in err, err


def test_output_to_dev_stdout_that_is_a_pipe() -> None:
    """/dev/stdout of a pipe resolves to /proc/self/fd/pipe:[N], no file name at all: it is
    written in place, as any device."""
    argv = [sys.executable, "-m", "offsetwatch.cli", "decode", str(SAMPLE), "-o", "/dev/stdout"]
    piped = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    assert piped.returncode == 0, piped.stderr
    direct = subprocess.run(argv[:-2], capture_output=True, timeout=60, check=True)
    assert piped.stdout == direct.stdout != b""
