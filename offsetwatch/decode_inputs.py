"""Where `offsetwatch decode` reads records from: hex JSON lines, log segments, a live topic.

Every source yields *chunks*: `Chunk(items, nbytes, label)`, one per record batch (segments),
per block of lines (hex-jsonl) or per consume call (live topic). The decode loop writes each
chunk's output with one write, and the progress bar advances by `nbytes` of input read.

An item is one of

* `InputRecord(partition, offset, timestamp, key, value, status, line)`: the raw bytes of one
  record of `__consumer_offsets` (`value` None for a tombstone; `key` None only in broken
  input). `status` is the transaction outcome ("committed", "aborted", "pending") of a record
  of a transactional batch, known only from segment files (None otherwise); `line` is the
  input line (hex-jsonl) for messages, 0 elsewhere; partition/offset/timestamp are -1 where
  the input does not say;
* `BadInput(where, reason)`: input that does not even form a record (a line that is not JSON,
  a corrupt batch): reported on stderr and counted as a failure;
* `Notice(message)`: worth telling the operator, not a failure (a partial write at the end of
  a segment, transient client errors).

Sources raise `UsageError` for problems the operator must fix before anything can be read
(missing files, an unreachable cluster, a topic that does not exist). A file or directory that
exists but cannot be read (permissions, an I/O error) is a `BadInput` naming it: like `cat a b`,
the readable inputs are still decoded and the exit code says something was missed.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, NamedTuple

from offsetwatch.commands import UsageError
from offsetwatch.core.topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from offsetwatch.decoder.segments import TransactionResolver

__all__ = [
    "BadInput",
    "Chunk",
    "HexJsonlSource",
    "InputRecord",
    "Item",
    "Notice",
    "Redactor",
    "SegmentSource",
    "Source",
    "StartPosition",
    "TopicSource",
    "sample_source",
]

HEX_CHUNK_LINES: Final = 1000
SEGMENT_CHUNK_RECORDS: Final = 500
SAMPLE_FILE: Final = "consumer-offsets.hex.jsonl"


class InputRecord(NamedTuple):
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    status: str | None = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class BadInput:
    where: str
    reason: str
    #: a whole input that could not be read: it stands for none of its lines, so hex-jsonl's
    #: one output line per input line gets no {"error"} line for it
    whole_input: bool = False

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Notice:
    message: str


Item = InputRecord | BadInput | Notice


class Chunk(NamedTuple):
    items: list[Item]
    #: input bytes consumed since the previous chunk (0 when unknown)
    nbytes: int
    #: where the items come from, for messages ("dump.jsonl", "stdin", "topic __consumer_offsets")
    label: str


class Source:
    """What the decode loop needs from an input."""

    #: total input size for the progress bar; None when unknown (stdin, a live topic)
    total_bytes: int | None = None
    #: one output line per input line (hex-jsonl)
    one_per_line: bool = False
    #: flush the output after every chunk (live topic: records appear as they arrive)
    flush_each_chunk: bool = False

    def chunks(self) -> Iterator[Chunk]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the source holds (a Kafka client); called once, after the loop."""


# -- hex JSON lines --------------------------------------------------------------------------


Opener = Callable[[], IO[bytes]]


