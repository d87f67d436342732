"""The one way offsetwatch's Spark jobs get a SparkSession: local by default, any master on request.

Why a module of its own:
* Python workers must run the interpreter that has offsetwatch and pyarrow (Python data sources
  and pandas UDFs need it), not whatever `python3` is first on PATH: PYSPARK_PYTHON defaults to
  `sys.executable` unless the operator set it.
* On a cluster (`--master spark://...`, `yarn`, `k8s://...`, `local-cluster[...]`) the executors
  may not have offsetwatch installed: the package is zipped (symlinked folders resolved) and
  shipped with `addPyFile`, so pickled functions and executor-side imports resolve there. The C
  accelerator cannot load from a zip; executors then decode with the pure-Python path.
* Quiet logs and UTC: every timestamp in the lake is epoch ms or a UTC date.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


@dataclass(frozen=True, slots=True)
class SparkSettings:
    """How to build the session; the CLI fills it from `--master`, `--conf` and the environment."""

    master: str = DEFAULT_MASTER
    app_name: str = "offsetwatch"
    #: extra Spark properties (`--conf key=value`), applied last so they win
    conf: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "WARN"
    #: None: ship the package to executors unless the master is plain local mode
    ship_package: bool | None = None
    shuffle_partitions: int | None = None

    @property
    def is_local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")

    def should_ship(self) -> bool:
        return (not self.is_local) if self.ship_package is None else self.ship_package


def package_root() -> Path:
    """The directory of the importable `offsetwatch` package."""
    import offsetwatch

    return Path(offsetwatch.__file__).resolve().parent


def build_package_zip(target_dir: Path) -> Path:
    """Zip the `offsetwatch` package (following the symlinked folders) for `addPyFile`."""
    root = package_root()
    target = target_dir / "offsetwatch-package.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for directory, dirnames, filenames in os.walk(root, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".pyc", ".so", ".pyd")):
                    continue
                path = Path(directory) / name
                archive.write(path, Path("offsetwatch") / path.relative_to(root))
    return target


def under_spark_submit() -> bool:
    """spark-submit starts the driver's Python with a gateway to its JVM already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_session(settings: SparkSettings | None = None) -> SparkSession:
    """A SparkSession for offsetwatch's jobs, with the `offsetwatch` data source registered."""
    settings = settings or SparkSettings()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if not (under_spark_submit() and settings.master == DEFAULT_MASTER):
        # under spark-submit, its --master (and --py-files) rule unless --master was given
        builder = builder.master(settings.master)
    builder = (
        builder.appName(settings.app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
    )
    if settings.is_local and not under_spark_submit():
        builder = builder.config("spark.ui.enabled", "false")
    if settings.shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
    for key, value in settings.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    if settings.should_ship() and not under_spark_submit():
        staging = Path(tempfile.mkdtemp(prefix="offsetwatch-spark-"))
        spark.sparkContext.addPyFile(str(build_package_zip(staging)))
    register_data_sources(spark)
    return spark


def register_data_sources(spark: SparkSession) -> None:
    """Register `spark.read.format("offsetwatch")` (see spark_jobs/datasource.py)."""
    from offsetwatch.spark_jobs.datasource import OffsetwatchDataSource

    spark.dataSource.register(OffsetwatchDataSource)
