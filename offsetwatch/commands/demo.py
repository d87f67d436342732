"""`offsetwatch demo`: the exporter against an in-process mock Kafka cluster with a workload."""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offsetwatch.commands import integer, seconds

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers
    from offsetwatch.exporter.config import ExporterConfig
    from offsetwatch.exporter.judge.snapshot import Snapshot
    from offsetwatch.simulator import GroupPlan

DESCRIPTION = """\
Start librdkafka's mock Kafka cluster in this process, create data topics with producers, and
simulate consumer groups that behave well and badly (healthy, lagging, stalled, stopped,
rewound, deleted, idle, a KIP-848 consumer group, a transactional committer, one member of
three stuck, a rebalance storm) by writing real-format __consumer_offsets records. Then run the
exporter on it, serve the operator console (open the printed URL), /metrics and the JSON
API, and show a live table of groups, lag, lag in seconds, status and the diagnosed cause.
No Kafka needed.
"""

EPILOG = """\
examples:
  offsetwatch demo                       # until Ctrl-C; console on http://127.0.0.1:9380/
  offsetwatch demo --duration 120        # two minutes, then exit
  offsetwatch demo --http-port 0 --plain # any free port, plain text tables (no terminal UI)

  curl -s localhost:9380/metrics | grep offsetwatch_group_status
  curl -s localhost:9380/api/v1/groups/reports-lagging
  curl -s localhost:9380/api/v1/groups/orders-enricher   # "diagnosis": cause, suspects

  # the demo archives every record (and log-end samples) for the Spark jobs:
  offsetwatch demo --archive-dir /tmp/ow-archive --duration 300
  offsetwatch spark compact --input /tmp/ow-archive --lake /tmp/ow-lake
"""

_STATUS_STYLE = {
    "OK": "green",
    "WARN": "yellow",
    "REWIND": "cyan",
    "STALL": "magenta",
    "STOP": "red",
    "ERR": "bold red",
}


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo",
        help="run the exporter on a built-in mock cluster with simulated groups (no Kafka)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--duration",
        type=seconds(0.0),
        default=0.0,
        metavar="SECONDS",
        help="stop after this many seconds (default: run until Ctrl-C)",
    )
    parser.add_argument(
        "--http-port",
        type=integer(0, 65535, "a TCP port"),
        default=9380,
        help="port of /metrics and the API (default 9380; 0 picks a free one)",
    )
    parser.add_argument(
        "--status-window-s",
        # the demo samples log ends every 2 s: the window must span two samples
        type=seconds(4.0),
        default=30.0,
        metavar="SECONDS",
        help="status window (default 30 s, short so the demo shows statuses quickly)",
    )
    parser.add_argument(
        "--archive-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="write the exporter's archive files here (JSON lines, the Spark jobs' input; "
        "default: an 'archive' folder in the demo's temporary state directory)",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="print a plain table every 10 s instead of the live terminal table",
    )
    parser.set_defaults(handler=run)
    return parser


def _status_name(value: int) -> str:
    from offsetwatch.core.status import Status

    return Status(value).name


def build_rows(snapshot: Snapshot, plans: tuple[GroupPlan, ...]) -> list[list[str]]:
    expected = {plan.group: plan.expect for plan in plans}
    rows = []
    for group in snapshot.groups:
        view = group.view
        lag_s = group.max_lag_seconds
        rows.append(
            [
                view.group_id,
                view.kind,
                view.state,
                str(len(view.members)),
                str(group.total_lag) if snapshot.ready else "-",
                f"{lag_s:.1f}" if snapshot.ready and not math.isnan(lag_s) else "-",
                group.status.name if snapshot.ready else "warming up",
                _cause(group) if snapshot.ready else "",
                f"{group.commit_rate:.1f}",
                expected.get(view.group_id, ""),
            ]
        )
    return rows


HEADERS = [
    "group",
    "kind",
    "state",
    "members",
    "lag",
    "lag s",
    "status",
    "cause",
    "commits/s",
    "expected",
]


def _cause(group: Any) -> str:
    """The diagnosis in a few words: the cause and the suspects' client ids."""
    diagnosis = group.diagnosis
    if diagnosis.cause is None:
        return ""
    who = sorted({suspect.client_id for suspect in diagnosis.suspects})
    shown = ", ".join(who[:2]) + (f" +{len(who) - 2}" if len(who) > 2 else "")
    return f"{diagnosis.cause.value}: {shown}" if shown else str(diagnosis.cause.value)


def _rich_table(snapshot: Snapshot, plans: tuple[GroupPlan, ...], url: str, elapsed: float) -> Any:
    from rich.table import Table

    title = (
        f"offsetwatch demo - {elapsed:.0f} s - console: {url}/ - metrics: {url}/metrics - "
        f"API: {url}/api/v1/groups"
    )
    table = Table(title=title, title_justify="left")
    for header in HEADERS:
        table.add_column(header, justify="right" if header in ("lag", "lag s") else "left")
    for row in build_rows(snapshot, plans):
        style = _STATUS_STYLE.get(row[6], "")
        row[6] = f"[{style}]{row[6]}[/]" if style else row[6]
        table.add_row(*row)
    return table