class HexJsonlSource(Source):
    """Lines like `{"key": "<hex>", "value": "<hex>"|null, "partition": 3, "offset": 120,
    "timestamp": 1795291757128}` (as in records.jsonl; other fields are ignored, partition /
    offset / timestamp are optional). Blank lines are skipped."""

    one_per_line = True

    def __init__(self, inputs: Sequence[tuple[str, Opener, int | None]]) -> None:
        self._inputs = inputs
        sizes = [size for _, _, size in inputs]
        self.total_bytes = None if any(s is None for s in sizes) else sum(s or 0 for s in sizes)

    @classmethod
    def from_paths(cls, paths: Sequence[str], stdin: IO[bytes]) -> HexJsonlSource:
        inputs: list[tuple[str, Opener, int | None]] = []
        for path in paths:
            if path == "-":
                inputs.append(("stdin", lambda: stdin, None))
                continue
            file = Path(path)
            try:
                mode = file.stat().st_mode
            except OSError as error:
                what = "does not exist" if error.errno == errno.ENOENT else error.strerror
                raise UsageError(
                    f"hex-jsonl input {path}: {what}; give a file of hex JSON lines "
                    "(or - for standard input)"
                ) from None
            if stat.S_ISDIR(mode):
                raise UsageError(
                    f"hex-jsonl input {path} is a directory: give a file of hex JSON lines "
                    "(or - for standard input)"
                )
            # a pipe (`decode <(kcat ...)`, a FIFO) is read as it comes, of no known size
            size = file.stat().st_size if stat.S_ISREG(mode) else None
            inputs.append((path, _file_opener(file), size))
        return cls(inputs)

    def chunks(self) -> Iterator[Chunk]:
        for label, opener, _size in self._inputs:
            try:
                stream = opener()
            except OSError as error:
                yield Chunk([unreadable(label, error)], 0, label)
                continue
            try:
                yield from self._read(stream, label)
            except OSError as error:  # an I/O error half way: what was read stands
                yield Chunk([unreadable(label, error)], 0, label)
            finally:
                if label != "stdin":
                    stream.close()

    def _read(self, stream: IO[bytes], label: str) -> Iterator[Chunk]:
        parse = _parse_line
        items: list[Item] = []
        nbytes = 0
        for number, line in enumerate(stream, 1):
            nbytes += len(line)
            if line.isspace():
                continue
            items.append(parse(line, number, label))
            if len(items) >= HEX_CHUNK_LINES:
                yield Chunk(items, nbytes, label)
                items = []
                nbytes = 0
        if items or nbytes:
            yield Chunk(items, nbytes, label)


def unreadable(where: str | Path, error: OSError) -> BadInput:
    """An input that exists but cannot be read: named, skipped, counted as a failure."""
    reason = error.strerror or str(error)
    return BadInput(
        str(where), f"cannot read it ({reason}): skipped; check its permissions", whole_input=True
    )


def _file_opener(path: Path) -> Opener:
    return lambda: path.open("rb")


_loads: Final = json.loads


def _parse_line(line: bytes, number: int, label: str) -> InputRecord | BadInput:
    try:
        obj = _loads(line)
    except ValueError as error:
        return BadInput(f"{label} line {number}", f"not a JSON line: {error}")
    if type(obj) is not dict:
        return BadInput(f"{label} line {number}", "not a JSON object")
    try:
        key_hex = obj["key"]
        value_hex = obj.get("value")
        key = None if key_hex is None else bytes.fromhex(key_hex)
        value = None if value_hex is None else bytes.fromhex(value_hex)
    except KeyError:
        return BadInput(f"{label} line {number}", 'no "key" field')
    except (ValueError, TypeError) as error:
        return BadInput(f"{label} line {number}", f"key/value is not a hex string: {error}")
    partition = obj.get("partition", -1)
    offset = obj.get("offset", -1)
    timestamp = obj.get("timestamp", -1)
    if type(partition) is not int or type(offset) is not int or type(timestamp) is not int:
        return BadInput(
            f"{label} line {number}", "partition, offset and timestamp must be integers"
        )
    return InputRecord(partition, offset, timestamp, key, value, None, number)


def sample_source() -> HexJsonlSource:
    """The built-in sample (34 records of a Kafka 4.0.0 `__consumer_offsets`: every record type
    the broker wrote, tombstones included), in hex-jsonl form."""
    from importlib.resources import files

    resource = files("offsetwatch").joinpath("samples", SAMPLE_FILE)
    return HexJsonlSource([("sample", lambda: resource.open("rb"), None)])


# -- log segment files -----------------------------------------------------------------------


@dataclass(slots=True)
class _PartitionFiles:
    partition: int | None
    directory: Path
    files: list[Path] = field(default_factory=list)


