"""The exporter's folders are its parts, and the tree says which may use which: every
module's imports checked, so a shortcut through a part's wall fails here, not in review.

* state/ and judge/ are pure: no I/O part, no client, socket, thread or HTTP module;
* judge/ reads state/, never the other way round;
* sinks/ and serve/ never read Kafka (no sources/ import), and serve/ never writes (no
  sinks/ import): what it shows comes from the snapshot and the stats.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXPORTER = Path(__file__).resolve().parents[2] / "exporter"
PARTS = ("sources", "state", "judge", "sinks", "serve")
IO_MODULES = ("confluent_kafka", "socket", "threading", "http", "urllib", "subprocess", "ssl")
#: part -> the parts (and daemon-level modules) it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "state": ("sources", "judge", "sinks", "serve", "daemon", "service", "supervisor"),
    "judge": ("sources", "sinks", "serve", "daemon", "service", "supervisor"),
    "sinks": ("sources", "serve", "daemon", "service"),
    "serve": ("sources", "sinks", "daemon", "service"),
    "sources": ("sinks", "serve", "judge", "daemon", "service"),
}
PURE = ("state", "judge")


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


MODULES = sorted(path for part in PARTS for path in (EXPORTER / part).glob("*.py"))


def test_every_part_is_a_package_with_modules() -> None:
    for part in PARTS:
        assert (EXPORTER / part / "__init__.py").is_file(), part
    assert len(MODULES) > 30


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_part_imports_only_what_its_place_allows(path: Path) -> None:
    part = path.parent.name
    imported = imports_of(path)
    for other in FORBIDDEN[part]:
        prefix = f"offsetwatch.exporter.{other}"
        wrong = sorted(n for n in imported if n == prefix or n.startswith(prefix + "."))
        assert not wrong, f"exporter/{part}/{path.name} imports {wrong}"
    if part in PURE:
        io = sorted(n for n in imported if n.split(".")[0] in IO_MODULES)
        assert not io, f"exporter/{part}/{path.name} is pure but imports {io}"
