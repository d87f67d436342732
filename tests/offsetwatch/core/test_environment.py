"""Every OFFSETWATCH_* variable the project reads is one the CLI knows (so none is refused as
misspelled), found by scanning the sources rather than listed by hand."""

from __future__ import annotations

import re
from pathlib import Path

from offsetwatch.cli import build_parser
from offsetwatch.commands import option_env_names
from offsetwatch.core.environment import OTHER_VARIABLES, stray_variables

ROOT = Path(__file__).parents[3]
#: where variables are read: the product, its tools, and what CI and make set
SCANNED = ("decoder", "exporter", "spark_jobs", "offsetwatch", "scripts", "benchmarks", "deploy")
NAME = re.compile(r"\bOFFSETWATCH_[A-Z0-9_]*[A-Z0-9]\b")


def _read_names() -> set[str]:
    files = [p for d in SCANNED for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".sh", ".c")]
    files += [ROOT / "Makefile", ROOT / ".ci" / "run", *sorted((ROOT / "tests").glob("*.py"))]
    names: set[str] = set()
    for path in files:
        # environment.py's docstring shows a misspelling on purpose
        if path.is_file() and path.name != "environment.py":
            names |= set(NAME.findall(path.read_text(errors="replace")))
    return names


def test_every_variable_the_project_reads_is_known() -> None:
    options = option_env_names([build_parser()])
    names = _read_names() - {"OFFSETWATCH_SPEEDUPS_SOURCE"}  # a C macro, not a variable
    # OFFSETWATCH_SOME_OPTION is the example of the commands package's docstring
    names.discard("OFFSETWATCH_SOME_OPTION")
    assert stray_variables(dict.fromkeys(names, "1"), options) == []


def test_the_other_variables_are_no_option_and_are_read_somewhere() -> None:
    options = option_env_names([build_parser()])
    read = _read_names()
    for name in OTHER_VARIABLES:
        assert name not in options
        assert name in read, f"{name} is listed but nothing reads it"