class SegmentSource(Source):
    """Kafka log segment files (`<baseOffset>.log`), as kafka-dump-log reads them.

    Paths may be segment files, `__consumer_offsets-<p>` partition directories (every .log in
    base-offset order) or a Kafka log directory holding such partition directories. The
    partition comes from the directory name. Transactions are resolved per partition with
    `offsetwatch.decoder.segments.TransactionResolver`: records of a transactional batch are
    released when
    their COMMIT/ABORT marker arrives (the order the group coordinator applies them in) and the
    still-open ones come last with status "pending".
    """

    def __init__(
        self,
        paths: Sequence[str],
        partitions: frozenset[int] | None = None,
        max_batch_bytes: int | None = None,
    ) -> None:
        from offsetwatch.decoder.compression import DEFAULT_MAX_BATCH_BYTES
        from offsetwatch.decoder.segments import partition_of_dir

        self.max_batch_bytes = max_batch_bytes or DEFAULT_MAX_BATCH_BYTES

        groups: dict[Path, _PartitionFiles] = {}
        #: inputs that exist but cannot be listed: reported first by chunks()
        self._unreadable: list[BadInput] = []

        def group(directory: Path) -> _PartitionFiles:
            found = groups.get(directory)
            if found is None:
                found = groups[directory] = _PartitionFiles(partition_of_dir(directory), directory)
            return found

        for raw in paths:
            path = Path(raw)
            if path.is_file():
                group(path.resolve().parent).files.append(path.resolve())
            elif path.is_dir():
                try:
                    logs = _log_files(path)
                    subdirs = [] if logs else _offsets_dirs(path)
                except OSError as error:
                    self._unreadable.append(unreadable(raw, error))
                    continue
                if logs:
                    group(path.resolve()).files.extend(logs)
                    continue
                if not subdirs:
                    raise UsageError(
                        f"no segment files in {raw}: give .log files, a {OFFSETS_TOPIC}-<p> "
                        f"directory or a Kafka log directory holding {OFFSETS_TOPIC}-* "
                        "directories"
                    )
                for sub in sorted(subdirs, key=lambda d: partition_of_dir(d) or 0):
                    try:
                        group(sub.resolve()).files.extend(_log_files(sub.resolve()))
                    except OSError as error:
                        self._unreadable.append(unreadable(sub, error))
            else:
                raise UsageError(
                    f"segment input {raw} does not exist: give .log files or "
                    f"{OFFSETS_TOPIC}-<p> directories"
                )
        selected = []
        for item in groups.values():
            if partitions is not None and item.partition not in partitions:
                continue
            item.files = sorted(set(item.files), key=_base_offset)
            selected.append(item)
        self._groups = selected
        self.total_bytes = sum(f.stat().st_size for g in selected for f in g.files)

    def chunks(self) -> Iterator[Chunk]:
        from offsetwatch.decoder.segments import TransactionResolver

        if self._unreadable:
            yield Chunk(list(self._unreadable), 0, "segments")
        for item in self._groups:
            partition = -1 if item.partition is None else item.partition
            if item.partition is None:
                yield Chunk(
                    [
                        Notice(
                            f"{item.directory} is not named {OFFSETS_TOPIC}-<partition>: "
                            "its records get partition -1"
                        )
                    ],
                    0,
                    str(item.directory),
                )
            resolver = TransactionResolver()
            last = item.files[-1] if item.files else None
            for file in item.files:
                yield from self._read_file(
                    file, partition, resolver, self.max_batch_bytes, active=file == last
                )
            pending = resolver.pending()
            if pending:
                yield Chunk(
                    [
                        InputRecord(partition, r.offset, r.timestamp, r.key, r.value, status, 0)
                        for r, status in pending
                    ],
                    0,
                    str(item.directory),
                )

    @staticmethod
    def _read_file(
        file: Path,
        partition: int,
        resolver: TransactionResolver,
        max_batch_bytes: int,
        *,
        active: bool = True,
    ) -> Iterator[Chunk]:
        """One segment file (`active`: the partition's last one, the only one Kafka may have
        left a partial write at the end of); small batches are gathered into chunks of about
        SEGMENT_CHUNK_RECORDS records (a single-record batch per chunk would cost more in
        per-chunk work than its record costs to decode)."""
        from offsetwatch.decoder.errors import DecodeError
        from offsetwatch.decoder.segments import SegmentReader

        label = str(file)
        size = file.stat().st_size
        done = 0  # bytes of the file already reported
        feed = resolver.feed
        new_tuple = tuple.__new__
        input_record = InputRecord
        items: list[Item] = []

        def bad_batch(error: DecodeError) -> None:
            # the batch's length was sound: report it and go on with the next batch
            items.append(BadInput(label, f"{error.at(partition, error.offset)}; batch skipped"))

        reader = SegmentReader(
            path=file, verify_crc=False, on_error=bad_batch, max_batch_bytes=max_batch_bytes
        )
        try:
            for batch in _readable(reader, file, items):
                header = batch.header
                if not header.crc_valid:
                    items.append(
                        BadInput(
                            f"{file}: partition {partition}",
                            f"batch at byte {header.position} (offsets "
                            f"{header.base_offset}..{header.last_offset}): CRC mismatch "
                            f"(stored {header.crc}); its records are decoded anyway",
                        )
                    )
                if not header.is_transactional and not header.is_control:
                    # what feed() releases at once with no status: built here in one pass,
                    # tuple.__new__ skips the NamedTuple's Python-level __new__ (a 1M-record
                    # segment of plain commits spends ~0.15 s less)
                    items += [
                        new_tuple(
                            input_record,
                            (partition, r.offset, r.timestamp, r.key, r.value, None, 0),
                        )
                        for r in batch.records
                    ]
                elif released := feed(batch):
                    items += [
                        InputRecord(
                            partition,
                            record.offset,
                            record.timestamp,
                            record.key,
                            record.value,
                            status if record.is_transactional else None,
                        )
                        for record, status in released
                    ]
                if len(items) >= SEGMENT_CHUNK_RECORDS:
                    end = header.position + header.size
                    yield Chunk(items, end - done, label)
                    items = []
                    done = end
        except DecodeError as error:
            located = error.at(partition, error.offset)
            items.append(BadInput(label, f"{located}; the rest of this file is skipped"))
        tail = reader.truncated_tail
        if tail is not None and tail.reason != "zero padding":
            if active:
                items.append(
                    Notice(
                        f"{file}: {tail.reason} at byte {tail.position} "
                        f"({tail.available} bytes) ignored, as Kafka does on recovery"
                    )
                )
            else:
                # Kafka appends only to the last segment: a rolled one ends whole
                items.append(
                    BadInput(
                        label,
                        f"{tail.reason} at byte {tail.position} ({tail.available} bytes"
                        + ("" if tail.needed is None else f" of the {tail.needed} it claims")
                        + ") in a rolled segment, which Kafka never appends to: the file is "
                        "cut short or a batch length is corrupt",
                    )
                )
        yield Chunk(items, max(size - done, 0), label)


