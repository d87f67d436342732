"""`offsetwatch decode`: records of `__consumer_offsets` -> JSON lines or Avro.

Inputs are in `offsetwatch.decode_inputs`; this module holds the options, the decode loop and
the output. The loop does per record only what the options ask for: one `Codec.decode`, one
rendering, one list append; output is written with one write per input chunk (a record batch,
a block of lines, a consume call).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from offsetwatch.commands import Repeat, UsageError, apply_env_defaults, reserved_env
from offsetwatch.core.connection import (
    ConnectionOptionError,
    add_connection_options,
    kafka_config,
)
from offsetwatch.instants import epoch_or_iso_ms

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers
    from offsetwatch.decode_inputs import Chunk, Source, StartPosition

FORMATS: Final = ("json", "dump-log", "console", "avro")
INPUTS: Final = ("topic", "segments", "hex-jsonl")
ISOLATION: Final = ("read_uncommitted", "read_committed")
DEFAULT_TOPIC: Final = "__consumer_offsets"
DEFAULT_TIMEOUT: Final = 30.0
NULL_LINE: Final = "null"

DESCRIPTION = """\
Decode the records of Kafka's __consumer_offsets topic into JSON lines (or an Avro file):
from a live cluster, from log segment files (like kafka-dump-log --offsets-decoder), or from
hex JSON lines (key/value bytes in hex, e.g. captured by another tool).

input (one of):
  --bootstrap-server HOST:PORT   the live topic: every partition (or --partition P ...), from
                                 --from, up to the high watermarks seen at start (or --follow)
  --input segments PATH...       .log segment files, __consumer_offsets-<p> directories, or a
                                 Kafka log directory holding them; the partition comes from the
                                 directory name
  --input hex-jsonl PATH|-       lines like {"key": "<hex>", "value": "<hex>"|null,
                                 "partition": 3, "offset": 120, "timestamp": ...}; other fields
                                 are ignored; - (or no PATH) reads standard input
  --sample                       a built-in sample of every record type (no Kafka needed)

output formats (--format):
  json       offsetwatch's canonical record (docs/canonical-schema.md), one per line; the
             records of transactional batches (segments) have their outcome in the field
             "transaction" (committed, aborted or pending; null elsewhere), in Avro too
  dump-log   {"key": ..., "payload": ...} exactly as kafka-dump-log --offsets-decoder prints
             them after key: and payload: ("<DELETE>" for a tombstone)
  console    what Kafka's OffsetsMessageFormatter / GroupMetadataMessageFormatter print; they
             skip key types 3 and above, and so does this format
  avro       an Avro container file of canonical records (deflate); needs --output

hex-jsonl gives exactly one output line per (non-blank) input line, in order: the record; or
null when the record is filtered out (--group/--type/--partition/--exclude-tombstones/
--skip-aborted) or skipped by the console formatter; or {"error": "..."} when it cannot be
decoded. (--format avro cannot hold such lines: bad records are only reported on stderr.)

transactions: only segment files show whether a transactional offset commit was committed,
aborted or is still pending (from the COMMIT/ABORT markers). Such records are released when
their marker arrives - the order in which the group coordinator applies them - and the still-open
ones come last. --skip-aborted drops the aborted ones. The live topic is read read_uncommitted
by default, like kafka-console-consumer and kafka-dump-log: every record written, aborted ones
included; --isolation read_committed shows only committed records (and stops at the last stable
offset).
"""

EPILOG = """\
examples:
  # decode a live cluster from a point in time (canonical JSON), then stop
  offsetwatch decode --bootstrap-server broker1:9092 --from 2026-11-20T09:00:00Z

  # ... only one group's offset commits, and keep following new ones
  offsetwatch decode --bootstrap-server broker1:9092 --group '^payments$' \\
      --type offset_commit --follow

  # a SASL_SSL cluster: librdkafka properties with -X, the password from the environment
  export OFFSETWATCH_KAFKA_SASL_PASSWORD=...
  offsetwatch decode --bootstrap-server broker1:9093 -X security.protocol=SASL_SSL \\
      -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=ops

  # decode segment files like kafka-dump-log --offsets-decoder --deep-iteration
  offsetwatch decode --format dump-log --input segments /var/lib/kafka/data/__consumer_offsets-7

  # every partition of a broker's log directory, without aborted transactional commits
  offsetwatch decode --input segments /var/lib/kafka/data --skip-aborted

  # turn a hex dump into Kafka's dump-log JSON, one output line per input line
  offsetwatch decode --format dump-log --input hex-jsonl records.jsonl

  # write an Avro container file of the canonical records
  offsetwatch decode --input segments /var/lib/kafka/data --format avro --output offsets.avro

  # try it without Kafka
  offsetwatch decode --sample --format console

