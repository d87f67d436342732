"""The Spark jobs on a real multi-process cluster: pickling and executor-side imports break here.

`local-cluster[2,1,1024]` starts a master, two workers and two executor JVMs, each with its own
Python workers; offsetwatch reaches them as the zipped package `get_session` ships with
addPyFile, exactly as on a standalone, YARN or Kubernetes cluster. One JVM runs one
SparkContext, so everything runs in one child process: `offsetwatch spark compact` and
`analyze` through the CLI's entry point and a segments read, all on one cluster, then the same
compaction and read in local mode (a new SparkContext in the same JVM). The cluster's lake and
rows must equal local mode's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.exporter.sinks.archive import ArchiveWriter
from offsetwatch.spark_jobs.session import PACKAGE_ZIP
from tests.spark_jobs.lake_records import classic, commit, log_end

#: a master, two workers and two executor JVMs: as much CPU as the rest of the Spark tests
#: together on two cores, so it runs in the multi-node tier (`make test-cluster`)
pytestmark = [pytest.mark.spark, pytest.mark.cluster]

MASTER = "local-cluster[2,1,1024]"
BASE_MS = 1_795_000_000_000  # 2026-11-18
MINUTE = 60_000


def _history() -> list[dict[str, Any]]:
    """40 minutes: `stuck` commits offset 100 every minute while its log end grows (a stall),
    `healthy` keeps up with its own topic; both are classic groups with one member."""
    records = [
        classic("stuck", 1, ["stuck-1"], BASE_MS, 0),
        classic("healthy", 1, ["healthy-1"], BASE_MS, 1),
    ]
    position = 2
    for minute in range(41):
        ts = BASE_MS + minute * MINUTE
        records.append(log_end("orders", 0, 100 + 50 * minute, ts))
        records.append(log_end("payments", 0, 10 * minute, ts))
        records.append(commit("stuck", "orders", 0, 100, ts + 1000, position))
        records.append(commit("healthy", "payments", 0, 10 * minute, ts + 1000, position + 1))
        position += 2
    return records


def _archive(target: Path) -> Path:
    with ArchiveWriter(target, "jsonl", roll_bytes=8 * 1024) as writer:  # several files
        for record in _history():
            writer.write(record)
    return target


CLUSTER_JOBS = textwrap.dedent(
    """
    import contextlib, io, json, os, sys, time
    from pathlib import Path
    from offsetwatch import cli
    from offsetwatch.spark_jobs.compact import compact
    from offsetwatch.spark_jobs.lake_schema import LAKE_TABLES
    from offsetwatch.spark_jobs.reader import read_records
    from offsetwatch.spark_jobs.session import SparkSettings, get_session

    master, archive, cluster_lake, local_lake, segments = sys.argv[1:6]

    def run(*argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(list(argv))
        if code != 0:
            sys.exit(f"{argv}: exit {code}")
        return out.getvalue()

    def where(rows):
        import offsetwatch
        time.sleep(0.5)  # keep each task long enough for both executors to take some
        yield (os.getpid(), offsetwatch.__file__, sum(1 for _ in rows))

    def tables(spark, lake):
        return {
            table: sorted(repr(tuple(r)) for r in spark.read.parquet(f"{lake}/{table}").collect())
            for table in LAKE_TABLES
            if os.path.exists(f"{lake}/{table}")
        }

    def segment_rows(spark):
        records = read_records(spark, "segments", segments)
        return records, sorted(map(list, records.select("partition", "offset", "type").collect()))

    run("spark", "compact", "--master", master, "--input", archive, "--lake", cluster_lake)
    analyzed = run(
        "spark", "analyze", "--master", master, "--lake", cluster_lake, "--format", "json"
    )
    spark = get_session(SparkSettings(master=master, shuffle_partitions=4))
    records, rows = segment_rows(spark)
    placed = records.repartition(8).rdd.mapPartitions(where).collect()
    cluster = {
        "analyzed": analyzed,
        "rows": rows,
        "tables": tables(spark, cluster_lake),
        "pids": sorted({p for p, _, _ in placed}),
        "modules": sorted({m for _, m, _ in placed}),
        "counted": sum(n for _, _, n in placed),
    }
    spark.stop()

    # local mode in the same JVM: a new SparkContext, no cluster, no shipped package
    spark = get_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    compact(spark, "archive", Path(local_lake), Path(archive), progress=lambda _: None)
    local = {"rows": segment_rows(spark)[1], "tables": tables(spark, local_lake)}
    spark.stop()
    print(json.dumps({"cluster": cluster, "local": local}))
    """
)


@dataclass(frozen=True, slots=True)
class ClusterRun:
    """What CLUSTER_JOBS printed: the cluster's results and local mode's."""

    cluster: dict[str, Any]
    local: dict[str, Any]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory, conformance_dir: Path) -> ClusterRun:
    """`spark compact` and `spark analyze` (the CLI's own entry point) and a segments read on
    one cluster, then the same in local mode, all in one child process: starting JVMs is
    most of the cost."""
    root = tmp_path_factory.mktemp("cluster")
    archive = _archive(root / "archive")
    segments = conformance_dir / "runs" / "main" / "segments"
    argv = [MASTER, archive, root / "lake-cluster", root / "lake-local", segments]
    done = subprocess.run(
        [sys.executable, "-c", CLUSTER_JOBS, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return ClusterRun(result["cluster"], result["local"])


def test_compact_and_analyze_on_a_cluster_equal_local_mode(cluster_run: ClusterRun) -> None:
    cluster_tables = cluster_run.cluster["tables"]
    assert cluster_tables == cluster_run.local["tables"]
    assert len(cluster_tables["commits"]) == 82
    assert len(cluster_tables["log_ends"]) == 82

    episodes = [
        row
        for row in map(json.loads, cluster_run.cluster["analyzed"].splitlines())
        if row["table"] == "episodes"
    ]
    # the stuck group stalls (and its lag in seconds breaks the SLO); the healthy one has none
    assert {e["group"] for e in episodes} == {"stuck"}
    assert {e["kind"] for e in episodes} == {"stall", "lag_slo"}


def test_segments_source_decodes_in_executor_processes(cluster_run: ClusterRun) -> None:
    result = cluster_run.cluster
    local = cluster_run.local["rows"]
    assert local
    assert result["rows"] == local
    assert result["counted"] == len(local)
    assert len(result["pids"]) >= 2, "tasks ran in more than one executor process"
    # executors imported offsetwatch from the zip the driver shipped, not from this checkout
    assert all(PACKAGE_ZIP in module for module in result["modules"])