def _base_offset(path: Path) -> tuple[int, str]:
    return (int(path.stem), path.name) if path.stem.isdigit() else (-1, path.name)


def _readable(reader: Iterable[Any], file: Path, items: list[Item]) -> Iterator[Any]:
    """The reader's batches; an OSError (no permission, an I/O error) ends them with a
    BadInput naming the file, after the batches read so far."""
    try:
        yield from reader
    except OSError as error:
        items.append(unreadable(file, error))


def _log_files(directory: Path) -> list[Path]:
    """The .log files of a directory, in base-offset order. Listed with os.scandir, not glob:
    glob answers nothing for a directory it may not read, which would read as "no segment
    files" instead of "cannot read"."""
    with os.scandir(directory) as entries:
        names = [e.name for e in entries if e.name.endswith(".log") and e.is_file()]
    return sorted((directory.joinpath(n).resolve() for n in names), key=_base_offset)


def _offsets_dirs(directory: Path) -> list[Path]:
    with os.scandir(directory) as entries:
        return [Path(e.path) for e in entries if e.is_dir() and _is_offsets_dir(Path(e.path))]


def _is_offsets_dir(path: Path) -> bool:
    name = path.name
    prefix = OFFSETS_TOPIC + "-"
    return name.startswith(prefix) and name[len(prefix) :].isdigit()


# -- live topic ------------------------------------------------------------------------------

