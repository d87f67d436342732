"""`offsetwatch decode`: records of `__consumer_offsets` -> JSON lines or Avro.

One job per module: `options` (the options and the help), `sources` (which input to read; the
readers themselves are `offsetwatch.decode_inputs`), `loop` (filters and renderers, record by
record), `progress` (the bar on stderr) and `output` (JSON lines or Avro, to stdout or a file).
The loop does per record only what the options ask for: one `Codec.decode`, one rendering, one
list append; output is written with one write per input chunk (a record batch, a block of
lines, a consume call).
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import TYPE_CHECKING

from offsetwatch.commands import apply_env_defaults, reserved_env
from offsetwatch.commands.decode.options import DESCRIPTION, EPILOG, add_arguments

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers

__all__ = ["register", "run"]


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "decode",
        help="decode __consumer_offsets records (live topic, segment files, hex dumps)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    # the connection's variables are read by kafka_config (in sources.open_source)
    apply_env_defaults(parser)
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    # here, not at the top: they load the decoder (and rich, confluent_kafka), and every
    # `offsetwatch` command line imports this package to register the command
    from offsetwatch.commands.decode import loop, output, progress, sources
    from offsetwatch.commands.decode.stopping import EXIT_INTERRUPTED, Stopping

    if args.format == "avro":
        output.check_avro(args.output)
    if args.output:
        output.check_apart_from_inputs(args.output, args.paths or [])
    reporter = loop.Reporter()
    # unwinds in reverse: the signal handlers are restored, the bar stops, the output is
    # closed (stdout: flushed; a file not completed stays FILE.partial), the source (a Kafka
    # consumer) is closed, whatever the loop raised
    with ExitStack() as stack:
        source = sources.open_source(stack, args, reserved_env(args))
        decode = loop.DecodeLoop(args, source.one_per_line, reporter)
        sink = output.open_output(stack, args.output)
        bar = progress.start_bar(stack, args, source, output_is_stdout=not args.output)
        stopping = stack.enter_context(Stopping())
        outputs = stopping.between_chunks(
            decode.outputs(source, None if bar is None else bar.advance)
        )
        try:
            if args.format == "avro":
                output.write_avro(sink, args.output, outputs, source.flush_each_chunk, reporter)
            else:
                output.write_lines(sink, outputs, source.flush_each_chunk)
            if isinstance(sink, output.OutputFile):
                sink.complete()
        except output.OutputError as error:
            reporter.failure(str(error))
            return 1
    if stopping.signal is not None and not args.follow:
        # SIGINT/SIGTERM before the input's end: what was decoded is written and the file
        # is whole, but the input was not read to its end
        reporter.note(f"stopped by signal {stopping.signal} before the end of the input")
        return EXIT_INTERRUPTED
    return 1 if reporter.failures else 0
