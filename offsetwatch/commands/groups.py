"""`offsetwatch groups list|describe`: consumer groups like kafka-consumer-groups shows them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from offsetwatch.commands import UsageError
from offsetwatch.commands._offset_common import (
    CONNECTION_HELP,
    OneLineErrors,
    add_connection,
    broker_from_args,
    env_defaults,
)

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers
    from offsetwatch.offset_ops.broker import OffsetBroker
    from offsetwatch.offset_ops.describe import GroupReport
    from offsetwatch.offset_ops.exporter_client import ExporterClient

DESCRIPTION = """\
Look at consumer groups, classic and KIP-848 (group.protocol=consumer) alike: their state,
members and, per partition, the committed offset, the log end and the lag.

Share groups (KIP-932) and streams groups (KIP-1071, Kafka Streams with group.protocol=streams)
come from a running `offsetwatch export` (--exporter): confluent-kafka can neither list nor
describe them (it calls a streams group an empty classic one). A streams group's offsets are
plain commits; --members prints each member's process and tasks (ACTIVE: 0:[0,1]) like
kafka-streams-groups.sh --describe --members --verbose.
Per share partition: the group's START-OFFSET (from __share_group_state; Kafka 4.0's
kafka-share-groups.sh prints the log end there), records acknowledged, archived and available
past it, and LAG = log end - start - acknowledged - archived (KIP-1226)."""

LIST_EPILOG = f"""\
examples:
  offsetwatch groups list --bootstrap-server broker1:9092
  offsetwatch groups list --format csv > groups.csv
  # share and streams groups too (TYPE SHARE, STREAMS), as a running `offsetwatch export`
  # knows them
  offsetwatch groups list --exporter http://localhost:9380

{CONNECTION_HELP}
"""

DESCRIBE_EPILOG = f"""\
examples:
  # per partition: CURRENT-OFFSET, LOG-END-OFFSET, LAG and the owning member
  offsetwatch groups describe payments --bootstrap-server broker1:9092
  # every group, with lag in seconds, status and (when not OK) the diagnosis: cause,
  # suspect members, reason (docs/diagnosis.md), from a running `offsetwatch export`
  offsetwatch groups describe --all-groups --exporter http://localhost:9380
  # members and their assignments; coordinator, state, type and epoch
  offsetwatch groups describe payments --members
  offsetwatch groups describe payments --state --format json
  # a share group: START-OFFSET, ACKNOWLEDGED, ARCHIVED, LAG per share partition
  offsetwatch groups describe orders-queue --exporter http://localhost:9380

Groups are described together: one DescribeGroups round, the offset fetches of all groups
sent at once, one ListOffsets round for every partition.

