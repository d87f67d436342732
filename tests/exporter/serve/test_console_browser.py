"""The operator console in a real browser: headless Chromium (Debian's) driven by Playwright.

One browser and one demo run for the whole module: librdkafka's mock cluster with the demo's
simulated groups (offsetwatch.simulator) and the exporter serving the console. Every check
waits for what the page shows (Playwright's `expect` polls the DOM); nothing sleeps.

* Groups shows each simulated behaviour's status, as text: OK, WARN, STALL, STOP, REWIND;
* a group's page shows its partitions with status and owner, members, charts; an unknown
  group is a 404 page saying so;
* share groups (the demo's queues, written as a 4.0 broker writes them) are in the list with
  kind SHARE and their queue status; a share group's page shows each share partition's start
  offset, records by delivery state and delivery counts, and pictures them as a bar whose
  segments are the persisted batches, poison ones outlined;
* Live records receive records over the event stream, filter by group, pause and resume;
* Exporter health shows ready and source up, and lists each problem /readyz names (a topic
  the exporter may not describe with its grant command, stale partitions, failing sinks
  and parts) with what to do, or one line saying there is none; a grant being selected
  to copy is not redrawn away;
* the keyboard alone filters, sorts and opens a group; dark mode follows the system;
* a group deleted in Kafka leaves the list;
* with --web-config basic auth, the browser gets a 401 without credentials.

Needs /usr/bin/chromium (`apt-get install chromium`): skipped without it locally, failed
under CI=true (.ci/run installs it).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bcrypt
import pytest

from offsetwatch.core.acl_hints import grant_line
from offsetwatch.dashboards.console_browser import CHROMIUM, chromium, chromium_path
from offsetwatch.dashboards.live import DemoStack
from offsetwatch.exporter.serve.console_static import static_file
from offsetwatch.exporter.serve.http_server import ExporterHttpServer
from offsetwatch.exporter.serve.metrics import SnapshotCollector
from offsetwatch.exporter.serve.web_config import load_web_config
from offsetwatch.exporter.stats import Freshness, PartHealth, PipelineStats, SinkHealth
from tests.exporter.serve.test_http_server import ready_stats
from tests.exporter.serve.test_metrics import Holder, build, commit, sample_state

pytestmark = pytest.mark.kafka

#: ms: generous, the machine is shared; statuses need a status window (8 s) to settle
WAIT_MS = 120_000
STEADY = {
    "billing-healthy": "OK",
    "audit-idle": "OK",
    "kip848-consumers": "OK",
    "txn-processor": "OK",
    "reports-lagging": "WARN",
    "etl-stalled": "STALL",
    "search-stopped": "STOP",
}


def _require_browser() -> None:
    problem = None
    if chromium_path() is None:
        problem = f"chromium not found at {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "playwright is not installed (pip install -e '.[dev]')"
    if problem is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(problem)
    pytest.skip(problem)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require_browser()
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def demo(browser: Any) -> Iterator[tuple[DemoStack, str]]:
    with DemoStack(status_window_s=8.0) as stack:
        yield stack, f"http://{stack.target}"


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], f"script errors in the page: {errors}"


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def status_cell(page: Any, group: str) -> Any:
    return page.locator(f'tr[data-group="{group}"] td[data-col="status"]')


# ------------------------------------------------------------------------------ groups


def test_groups_show_the_status_of_each_behaviour(page: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    page.goto(url + "/groups")
    expect(page.locator("h1")).to_have_text("Consumer groups")
    # REWIND lasts a status window after each reset (one a minute): watch for it first
    expect(status_cell(page, "replay-rewound")).to_contain_text("REWIND", timeout=WAIT_MS)
    for group, status in STEADY.items():
        expect(status_cell(page, group)).to_have_text(re.compile(rf"{status}$"), timeout=WAIT_MS)
    # the status is text, not colour alone; the causes come from the exporter's diagnosis
    assert page.locator('tr[data-group="etl-stalled"] .status').inner_text().endswith("STALL")
    sparkline = page.locator('tr[data-group="reports-lagging"] svg.sparkline')
    expect(sparkline).to_have_attribute("aria-label", re.compile("lag seconds over the last hour"))
    expect(sparkline.locator("path")).to_have_count(1, timeout=WAIT_MS)


def test_filter_by_name_and_status_and_sort(page: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    page.goto(url + "/groups")
    rows = page.locator("#groups tbody tr[data-group]")
    expect(rows.first).to_be_visible(timeout=WAIT_MS)
    page.fill("#group-filter", "stall")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-group", "etl-stalled")
    page.fill("#group-filter", "")
    expect(status_cell(page, "etl-stalled")).to_have_text(re.compile("STALL$"), timeout=WAIT_MS)
    page.select_option("#status-filter", "STALL")
    # the demo has more than one stalled group (a stalled one, one with a stuck member): every
    # row shown is STALL, and the stalled group is among them
    expect(rows.filter(has_not=page.locator(".status", has_text="STALL"))).to_have_count(0)
    expect(page.locator('#groups tbody tr[data-group="etl-stalled"]')).to_have_count(1)
    assert "status=STALL" in page.url
    page.select_option("#status-filter", "")
    page.click('button[data-sort="group"]')
    expect(page.locator('th:has(button[data-sort="group"])')).to_have_attribute(
        "aria-sort", "ascending"
    )
    names = rows.evaluate_all("rows => rows.map(r => r.dataset.group)")
    assert names == sorted(names)


def test_keyboard_alone_filters_and_opens_a_group(page: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    page.goto(url + "/groups")
    expect(page.locator("#groups tbody tr[data-group]").first).to_be_visible(timeout=WAIT_MS)
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "group-filter"
    page.keyboard.type("etl-stalled")
    expect(page.locator("#groups tbody tr[data-group]")).to_have_count(1)
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('href')") == "/groups/etl-stalled":
            break
    else:
        pytest.fail("Tab never reached the group's link")
    page.keyboard.press("Enter")
    expect(page).to_have_url(url + "/groups/etl-stalled")
    expect(page.locator("h1")).to_contain_text("etl-stalled")


def test_dark_mode_follows_the_system(browser: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    context = browser.new_context(color_scheme="dark")
    try:
        page = context.new_page()
        page.goto(url + "/groups")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        channels = [int(c) for c in re.findall(r"\d+", background)[:3]]
        assert max(channels) < 64, background
    finally:
        context.close()


# ------------------------------------------------------------------------- group detail


def test_group_detail_partitions_owners_members_and_charts(
    page: Any, demo: tuple[DemoStack, str]
) -> None:
    _, url = demo
    page.goto(url + "/groups/etl-stalled")
    partitions = page.locator("#partitions tbody tr")
    expect(partitions).to_have_count(3, timeout=WAIT_MS)
    for row in range(3):
        expect(partitions.nth(row).locator('[data-col="status"]')).to_have_text(
            re.compile("STALL$"), timeout=WAIT_MS
        )
    expect(page.locator("#partitions")).to_contain_text("etl-stalled-client @ /10.0.0.")
    expect(page.locator("#members tbody tr")).to_have_count(2)
    expect(page.locator("#members")).to_contain_text("payments: 0, 2")
    # the charts draw the history the exporter keeps (a path with at least two points)
    for chart in ("#offsets-chart", "#lag-seconds-chart"):
        path = page.locator(f"{chart} path[data-series]").first
        expect(path).to_have_attribute("d", re.compile(r"^M[^M]*L"), timeout=WAIT_MS)
    detail = page.request.get(url + "/api/v1/groups/etl-stalled").json()
    if "diagnosis" in detail:  # rendered when the exporter diagnoses (issue 14)
        expect(page.locator("#diagnosis")).to_be_visible()
    expect(page.get_by_role("heading", name="Recent rebalances")).to_be_visible()


@pytest.mark.parametrize(
    ("group", "status", "members"),
    [("search-stopped", "STOP", 0), ("reports-lagging", "WARN", 2), ("audit-idle", "OK", 1)],
)
def test_group_detail_status_per_behaviour(
    page: Any, demo: tuple[DemoStack, str], group: str, status: str, members: int
) -> None:
    _, url = demo
    page.goto(url + f"/groups/{group}")
    expect(page.locator("h1 .status")).to_have_text(re.compile(f"{status}$"), timeout=WAIT_MS)
    if members:
        expect(page.locator("#members tbody tr")).to_have_count(members)
    else:
        expect(page.locator("main")).to_contain_text("No members")


def test_streams_group_page_shows_topology_tasks_and_the_blamed_task(
    page: Any, demo: tuple[DemoStack, str]
) -> None:
    """The demo's streams group (KIP-1071): kind STREAMS in the list; its page shows the
    topology and each instance's process and tasks, and the diagnosis blames the instance
    whose tasks hang, by task."""
    _, url = demo
    page.goto(url + "/groups")
    row = page.locator('tr[data-group="wordcount-streams"]')
    expect(row.locator('[data-col="kind"]')).to_have_text("STREAMS", timeout=WAIT_MS)
    page.goto(url + "/groups/wordcount-streams")
    expect(page.locator("h1 .status")).to_have_text(re.compile("STALL$"), timeout=WAIT_MS)
    expect(page.locator("#group-facts")).to_contain_text("STREAMS / STABLE")
    expect(page.locator("#subtopologies tbody tr")).to_have_count(1)
    expect(page.locator('#subtopologies tr[data-subtopology="0"]')).to_contain_text("orders")
    members = page.locator("#members tbody tr")
    expect(members).to_have_count(2)
    detail = page.request.get(url + "/api/v1/groups/wordcount-streams").json()
    for member in detail["members"]:
        cells = page.locator(f'#members tr[data-member="{member["member_id"]}"]')
        expect(cells.locator('[data-col="active"]')).to_have_text(
            ", ".join(member["tasks"]["active_task_ids"])
        )
        expect(cells).to_contain_text(member["tasks"]["process_id"])
    expect(page.locator("#diagnosis")).to_contain_text("stuck_member", timeout=WAIT_MS)
    expect(page.locator("#diagnosis-reason")).to_contain_text("tasks 0_1, 0_3, 0_5")
    expect(page.locator("#diagnosis-reason")).to_contain_text("wordcount-1")


def test_unknown_group_is_a_404_page(page: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    response = page.goto(url + "/groups/no-such-group")
    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("No such group")
    expect(page.locator("main")).to_contain_text("no-such-group")


# ------------------------------------------------------------------------- share groups

#: the demo's share groups (offsetwatch/share_simulator.py) and the status each settles on
SHARE_STATUS = {
    "jobs-queue": "WARN",
    "emails-queue": "WARN",
    "thumbnails-queue": "STALL",
    "exports-queue": "STOP",
}


def test_share_groups_are_listed_with_kind_share(page: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    page.goto(url + "/groups")
    expect(page.locator('tr[data-group="billing-healthy"] td[data-col="kind"]')).to_have_text(
        "CLASSIC", timeout=WAIT_MS
    )
    expect(page.locator('tr[data-group="kip848-consumers"] td[data-col="kind"]')).to_have_text(
        "CONSUMER"
    )
    page.select_option("#kind-filter", "SHARE")
    assert "kind=SHARE" in page.url
    rows = page.locator("#groups tbody tr[data-group]")
    expect(rows).to_have_count(len(SHARE_STATUS))
    assert sorted(rows.evaluate_all("rows => rows.map(r => r.dataset.group)")) == sorted(
        SHARE_STATUS
    )
    for group, status in SHARE_STATUS.items():
        expect(page.locator(f'tr[data-group="{group}"] td[data-col="kind"]')).to_have_text("SHARE")
        expect(status_cell(page, group)).to_have_text(re.compile(rf"{status}$"), timeout=WAIT_MS)
        # a queue never commits offsets: no "last commit" age
        expect(page.locator(f'tr[data-group="{group}"] td[data-col="last_commit"]')).to_have_text(
            "–"
        )
    # the same list as the API's, kind by kind
    api = page.request.get(url + "/api/v1/groups").json()
    assert sorted(g["group"] for g in api if g["kind"] == "SHARE") == sorted(SHARE_STATUS)


def _segments(page: Any, row: Any) -> list[tuple[int, int, str, int]]:
    """The bar's segments as (first - start offset, last - start offset, state, deliveries)."""
    start = int(row.locator('[data-col="start_offset"]').inner_text().replace(",", ""))
    rects = row.locator("svg.share-bar rect[data-state]").evaluate_all(
        "rs => rs.map(r => [+r.dataset.first, +r.dataset.last, r.dataset.state, +r.dataset.count])"
    )
    return [(first - start, last - start, state, count) for first, last, state, count in rects]


