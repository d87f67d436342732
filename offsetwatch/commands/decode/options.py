"""The options of `offsetwatch decode`, their value types, and its help text.

Imported by every `offsetwatch` command line (to register the command): keep it light, the
decoder is imported only when a value needs it.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import TYPE_CHECKING, Final

from offsetwatch.commands import INT32_MAX, Repeat, seconds, topic_name
from offsetwatch.core.connection import add_connection_options
from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.instants import InstantRangeError, epoch_or_iso_ms

if TYPE_CHECKING:
    from offsetwatch.decode_inputs import StartPosition

FORMATS: Final = ("json", "dump-log", "console", "avro")
INPUTS: Final = ("topic", "segments", "hex-jsonl")
ISOLATION: Final = ("read_uncommitted", "read_committed")
DEFAULT_TIMEOUT: Final = 30.0

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

__share_group_state (share groups' delivery state, KIP-932) is decoded too: the topic comes
from the input - __share_group_state-<p> segment directories (or files in them), or
--topic __share_group_state for the live topic or hex-jsonl; its records are the types
share_snapshot / share_update, and dump-log is kafka-dump-log --share-group-state-decoder.

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
        timestamp = epoch_or_iso_ms(text)
    except InstantRangeError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a start position: use beginning, end, an ISO-8601 time like "
            "2026-11-20T09:00:00Z (UTC unless it has an offset), or epoch milliseconds"
        ) from None
    if timestamp > time.time() * 1000:
        # every partition would start at its end: say so rather than wait for nothing
        raise argparse.ArgumentTypeError(
            f"{text!r} is in the future: give a past time, or --from end --follow to read "
            "only records written from now on"
        )
    return StartPosition("timestamp", timestamp)


def parse_partition(text: str) -> int:
    try:
        partition = int(text)
    except ValueError:
        partition = -1
    if not 0 <= partition <= INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is not a partition number (0 to {INT32_MAX})")
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


#: shorter than this, librdkafka cannot even connect: the run would fail blaming the cluster
MIN_TIMEOUT_S: Final = 0.1
#: --timeout: finite, at least MIN_TIMEOUT_S, at most librdkafka's longest (int32 ms)
parse_timeout: Final = seconds(MIN_TIMEOUT_S)


MAX_BATCH_BYTES: Final = 64 << 30


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
    if value > MAX_BATCH_BYTES:
        # a bound on what one batch may inflate to in memory: past this it bounds nothing
        raise argparse.ArgumentTypeError(f"{text} is more than the most, 64GiB")
    return value


# -- the parser ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
        "--topic",
        "--offsets-topic",
        default=OFFSETS_TOPIC,
        type=topic_name(),
        help="topic to read (%(default)s; or __share_group_state)",
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
        "watermarks seen at start); a new cluster behind the same address (another cluster "
        "id) is said on stderr and its topic read from its beginning (or --from's time)",
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
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE instead of standard output: FILE.partial while decode runs (with "
        "--follow, until it stops), renamed to FILE when it ends, also on the first Ctrl-C "
        "or SIGTERM; a write error or a kill leaves FILE.partial. A device or FIFO is "
        "written in place",
    )
    output.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr for file input (default: when stderr is a terminal)",
    )