environment:
  Every option can also come from an environment variable OFFSETWATCH_<OPTION> (upper case,
  dashes as underscores): OFFSETWATCH_BOOTSTRAP_SERVER=broker1:9092 (or
  OFFSETWATCH_BOOTSTRAP_SERVERS; both set must agree), OFFSETWATCH_FORMAT=dump-log,
  OFFSETWATCH_FOLLOW=1. Repeatable options take a comma-separated list (newline-separated when
  a value holds commas). librdkafka properties come from OFFSETWATCH_KAFKA_<PROPERTY>, the
  same variables offsetwatch export reads: dots as underscores, a literal underscore doubled,
  e.g. OFFSETWATCH_KAFKA_SASL_PASSWORD is -X sasl.password, OFFSETWATCH_KAFKA_SSL_CA_LOCATION
  is -X ssl.ca.location; -X on the command line wins. Values of secret properties (passwords,
  keys, tokens) are never printed.

progress:
  File input shows a progress bar on stderr when stderr is a terminal and the records do not
  go to the same terminal (--progress / --no-progress to force).

exit status:
  0 every record decoded; 1 some records could not be read or decoded (each reported on stderr
  as "offsetwatch: partition P offset O: value at byte B: <reason>", the others are still
  written); 2 usage or configuration error. A closed pipe (| head) ends the run quietly.
