"""`offsetwatch spark ...`: the PySpark history jobs (lake, analytics, alerts, point in time).

Each job is a module of this package with `register(subparsers)`, found by itself like the
top-level commands; `_common` holds the options every job shares (`--master`, `--conf`).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers

DESCRIPTION = """\
Spark jobs over the history of __consumer_offsets: the exporter's archive files, raw segment
files or a live topic become a Parquet lake (commits, group events, log-end samples), and
analytics over it find stalls, stops, rewinds, rebalance storms and lag-SLO breaches, alert
through Alertmanager, and answer "which offsets did group G have at time T".

Runs in local mode by default (local[*]); `--master` runs the same job on a cluster
(spark://HOST:7077, yarn, k8s://...). The offsetwatch package is shipped to the executors.
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "spark",
        help="Spark jobs: history lake, analytics, alerts, offsets at a point in time",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    jobs = parser.add_subparsers(title="jobs", metavar="JOB", dest="spark_job")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        job_register = getattr(module, "register", None)
        if callable(job_register):
            job_register(jobs)
    return parser
