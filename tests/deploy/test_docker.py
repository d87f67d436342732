"""deploy/docker/Dockerfile, read as text: no Docker engine on this machine.

Not run here: `docker build` and the container itself (no engine, no registry). What is
checked: two stages, the C accelerator asserted in use at build time, the files it copies
exist and pass the BuildKit ignore file, a numeric non-root user, a HEALTHCHECK on /readyz at
the exporter's port, only real OFFSETWATCH_* variables, and `offsetwatch export` as the
entrypoint. tests/decoder/test_speedups.py covers the accelerator the build step asserts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from offsetwatch.exporter.config import DEFAULT_HTTP_PORT
from tests.deploy.cli_options import is_export_env

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
IGNORE = ROOT / "deploy" / "docker" / "Dockerfile.dockerignore"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _all(instruction: str) -> list[str]:
    return [rest for word, rest in _instructions() if word == instruction]


def test_multi_stage_with_the_accelerator_checked() -> None:
    stages = _all("FROM")
    assert len(stages) == 2 and stages[0].endswith(" AS build")
    build_steps = " ".join(_all("RUN"))
    assert "pip wheel" in build_steps
    assert "speedups_status" in build_steps and "assert used" in build_steps
    assert any(copy.startswith("--from=build ") for copy in _all("COPY"))


def test_copied_sources_exist_and_are_not_ignored() -> None:
    ignored = IGNORE.read_text().splitlines()
    assert ignored[ignored.index("*")] == "*"
    for copy in _all("COPY"):
        if copy.startswith("--from="):
            continue
        *sources, _ = copy.split()
        for source in sources:
            assert (ROOT / source).exists(), source
            assert f"!{source}" in ignored, f"{source} is excluded from the build context"


def test_runs_as_numeric_non_root_user() -> None:
    (user,) = _all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) >= 1000 and gid.isdigit()


def test_healthcheck_asks_readyz_on_the_exporter_port() -> None:
    (healthcheck,) = _all("HEALTHCHECK")
    assert f"127.0.0.1:{DEFAULT_HTTP_PORT}/readyz" in healthcheck
    assert "--start-period=" in healthcheck
    (expose,) = _all("EXPOSE")
    assert expose == str(DEFAULT_HTTP_PORT)


def test_environment_and_entrypoint_are_real() -> None:
    names = re.findall(r"\b(OFFSETWATCH_\w+)=", " ".join(_all("ENV")))
    assert names and all(is_export_env(name) for name in names), names
    (entrypoint,) = _all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["offsetwatch", "export"]