{CONNECTION_HELP}
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "groups",
        help="list and describe consumer groups (offsets, log ends, lag, members)",
        description=DESCRIPTION,
    )
    nested = parser.add_subparsers(
        title="subcommands", metavar="SUBCOMMAND", dest="subcommand", parser_class=OneLineErrors
    )

    listing = nested.add_parser(
        "list",
        help="every consumer group with its type and state",
        description="Every consumer group of the cluster with its type (CLASSIC, CONSUMER) "
        "and state; with --exporter, the share and streams groups it knows too (SHARE, "
        "STREAMS).",
        epilog=LIST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_exporter(
        listing,
        "a running `offsetwatch export` (http://host:9380): adds the share and streams "
        "groups it knows",
    )
    _add_format(listing)
    add_connection(listing)
    listing.set_defaults(handler=run_list, command_parser=listing)
    env_defaults(listing, keep=_EXPORTER_DESTS)

    describe = nested.add_parser(
        "describe",
        help="offsets, log ends and lag per partition; members; state",
        description=DESCRIPTION,
        epilog=DESCRIBE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    describe.add_argument("groups", nargs="*", metavar="GROUP", help="group ids")
    describe.add_argument(
        "--all-groups", action="store_true", help="every group of the cluster (groups list)"
    )
    view = describe.add_mutually_exclusive_group()
    view.add_argument(
        "--members", action="store_true", help="the members and their assignments instead"
    )
    view.add_argument(
        "--state", action="store_true", help="coordinator, strategy, state, type, epoch instead"
    )
    describe.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="only these topics (repeatable)",
    )
    _add_exporter(
        describe,
        "a running `offsetwatch export` (http://host:9380): adds LAG-SECONDS and STATUS, "
        "and a group's cause and reason when it is not OK; describes share groups",
    )
    _add_format(describe)
    add_connection(describe)
    describe.set_defaults(handler=run_describe, command_parser=describe)
    env_defaults(describe, keep=_EXPORTER_DESTS)
    parser.set_defaults(handler=lambda _args: _usage(parser))
    return parser


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


#: the --exporter options, which OFFSETWATCH_EXPORTER_* variables may set too
_EXPORTER_DESTS: Final = frozenset(
    {
        "exporter",
        "exporter_ca",
        "exporter_cert",
        "exporter_key",
        "exporter_user",
        "exporter_password_file",
    }
)


def _add_exporter(parser: argparse.ArgumentParser, what: str) -> None:
    group = parser.add_argument_group("exporter (--exporter and how to reach a secured one)")
    group.add_argument("--exporter", metavar="URL", help=what)
    group.add_argument(
        "--exporter-ca", type=Path, metavar="FILE", help="CA certificate(s) of its TLS server"
    )
    group.add_argument(
        "--exporter-cert",
        type=Path,
        metavar="FILE",
        help="client certificate (PEM, with its key unless --exporter-key)",
    )
    group.add_argument("--exporter-key", type=Path, metavar="FILE", help="the client key (PEM)")
    group.add_argument("--exporter-user", metavar="NAME", help="basic-auth user")
    group.add_argument(
        "--exporter-password-file",
        type=Path,
        metavar="FILE",
        help="basic-auth password (first line), else OFFSETWATCH_EXPORTER_PASSWORD; never "
        "in the URL",
    )


def exporter_client(args: argparse.Namespace) -> ExporterClient | None:
    """The client of `--exporter`, its URL and files checked (before any other work)."""
    if not getattr(args, "exporter", None):
        return None
    from offsetwatch.core.paths import PathProblem, check_input
    from offsetwatch.offset_ops import OffsetOpsError
    from offsetwatch.offset_ops.exporter_client import (
        PASSWORD_ENV,
        ExporterAccess,
        ExporterClient,
        read_password,
    )

    try:
        for flag in (
            "--exporter-ca",
            "--exporter-cert",
            "--exporter-key",
            "--exporter-password-file",
        ):
            given = getattr(args, flag[2:].replace("-", "_"))
            if given is not None:
                # each file by its own option: loading the pair names only --exporter-cert
                check_input(given, flag, "file")
    except PathProblem as error:
        raise UsageError(str(error)) from None
    try:
        password = (
            read_password(args.exporter_password_file)
            if args.exporter_password_file is not None
            else os.environ.get(PASSWORD_ENV)
        )
        return ExporterClient(
            ExporterAccess(
                args.exporter,
                args.exporter_ca,
                args.exporter_cert,
                args.exporter_key,
                args.exporter_user,
                password,
            )
        )
    except OffsetOpsError as error:
        raise UsageError(str(error)) from None


def _add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=("table", "json", "csv"), default="table", help="output (table)"
    )


def run_list(args: argparse.Namespace) -> int:
    client = exporter_client(args)
    return list_groups(args, broker_from_args(args), client)


def list_groups(
    args: argparse.Namespace, broker: OffsetBroker, client: ExporterClient | None = None
) -> int:
    from offsetwatch.offset_ops import OffsetOpsError, Unsupported
    from offsetwatch.offset_ops.render import LISTING_HEADER, listing_rows, render

    try:
        client = client or exporter_client(args)
        listings = broker.list_groups()
        if client is not None:
            from offsetwatch.offset_ops.describe import exporter_groups

            # a streams group's commits make librdkafka list it as an empty classic group
            extra = exporter_groups(client)
            theirs = {x.group_id for x in extra}
            listings = sorted(
                [*(x for x in listings if x.group_id not in theirs), *extra],
                key=lambda x: x.group_id,
            )
    except Unsupported as error:
        raise UsageError(f"{error}: name the groups, `offsetwatch groups describe GROUP`") from None
    except OffsetOpsError as error:
        raise UsageError(str(error)) from None
    sys.stdout.write(render(args.format, LISTING_HEADER, listing_rows(listings)))
    return 0 if _every_group_listed(broker) else 1


def _every_group_listed(broker: OffsetBroker) -> bool:
    """Kafka lists only the groups a principal may Describe unless it may Describe the
    cluster: say so (exit 1, README "Exit codes") rather than pass a part for the whole."""
    if broker.may_list_every_group() is not False:
        return True
    print(
        "offsetwatch: note: this principal may not Describe the cluster, so Kafka listed only "
        "the groups it may Describe: others may exist; grant: "
        + broker.grant("Describe", "cluster"),
        file=sys.stderr,
    )
    return False


def _hidden_topics(broker: OffsetBroker, reports: list[GroupReport]) -> bool:
    """Topics the groups' members are assigned that OffsetFetch left out because the
    principal may not Describe them: each named with its grant; False when there are any."""
    assigned = {
        topic
        for report in reports
        if report.info is not None
        for member in report.info.members
        for topic, _partition in member.assignment
    }
    committed = {row.topic for report in reports for row in report.rows if row.current is not None}
    refused = broker.refused_topics(assigned - committed)
    for topic, error in sorted(refused.items()):
        print(
            f"offsetwatch: note: not authorized to describe topic {topic!r} ({error}): its "
            f"offsets and lag are left out; grant: {broker.grant('Describe', 'topic', topic)}",
            file=sys.stderr,
        )
    return not refused


