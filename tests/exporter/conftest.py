"""Fixtures of the exporter's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.exporter.exporter_process import ExporterProcess


@pytest.fixture
def children() -> Iterator[list[ExporterProcess]]:
    """The exporters a test starts; any still running when it ends (a failed assertion) is
    killed, so that no child outlives its test."""
    started: list[ExporterProcess] = []
    yield started
    for child in started:
        if child.proc.poll() is None:
            child.proc.kill()
            child.proc.wait(60)
        child.log.close()
