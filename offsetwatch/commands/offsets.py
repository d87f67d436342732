"""`offsetwatch offsets export|reset|migrate`: read, move and copy committed offsets."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.commands import INT64_MAX, UsageError, integer
from offsetwatch.commands._offset_common import (
    CONNECTION_HELP,
    OneLineErrors,
    add_connection,
    broker_from_args,
    env_defaults,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TypeAlias

    from offsetwatch.commands import Subparsers

    Nested: TypeAlias = argparse._SubParsersAction[OneLineErrors]
    from offsetwatch.offset_ops.broker import OffsetBroker
    from offsetwatch.offset_ops.model import GroupInfo, TopicPartitionKey
    from offsetwatch.offset_ops.plan import Mode

DESCRIPTION = """\
Export, reset and copy the committed offsets of a consumer group (classic or KIP-848). Changes
are dry runs until --execute; the whole plan is checked before anything is written, and a
group with active members is refused (stop its consumers first)."""

OUTCOME_HELP = """\
exit codes: 0 done; 2 a mistake or a refusal, nothing changed (or the line says which
partitions the broker did commit); 3 the commit was sent and no answer came (a timeout, a
dropped connection): it may or may not have been applied, so check with `offsetwatch offsets
export --group G` before retrying (a retried --shift-by would shift twice). A request waits
for its answer up to 30 s, or -X socket.timeout.ms when that is shorter."""

EXPORT_EPILOG = f"""\
The CSV is topic,partition,offset with no header: what kafka-consumer-groups --reset-offsets
--from-file reads, and what `offsetwatch offsets reset --from-file` reads.

examples:
  offsetwatch offsets export --group payments -o payments.csv
  offsetwatch offsets export --group payments --topic orders --topic refunds

{CONNECTION_HELP}
"""

RESET_EPILOG = f"""\
Exactly one of the --to-*/--shift-by/--by-duration/--from-file options says where to go; the
scope is --topic (repeatable) or --all-topics (the partitions the group has offsets for).
Offsets outside [log start, log end] are clamped and the plan says so; a --from-file offset
past the log end is refused (the file does not fit the topic). A time goes to the first offset
whose record timestamp is at or after it (the log end when there is none); a time before the
log start of a partition whose older records were deleted is refused.

examples:
  # dry run (the default): current -> new offset, and what the group will re-read or skip
  offsetwatch offsets reset --group payments --topic orders --to-datetime 2026-11-20T09:00:00Z
  offsetwatch offsets reset --group payments --all-topics --by-duration PT30M --execute
  offsetwatch offsets reset --group payments --topic orders:0,3 --shift-by -100 --execute
  # save a plan, edit it, apply it
  offsetwatch offsets reset --group payments --all-topics --to-latest --export > plan.csv
  offsetwatch offsets reset --group payments --from-file plan.csv --execute
  # the offsets the group had at a past time, from the Spark history
  offsetwatch offsets reset --group payments --all-topics --to-history-time 2026-11-20T09:00Z \\
      --history /data/offsetwatch-lake

{OUTCOME_HELP}

{CONNECTION_HELP}
"""

MIGRATE_EPILOG = f"""\
Copies every committed offset of --from-group (with its metadata) to --to-group, then reads
--to-group back and compares each partition: the table shows the check, and the exit code
is 1 when any partition differs. The source must have no active members, the target must
have no members and no offsets.

examples:
  offsetwatch offsets migrate --from-group billing --to-group billing-invoices
  offsetwatch offsets migrate --from-group billing --to-group billing-invoices \\
      --topic 'invoices\\..*' --execute

{OUTCOME_HELP}

