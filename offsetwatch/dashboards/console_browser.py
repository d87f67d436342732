"""Headless Chromium for the console: the browser tests, the pictures and the benchmark.

Playwright drives Debian's `chromium` package (`apt-get install chromium`); it never
downloads a browser of its own (`playwright install` is not needed, and not run). Playwright
is a development dependency: import this module only where a browser is wanted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from playwright.sync_api import Browser

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium", "chromium_path"]

CHROMIUM: Final = Path("/usr/bin/chromium")
#: no sandbox (root in containers), no GPU, and nothing that talks to the internet by itself
CHROMIUM_ARGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> Path | None:
    """Debian's chromium (or $OFFSETWATCH_CHROMIUM), None when it is not installed."""
    configured = os.environ.get("OFFSETWATCH_CHROMIUM")
    path = Path(configured) if configured else CHROMIUM
    return path if path.exists() else None


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed on exit; RuntimeError when chromium is not installed."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError(f"chromium not found at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(path), args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            browser.close()