def _plain_table(snapshot: Snapshot, plans: tuple[GroupPlan, ...]) -> str:
    rows = [HEADERS, *build_rows(snapshot, plans)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def run(args: argparse.Namespace) -> int:
    from offsetwatch.commands import UsageError, listen_error
    from offsetwatch.core.paths import PathProblem, check_output_dir
    from offsetwatch.exporter.service import ExporterService
    from offsetwatch.mock_cluster import MockCluster
    from offsetwatch.simulator import ClusterSimulator

    if args.archive_dir is not None:
        try:
            # before the cluster and the exporter start: the exporter's own check of it
            # is made by its config loader, which the demo does not use
            check_output_dir(args.archive_dir, "--archive-dir")
        except PathProblem as error:
            raise UsageError(str(error)) from None
    state_dir = Path(tempfile.mkdtemp(prefix="offsetwatch-demo-"))
    with MockCluster() as cluster:
        simulator = ClusterSimulator(cluster.bootstrap_servers)
        service: ExporterService | None = None
        running = False
        # everything after the simulator's start is undone in order, whenever Ctrl-C comes:
        # an exporter left running kept the process alive, and producers the cluster was
        # closed under logged a librdkafka "Disconnected" line per connection
        try:
            simulator.create_topics(cluster.create_topic)
            simulator.start()
            service = ExporterService(_exporter_config(args, cluster.bootstrap_servers, state_dir))
            try:
                service.start()
            except OSError as error:
                raise UsageError(listen_error("127.0.0.1", args.http_port, error)) from None
            service.run_in_background()
            running = True
            url = service.http.url
            # before the live table takes the terminal: the one line to open in a browser
            print(f"offsetwatch console: {url}/", file=sys.stderr, flush=True)
            started = time.monotonic()
            live = sys.stdout.isatty() and not args.plain
            try:
                if live:
                    _run_live(service, simulator, args.duration, started, url)
                else:
                    _run_plain(service, simulator, args.duration, started, url)
            except KeyboardInterrupt:
                pass
        except BaseException as error:
            # the frames of the interrupted calls hold the simulator (and its producers)
            # until the error is handled, after the cluster is gone
            traceback.clear_frames(error.__traceback__)
            raise
        finally:
            if service is not None:
                if running:
                    service.stop()
                else:
                    service.shutdown()
            simulator.close()
            # its producers are destroyed here, before the cluster
            del simulator
    print(
        f"demo state (checkpoint, quarantine) kept in {state_dir}; archive in "
        f"{args.archive_dir or state_dir / 'archive'}",
        file=sys.stderr,
    )
    return 0


def _exporter_config(args: argparse.Namespace, bootstrap: str, state_dir: Path) -> ExporterConfig:
    from offsetwatch.exporter.config import ExporterConfig
    from offsetwatch.simulator import demo_warn_ratio

    return ExporterConfig(
        bootstrap_servers=bootstrap,
        cluster_name="demo",
        http_host="127.0.0.1",
        http_port=args.http_port,
        sample_interval_s=2.0,
        snapshot_interval_s=1.0,
        status_window_s=args.status_window_s,
        warn_min_growth_ratio=demo_warn_ratio(2.0, args.status_window_s),
        publish_topic="offsetwatch.records",
        publish_dlq_topic="offsetwatch.records.dlq",
        checkpoint_path=state_dir / "checkpoint",
        archive_dir=args.archive_dir or state_dir / "archive",
        archive_roll_s=60.0,
        log_level="WARNING",
    )


def _expired(duration: float, started: float) -> bool:
    return duration > 0 and time.monotonic() - started >= duration


def _run_live(service: Any, simulator: Any, duration: float, started: float, url: str) -> None:
    from rich.live import Live

    with Live(refresh_per_second=2) as live:
        while not _expired(duration, started):
            simulator.tick()
            elapsed = time.monotonic() - started
            live.update(_rich_table(service.exporter.snapshot, simulator.plans, url, elapsed))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started - elapsed)))


def _run_plain(service: Any, simulator: Any, duration: float, started: float, url: str) -> None:
    print(
        f"offsetwatch demo: console on {url}/, metrics on {url}/metrics, "
        f"API on {url}/api/v1/groups",
        flush=True,
    )
    last_print = 0.0
    while not _expired(duration, started):
        tick_started = time.monotonic()
        simulator.tick()
        elapsed = tick_started - started
        if elapsed - last_print >= 10 or _expired(duration, started - 1):
            print(f"\n--- {elapsed:.0f} s ---", flush=True)
            print(_plain_table(service.exporter.snapshot, simulator.plans), flush=True)
            last_print = elapsed
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick_started)))
