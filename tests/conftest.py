"""Shared fixtures: where the conformance vectors live, and how to behave when they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _conformance_root() -> Path:
    configured = os.environ.get("OFFSETWATCH_CONFORMANCE_DIR")
    base = Path(configured) if configured else REPO_ROOT.parent / "shared" / "conformance"
    return base


def require_path(path: Path, what: str) -> Path:
    """Skip locally, fail under CI=true, when shared test material is missing."""
    if path.exists():
        return path
    message = (
        f"{what} not found at {path}. Set OFFSETWATCH_CONFORMANCE_DIR to the folder holding "
        "kafka-4.0.0/ (default ../shared/conformance)."
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    return require_path(_conformance_root() / "kafka-4.0.0", "Conformance vectors")


@pytest.fixture(scope="session")
def bench_dir() -> Path:
    return require_path(_conformance_root().parent / "bench", "Benchmark data")