#: librdkafka properties whose values must never reach a terminal or a log
_SECRET_WORDS: Final = ("password", "secret", "jaas", "token", "pem", "ssl.key", "oauthbearer")


class Redactor:
    """Replaces the values of secret client properties in any text shown to the operator."""

    def __init__(self, properties: dict[str, str]) -> None:
        self._secrets = sorted(
            {
                value
                for key, value in properties.items()
                if value and any(word in key.lower() for word in _SECRET_WORDS)
            },
            key=len,
            reverse=True,
        )

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


@dataclass(frozen=True, slots=True)
class StartPosition:
    """Where to start reading: "beginning", "end", or the first record at/after `timestamp`."""

    kind: str
    timestamp: int = -1


def _kafka_text(error: BaseException) -> str:
    """The message of a KafkaException (its KafkaError's text), else str(error)."""
    first = error.args[0] if error.args else None
    text = getattr(first, "str", None)
    return str(text()) if callable(text) else str(error)


#: how often `decode --follow` asks which cluster answers, and how long it waits for that
#: answer (a cluster wiped and replaced behind the same address tells only by its id)
CLUSTER_CHECK_S: Final = 5.0
CLUSTER_ASK_S: Final = 2.0


def _own_group_refused(error: Any) -> bool:
    """GROUP_AUTHORIZATION_FAILED is about the consumer's own group id (confluent-kafka
    requires one), which reading by assignment never joins nor commits to: no group ACL is
    needed, so it is not a problem of the read."""
    from confluent_kafka import KafkaError

    code = getattr(error, "code", None)
    return callable(code) and code() == KafkaError.GROUP_AUTHORIZATION_FAILED