{CONNECTION_HELP}
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "offsets",
        help="export, reset (dry run first) and migrate committed offsets",
        description=DESCRIPTION,
    )
    nested = parser.add_subparsers(
        title="subcommands", metavar="SUBCOMMAND", dest="subcommand", parser_class=OneLineErrors
    )
    _register_export(nested)
    _register_reset(nested)
    _register_migrate(nested)
    parser.set_defaults(handler=lambda _args: _usage(parser))
    return parser


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _register_export(nested: Nested) -> None:
    export = nested.add_parser(
        "export",
        help="committed offsets as CSV topic,partition,offset",
        description="Write a group's committed offsets as CSV.",
        epilog=EXPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("--group", required=True, help="the consumer group")
    export.add_argument("--topic", action="append", default=[], help="only this topic (repeatable)")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default stdout)")
    add_connection(export)
    export.set_defaults(handler=_export_command)
    export.set_defaults(command_parser=export)
    env_defaults(export)


def _register_reset(nested: Nested) -> None:
    reset = nested.add_parser(
        "reset",
        help="move a group's offsets (earliest, latest, offset, shift, time, file, history)",
        description=DESCRIPTION,
        epilog=RESET_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reset.add_argument("--group", required=True, help="the consumer group")
    where = reset.add_argument_group("where to (exactly one)").add_mutually_exclusive_group(
        required=True
    )
    where.add_argument("--to-earliest", action="store_true", help="the log start")
    where.add_argument("--to-latest", action="store_true", help="the log end")
    where.add_argument(
        "--to-offset", type=integer(0, INT64_MAX, "an offset"), metavar="N", help="offset N"
    )
    where.add_argument(
        "--shift-by",
        type=integer(-INT64_MAX, INT64_MAX, "a shift"),
        metavar="N",
        help="the current offset plus N",
    )
    where.add_argument(
        "--to-datetime", metavar="TIME", help="ISO 8601 time, UTC unless it has an offset"
    )
    where.add_argument(
        "--by-duration",
        metavar="DURATION",
        help="a duration before now: ISO 8601 (PT30M, P1D) or short (30m, 1d)",
    )
    where.add_argument("--from-file", metavar="CSV", help="topic,partition,offset rows")
    where.add_argument(
        "--to-history-time",
        metavar="TIME",
        help="the offsets the group had at this time, from the Spark history (--history)",
    )
    reset.add_argument("--history", metavar="DIR", help="the Spark history (lake) directory")
    scope = reset.add_argument_group("scope").add_mutually_exclusive_group()
    scope.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has offsets for"
    )
    reset.add_argument("--execute", action="store_true", help="apply the plan (default: dry run)")
    reset.add_argument(
        "--export", action="store_true", help="print the plan as CSV topic,partition,offset"
    )
    reset.add_argument(
        "--force",
        action="store_true",
        help="skip the active-members check (the broker still checks)",
    )
    add_connection(reset)
    reset.set_defaults(handler=_reset_command)
    reset.set_defaults(command_parser=reset)
    env_defaults(reset)