"""


# -- option types ----------------------------------------------------------------------------


def parse_start(text: str) -> StartPosition:
    """beginning | end | epoch milliseconds | ISO-8601 time (UTC when no offset is given)."""
    from offsetwatch.decode_inputs import StartPosition

    lowered = text.strip().lower()
    if lowered in ("beginning", "earliest"):
        return StartPosition("beginning")
    if lowered in ("end", "latest"):
        return StartPosition("end")
    try:
        return StartPosition("timestamp", epoch_or_iso_ms(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a start position: use beginning, end, an ISO-8601 time like "
            "2026-11-20T09:00:00Z (UTC unless it has an offset), or epoch milliseconds"
        ) from None


def parse_partition(text: str) -> int:
    try:
        partition = int(text)
    except ValueError:
        partition = -1
    if partition < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a partition number")
    return partition


def parse_type(text: str) -> frozenset[int]:
    """A record type name (offset_commit), Kafka's schema name (OffsetCommit) or a key type
    number -> the key types it covers, as unsigned 16-bit values (how the key starts)."""
    from offsetwatch.decoder.registry import RECORD_TYPES

    wanted = text.strip()
    try:
        number = int(wanted)
    except ValueError:
        pass
    else:
        if not -(1 << 15) <= number < (1 << 15):
            raise argparse.ArgumentTypeError(f"key type {number} is not an int16")
        return frozenset({number & 0xFFFF})
    found = frozenset(
        k
        for k, t in RECORD_TYPES.items()
        if wanted == t.name or wanted.lower() == t.kafka_name.lower()
    )
    if not found:
        names = ", ".join(sorted({t.name for t in RECORD_TYPES.values()}))
        raise argparse.ArgumentTypeError(
            f"unknown record type {wanted!r}: use a key type number or one of {names}"
        )
    return found


def parse_regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid regular expression ({error}); quote it for the shell, "
            "e.g. --group '^orders-.*$'"
        ) from None


def parse_timeout(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


# -- parser ----------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """A byte count: 268435456, 256MiB, 1GiB, 64MB."""
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
    cleaned = text.strip().lower()
    factor = 1
    for suffix, multiplier in units.items():
        if cleaned.endswith(suffix):
            cleaned, factor = cleaned[: -len(suffix)].strip(), multiplier
            break
    try:
        value = int(cleaned) * factor
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a byte count like 256MiB, got {text!r}"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive byte count, got {text!r}")
    return value


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "decode",
        help="decode __consumer_offsets records (live topic, segment files, hex dumps)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_argument_group("input")
    source.add_argument(
        "paths", nargs="*", metavar="PATH", help="segment files/directories or hex-jsonl files"
    )
    source.add_argument(
        "--input",
        choices=INPUTS,
        help="what PATH holds (guessed from the paths when left out: directories and .log "
        "files are segments, other files hex-jsonl); 'topic' is the live topic",
    )
    source.add_argument(
        "--sample", action="store_true", help="decode the built-in sample (no Kafka needed)"
    )
    source.add_argument(
        "--max-batch-bytes",
        type=parse_size,
        default=None,
        metavar="BYTES",
        help="segments: bound on one batch's decompressed size (default 256 MiB, and 64 MiB "
        "per record the batch claims); a batch beyond it is reported as a decompression bomb "
        "and skipped, never allocated",
    )

    live = parser.add_argument_group("live topic")
    add_connection_options(
        live,
        bootstrap_help="Kafka brokers to read from",
        property_help="see the environment section below",
    )
    live.add_argument(
        "--topic", "--offsets-topic", default=DEFAULT_TOPIC, help="topic to read (%(default)s)"
    )
    live.add_argument(
        "--from",
        dest="start",
        metavar="WHERE",
        type=parse_start,
        default=parse_start("beginning"),
        help="beginning (default), end, an ISO-8601 time (2026-11-20T09:00:00+01:00; UTC "
        "without offset) or epoch milliseconds: each partition starts at its first record at "
        "or after that time",
    )
    live.add_argument(
        "--follow",
        action="store_true",
        help="keep reading new records until interrupted (default: stop at the high "
        "watermarks seen at start)",
    )
    live.add_argument(
        "--isolation",
        choices=ISOLATION,
        default="read_uncommitted",
        help="read_uncommitted (default: every record, as Kafka's console consumer shows them) "
        "or read_committed (hide aborted transactional commits)",
    )
    live.add_argument(
        "--timeout",
        type=parse_timeout,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="give up when the cluster does not answer for this long (%(default)g)",
    )

    filters = parser.add_argument_group("filters")
    filters.add_argument(
        "--group", type=parse_regex, metavar="REGEX", help="only groups whose id matches (search)"
    )
    filters.add_argument(
        "--type",
        dest="types",
        action=Repeat,
        type=parse_type,
        metavar="TYPE",
        help="only this record type (repeatable): a key type number or a name, e.g. "
        "offset_commit (types 0 and 1), group_metadata, consumer_group_member_metadata, "
        "share_group_metadata",
    )
    filters.add_argument(
        "--partition",
        dest="partitions",
        action=Repeat,
        type=parse_partition,
        metavar="P",
        help="only this __consumer_offsets partition (repeatable)",
    )
    filters.add_argument(
        "--exclude-tombstones", action="store_true", help="leave out deletions (null values)"
    )
    filters.add_argument(
        "--skip-aborted",
        action="store_true",
        help="leave out records of aborted transactions (segment input)",
    )

    output = parser.add_argument_group("output")
    output.add_argument(
        "--format", choices=FORMATS, default="json", help="output format (%(default)s)"
    )
    output.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE instead of standard output"
    )
    output.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr for file input (default: when stderr is a terminal)",
    )
    # the connection's variables are read by kafka_config (in _open_source)
    apply_env_defaults(parser)
    parser.set_defaults(handler=run)
    return parser


# -- choosing the input ----------------------------------------------------------------------


def _guess_input(paths: list[str]) -> str:
    kinds = set()
    for raw in paths:
        path = Path(raw)
        if raw != "-" and (path.is_dir() or path.suffix == ".log"):
            kinds.add("segments")
        else:
            kinds.add("hex-jsonl")
    if len(kinds) != 1:
        raise UsageError(
            "cannot tell what the paths hold: say --input segments or --input hex-jsonl"
        )
    return kinds.pop()


def _open_source(args: argparse.Namespace, reserved_env: Collection[str]) -> Source:
    from offsetwatch import decode_inputs as inputs

    partitions = frozenset(args.partitions) if args.partitions else None
    try:
        kafka = kafka_config(args, os.environ, reserved_env)
    except ConnectionOptionError as error:
        raise UsageError(str(error)) from None
    kind = args.input
    if args.sample:
        if args.paths or kind is not None:
            raise UsageError("--sample decodes the built-in sample: leave out --input and paths")
        kind = "sample"
    elif kind is None:
        if args.paths:
            kind = _guess_input(args.paths)
        elif "bootstrap.servers" in kafka:
            kind = "topic"
        else:
            raise UsageError(
                "nothing to decode: give --bootstrap-server HOST:PORT (the live topic), "
                "--input segments PATH..., --input hex-jsonl PATH|-, or --sample "
                "(see offsetwatch decode --help)"
            )
    if kind != "topic":
        if args.follow:
            raise UsageError("--follow only applies to the live topic (--bootstrap-server)")
        if args.start.kind != "beginning":
            raise UsageError("--from only applies to the live topic (--bootstrap-server)")
    if kind == "sample":
        return inputs.sample_source()
    if kind == "hex-jsonl":
        return inputs.HexJsonlSource.from_paths(args.paths or ["-"], sys.stdin.buffer)
    if kind == "segments":
        if not args.paths:
            raise UsageError(
                "--input segments needs PATHs: .log files or __consumer_offsets-<p> directories"
            )
        return inputs.SegmentSource(args.paths, partitions, args.max_batch_bytes)
    if args.paths:
        raise UsageError("the live topic takes no PATH (did you mean --input segments?)")
    config = inputs.client_config(None, args.isolation, kafka.items())
    if "bootstrap.servers" not in config:
        raise UsageError("the live topic needs --bootstrap-server HOST:PORT")
    source = inputs.TopicSource(
        config,
        args.topic,
        partitions,
        args.start,
        args.follow,
        args.timeout,
        inputs.Redactor({k: str(v) for k, v in config.items()}),
    )
    try:
        source.open()
    except BaseException:
        source.close()
        raise
    return source


# -- the decode loop -------------------------------------------------------------------------


class Reporter:
    """Problems go to stderr, one line each; counts the failures for the exit code."""

    def __init__(self) -> None:
        self.failures = 0

    def failure(self, message: str) -> None:
        self.failures += 1
        # looked up at each call: the progress bar redirects sys.stderr while it runs
        sys.stderr.write(f"offsetwatch: {message}\n")

    def note(self, message: str) -> None:
        sys.stderr.write(f"offsetwatch: note: {message}\n")


Render = Callable[[Any, "str | None"], Any]


def _renderer(fmt: str) -> Render:
    """record, transaction status -> output line (str), canonical dict (avro), or None (skip)."""
    from offsetwatch.decoder import Canonical, KafkaJson

    if fmt in ("json", "avro"):
        canonical = Canonical()
        # the transaction outcome travels in the record itself (contract.TRANSACTION), in
        # JSON and Avro alike: a reader of either must not count aborted or open commits
        return canonical.to_dict if fmt == "avro" else canonical.to_json
    kafka = KafkaJson()
    # text straight from the records: the same lines as dumps(kafka.dump_log(record)) etc.
    if fmt == "dump-log":
        dump_log_text = kafka.dump_log_text
        return lambda record, status: dump_log_text(record)
    console_text = kafka.console_text
    return lambda record, status: console_text(record)


def _error_line(message: str) -> str:
    from offsetwatch.decoder.canonical import dumps

    return dumps({"error": message})


class DecodeLoop:
    """Turns input chunks into output items, applying the filters."""

    def __init__(self, args: argparse.Namespace, one_per_line: bool, reporter: Reporter) -> None:
        from offsetwatch.decode_inputs import InputRecord, Notice
        from offsetwatch.decoder import Codec, DecodeError, group_of

        self._decode_error = DecodeError
        self._group_of = group_of
        self._input_record = InputRecord
        self._notice = Notice
        self.codec = Codec()
        self.render = _renderer(args.format)
        self.reporter = reporter
        self.one_per_line = one_per_line and args.format != "avro"
        self.partitions = frozenset(args.partitions) if args.partitions else None
        self.types = frozenset().union(*args.types) if args.types else None
        self.group = args.group
        self.exclude_tombstones = bool(args.exclude_tombstones)
        self.skip_aborted = bool(args.skip_aborted)

    def _located(self, error: Exception, item: Any, label: str) -> str:
        if isinstance(error, self._decode_error):
            error = error.at(
                item.partition if item.partition >= 0 else None,
                item.offset if item.offset >= 0 else None,
            )
        where = f" ({label} line {item.line})" if item.line else ""
        return f"{error}{where}"

    def __call__(self, chunk: Chunk) -> list[Any]:
        DecodeError = self._decode_error
        InputRecord = self._input_record
        Notice = self._notice
        group_of = self._group_of
        decode = self.codec.decode
        render = self.render
        one_per_line = self.one_per_line
        partitions = self.partitions
        types = self.types
        group = self.group
        exclude_tombstones = self.exclude_tombstones
        skip_aborted = self.skip_aborted
        prefilter = (
            partitions is not None or types is not None or exclude_tombstones or skip_aborted
        )
        out: list[Any] = []
        append = out.append
        for item in chunk.items:
            if type(item) is not InputRecord:
                if type(item) is Notice:
                    self.reporter.note(item.message)
                    continue
                message = str(item)
                self.reporter.failure(message)
                if one_per_line:
                    append(_error_line(message))
                continue
            partition, offset, timestamp, key, value, status, _line = item
            if prefilter and (
                (partitions is not None and partition not in partitions)
                or (
                    types is not None
                    and (key is None or len(key) < 2 or (key[0] << 8 | key[1]) not in types)
                )
                or (exclude_tombstones and value is None)
                or (skip_aborted and status == "aborted")
            ):
                if one_per_line:
                    append(NULL_LINE)
                continue
            try:
                record = decode(key, value, partition, offset, timestamp)
            except DecodeError as error:
                message = self._located(error, item, chunk.label)
                self.reporter.failure(message)
                if one_per_line:
                    append(_error_line(message))
                continue
            if group is not None:
                group_id = group_of(record)
                if group_id is None or group.search(group_id) is None:
                    if one_per_line:
                        append(NULL_LINE)
                    continue
            rendered = render(record, status)
            if rendered is None:
                if one_per_line:
                    append(NULL_LINE)
                continue
            append(rendered)
        return out


# -- progress bar ----------------------------------------------------------------------------


class _Progress:
    """A rich progress bar on stderr (bytes when the total is known, records always)."""

    def __init__(self, total: int | None, force: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        console = Console(stderr=True, force_terminal=force or None)
        columns: list[Any] = [TextColumn("decoding")]
        if total is not None:
            columns += [BarColumn(), DownloadColumn(), TransferSpeedColumn()]
        columns += [TextColumn("{task.fields[records]:,} records"), TimeElapsedColumn()]
        if total is not None:
            columns.append(TimeRemainingColumn())
        self._progress = Progress(*columns, console=console, transient=True, redirect_stdout=False)
        self._task = self._progress.add_task("decode", total=total, records=0)
        self._records = 0
        self._bytes = 0
        self._next_update = 0.0

    def __enter__(self) -> _Progress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._flush()
        self._progress.stop()

    def advance(self, nbytes: int, records: int) -> None:
        # the bar redraws ~10 times a second: pass it the counts at about that rate
        self._records += records
        self._bytes += nbytes
        now = time.monotonic()
        if now >= self._next_update:
            self._next_update = now + 0.1
            self._flush()

    def _flush(self) -> None:
        self._progress.update(self._task, advance=self._bytes, records=self._records)
        self._bytes = 0


def _want_progress(args: argparse.Namespace, source: Source, output_is_stdout: bool) -> bool:
    if source.flush_each_chunk:  # the live topic: no end to measure
        return False
    if args.progress is not None:
        return bool(args.progress)
    if not _isatty(sys.stderr):
        return False
    # records printed to the same terminal would tear the bar
    return not (output_is_stdout and _isatty(sys.stdout))


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


# -- output ----------------------------------------------------------------------------------


def _binary_stdout() -> IO[bytes]:
    stdout = sys.stdout
    buffer = getattr(stdout, "buffer", None)
    if buffer is None:
        raise UsageError("standard output is not a byte stream: use --output FILE")
    stdout.flush()
    return buffer  # type: ignore[no-any-return]


def _open_output(path: str) -> IO[bytes]:
    try:
        return open(path, "wb")
    except OSError as error:
        raise UsageError(
            f"cannot write {path}: {error.strerror}; check that the directory exists and is "
            "writable"
        ) from None


def run(args: argparse.Namespace) -> int:
    if args.format == "avro" and not args.output:
        raise UsageError("--format avro writes a binary container file: give --output FILE")
    if args.format == "avro":
        try:
            from offsetwatch.decoder.avro import AvroCodec, AvroError
        except ImportError as error:
            raise UsageError(f"--format avro is not available here: {error}") from None
    source = _open_source(args, reserved_env(args))
    try:
        reporter = Reporter()
        loop = DecodeLoop(args, source.one_per_line, reporter)
        output = _binary_stdout() if not args.output else _open_output(args.output)
        try:
            progress = (
                _Progress(source.total_bytes, force=bool(args.progress))
                if _want_progress(args, source, not args.output)
                else None
            )

            def outputs() -> Iterator[list[Any]]:
                for chunk in source.chunks():
                    items = loop(chunk)
                    if progress is not None:
                        progress.advance(chunk.nbytes, len(chunk.items))
                    yield items

            try:
                if progress is not None:
                    progress.__enter__()
                if args.format == "avro":
                    output.close()
                    try:
                        AvroCodec().write_container(
                            args.output, (rec for items in outputs() for rec in items)
                        )
                    except AvroError as error:
                        reporter.failure(f"{args.output}: {error}; the Avro file is incomplete")
                else:
                    _write_lines(output, outputs(), source.flush_each_chunk)
            except KeyboardInterrupt:
                if not args.follow:
                    raise
            finally:
                if progress is not None:
                    progress.__exit__(None, None, None)
        finally:
            if args.output:
                output.close()
            else:
                output.flush()
    finally:
        source.close()
    return 1 if reporter.failures else 0


def _write_lines(output: IO[bytes], outputs: Iterator[list[Any]], flush: bool) -> None:
    write = output.write
    for lines in outputs:
        if lines:
            lines.append("")
            # the renderers emit valid UTF-8 text; an escape beats a crash should that change
            write("\n".join(lines).encode("utf-8", "backslashreplace"))
            if flush:
                output.flush()
