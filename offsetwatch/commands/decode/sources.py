"""Which input `offsetwatch decode` reads: the live topic, segment files, hex JSON lines or the
built-in sample, from the options (or guessed from the paths). The readers themselves are in
`offsetwatch.decode_inputs`; this module only chooses one, checks that the options fit it, and
opens it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Mapping
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Final

from offsetwatch import decode_inputs as inputs
from offsetwatch.commands import UsageError
from offsetwatch.core.connection import (
    ConnectionOptionError,
    check_client_config,
    kafka_config_origins,
    probe_cluster,
)
from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC


def open_source(
    stack: ExitStack, args: argparse.Namespace, reserved_env: Collection[str]
) -> inputs.Source:
    """The input the options ask for, ready to read; the stack closes it."""
    try:
        kafka, origins = kafka_config_origins(args, os.environ, reserved_env)
    except ConnectionOptionError as error:
        raise UsageError(str(error)) from None
    kind = _input_kind(args, kafka)
    if kind == "topic":
        source = stack.enter_context(closing(_topic_source(args, kafka, origins)))
        # connects: the stack closes the consumer should that fail half way
        source.open()
        return source
    return stack.enter_context(closing(_file_source(kind, args)))


#: the topics decode reads by design
INTERNAL_TOPICS: Final = (OFFSETS_TOPIC, SHARE_STATE_TOPIC)


def _input_kind(args: argparse.Namespace, kafka: Mapping[str, str]) -> str:
    kind: str | None = args.input
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
    return kind


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


def _partitions(args: argparse.Namespace) -> frozenset[int] | None:
    return frozenset(args.partitions) if args.partitions else None


def _file_source(kind: str, args: argparse.Namespace) -> inputs.Source:
    if kind == "sample":
        return inputs.sample_source()
    if kind == "hex-jsonl":
        return inputs.HexJsonlSource.from_paths(args.paths or ["-"], sys.stdin.buffer)
    if not args.paths:
        raise UsageError(
            "--input segments needs PATHs: .log files or __consumer_offsets-<p> directories"
        )
    return inputs.SegmentSource(args.paths, _partitions(args), args.max_batch_bytes)


def _topic_source(
    args: argparse.Namespace, kafka: Mapping[str, str], origins: Mapping[str, str]
) -> inputs.TopicSource:
    if args.paths:
        raise UsageError("the live topic takes no PATH (did you mean --input segments?)")
    if args.topic not in INTERNAL_TOPICS:
        # a copy of __consumer_offsets (MirrorMaker's) is a real use; a data topic is a typo
        sys.stderr.write(
            f"offsetwatch: note: --topic {args.topic} is not {' or '.join(INTERNAL_TOPICS)}: "
            "its records are decoded as offsets records (a copy of the topic decodes; a data "
            "topic's records end as decode errors)\n"
        )
    config = inputs.client_config(None, args.isolation, kafka.items())
    if "bootstrap.servers" not in config:
        raise UsageError("the live topic needs --bootstrap-server HOST:PORT")
    try:
        # names the -X flag or the variable a bad property came from
        check_client_config(config, origins, "consumer")
        # one line with librdkafka's reason (a refused login, a TLS listener spoken to in
        # plaintext) as soon as it is known, instead of a metadata call's whole --timeout
        # ending in "Broker transport failure"
        probe_cluster(config, origins, args.timeout)
    except ConnectionOptionError as error:
        raise UsageError(str(error)) from None
    return inputs.TopicSource(
        config,
        args.topic,
        _partitions(args),
        args.start,
        args.follow,
        args.timeout,
        inputs.Redactor({k: str(v) for k, v in config.items()}),
    )
