"""The examples of docs/consumer-helpers.md and of the README's consumer-helpers section run
as written, each in its own Python process, against librdkafka's mock cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from offsetwatch.mock_cluster import MockCluster
from tests.kafka_fixtures import REPO_ROOT, create_data_topic, kafka_cluster  # noqa: F401

pytestmark = pytest.mark.kafka

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _examples(path: Path, section: str | None = None) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if section is not None:
        start = text.index(section)
        end = text.find("\n## ", start + len(section))
        text = text[start : end if end != -1 else None]
    return _BLOCK.findall(text)


def _run(code: str, bootstrap: str, tmp_path: Path, *args: str) -> str:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "BOOTSTRAP": bootstrap, "STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def topics(kafka_cluster: MockCluster) -> str:  # noqa: F811
    create_data_topic(kafka_cluster, "orders", [20, 20])
    create_data_topic(kafka_cluster, "clicks", [15, 15, 15])
    return kafka_cluster.bootstrap_servers


def test_the_docs_examples_run(topics: str, tmp_path: Path) -> None:
    seek, replay, external, sqlite = _examples(REPO_ROOT / "docs" / "consumer-helpers.md")
    # The mock answers -1 to timestamp lookups: "nothing in the last hour", the log end.
    assert _run(seek, topics, tmp_path) == "read 0 messages\n"
    assert _run(replay, topics, tmp_path) == "replayed 40 messages\n"
    # The same replay id again: already done.
    assert _run(replay, topics, tmp_path) == "replayed 0 messages\n"
    assert _run(external, topics, tmp_path) == "processed 45 messages\n"
    # The restart restores every partition's state and position.
    assert _run(external, topics, tmp_path) == "processed 0 messages\n"
    assert "StoredPartition(offset=42" in _run(sqlite, topics, tmp_path)


def test_the_docs_snapshot_replay_reads_a_csv(topics: str, tmp_path: Path) -> None:
    replay = _examples(REPO_ROOT / "docs" / "consumer-helpers.md")[1]
    (tmp_path / "snapshot.csv").write_text("orders,0,15\norders,1,18\n", encoding="utf-8")
    assert _run(replay, topics, tmp_path, "snapshot.csv") == "replayed 7 messages\n"


def test_the_readme_example_runs(topics: str, tmp_path: Path) -> None:
    (example,) = _examples(REPO_ROOT / "README.md", "## Consumer helpers")
    assert _run(example, topics, tmp_path) == "replayed 40 messages\n"
