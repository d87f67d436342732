"""The decode loop of `offsetwatch decode`: input chunks -> output items, with the filters and
the renderers, and the stderr reporter of what could not be decoded."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from offsetwatch.commands import UsageError
from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decode_inputs import BadInput, Chunk, InputRecord, Notice, Source
from offsetwatch.decoder import Canonical, Codec, DecodeError, KafkaJson, group_of, share_state
from offsetwatch.decoder.canonical import dumps
from offsetwatch.decoder.kafka_json import RawCommitLines

#: what hex-jsonl input gets for a record that is filtered out or skipped (one line per line)
NULL_LINE: Final = "null"


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

#: `<topic>-<partition>`, as Kafka names a partition's log directory
_PARTITION_DIR: Final = re.compile(r"(.+)-(\d+)")


def topic_of(args: argparse.Namespace) -> str:
    """Which internal topic the input holds, so which decoder applies: the live topic's
    `--topic`; for paths, the `<topic>-<p>` directory they are (or are in), else `--topic`."""
    named = set()
    for raw in args.paths or ():
        path = Path(raw)
        directory = path if path.is_dir() else path.parent
        match = _PARTITION_DIR.fullmatch(directory.name)
        if match and match.group(1) in (OFFSETS_TOPIC, share_state.SHARE_STATE_TOPIC):
            named.add(match.group(1))
    if len(named) > 1:
        raise UsageError(
            f"the paths hold both {' and '.join(sorted(named))}: decode one topic at a time"
        )
    topic: str = named.pop() if named else args.topic
    if topic == share_state.SHARE_STATE_TOPIC and args.format == "console":
        raise UsageError(
            f"--format console is what Kafka's {OFFSETS_TOPIC} formatters print; for {topic} "
            "use --format json, dump-log or avro"
        )
    return topic


def _share_state_renderer(fmt: str) -> Render:
    """The renderers of `__share_group_state` records (same formats, that topic's shapes)."""
    if fmt == "json":
        return share_state.canonical_json
    if fmt == "avro":
        return share_state.canonical
    return lambda record, status: share_state.dump_log_text(record)


def _renderer(fmt: str) -> Render:
    """record, transaction status -> output line (str), canonical dict (avro), or None (skip)."""
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


#: the renderer RawCommitLines stands in for (benchmarks swap `_renderer` for their own)
_BUILTIN_RENDERER: Final = _renderer


def _error_line(message: str) -> str:
    return dumps({"error": message})


class DecodeLoop:
    """Turns input chunks into output items, applying the filters."""

    def __init__(
        self,
        args: argparse.Namespace,
        one_per_line: bool,
        reporter: Reporter,
        topic: str | None = None,
    ) -> None:
        if topic is None:
            topic = topic_of(args)
        self.topic = topic
        self.codec: Codec | share_state.ShareStateCodec = Codec()
        # a module global on purpose: benchmarks/dump_log.py swaps in its naive renderer
        self.render = _renderer(args.format)
        self.group_of: Callable[[Any], str | None] = group_of
        if topic == share_state.SHARE_STATE_TOPIC:
            # its key types 0/1 are not offset commits: another table, other record shapes
            self.codec = share_state.ShareStateCodec()
            self.render = _share_state_renderer(args.format)
            self.group_of = share_state.group_of
        self.reporter = reporter
        self.one_per_line = one_per_line and args.format != "avro"
        self.partitions = frozenset(args.partitions) if args.partitions else None
        self.types = frozenset().union(*args.types) if args.types else None
        self.group = args.group
        self.exclude_tombstones = bool(args.exclude_tombstones)
        self.skip_aborted = bool(args.skip_aborted)
        #: whether records are filtered before they are decoded
        self.prefiltered = (
            self.partitions is not None
            or self.types is not None
            or self.exclude_tombstones
            or self.skip_aborted
        )
        # dump-log lines of plain offset commits straight from their bytes (the bulk of a
        # segment); not with --group, which needs the decoded key, nor when the renderer was
        # swapped (benchmarks/dump_log.py compares against its naive one)
        self.raw_commits: RawCommitLines | None = None
        if (
            args.format == "dump-log"
            and topic != share_state.SHARE_STATE_TOPIC
            and self.group is None
            and _renderer is _BUILTIN_RENDERER
        ):
            self.raw_commits = RawCommitLines()

    def outputs(
        self, source: Source, advance: Callable[[int, int], None] | None
    ) -> Iterator[list[Any]]:
        """The output items of each chunk of the source; `advance(bytes, records)` is told
        after each chunk (the progress bar)."""
        for chunk in source.chunks():
            items = self(chunk)
            if advance is not None:
                advance(chunk.nbytes, len(chunk.items))
            yield items

    def _located(self, error: Exception, item: Any, label: str) -> str:
        if isinstance(error, DecodeError):
            error = error.at(
                item.partition if item.partition >= 0 else None,
                item.offset if item.offset >= 0 else None,
            )
        where = f" ({label} line {item.line})" if item.line else ""
        return f"{error}{where}"

    def __call__(self, chunk: Chunk) -> list[Any]:
        raw_commits = self.raw_commits
        if raw_commits is not None and not self.prefiltered:
            return raw_commits.lines(
                chunk.items, InputRecord, lambda items: self._items(items, chunk.label)
            )
        return self._items(chunk.items, chunk.label)

    def _items(self, items: list[Any], label: str) -> list[Any]:
        # locals, bound once per chunk: the loop below runs once per record
        input_record = InputRecord
        notice = Notice
        decode_error = DecodeError
        group_of_record = self.group_of
        decode = self.codec.decode
        render = self.render
        one_per_line = self.one_per_line
        partitions = self.partitions
        types = self.types
        group = self.group
        exclude_tombstones = self.exclude_tombstones
        skip_aborted = self.skip_aborted
        learn = None if self.raw_commits is None else self.raw_commits.learn
        prefilter = self.prefiltered
        out: list[Any] = []
        append = out.append
        for item in items:
            if type(item) is not input_record:
                if type(item) is notice:
                    self.reporter.note(item.message)
                    continue
                message = str(item)
                self.reporter.failure(message)
                if one_per_line and not (type(item) is BadInput and item.whole_input):
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
            except decode_error as error:
                message = self._located(error, item, label)
                self.reporter.failure(message)
                if one_per_line:
                    append(_error_line(message))
                continue
            if group is not None:
                group_id = group_of_record(record)
                if group_id is None or group.search(group_id) is None:
                    if one_per_line:
                        append(NULL_LINE)
                    continue
            rendered = render(record, status)
            if learn is not None:
                learn(key, value, record, rendered)
            if rendered is None:
                if one_per_line:
                    append(NULL_LINE)
                continue
            append(rendered)
        return out
