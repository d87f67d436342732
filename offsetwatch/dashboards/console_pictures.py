"""Screenshots of the operator console on the demo workload, for docs/images/ and the README.

    python -m offsetwatch.dashboards.console_pictures            # ~2 minutes; docs/images/

Runs the demo (mock cluster, simulated groups, exporter: `offsetwatch.dashboards.live`),
lets it run long enough for the charts to have a history and for the rewound group to be
caught rewinding, then opens each page in headless Chromium (the browser tests' launcher,
`console_browser`) and saves it. Needs Debian's chromium and the dev extra (playwright).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from offsetwatch.dashboards.console_browser import chromium
from offsetwatch.dashboards.live import DemoStack

if TYPE_CHECKING:
    from playwright.sync_api import Browser

#: (file, path, wait for this selector, full page)
PAGES: Final = (
    ("console-groups.png", "/groups", 'main[data-ready="groups"]', False),
    ("console-group-detail.png", "/groups/etl-stalled", 'main[data-ready="group"]', True),
    ("console-live.png", "/live", "#records tbody tr", False),
    ("console-health.png", "/health", 'main[data-ready="health"]', False),
)
#: seconds of demo before the pictures: the charts need a history
WARM_UP_S: Final = 75.0
TIMEOUT_MS: Final = 120_000


def _shoot(browser: Browser, url: str, out: Path, dark: bool) -> list[Path]:
    context = browser.new_context(
        viewport={"width": 1280, "height": 760},
        color_scheme="dark" if dark else "light",
        device_scale_factor=1,
    )
    written = []
    try:
        page = context.new_page()
        page.goto(url + "/groups")
        # a rewind lasts one status window per minute: picture the list while it shows
        page.locator('tr[data-group="replay-rewound"] td[data-col="status"]').filter(
            has_text="REWIND"
        ).wait_for(timeout=TIMEOUT_MS)
        for name, path, ready, full in PAGES:
            if dark:
                name = name.replace(".png", "-dark.png")
            if path != "/groups":
                page.goto(url + path)
            page.locator(ready).first.wait_for(timeout=TIMEOUT_MS)
            target = out / name
            page.screenshot(path=str(target), full_page=full)
            written.append(target)
            if dark:
                break  # one dark picture shows the scheme
    finally:
        context.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    parser.add_argument("--warm-up-s", type=float, default=WARM_UP_S)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with DemoStack(status_window_s=8.0) as stack, chromium() as browser:
        url = f"http://{stack.target}"
        time.sleep(args.warm_up_s)  # let the demo build a history worth drawing
        written = _shoot(browser, url, args.out, dark=False)
        written += _shoot(browser, url, args.out, dark=True)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