def run_describe(args: argparse.Namespace) -> int:
    if bool(args.groups) == args.all_groups:
        raise UsageError("name the groups to describe, or give --all-groups (not both)")
    client = exporter_client(args)
    return describe_groups(args, broker_from_args(args), client)


def describe_groups(
    args: argparse.Namespace, broker: OffsetBroker, client: ExporterClient | None = None
) -> int:
    from offsetwatch.offset_ops import OffsetOpsError, Unsupported
    from offsetwatch.offset_ops.describe import (
        build_reports,
        exporter_groups,
        fetch_exporter,
    )

    client = client or exporter_client(args)
    try:
        if args.all_groups:
            try:
                group_ids = [x.group_id for x in broker.list_groups()]
            except Unsupported as error:
                raise UsageError(f"{error}: --all-groups needs it; name the groups") from None
            if client is not None:
                shares = [x.group_id for x in exporter_groups(client)]
                group_ids = sorted({*group_ids, *shares})
        else:
            group_ids = list(dict.fromkeys(args.groups))
        exporter = fetch_exporter(client, group_ids) if client is not None else None
        reports = build_reports(broker, group_ids, args.topic, exporter)
    except OffsetOpsError as error:
        raise UsageError(str(error)) from None
    if args.members and any(r.info is None for r in reports):
        # members are all this view shows: an empty table would read as "no members", not as
        # a cluster that cannot tell (--state says STATE UNKNOWN, and an exporter's epoch)
        raise UsageError(
            "the cluster does not support DescribeGroups: --members needs it; "
            "`offsetwatch groups describe GROUP` shows offsets and lag without it"
        )
    unknown = [r.group_id for r in reports if not r.exists and not args.all_groups]
    if unknown:
        hint = (
            ""
            if args.exporter
            else " (a share or streams group? give --exporter URL of `offsetwatch export`)"
        )
        raise UsageError(f"unknown group {unknown[0]!r}: no members and no committed offsets{hint}")
    if any(r.info is None for r in reports):
        print(
            "offsetwatch: note: the cluster cannot describe groups (no DescribeGroups): "
            "members and state are unknown",
            file=sys.stderr,
        )
    sys.stdout.write(_describe_output(args, reports))
    complete = _hidden_topics(broker, reports)
    if args.all_groups:
        complete = _every_group_listed(broker) and complete
    return 0 if complete else 1


def _describe_output(args: argparse.Namespace, reports: list[GroupReport]) -> str:
    from offsetwatch.offset_ops import render as r

    with_exporter = bool(args.exporter)
    shares = [report for report in reports if report.share is not None]
    if shares and not (args.members or args.state) and args.format != "json":
        # share partitions have other columns: their own table (or CSV block) after the rest
        consumers = [report for report in reports if report.share is None]
        share_text = _share_output(args.format, shares)
        if not consumers:
            return share_text
        return _describe_output(args, consumers) + "\n" + share_text
    if args.format == "json" and not (args.members or args.state):
        return r.json_text([r.report_json(report, with_exporter) for report in reports])
    if args.members:
        streams = [x for x in reports if x.info is not None and x.info.type == "STREAMS"]
        others = [x for x in reports if x not in streams]
        # streams members run tasks: kafka-streams-groups.sh's own columns, in their own table
        out = []
        if others or not streams:
            rows = [row for report in others for row in r.members_rows(report)]
            out.append(r.render(args.format, r.MEMBERS_HEADER, rows))
        if streams:
            rows = [row for report in streams for row in r.streams_members_rows(report)]
            out.append(r.render(args.format, r.STREAMS_MEMBERS_HEADER, rows))
        if args.format == "json" and len(out) == 2:
            return r.json_text(
                [
                    *(
                        dict(zip(map(r.json_key, r.MEMBERS_HEADER), row, strict=True))
                        for report in others
                        for row in r.members_rows(report)
                    ),
                    *(
                        dict(zip(map(r.json_key, r.STREAMS_MEMBERS_HEADER), row, strict=True))
                        for report in streams
                        for row in r.streams_members_rows(report)
                    ),
                ]
            )
        return "\n".join(out)
    if args.state:
        return r.render(args.format, r.STATE_HEADER, [r.state_row(report) for report in reports])
    header = r.offsets_header(with_exporter)
    if args.format == "csv":
        rows = [row for report in reports for row in r.offsets_rows(report, with_exporter)]
        return r.csv_text(header, rows)
    return "\n".join(
        r.table(header, r.offsets_rows(report, with_exporter)) + r.group_total(report)
        for report in reports
    )


def _share_output(fmt: str, reports: list[GroupReport]) -> str:
    from offsetwatch.offset_ops import render as r

    if fmt == "csv":
        return r.csv_text(r.SHARE_HEADER, [row for x in reports for row in r.share_rows(x)])
    return "\n".join(r.table(r.SHARE_HEADER, r.share_rows(x)) + r.group_total(x) for x in reports)