def _register_migrate(nested: Nested) -> None:
    migrate = nested.add_parser(
        "migrate",
        help="copy a group's committed offsets to another group and verify the copy",
        description=DESCRIPTION,
        epilog=MIGRATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    migrate.add_argument("--from-group", required=True, metavar="GROUP", help="copy from")
    migrate.add_argument("--to-group", required=True, metavar="GROUP", help="copy to")
    migrate.add_argument(
        "--topic", metavar="REGEX", help="only topics this regular expression matches entirely"
    )
    migrate.add_argument("--execute", action="store_true", help="copy (default: dry run)")
    migrate.add_argument(
        "--force",
        action="store_true",
        help="skip the active-members check (the broker still checks)",
    )
    add_connection(migrate)
    migrate.set_defaults(handler=lambda args: migrate_offsets(args, broker_from_args(args)))
    migrate.set_defaults(command_parser=migrate)
    env_defaults(migrate)


def _check_paths(args: argparse.Namespace) -> None:
    """The files a command was given, checked before it connects: a cluster reached (and a
    probe of seconds) only to be told that -o cannot be written, or that --from-file does not
    exist, was work for nothing."""
    from offsetwatch.core.paths import PathProblem, check_input, check_output_file

    try:
        if getattr(args, "output", None):
            check_output_file(Path(args.output), "--output")
        if getattr(args, "from_file", None) is not None:
            check_input(Path(args.from_file), "--from-file", "file")
        if getattr(args, "history", None):
            check_input(Path(args.history), "--history", "dir")
    except PathProblem as error:
        raise UsageError(str(error)) from None


def _export_command(args: argparse.Namespace) -> int:
    _check_paths(args)
    return export_offsets(args, broker_from_args(args))


def _reset_command(args: argparse.Namespace) -> int:
    # the options too, not only in reset_offsets: a mistake in them needs no cluster
    _check_reset_options(args)
    _check_paths(args)
    return reset_offsets(args, broker_from_args(args))


def _out(text: str, path: str | None = None) -> None:
    if not path:
        sys.stdout.write(text)
        return
    from offsetwatch.core.atomic import write_text_atomic
    from offsetwatch.core.paths import advice, os_error_text

    try:
        # a temporary name, then renamed: a full disk never leaves a cut plan or export
        write_text_atomic(path, text)
    except OSError as error:
        # checked before the connection (_check_paths), so the disk changed since
        raise UsageError(
            f"--output {path}: cannot write it: {os_error_text(error)}; {advice(error)}"
        ) from None


def _note(text: str) -> None:
    print(f"offsetwatch: {text}", file=sys.stderr)


# -- export ----------------------------------------------------------------------------------


def export_offsets(args: argparse.Namespace, broker: OffsetBroker) -> int:
    from offsetwatch.offset_ops import OffsetOpsError
    from offsetwatch.offset_ops.csv_io import offsets_csv

    try:
        named: list[TopicPartitionKey] | None = None
        if args.topic:
            counts = broker.partition_counts()
            for topic in args.topic:
                if topic not in counts:
                    raise OffsetOpsError(f"unknown topic {topic!r}")
            named = [(t, p) for t in args.topic for p in range(counts[t])]
        found = broker.committed({args.group: named})[args.group]
    except OffsetOpsError as error:
        raise UsageError(str(error)) from None
    if not found:
        raise UsageError(f"unknown group {args.group!r}: it has no committed offsets")
    _out(offsets_csv({key: c.offset for key, c in found.items()}), args.output)
    return 0


# -- checks shared by reset and migrate ------------------------------------------------------


def _describe(
    broker: OffsetBroker, group_ids: Sequence[str], writing: str | None = None
) -> dict[str, GroupInfo] | None:
    """`writing`: the group whose offsets the command will commit; where its Describe is
    refused, the grant named is Read (which implies Describe): a Describe grant alone would
    only move the refusal to the commit."""
    from offsetwatch.offset_ops import NotAuthorized, Unsupported

    try:
        return broker.describe_groups(group_ids)
    except Unsupported:
        return None
    except NotAuthorized as refused:
        if refused.resource != "group" or refused.name != writing:
            raise
        raise NotAuthorized(
            f"not authorized to describe group {writing!r}, whose offsets this commits: it "
            f"needs Read on the group (Read implies Describe); grant it: "
            f"{broker.grant('Read', 'group', writing)}",
            "group",
            writing,
            "Read",
        ) from refused


def _check_inactive(
    infos: dict[str, GroupInfo] | None, group_id: str, execute: bool, force: bool
) -> None:
    if force:
        return
    if infos is None:
        if execute:
            raise UsageError(
                f"cannot check group {group_id!r} for active members: the cluster does not "
                "support DescribeGroups; add --force to rely on the broker's own check"
            )
        _note(f"note: cannot check group {group_id!r} for active members (no DescribeGroups)")
        return
    info = infos.get(group_id)
    if info is not None and info.active:
        message = (
            f"group {group_id!r} has {len(info.members)} active member(s) (state {info.state}): "
            "stop its consumers first"
        )
        if execute:
            raise UsageError(message)
        _note(f"warning: {message}; --execute will refuse")


# -- reset -----------------------------------------------------------------------------------


def _mode(args: argparse.Namespace, now_ms: int) -> Mode:
    from offsetwatch.offset_ops import plan
    from offsetwatch.offset_ops.csv_io import parse_offsets_csv
    from offsetwatch.offset_ops.history import offsets_at_history
    from offsetwatch.offset_ops.times import duration_before_ms, parse_datetime_ms

    if args.to_earliest:
        return plan.ToEarliest()
    if args.to_latest:
        return plan.ToLatest()
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise UsageError(f"--to-offset {args.to_offset}: offsets are >= 0")
        return plan.ToOffset(args.to_offset)
    if args.shift_by is not None:
        return plan.ShiftBy(args.shift_by)
    if args.to_datetime is not None:
        time_ms = parse_datetime_ms(args.to_datetime)
        plan.check_time(time_ms, now_ms, f"--to-datetime {args.to_datetime}")
        return plan.ToTime(time_ms, f"--to-datetime {args.to_datetime}")
    if args.by_duration is not None:
        return plan.ToTime(
            duration_before_ms(args.by_duration, now_ms), f"--by-duration {args.by_duration}"
        )
    if args.from_file is not None:
        from offsetwatch.core.textfiles import TextFileError, read_text

        try:
            text = read_text(Path(args.from_file), "--from-file")
        except TextFileError as error:
            raise UsageError(str(error)) from None
        return plan.ToOffsets(parse_offsets_csv(text, args.from_file), args.from_file, True)
    time_ms = parse_datetime_ms(args.to_history_time, "--to-history-time")
    plan.check_time(time_ms, now_ms, f"--to-history-time {args.to_history_time}")
    if not args.history:
        raise UsageError("--to-history-time needs --history DIR (the Spark history)")
    found = offsets_at_history(args.history, args.group, time_ms)
    if not found:
        raise UsageError(
            f"the history has no offsets of group {args.group!r} at {args.to_history_time}"
        )
    return plan.ToOffsets(found, f"the history at {args.to_history_time}", False)


def _check_reset_options(args: argparse.Namespace) -> None:
    scoped = bool(args.topic) or args.all_topics
    if args.from_file is not None and scoped:
        raise UsageError(
            "--from-file takes its partitions from the file: drop --topic/--all-topics"
        )
    if args.history and args.to_history_time is None:
        raise UsageError("--history only goes with --to-history-time")
    if args.from_file is None and args.to_history_time is None and not scoped:
        raise UsageError("say which partitions: --topic TOPIC[:P,...] or --all-topics")
    if args.execute and args.export:
        raise UsageError("--export prints the plan of a dry run: drop --execute")


def reset_offsets(args: argparse.Namespace, broker: OffsetBroker) -> int:
    from offsetwatch.offset_ops import OffsetOpsError

    _check_reset_options(args)
    try:
        return _reset(args, broker)
    except OffsetOpsError as error:
        raise UsageError(str(error)) from None


def _reset(args: argparse.Namespace, broker: OffsetBroker) -> int:
    from offsetwatch.offset_ops import plan
    from offsetwatch.offset_ops.broker import EARLIEST, LATEST
    from offsetwatch.offset_ops.csv_io import offsets_csv
    from offsetwatch.offset_ops.render import PLAN_HEADER, plan_rows, table
    from offsetwatch.offset_ops.scope import check_partitions, parse_topic_scope, resolve_scope

    now_ms = int(time.time() * 1000)
    mode = _mode(args, now_ms)
    scopes = [parse_topic_scope(text) for text in args.topic]
    counts = broker.partition_counts()
    infos = _describe(broker, [args.group], args.group if args.execute else None)
    current = broker.committed({args.group: None})[args.group]
    info = None if infos is None else infos.get(args.group)
    if not current and (info is None or not info.exists):
        raise UsageError(f"unknown group {args.group!r}: no members and no committed offsets")
    if isinstance(mode, plan.ToOffsets):
        check_partitions(mode.offsets, counts, f"{mode.source}: ")
        partitions = sorted(mode.offsets)
        if scopes or args.all_topics:
            wanted = set(resolve_scope(scopes, counts, current, args.all_topics))
            partitions = [key for key in partitions if key in wanted]
            missing = len(wanted) - len(partitions)
            if missing:
                _note(
                    f"note: {missing} partition(s) in scope have no offset in "
                    f"{mode.source}: unchanged"
                )
    else:
        partitions = resolve_scope(scopes, counts, current, args.all_topics)
    if not partitions:
        raise UsageError("no partitions in scope: the group has no committed offsets there")
    log_start = broker.list_offsets(partitions, EARLIEST)
    log_end = broker.list_offsets(partitions, LATEST)
    by_time = (
        broker.list_offsets(partitions, mode.time_ms) if isinstance(mode, plan.ToTime) else None
    )
    rows = plan.build_plan(mode, partitions, current, log_start, log_end, by_time)
    _check_inactive(infos, args.group, args.execute, args.force)
    if args.export:
        sys.stdout.write(offsets_csv([(r.topic, r.partition, r.target) for r in rows]))
        return 0
    sys.stdout.write(table(PLAN_HEADER, plan_rows(rows)))
    if not args.execute:
        print(f"dry run: nothing changed; add --execute to reset {len(rows)} partition(s)")
        return 0
    broker.alter(args.group, plan.changes(rows))
    print(f"reset {len(rows)} partition(s) of group {args.group}")
    return 0


# -- migrate ---------------------------------------------------------------------------------


def migrate_offsets(args: argparse.Namespace, broker: OffsetBroker) -> int:
    from offsetwatch.offset_ops import OffsetOpsError

    if args.from_group == args.to_group:
        raise UsageError("--from-group and --to-group are the same group")
    try:
        return _migrate(args, broker)
    except OffsetOpsError as error:
        raise UsageError(str(error)) from None


def _migrate(args: argparse.Namespace, broker: OffsetBroker) -> int:
    from offsetwatch.offset_ops.migrate import select_offsets, verify
    from offsetwatch.offset_ops.render import (
        COPY_HEADER,
        VERIFY_HEADER,
        copy_rows,
        table,
        verify_rows,
    )
    from offsetwatch.offset_ops.scope import check_partitions

    source, target = args.from_group, args.to_group
    infos = _describe(broker, [source, target], target if args.execute else None)
    found = broker.committed({source: None, target: None})
    if not found[source]:
        raise UsageError(f"unknown group {source!r}: it has no committed offsets")
    copy = select_offsets(found[source], args.topic)
    if not copy:
        raise UsageError(f"group {source!r} has no offsets on topics matching {args.topic!r}")
    if found[target]:
        (topic, partition), c = min(found[target].items())
        raise UsageError(
            f"migrate target {target!r} already has offsets ({topic}:{partition} at {c.offset}, "
            f"{len(found[target])} in all): choose a new group"
        )
    check_partitions(copy, broker.partition_counts())
    _check_inactive(infos, source, args.execute, args.force)
    _check_inactive(infos, target, args.execute, args.force)
    if not args.execute:
        sys.stdout.write(table(COPY_HEADER, copy_rows(copy)))
        print(f"dry run: nothing copied; add --execute to copy {len(copy)} offset(s) to {target}")
        return 0
    broker.alter(target, copy)
    readback = broker.committed({target: sorted(copy)})[target]
    checked = verify(copy, readback)
    sys.stdout.write(table(VERIFY_HEADER, verify_rows(checked)))
    bad = [row for row in checked if not row.ok]
    if bad:
        print(
            f"offsetwatch: {len(bad)} of {len(checked)} partition(s) of {target} differ from "
            f"{source} (first: {bad[0].topic}:{bad[0].partition})",
            file=sys.stderr,
        )
        return 1
    print(f"copied and verified {len(checked)} offset(s) from {source} to {target}")
    return 0