def test_share_group_detail_pictures_each_partition(page: Any, demo: tuple[DemoStack, str]) -> None:
    """jobs-queue keeps 40 records in flight per partition: 10 released twice (available),
    on partitions 0 and 3 five archived at the delivery limit (poison), 15 acknowledged."""
    _, url = demo
    page.goto(url + "/groups/jobs-queue")
    expect(page.locator("h1 .status")).to_have_text(re.compile("WARN$"), timeout=WAIT_MS)
    rows = page.locator("#share-partitions tbody tr")
    expect(rows).to_have_count(6, timeout=WAIT_MS)
    expect(page.locator("#partitions")).to_have_count(0)  # a queue has no committed offsets
    expect(page.locator("#group-facts")).to_contain_text("SHARE / STABLE")
    for p in range(6):
        row = page.locator(f'#share-partitions tr[data-partition="orders-{p}"]')
        poison = p in (0, 3)
        expect(row.locator('[data-col="available"]')).to_have_text("10")
        expect(row.locator('[data-col="acknowledged"]')).to_have_text("15")
        expect(row.locator('[data-col="archived"]')).to_have_text("5" if poison else "0")
        expect(row.locator('[data-col="max_delivery_count"]')).to_have_text("5" if poison else "2")
        expected = [(0, 9, "available", 2)]
        if poison:
            expected.append((10, 14, "archived", 5))
        expected.append((15, 29, "acknowledged", 1))
        assert _segments(page, row) == expected
        # the picture says the same in words, and its poison batch is marked
        label = row.locator("svg.share-bar").get_attribute("aria-label")
        assert label is not None and "10 available, 15 acknowledged" in label
        expect(row.locator("svg.share-bar rect.poison")).to_have_count(1 if poison else 0)
        expect(row.locator('[data-col="status"]')).to_have_text(
            re.compile("WARN$" if poison else "OK$"), timeout=WAIT_MS
        )
    expect(page.locator("#poison li")).to_have_count(2)
    expect(page.locator('#poison li[data-partition="orders-0"]')).to_contain_text(
        "(archived, 5 deliveries)"
    )
    expect(page.locator("#share-facts")).to_contain_text("10")  # poison records: 2 x 5
    expect(page.locator("#diagnosis")).to_contain_text("poison_records")
    expect(page.locator("#members tbody tr")).to_have_count(2)
    expect(page.locator("#members")).to_contain_text("orders: 0, 1, 2, 3, 4, 5")


