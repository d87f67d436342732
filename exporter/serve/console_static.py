"""The console's files: HTML, CSS and JavaScript modules shipped in the package (no build step).

They are read once, from `offsetwatch/exporter/static/` (package data in the wheel), and
served from memory with an ETag, so a browser revalidates instead of downloading again. Every
console path (`/`, `/groups`, `/groups/{group}`, `/live`, `/health`) gets the same page; its
script draws the view the path names. The page of an unknown group also says so in the HTML
itself (and is served with 404), so it reads right without the script too.
"""

from __future__ import annotations

import functools
import hashlib
import html
from dataclasses import dataclass
from importlib import resources
from typing import Final

__all__ = ["PAGE_HEADERS", "StaticFile", "console_page", "static_file"]

_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: the console only ever loads its own files: no inline script, no other origin
PAGE_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_MAIN: Final = '<main id="main" tabindex="-1">'


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str


@functools.cache
def _load() -> dict[str, StaticFile]:
    """Read once per process: the files cannot change under a running exporter."""
    root = resources.files("offsetwatch.exporter.serve") / "static"
    loaded = {}
    for entry in root.iterdir():
        name = entry.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if not entry.is_file() or suffix not in _TYPES:
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        loaded[name] = StaticFile(body, _TYPES[suffix], etag)
    return loaded


def static_file(name: str) -> StaticFile | None:
    """A file of the console by name (`app.js`); None for anything else (no paths)."""
    if "/" in name or name.startswith("."):
        return None
    return _load().get(name)


def console_page(missing_group: str | None = None, warming_up: bool = False) -> bytes:
    """The console's page; with `missing_group`, saying that there is no such group (and,
    while the exporter is still catching up, that it may not know the group yet)."""
    page = _load()["index.html"].body
    if missing_group is None:
        return page
    name = html.escape(missing_group)
    why = (
        "the exporter is still reading __consumer_offsets and may not have met it yet"
        if warming_up
        else "it never committed offsets, or it was deleted"
    )
    notice = (
        f'{_MAIN}<section class="notice" data-view="missing"><h1>No such group</h1>'
        f"<p>The exporter knows no consumer group <code>{name}</code>: {why}. "
        '<a href="/groups">All groups</a></p></section>'
    )
    return page.replace(_MAIN.encode(), notice.encode(), 1)