class TopicSource(Source):
    """Records of the live topic through librdkafka (confluent-kafka), partitions assigned
    directly (no group membership, nothing committed).

    Without `follow`, every partition is read up to the high watermark seen at start (or to its
    end as the isolation level sees it: read_committed stops at the last stable offset).
    """

    flush_each_chunk = True

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        partitions: frozenset[int] | None,
        start: StartPosition,
        follow: bool,
        timeout: float,
        redact: Redactor,
        chunk_size: int = 1000,
    ) -> None:
        self._config = config
        self._topic = topic
        self._wanted = partitions
        self._start = start
        self._follow = follow
        self._timeout = timeout
        self._redact = redact
        self._chunk_size = chunk_size
        self._consumer: Any = None
        self._client_errors: list[str] = []
        self._assignment: list[Any] = []
        #: partition -> high watermark at start, for the partitions still to read
        self._remaining: dict[int, int] = {}
        #: Kafka's id of the cluster read (metadata): --follow compares it with every later
        #: answer, since a cluster wiped and replaced behind the same address keeps the address
        self._cluster_id: str | None = None
        #: a client error (a lost connection) since the cluster id was last confirmed: what
        #: arrives next may come from another cluster, read at this one's positions
        self._suspect = False
        #: the cluster changed and its topic is not assigned yet (it may not exist yet)
        self._moved = False
        self._next_check = 0.0

    @property
    def _bootstrap(self) -> str:
        return str(self._config.get("bootstrap.servers", "?"))

    def _on_error(self, error: Any) -> None:
        if _own_group_refused(error):
            return
        self._suspect = True
        text = self._redact(str(error.str() if hasattr(error, "str") else error))
        if text not in self._client_errors:
            self._client_errors.append(text)

    def _last_error(self) -> str:
        return f" (last client error: {self._client_errors[-1]})" if self._client_errors else ""

    def open(self) -> None:
        """Connect, find the partitions and where to start; UsageError when that fails."""
        from confluent_kafka import Consumer, KafkaException

        config = dict(self._config)
        config["error_cb"] = self._on_error
        try:
            consumer = Consumer(config)
        except (KafkaException, ValueError, TypeError) as error:
            raise UsageError(
                f"invalid Kafka client configuration: {self._redact(_kafka_text(error))} "
                "(check -X KEY=VALUE properties)"
            ) from None
        self._consumer = consumer
        topic = self._topic
        try:
            metadata = consumer.list_topics(topic, timeout=self._timeout)
        except KafkaException as error:
            reason = self._redact(_kafka_text(error)) + self._last_error()
            raise UsageError(
                f"cannot get metadata of topic {topic} from {self._bootstrap} within "
                f"{self._timeout:g}s: {reason}; check --bootstrap-server and the -X security "
                "settings (security.protocol, sasl.*, ssl.*)"
            ) from None
        self._cluster_id = metadata.cluster_id or None
        info = metadata.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            reason = "" if info is None or info.error is None else f": {info.error.str()}"
            raise UsageError(
                f"topic {topic} is not available on {self._bootstrap}{reason}; check --topic"
            )
        self._suspect = False
        self._assignment = self._plan(sorted(info.partitions), self._start)
        consumer.assign(self._assignment)

    def _plan(self, available: list[int], start: StartPosition) -> list[Any]:
        """Where to read each partition from; UsageError when the cluster cannot say."""
        from confluent_kafka import KafkaException, TopicPartition

        consumer, topic = self._consumer, self._topic
        if self._wanted is not None:
            missing = sorted(self._wanted - set(available))
            if missing:
                raise UsageError(
                    f"topic {topic} has no partition {', '.join(map(str, missing))} "
                    f"(it has 0..{available[-1]}); check --partition"
                )
            partitions = sorted(self._wanted)
        else:
            partitions = available
        try:
            watermarks = {
                p: consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=self._timeout, cached=False
                )
                for p in partitions
            }
            starts = self._start_offsets(partitions, watermarks, start)
        except KafkaException as error:
            raise UsageError(
                f"cannot list the offsets of {topic} on {self._bootstrap}: "
                f"{self._redact(_kafka_text(error))}{self._last_error()}"
            ) from None
        for p in partitions:
            if watermarks[p] is None:
                raise UsageError(f"no offsets for {topic} partition {p}{self._last_error()}")
            high = watermarks[p][1]
            if starts[p] < high:
                self._remaining[p] = high
        return [TopicPartition(topic, p, starts[p]) for p in partitions]

    def _start_offsets(
        self, partitions: list[int], watermarks: dict[int, tuple[int, int]], start: StartPosition
    ) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        kind = start.kind
        if kind == "beginning":
            return {p: watermarks[p][0] for p in partitions}
        if kind == "end":
            return {p: watermarks[p][1] for p in partitions}
        found = self._consumer.offsets_for_times(
            [TopicPartition(self._topic, p, start.timestamp) for p in partitions],
            timeout=self._timeout,
        )
        starts = {}
        for tp in found:
            if tp.error is not None:
                raise UsageError(
                    f"cannot look up offsets by time for partition {tp.partition}: "
                    f"{self._redact(tp.error.str())}"
                )
            # -1: no record at or after the timestamp; start at the end
            starts[tp.partition] = tp.offset if tp.offset >= 0 else watermarks[tp.partition][1]
        return starts

    def chunks(self) -> Iterator[Chunk]:
        from confluent_kafka import KafkaError

        if self._consumer is None:
            self.open()
        consumer = self._consumer
        follow = self._follow
        remaining = self._remaining
        label = f"topic {self._topic}"
        eof = KafkaError._PARTITION_EOF
        consume = consumer.consume
        chunk_size = self._chunk_size
        seen_errors = 0
        last_data = time.monotonic()
        while follow or remaining:
            messages = consume(num_messages=chunk_size, timeout=0.5)
            items: list[Item] = []
            append = items.append
            if follow and (
                self._moved or (self._suspect and messages) or time.monotonic() >= self._next_check
            ):
                messages = self._same_cluster(messages, items)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == eof:
                        remaining.pop(message.partition(), None)
                    elif not _own_group_refused(error):
                        append(
                            BadInput(
                                f"{label} partition {message.partition()}",
                                self._redact(error.str()),
                            )
                        )
                    continue
                partition = message.partition()
                offset = message.offset()
                if not follow:
                    end = remaining.get(partition)
                    if end is None or offset >= end:
                        continue  # written after we started
                    if offset >= end - 1:
                        del remaining[partition]
                append(
                    InputRecord(
                        partition,
                        offset,
                        message.timestamp()[1],
                        message.key(),
                        message.value(),
                    )
                )
            while seen_errors < len(self._client_errors):
                append(Notice(f"kafka: {self._client_errors[seen_errors]}"))
                seen_errors += 1
            now = time.monotonic()
            if messages:
                last_data = now
            elif not follow and now - last_data > self._timeout:
                parts = ", ".join(map(str, sorted(remaining)))
                append(
                    BadInput(
                        label,
                        f"no data for {self._timeout:g}s from partition(s) {parts}: stopped "
                        f"before their high watermark{self._last_error()}",
                    )
                )
                remaining.clear()
            if items:
                yield Chunk(items, 0, label)

    def _same_cluster(self, messages: list[Any], items: list[Item]) -> list[Any]:
        """--follow: `messages` if the cluster read so far answers, else none (notices go to
        `items`). A cluster wiped and replaced behind the same address would otherwise be read
        at the dead one's positions: nothing while its log is shorter, the wrong records once
        it is longer."""
        from confluent_kafka import KafkaException

        self._next_check = time.monotonic() + (1.0 if self._moved else CLUSTER_CHECK_S)
        try:
            metadata = self._consumer.list_topics(
                self._topic, timeout=min(self._timeout, CLUSTER_ASK_S)
            )
        except KafkaException:
            # no answer now: records that came after a lost connection are not vouched for;
            # read them again once the cluster is known
            if self._suspect:
                self._rewind(messages)
                return []
            return messages
        cluster_id = metadata.cluster_id or None
        if cluster_id is None or cluster_id == self._cluster_id:
            self._suspect = False
            if not self._moved:
                return messages
        else:
            previous, self._cluster_id = self._cluster_id, cluster_id
            self._suspect, self._moved = False, True
            self._consumer.assign([])  # stop reading the new log at the old positions
            start = self._start if self._start.kind == "time" else StartPosition("beginning")
            where = "its beginning" if start.kind == "beginning" else "--from's time"
            items.append(
                Notice(
                    f"the cluster behind {self._bootstrap} changed: cluster {previous} was "
                    f"replaced by cluster {cluster_id}; reading {self._topic} of the new cluster "
                    f"from {where}"
                )
            )
        info = metadata.topics.get(self._topic)
        if info is None or info.error is not None or not info.partitions:
            return []  # not created on the new cluster yet: asked again in a second
        start = self._start if self._start.kind == "time" else StartPosition("beginning")
        try:
            self._assignment = self._plan(sorted(info.partitions), start)
        except UsageError as error:
            items.append(Notice(f"{error} (trying again)"))
            return []
        self._consumer.assign(self._assignment)
        self._moved = False
        return []

    def _rewind(self, messages: list[Any]) -> None:
        """Seek back to the first of `messages` in each partition (fetched again later)."""
        from confluent_kafka import TopicPartition

        first: dict[int, int] = {}
        for message in messages:
            if message.error() is None:
                first.setdefault(message.partition(), message.offset())
        for partition, offset in first.items():
            self._consumer.seek(TopicPartition(self._topic, partition, offset))

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()


def client_config(
    bootstrap: str | None,
    isolation: str,
    properties: Iterable[tuple[str, str]],
) -> dict[str, Any]:
    """The consumer configuration: our defaults, then -X properties, then what decoding needs."""
    config: dict[str, Any] = {
        "group.id": "offsetwatch-decode",
        "isolation.level": isolation,
        "client.id": "offsetwatch-decode",
        # librdkafka's own log lines (one per reconnect attempt) would drown our messages;
        # errors still arrive through error_cb. -X log_level=7 / -X debug=... bring them back.
        "log_level": 0,
        "log.connection.close": False,
    }
    if bootstrap:
        config["bootstrap.servers"] = bootstrap
    for key, value in properties:
        if key == "bootstrap.servers" and bootstrap:
            continue  # --bootstrap-server wins
        config[key] = value
    if "debug" in config and "log_level" not in dict(properties):
        config["log_level"] = 7
    # assign() only: never join a group, never commit; EOF events end the run
    config["enable.auto.commit"] = False
    config["enable.auto.offset.store"] = False
    config["enable.partition.eof"] = True
    return config