def test_share_group_detail_equals_the_api_for_a_stuck_queue(
    page: Any, demo: tuple[DemoStack, str]
) -> None:
    """thumbnails-queue's state never changes once written: the page and the API agree on
    every number of every share partition."""
    _, url = demo
    page.goto(url + "/groups/thumbnails-queue")
    expect(page.locator("h1 .status")).to_have_text(re.compile("STALL$"), timeout=WAIT_MS)
    share = page.request.get(url + "/api/v1/groups/thumbnails-queue").json()["share"]
    rows = page.locator("#share-partitions tbody tr")
    expect(rows).to_have_count(len(share["partitions"]))
    for part in share["partitions"]:
        row = page.locator(f'#share-partitions tr[data-partition="payments-{part["partition"]}"]')
        start = part["start_offset"]
        expect(row.locator('[data-col="start_offset"]')).to_have_text(f"{start:,}")
        for state in ("available", "acknowledged", "archived"):
            expect(row.locator(f'[data-col="{state}"]')).to_have_text(str(part["records"][state]))
        expect(row.locator('[data-col="max_delivery_count"]')).to_have_text(
            str(part["max_delivery_count"])
        )
        assert _segments(page, row) == [
            (b["first_offset"] - start, b["last_offset"] - start, b["delivery_state"],
             b["delivery_count"])
            for b in part["in_flight"]
        ]  # fmt: skip
    expect(page.locator("#diagnosis")).to_contain_text("stuck_member")


