"""Shared fixtures: where the conformance vectors live, and how to behave when they are absent."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Final

import pytest

from tests.real_broker import RUN_DIR_VARIABLE, kafka_broker, stop_shared_broker

__all__ = ["kafka_broker"]

REPO_ROOT = Path(__file__).resolve().parent.parent

# Every JVM the tests start (the shared session, `offsetwatch spark` children, cluster
# executors) reads tests/spark-conf/spark-defaults.conf; an operator's own directory wins.
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent / "spark-conf"))
# Every Kafka JVM the tests start (brokers, Kafka's CLI tools: kafka-run-class.sh reads this)
# compiles with C1 only and collects with the serial collector, as the Spark JVMs above do:
# a broker's start plus a topic and a group listing took 9.1 CPU s with Kafka's defaults and
# 5.1 with these (2026-11-27), and the suite starts dozens of brokers and a hundred tools on
# two cores. The benchmarks run Kafka with its defaults.
os.environ.setdefault(
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true",
)


def pytest_configure(config: pytest.Config) -> None:
    """The run's directory for the shared real broker, made once by the process that starts
    the run; xdist workers inherit it through the environment and share the broker there."""
    if RUN_DIR_VARIABLE not in os.environ:
        run_dir = tempfile.mkdtemp(prefix="offsetwatch-broker-")
        os.environ[RUN_DIR_VARIABLE] = run_dir
        config.stash[_RUN_DIR_OWNED] = Path(run_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The process that made the run's directory stops the shared broker (if one started)."""
    run_dir = config.stash.get(_RUN_DIR_OWNED, None)
    if run_dir is not None:
        stop_shared_broker(run_dir)
        os.environ.pop(RUN_DIR_VARIABLE, None)


_RUN_DIR_OWNED: Final = pytest.StashKey[Path]()


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


def require_accelerator(loaded: tuple[Any, str], what: str) -> Any:
    """The module of an optional C accelerator (`ingest_accelerator()`...): CI builds from a
    clean clone, so there it must be in use; locally a failed build only skips."""
    module, why = loaded
    if module is None:
        message = f"the {what} is not used: {why}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return module


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    return require_path(_conformance_root() / "kafka-4.0.0", "Conformance vectors")


@pytest.fixture(scope="session")
def bench_dir() -> Path:
    return require_path(_conformance_root().parent / "bench", "Benchmark data")


#: The CPU-bound Spark tests run in two groups of about equal length, each group in one worker
#: with that worker's one SparkSession (one JVM; a third CPU-bound group was measured slower:
#: one more JVM costs more CPU than its shorter tail saves). The Spark modules on a real broker
#: and Spark's local-cluster are marked `cluster` and run under `make test-cluster`.
_SPARK_TESTS: Final = "tests/spark_jobs/"
_SOURCE_TESTS: Final = ("kafka", "source", "offsets_at", "path_matrix")
#: the longest units first (the Spark groups, then every module that took 8 s or more under
#: `make test`, longest first): the run then ends on short modules, and no worker is left
#: with a long one while the others are done
_FIRST: Final = (
    "spark",
    "spark-sources",
    # the real-broker modules mostly wait (brokers of their own starting and crashing,
    # rebalances, Kafka's tools in JVMs): begun early, they overlap the CPU-bound ones
    "tests/exporter/test_secured_real.py",
    "tests/exporter/test_exporter_crash_real.py",
    "tests/exporter/test_real_broker_retention.py",
    "tests/exporter/test_share_groups_real_broker.py",
    "tests/decoder/test_share_state_broker.py",
    "tests/offsetwatch/test_offsets_real_broker.py",
    "tests/exporter/test_real_broker.py",
    "tests/exporter/test_sink_faults.py",
    "tests/offsetwatch/test_groups_real_broker.py",
    "tests/offsetwatch/consumer_helpers/test_real_broker.py",
    "tests/offsetwatch/test_decode_real_broker.py",
    "tests/decoder/test_kafka_json_text.py",
    "tests/offsetwatch/consumer_helpers/test_replay.py",
    "tests/decoder/test_roundtrip.py",
    "tests/offsetwatch/consumer_helpers/test_docs.py",
    "tests/exporter/serve/test_console_browser.py",
    "tests/grafana/test_e2e.py",
    "tests/offsetwatch/consumer_helpers/test_seek.py",
    "tests/offsetwatch/test_decode_cmd.py",
    "tests/exporter/serve/test_console_api.py",
    "tests/exporter/test_broker_outage.py",
    "tests/grafana/test_known_limits.py",
    "tests/offsetwatch/test_offsets_cmd.py",
    "tests/exporter/sinks/test_publisher.py",
    "tests/exporter/serve/test_metrics.py",
    "tests/exporter/test_daemon_restart.py",
    "tests/exporter/serve/test_http_security.py",
    "tests/offsetwatch/consumer_helpers/test_assignment.py",
    "tests/exporter/serve/test_http_server.py",
    "tests/decoder/test_bombs.py",
    "tests/decoder/test_speedups.py",
)


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to under `make test` (pytest -n N --dist loadgroup).

    A Spark group (above), else its module: module-scoped fixtures (a built wheel, a running
    demo, a mock cluster) are made once, and never by two workers at the same time.
    """
    module = nodeid.split("::", 1)[0]
    if not module.startswith(_SPARK_TESTS):
        return module
    name = module.rsplit("/", 1)[-1]
    return "spark-sources" if any(word in name for word in _SOURCE_TESTS) else "spark"


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` with the scopes of `xdist_scope`.

    pytest-xdist marks a test's group by appending `@group` to its node id, which pytest 9.2's
    structured node ids ignore (pytest-xdist issue 1386): the groups are decided here, from
    the node id, where the scheduler asks for them. An explicit `@group` still wins.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Scheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            marked: str = super()._split_scope(nodeid)
            return marked if marked != nodeid else xdist_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            for scope in reversed(_FIRST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return Scheduling(config, log)
