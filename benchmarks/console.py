"""Console figures: the API at 10,000 groups, the Groups page in headless Chromium, the live
stream's cost per browser.

    .venv/bin/python benchmarks/console.py            # ~1-2 minutes; needs /usr/bin/chromium
    .venv/bin/python benchmarks/console.py --quick    # fewer runs

Figures (printed; nothing here is asserted anywhere, tests never time):

* the snapshot of 10,000 groups (4 partitions each, one in ten with a classic group of 2
  members, log ends sampled so lag, lag seconds and status exist) and a console history of
  120 points per group: how long `ConsoleHistory.record` takes on the main loop, its memory;
* `/api/v1/groups` over real HTTP (keep-alive): the first request after a new snapshot (it
  encodes and gzips the list) and the next ones (cached), plain and gzipped; the same for
  `/api/v1/history/lag-seconds` (the sparklines);
* the Groups page in headless Chromium (Debian's, through Playwright) on that server: from
  navigation start until the first page of rows is drawn and the controls work (the page's
  own `offsetwatch:groups-usable` performance mark), in a fresh browser context each run
  (nothing cached), then how long typing a filter and sorting take;
* the live stream: a feeder thread appends realistic offset commits to the `LiveRecords`
  ring at a fixed rate, 0, 1 and 4 browsers show /live, and the process' CPU time over the
  same wall time is compared: (CPU with N browsers - CPU with none) / N is the cost of one
  browser to the exporter, at a quiet rate and at a rate above the per-browser budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import http.client
import resource
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # tests.* helpers (run as a script, benchmarks/ is path[0])
    sys.path.insert(0, str(REPO))

from offsetwatch.dashboards.console_browser import chromium  # noqa: E402
from offsetwatch.decoder.records import Record  # noqa: E402
from offsetwatch.exporter.judge.snapshot import Snapshot, SnapshotBuilder  # noqa: E402
from offsetwatch.exporter.serve.console_history import ConsoleHistory  # noqa: E402
from offsetwatch.exporter.serve.http_server import ExporterHttpServer  # noqa: E402
from offsetwatch.exporter.serve.live_records import LiveRecords  # noqa: E402
from offsetwatch.exporter.serve.metrics import SnapshotCollector  # noqa: E402
from offsetwatch.exporter.state.lag import LogEndHistory  # noqa: E402
from offsetwatch.exporter.state.offset_state import OffsetState  # noqa: E402
from offsetwatch.exporter.stats import PipelineStats  # noqa: E402
from tests.exporter.serve.test_metrics import classic_group, commit  # noqa: E402

GROUPS = 10_000
PARTITIONS = 4
TOPICS = 200
POINTS = 120


def build_snapshot(now_ms: int) -> Snapshot:
    state = OffsetState()
    ends: dict[tuple[str, int], int] = {}
    for g in range(GROUPS):
        group = f"group-{g:05d}"
        topic = f"topic-{g % TOPICS:03d}"
        if g % 10 == 0:
            members = [
                (f"{group}-m{i}", f"{group}-client", f"/10.0.{i}.1", {topic: [i, i + 2]})
                for i in range(2)
            ]
            state.apply(classic_group(group, members))
        for p in range(PARTITIONS):
            ends[(topic, p)] = 1_000_000
            behind = (g * 7 + p) % 500 if g % 3 else 0
            state.apply(commit(group, topic, p, 1_000_000 - behind, ts=now_ms - 5_000))
    histories = {}
    for key, end in ends.items():
        history = LogEndHistory()
        history.record(now_ms - 600_000, end - 6_000)
        history.record(now_ms - 1_000, end)
        histories[key] = history
    builder = SnapshotBuilder()
    builder.build(state, histories, now_ms, True)  # warm: group views cached as in a daemon
    started = time.perf_counter()
    snapshot = builder.build(state, histories, now_ms, True)
    print(f"snapshot build (for scale): {(time.perf_counter() - started) * 1000:.0f} ms")
    return snapshot


def ready_stats() -> PipelineStats:
    stats = PipelineStats(source_up=True)
    stats.set_position(0, 10)
    stats.set_high_watermark(0, 10)
    stats.mark_ready()
    return stats


def timed_get(
    connection: http.client.HTTPConnection, path: str, gzipped: bool
) -> tuple[float, int]:
    headers = {"Accept-Encoding": "gzip" if gzipped else "identity"}
    started = time.perf_counter()
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - started
    assert response.status == 200, (path, response.status)
    if gzipped:
        assert response.getheader("Content-Encoding") == "gzip"
        gzip.decompress(body)
    return elapsed, len(body)


def api_figures(server: ExporterHttpServer, holder: Holder, runs: int) -> list[str]:
    lines = []
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    page = "&".join(f"group=group-{g:05d}" for g in range(0, GROUPS, GROUPS // 100))
    for path in (
        "/api/v1/groups",
        "/api/v1/history/lag-seconds",
        f"/api/v1/history/lag-seconds?{page}",
    ):
        for gzipped in (False, True):
            firsts, repeats = [], []
            size = 0
            for _ in range(runs):
                # a new snapshot object (and history version): the cache must encode again
                holder.snapshot = dataclasses.replace(holder.snapshot)
                server.history._seq += 2  # a new history version with the same points
                first, size = timed_get(connection, path, gzipped)
                firsts.append(first)
                repeats += [timed_get(connection, path, gzipped)[0] for _ in range(5)]
            kind = "gzip" if gzipped else "plain"
            name = path if "?" not in path else path.split("?")[0] + "?group=... (100 groups)"
            lines.append(
                f"{name} ({kind}, {size / 1e6:.3f} MB): first after a new snapshot "
                f"{statistics.median(firsts) * 1000:.0f} ms (best {min(firsts) * 1000:.0f}), "
                f"then {statistics.median(repeats) * 1000:.1f} ms"
            )
    connection.close()
    return lines


def page_figures(browser: Any, url: str, holder: Holder, runs: int) -> list[str]:
    usable, filtering, sorting = [], [], []
    for _ in range(runs):
        # a snapshot the server has not encoded yet: the page pays for the encoding too
        holder.snapshot = dataclasses.replace(holder.snapshot)
        # the page's CSP forbids eval, which Playwright's wait_for_function uses
        context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.goto(url + "/groups", wait_until="commit")
        page.wait_for_selector('main[data-ready="groups"]', timeout=60_000)
        usable.append(
            page.evaluate("performance.getEntriesByName('offsetwatch:groups-usable')[0].startTime")
        )
        rows = page.locator("#groups tbody tr[data-group]")
        assert rows.count() == 100, rows.count()
        started = time.perf_counter()
        page.fill("#group-filter", "group-04242")
        page.wait_for_function(
            "document.querySelectorAll('#groups tbody tr[data-group]').length === 1"
        )
        filtering.append(time.perf_counter() - started)
        page.fill("#group-filter", "")
        page.wait_for_function(
            "document.querySelectorAll('#groups tbody tr[data-group]').length === 100"
        )
        started = time.perf_counter()
        page.click('button[data-sort="lag"]')
        page.wait_for_selector('th[aria-sort="descending"] button[data-sort="lag"]')
        sorting.append(time.perf_counter() - started)
        context.close()
    return [
        f"Groups page usable (navigation start -> rows drawn, {GROUPS:,} groups, new snapshot, "
        "cold browser context): "
        f"median {statistics.median(usable):.0f} ms, worst {max(usable):.0f} ms "
        f"(target <= 1500 ms)",
        f"typing a filter -> rows filtered: median {statistics.median(filtering) * 1000:.0f} ms "
        f"(incl. the page's 120 ms typing debounce); a sort click: "
        f"{statistics.median(sorting) * 1000:.0f} ms",
    ]


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def feeder(live: LiveRecords, rate: float, stop: threading.Event) -> Callable[[], None]:
    records = [
        Record(
            1,
            commit(f"group-{i % 500:05d}", "orders", i % 12, 1_000 + i).key,
            3,
            commit(f"group-{i % 500:05d}", "orders", i % 12, 1_000 + i).value,
            i % 50,
            i,
            1_800_000_000_000 + i,
        )
        for i in range(20_000)
    ]

    def run() -> None:
        started = time.monotonic()
        sent = 0
        while not stop.is_set():
            due = int((time.monotonic() - started) * rate)
            while sent < due:
                live.append(records[sent % len(records)])
                sent += 1
            stop.wait(0.01)

    return run


def stream_figures(browser: Any, server: ExporterHttpServer, seconds: float) -> list[str]:
    lines = []
    for rate in (200.0, 5_000.0):
        cost: dict[int, float] = {}
        for browsers in (0, 1, 4):
            contexts = [browser.new_context() for _ in range(browsers)]
            pages = [context.new_page() for context in contexts]
            for page in pages:
                page.goto(server.url + "/live")
                page.wait_for_selector('main[data-ready="live"]', timeout=30_000)
            stop = threading.Event()
            thread = threading.Thread(target=feeder(server.live, rate, stop), daemon=True)
            before = cpu_s()
            thread.start()
            time.sleep(seconds)  # a benchmark's measuring interval, not synchronisation
            stop.set()
            thread.join()
            cost[browsers] = (cpu_s() - before) / seconds
            for context in contexts:
                context.close()
        per_browser = [(cost[n] - cost[0]) / n for n in (1, 4)]
        lines.append(
            f"live stream at {rate:,.0f} records/s: exporter CPU {cost[0] * 100:.1f}% of a core "
            f"with no browser, +{per_browser[0] * 100:.1f}% with 1 browser, "
            f"+{per_browser[1] * 100:.1f}% per browser with 4"
        )
    return lines


class Holder:
    def __init__(self, snapshot: Snapshot, stats: PipelineStats) -> None:
        self.snapshot, self.stats = snapshot, stats

    def __call__(self) -> tuple[Snapshot, PipelineStats]:
        return self.snapshot, self.stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 3 if args.quick else 7
    now = int(time.time() * 1000)
    started = time.perf_counter()
    snapshot = build_snapshot(now)
    print(f"built the snapshot of {GROUPS:,} groups in {time.perf_counter() - started:.1f} s")

    history = ConsoleHistory()
    costs = []
    for i in range(POINTS):
        point = dataclasses.replace(snapshot, time_ms=now - (POINTS - i) * 30_000)
        t = time.perf_counter()
        history.record(point)
        costs.append(time.perf_counter() - t)
    # memory of a filled history, measured apart (tracemalloc slows what it watches)
    tracemalloc.start()
    measured = ConsoleHistory()
    for i in range(POINTS):
        measured.record(dataclasses.replace(snapshot, time_ms=now - (POINTS - i) * 30_000))
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del measured
    figures = [
        f"ConsoleHistory.record at {GROUPS:,} groups (main loop, per snapshot): median "
        f"{statistics.median(costs) * 1000:.1f} ms, worst {max(costs) * 1000:.1f} ms; "
        f"{len(history)} points held, {memory / 1e6:.1f} MB ({memory / GROUPS / 1000:.1f} KB "
        "per group)"
    ]
    holder = Holder(snapshot, ready_stats())
    server = ExporterHttpServer(
        SnapshotCollector(holder), "127.0.0.1", 0, history=history, live=LiveRecords()
    )
    with server:
        figures += api_figures(server, holder, runs)
        with chromium() as browser:
            figures += page_figures(browser, server.url, holder, runs)
            figures += stream_figures(browser, server, 5.0 if args.quick else 10.0)
    print()
    for line in figures:
        print("*", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