@pytest.mark.parametrize("group", sorted(SHARE_STATUS))
def test_a_share_group_page_shows_only_what_can_exist(
    page: Any, demo: tuple[DemoStack, str], group: str
) -> None:
    """No in-flight batch past its partition's log end, and the history chart's consumed
    position (log end - lag) never below zero: the demo showed both (issue 31 item 5)."""
    _, url = demo
    page.goto(url + f"/groups/{group}")
    expect(page.locator("#share-partitions tbody tr").first).to_be_visible(timeout=WAIT_MS)
    share = page.request.get(url + f"/api/v1/groups/{group}").json()["share"]
    for part in share["partitions"]:
        assert all(b["last_offset"] < part["log_end"] for b in part["in_flight"]), part
        assert part["lag"] >= 0
    expect(page.locator("figure svg").first).to_be_visible(timeout=WAIT_MS)
    history = page.request.get(url + f"/api/v1/groups/{group}/history").json()
    assert history["consumed"] and min(history["consumed"]) >= 0, history
    assert all(c <= e for c, e in zip(history["consumed"], history["log_end"], strict=True))


# ------------------------------------------------------------------------------ live


def test_live_records_arrive_filter_and_pause(page: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    page.goto(url + "/live")
    rows = page.locator("#records tbody tr")
    expect(rows.first).to_be_visible(timeout=WAIT_MS)
    page.fill("#live-group", "billing-healthy")
    # the page reconnects with the filter 300 ms after the last keystroke and starts the table
    # over; until then the unfiltered stream still adds rows, any of which may be this group's
    expect(page).to_have_url(re.compile(r"\?group=billing-healthy$"))
    expect(rows.first).to_have_attribute("data-group", "billing-healthy", timeout=WAIT_MS)
    groups = set(rows.evaluate_all("rows => rows.map(r => r.dataset.group)"))
    assert groups == {"billing-healthy"}
    assert "offset_commit" in rows.first.inner_text()
    page.click("#pause")
    expect(page.locator("#pause")).to_have_attribute("aria-pressed", "true")
    newest = rows.first.inner_text()
    expect(page.locator("#waiting")).not_to_have_text("0", timeout=WAIT_MS)
    assert rows.first.inner_text() == newest  # paused: the table did not move
    page.click("#pause")
    expect(page.locator("#waiting")).to_have_text("0")
    expect(rows.first).not_to_have_text(newest)
    # partition and offset filters go to the server: only what matches arrives
    partition, offset = (int(x) for x in rows.first.locator("td").nth(1).inner_text().split(" @ "))
    page.fill("#live-partition", str(partition))
    page.fill("#live-offset", str(offset + 1))
    # the page reconnects with the filters (in its URL) and starts the table over
    expect(page).to_have_url(re.compile(rf"partition={partition}&min_offset={offset + 1}$"))
    expect(rows.first).to_be_visible(timeout=WAIT_MS)
    positions = rows.evaluate_all("rows => rows.map(r => r.cells[1].textContent)")
    for position in positions:
        p, o = (int(x) for x in position.split(" @ "))
        assert p == partition and o > offset, position


# ---------------------------------------------------------------------------- health


def test_health_page(page: Any, demo: tuple[DemoStack, str]) -> None:
    _, url = demo
    page.goto(url + "/health")
    expect(page.locator("#health-ready")).to_contain_text("yes", timeout=WAIT_MS)
    expect(page.locator("#health-source-up")).to_contain_text("yes")
    expect(page.locator("#health-decode-errors")).to_contain_text("0")
    expect(page.locator("#health-checkpoint-age")).to_contain_text(re.compile(r"\d"))


# ---------------------------------------------------------------------------- deletion


def test_a_group_deleted_in_kafka_leaves_the_list(page: Any, demo: tuple[DemoStack, str]) -> None:
    stack, url = demo
    page.goto(url + "/groups")
    expect(page.locator('tr[data-group="audit-idle"]')).to_have_count(1, timeout=WAIT_MS)
    stack.delete_group("audit-idle")  # tombstones, as kafka-consumer-groups --delete writes
    expect(page.locator('tr[data-group="audit-idle"]')).to_have_count(0, timeout=WAIT_MS)
    # the demo's own group deleted after 30 s has gone too
    expect(page.locator('tr[data-group="old-deleted"]')).to_have_count(0, timeout=WAIT_MS)
    response = page.goto(url + "/groups/audit-idle")
    assert response is not None and response.status == 404


# ------------------------------------------------------------------------------ auth


def _navigation_refused(page: Any, url: str) -> bool:
    """Chromium either shows the 401 or, when it gives up on the challenge, fails the load."""
    from playwright.sync_api import Error as BrowserError

    try:
        response = page.goto(url)
    except BrowserError as error:
        return "ERR_INVALID_AUTH_CREDENTIALS" in str(error)
    return response is not None and response.status == 401


def test_basic_auth_refuses_the_browser_without_credentials(browser: Any, tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  operator: {hashed}\n")
    holder = Holder(build(sample_state()), ready_stats())
    server = ExporterHttpServer(
        SnapshotCollector(holder), "127.0.0.1", 0, web_config=load_web_config(config)
    )
    with server:
        for credentials in (None, {"username": "operator", "password": "wrong"}):
            context = browser.new_context(http_credentials=credentials)
            try:
                page = context.new_page()
                assert page.request.get(server.url + "/groups").status == 401
                assert _navigation_refused(page, server.url + "/groups")
                assert page.locator("#groups").count() == 0
            finally:
                context.close()
        operator = browser.new_context(
            http_credentials={"username": "operator", "password": "s3cret"}
        )
        try:
            page = operator.new_page()
            response = page.goto(server.url + "/groups")
            assert response is not None and response.status == 200
            # its scripts and API calls carry the credentials too
            expect(status_cell(page, "stopped")).to_have_text(re.compile("ERR$"))
            page.goto(server.url + "/live")
            expect(page.locator("#stream-state")).to_have_text("connected")
        finally:
            operator.close()


# ------------------------------------------------------------------- many groups, odd names

HOSTILE = '<img src=x onerror="window.owned=1">'


@pytest.fixture(scope="module")
def many_groups() -> Iterator[ExporterHttpServer]:
    """1,000 groups (and one whose name is markup) on a server without Kafka."""
    state = sample_state()
    for g in range(1_000):
        state.apply(commit(f"bulk-{g:04d}", "orders", g % 3, 10))
    state.apply(commit(HOSTILE, "orders", 0, 1))
    holder = Holder(build(state), ready_stats())
    with ExporterHttpServer(SnapshotCollector(holder), "127.0.0.1", 0) as server:
        yield server


def test_a_thousand_groups_are_paged(page: Any, many_groups: ExporterHttpServer) -> None:
    page.goto(many_groups.url + "/groups?sort=group&order=asc")
    rows = page.locator("#groups tbody tr[data-group]")
    expect(rows).to_have_count(100)
    expect(page.locator("#page-info")).to_have_text("Page 1 of 11")
    expect(page.locator("#prev-page")).to_be_disabled()
    page.click("#next-page")
    expect(page.locator("#page-info")).to_have_text("Page 2 of 11")
    expect(rows.first).to_have_attribute("data-group", "bulk-0099")
    assert "page=2" in page.url
    page.fill("#group-filter", "bulk-09")
    expect(page.locator("#page-info")).to_have_text("Page 1 of 1")
    expect(rows).to_have_count(100)


def test_group_names_are_text_never_markup(page: Any, many_groups: ExporterHttpServer) -> None:
    page.goto(many_groups.url + "/groups?q=onerror")
    row = page.locator("#groups tbody tr[data-group]")
    expect(row).to_have_count(1)
    expect(row.locator("th a")).to_have_text(HOSTILE)
    assert page.locator("#groups img").count() == 0
    row.locator("th a").click()
    expect(page.locator("h1")).to_contain_text(HOSTILE)
    assert page.evaluate("window.owned === undefined")
    response = page.goto(many_groups.url + "/groups/" + quote(HOSTILE + "-gone", safe=""))
    assert response is not None and response.status == 404
    expect(page.locator("main code")).to_have_text(HOSTILE + "-gone")
    assert page.evaluate("window.owned === undefined")


# ------------------------------------------------------------------- health problems

DENIED_ERROR = "TOPIC_AUTHORIZATION_FAILED: Broker: Topic authorization failed"
SINK_ERROR = "KafkaException: Broker: Topic authorization failed (offsetwatch.records)"
PART_ERROR = "KafkaException: Local: Timed out"
STALE_CAUSE = "its leader did not answer for its log end: timed out"
SHARE_STALE_CAUSE = "not read up to the log end its leader answered (40; read up to offset 12)"


def _grant(topic: str) -> str:
    settings = {"bootstrap.servers": "kafka-1:9093", "sasl.username": "offsetwatch"}
    return grant_line(settings, "Describe", "topic", topic)


def _problem_stats() -> PipelineStats:
    """Caught up, with one of each problem /readyz lists. readiness() takes the wall clock
    and these ages are an hour or more, so the two stale partitions stay stale."""
    now = time.time_ns() // 1_000_000
    stats = ready_stats()
    stats.denied_topics = {topic: (DENIED_ERROR, _grant(topic)) for topic in ("payments", HOSTILE)}
    stats.freshness = Freshness(
        tracked=(7, 31),
        partition_count=50,
        confirmed_ms={31: now - 3_600_000},  # 7 never confirmed since tracking began
        causes={31: STALE_CAUSE},
        stale_after_ms=30_000,
        since_ms=now - 7_200_000,
    )
    stats.share_state_freshness = Freshness(
        tracked=(0, 1, 2),
        partition_count=3,
        confirmed_ms={0: now, 1: now, 2: now - 5_400_000},
        causes={2: SHARE_STALE_CAUSE},
        stale_after_ms=30_000,
        since_ms=now - 7_200_000,
    )
    stats.sinks = [
        SinkHealth("archive"),
        SinkHealth(
            "publish",
            errors_total=40,
            dropped_total=12,
            failing_since_ms=now - 600_000,
            last_error=SINK_ERROR,
            backlog=1_000,
        ),
    ]
    stats.parts = [
        PartHealth("offsets_reader"),
        PartHealth(
            "log_end_sampler",
            restarts_total=4,
            failing_since_ms=now - 900_000,
            last_error=PART_ERROR,
        ),
    ]
    return stats


@contextmanager
def _health_server(stats: PipelineStats) -> Iterator[ExporterHttpServer]:
    holder = Holder(build(sample_state()), stats)
    with ExporterHttpServer(SnapshotCollector(holder), "127.0.0.1", 0) as server:
        yield server


def test_health_lists_each_problem_with_what_to_do(page: Any) -> None:
    with _health_server(_problem_stats()) as server:
        page.goto(server.url + "/health")
        problems = page.locator("#health-problems")
        expect(problems.locator("h2")).to_have_text("Problems")
        expect(page.locator("#health-no-problems")).to_have_count(0)
        # topics in name order: "<" sorts before "p"
        refused = page.locator("#health-not-authorized tbody tr")
        expect(refused).to_have_count(2)
        for row, topic in zip((refused.nth(0), refused.nth(1)), (HOSTILE, "payments"), strict=True):
            expect(row).to_have_attribute("data-name", topic)
            expect(row.locator('[data-col="resource"] code')).to_have_text(topic)
            expect(row.locator('[data-col="operation"]')).to_have_text("Describe")
            expect(row.locator('[data-col="error"]')).to_have_text(DENIED_ERROR)
            expect(row.locator("code.grant")).to_have_text(_grant(topic))
        # the markup in the topic name is text: no image, no handler ran
        expect(problems.locator("img")).to_have_count(0)
        assert page.evaluate("window.owned === undefined")

        stale = page.locator("#health-stale")
        expect(stale.locator("h3")).to_contain_text("2 __consumer_offsets partition(s)")
        rows = stale.locator("tbody tr")
        expect(rows).to_have_count(2)
        # the longest unconfirmed first: 7 (never, tracked for two hours), then 31 (an hour)
        assert rows.evaluate_all("rows => rows.map(r => r.dataset.partition)") == ["7", "31"]
        expect(rows.nth(0).locator('[data-col="age"]')).to_contain_text("2 h")
        expect(rows.nth(0)).to_contain_text("never since the exporter started tracking it")
        expect(rows.nth(0).locator('[data-col="cause"]')).to_contain_text("no log-end round")
        expect(rows.nth(1).locator('[data-col="age"]')).to_contain_text("1 h")
        expect(rows.nth(1).locator('[data-col="cause"]')).to_have_text(STALE_CAUSE)

        # the share groups' state: its own list, only the stale partition
        share = page.locator("#health-share-state-stale")
        expect(share.locator("h3")).to_contain_text("1 __share_group_state partition(s)")
        expect(share).to_contain_text("the share groups whose state they hold")
        share_rows = share.locator("tbody tr")
        expect(share_rows).to_have_count(1)
        expect(share_rows.nth(0)).to_have_attribute("data-partition", "2")
        expect(share_rows.nth(0).locator('[data-col="age"]')).to_contain_text("1 h")
        expect(share_rows.nth(0).locator('[data-col="cause"]')).to_have_text(SHARE_STALE_CAUSE)

        sinks = page.locator("#health-failing-sinks tbody tr")
        expect(sinks).to_have_count(1)  # the archive is up: not a problem
        publish = page.locator('#health-failing-sinks tr[data-sink="publish"]')
        expect(publish.locator('[data-col="error"]')).to_have_text(SINK_ERROR)
        expect(publish.locator('[data-col="since"]')).to_contain_text(re.compile(r"Z \(.* ago\)$"))
        expect(publish.locator('[data-col="kept"]')).to_have_text("1,000")
        expect(publish.locator('[data-col="dropped"]')).to_have_text("12")

        parts = page.locator("#health-failing-parts tbody tr")
        expect(parts).to_have_count(1)
        sampler = page.locator('#health-failing-parts tr[data-part="log_end_sampler"]')
        expect(sampler.locator('[data-col="error"]')).to_have_text(PART_ERROR)
        expect(sampler.locator('[data-col="restarts"]')).to_have_text("4")
        # stale partitions make the exporter unready, and the one-line reason says so too
        expect(page.locator("#health-ready")).to_contain_text("no stale: the cluster")


def _next_two_refreshes(page: Any) -> None:
    """Returns once a whole refresh ran after now: the page asks again only after its last
    answer was drawn (or skipped), so the second request follows a complete one."""
    for _ in range(2):
        with page.expect_request(re.compile(r"/api/v1/health$")):
            pass


def test_a_grant_being_copied_is_not_redrawn_away(page: Any) -> None:
    with _health_server(_problem_stats()) as server:
        page.goto(server.url + "/health")
        grant = page.locator("#health-not-authorized tr[data-name=payments] code.grant")
        grant.click()  # user-select: all: one click selects the whole command
        assert page.evaluate("getSelection().toString()") == _grant("payments")
        grant.evaluate("node => { node.kept = true; }")
        _next_two_refreshes(page)
        assert page.evaluate("getSelection().toString()") == _grant("payments")
        assert grant.evaluate("node => node.kept === true")
        page.evaluate("getSelection().removeAllRanges()")
        _next_two_refreshes(page)
        assert grant.evaluate("node => node.kept === undefined")  # drawn anew again


def test_health_without_problems_says_so_in_one_line(page: Any) -> None:
    with _health_server(ready_stats()) as server:
        page.goto(server.url + "/health")
        expect(page.locator("#health-no-problems")).to_have_text(
            "No problems: every topic is described, every __consumer_offsets and "
            "__share_group_state partition was confirmed lately, and every sink and part is up."
        )
        for kind in (
            "not-authorized",
            "stale",
            "share-state-stale",
            "failing-sinks",
            "failing-parts",
        ):
            expect(page.locator(f"#health-{kind}")).to_have_count(0)
        expect(page.locator("#health-ready")).to_contain_text("yes")


# ------------------------------------------------------------------- requests cut short


class _HalfAnswer(BaseHTTPRequestHandler):
    """Serves the console's util.js, an empty page, and at /slow a JSON answer whose body
    stops half-way until the test sets the server's `release`."""

    server: _HalfAnswerServer

    def do_GET(self) -> None:
        if self.path == "/util.js":
            util = static_file("util.js")
            assert util is not None
            self._answer("text/javascript", util.body)
        elif self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b'{"times_ms": [')
            self.wfile.flush()
            self.server.release.wait(30)
        else:
            self._answer("text/html", b"<!doctype html><title>half</title>")

    def _answer(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _HalfAnswerServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HalfAnswer)
        self.release = threading.Event()


def test_a_request_aborted_while_its_body_arrives_is_an_abort_never_null(page: Any) -> None:
    """A script error CI once caught on the Groups page: a newer sparkline request aborted
    one whose headers had come and whose body had not, and `getJson` answered null."""
    server = _HalfAnswerServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        page.evaluate(
            """async () => {
                const { getJson } = await import("/util.js");
                const real = window.fetch;
                window.fetch = async (...args) => {
                    const response = await real(...args);
                    window.headersIn = true;
                    return response;
                };
                const controller = new AbortController();
                window.abortIt = () => controller.abort();
                window.outcome = getJson("/slow", controller.signal).then(
                    (body) => ({ resolved: body }), (error) => ({ rejected: error.name }));
            }"""
        )
        page.wait_for_function("window.headersIn === true")
        page.evaluate("window.abortIt()")
        assert page.evaluate("window.outcome") == {"rejected": "AbortError"}
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
