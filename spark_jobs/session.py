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
* A quiet start unless `quiet=False` (`--verbose`): the driver JVM logs with
  log4j2-quiet.properties from its first line, in local mode binds to the loopback address
  (Spark's hostname warning is about choosing another one), and the JVM's notice about the
  incubator module Spark always adds (no JVM option silences it) is dropped from its stderr.
* A session that cannot start (a wrong master, a master that does not answer, a bad --conf)
  is one `SparkStartError` with Spark's own reason in one line: the JVM's lines of a quiet
  start are held until the session is up, and dropped when it never is (`--verbose` shows
  them as Spark prints them).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
#: the zipped package `get_session` ships to executors (its name, as executors see it)
PACKAGE_ZIP: Final = "offsetwatch-package.zip"
QUIET_LOG4J: Final = Path(__file__).with_name("log4j2-quiet.properties")
#: JVM start-up lines that no option turns off: dropped from the driver's stderr when quiet
_JVM_NOTICES: Final = (b"WARNING: Using incubator modules:",)
#: `org.apache.spark.SparkException: Could not parse Master URL: 'x'` in a Java line
_JAVA_EXCEPTION: Final = re.compile(r"(?:[\w$]+\.)+([\w$]*(?:Exception|Error)): (.+)")


#: a log4j ERROR line of the quiet layout: `26/12/07 07:34:30 ERROR Backend: message`
_LOGGED_ERROR: Final = re.compile(r"^\S+ \S+ ERROR [\w$.]+: (.+)")
#: what Spark says about a failure whose reason is elsewhere
_UNINFORMATIVE: Final = ("Cannot call methods on a stopped SparkContext", "Error initializing")


class SparkStartError(RuntimeError):
    """The session did not start; the message is Spark's reason, in one line."""


class _HeldLines:
    """The JVM's stderr of a start that may fail: held until the session is up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: list[bytes] | None = []
        self.target: IO[bytes] | None = None
        self.reader: threading.Thread | None = None

    def write(self, line: bytes) -> None:
        with self._lock:
            if self._lines is not None:
                self._lines.append(line)
                return
        self._write(line)

    def _write(self, line: bytes) -> None:
        if self.target is not None:
            with contextlib.suppress(OSError, ValueError):
                self.target.write(line)
                self.target.flush()

    def release(self) -> None:
        """The session is up: what was held goes out, and what comes next straight away."""
        with self._lock:
            held, self._lines = self._lines or [], None
        for line in held:
            self._write(line)

    def held(self, wait_s: float = 0.0) -> list[str]:
        """What was held; `wait_s` lets a JVM that is exiting finish saying why."""
        if self.reader is not None and wait_s > 0:
            self.reader.join(wait_s)
        with self._lock:
            return [line.decode("utf-8", "replace").strip() for line in self._lines or []]


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
    #: False: Spark's start-up messages as Spark prints them (`--verbose`)
    quiet: bool = True

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
    """Zip the `offsetwatch` package (following the symlinked folders) for `addPyFile`.

    Written under a temporary name and renamed: a failure (a full disk) leaves no cut zip
    under the final name, and an older zip there stays whole."""
    from offsetwatch.core.atomic import atomic_write

    root = package_root()
    target = target_dir / PACKAGE_ZIP
    with atomic_write(target) as out, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
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

    options = _options(settings)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    held = _HeldLines()
    try:
        if settings.quiet and not under_spark_submit():
            _start_quiet_jvm(options, settings.is_local, held)
        spark = builder.getOrCreate()
    except Exception as error:  # py4j's and pyspark's errors: Spark says why in them
        exited = getattr(error, "java_exception", None) is None
        raise SparkStartError(start_failure(error, held.held(2.0 if exited else 0.0))) from error
    held.release()
    spark.sparkContext.setLogLevel(settings.log_level)
    if settings.should_ship() and not under_spark_submit() and not _shipped(spark):
        staging = Path(tempfile.mkdtemp(prefix="offsetwatch-spark-"))
        spark.sparkContext.addPyFile(str(build_package_zip(staging)))
    register_data_sources(spark)
    return spark


def _shipped(spark: SparkSession) -> bool:
    """Whether this SparkContext already has the package: a second job in the same process
    (a notebook, a script running several jobs) reuses the context, and Spark refuses a
    second file of the same name from another path."""
    return any(path.endswith(f"/{PACKAGE_ZIP}") for path in spark.sparkContext.listFiles)


def _options(settings: SparkSettings) -> dict[str, str]:
    """The session's Spark properties, in the order they are applied (later wins)."""
    options: dict[str, str] = {}
    if not (under_spark_submit() and settings.master == DEFAULT_MASTER):
        # under spark-submit, its --master (and --py-files) rule unless --master was given
        options["spark.master"] = settings.master
    options["spark.app.name"] = settings.app_name
    options["spark.sql.session.timeZone"] = "UTC"
    options["spark.ui.showConsoleProgress"] = "false"
    options["spark.sql.sources.partitionOverwriteMode"] = "dynamic"
    if settings.is_local and not under_spark_submit():
        options["spark.ui.enabled"] = "false"
    if settings.shuffle_partitions is not None:
        options["spark.sql.shuffle.partitions"] = str(settings.shuffle_partitions)
    options.update(settings.conf)
    if settings.quiet:
        # the user's own driver options come after ours, so their -D settings win
        java = f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"
        user = settings.conf.get("spark.driver.extraJavaOptions", "").strip()
        options["spark.driver.extraJavaOptions"] = f"{java} {user}".strip()
    return options


def start_failure(error: BaseException, jvm_lines: list[str]) -> str:
    """Spark's reason for a session that did not start, in one line: the Java exception
    behind a py4j error, else the first exception the JVM printed (a JVM that exited before
    the gateway was up says why only there), else the Python error."""
    java = getattr(error, "java_exception", None)
    candidates = [str(java)] if java is not None else []
    # a context stopped by its scheduler (a master that never answered) says why in a log
    # line only: "All masters are unresponsive! Giving up."
    logged = [m.group(1) for m in map(_LOGGED_ERROR.search, jvm_lines) if m]
    candidates += [f"{line}" for line in logged if not line.startswith(_UNINFORMATIVE)]
    candidates += jvm_lines
    for text in candidates:
        found = _JAVA_EXCEPTION.search(text)
        if found and not found.group(2).startswith(_UNINFORMATIVE):
            return f"{found.group(1)}: {found.group(2).strip()}"
        if found is None and text in logged:
            return text.strip()
    first = str(error).strip().splitlines()
    return first[0] if first else type(error).__name__


def _start_quiet_jvm(options: Mapping[str, str], loopback: bool, held: _HeldLines) -> None:
    """Start the driver JVM as the builder would, with its stderr passed on through a filter
    (pyspark's `popen_kwargs`, meant for this). A JVM that already runs is left alone: its
    start-up is over."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf().setAll(list(options.items()))
    # where the JVM's stderr would have gone: this process's file descriptor 2
    held.target = os.fdopen(os.dup(2), "wb")
    # a pipe of our own, read from before the JVM starts: a JVM that exits at once (a master
    # Spark cannot parse) says why only there, and pyspark drops its own pipe when it raises
    read_end, write_end = os.pipe()
    held.reader = threading.Thread(
        target=_pass_on, args=(os.fdopen(read_end, "rb"), held), name="spark-stderr", daemon=True
    )
    held.reader.start()
    try:
        with _local_ip("127.0.0.1" if loopback else None):
            gateway = launch_gateway(  # type: ignore[no-untyped-call]  # pyspark leaves it untyped
                conf, popen_kwargs={"stderr": write_end}
            )
    finally:
        os.close(write_end)
    SparkContext._ensure_initialized(gateway=gateway)


@contextlib.contextmanager
def _local_ip(address: str | None) -> Iterator[None]:
    """SPARK_LOCAL_IP for the JVM about to start, unless the operator chose one. In local mode
    nothing outside this host talks to the driver; on a cluster the executors must reach it,
    so Spark's own choice (and its warning) stays."""
    if address is None or "SPARK_LOCAL_IP" in os.environ:
        yield
        return
    os.environ["SPARK_LOCAL_IP"] = address
    try:
        yield
    finally:
        del os.environ["SPARK_LOCAL_IP"]


def _pass_on(source: IO[bytes], target: _HeldLines) -> None:
    """The JVM's stderr, line by line, without the notices nothing else turns off; drained to
    the end so the JVM never blocks on a full pipe, whatever happens to the target."""
    for line in iter(source.readline, b""):
        if not line.startswith(_JVM_NOTICES):
            target.write(line)


def register_data_sources(spark: SparkSession) -> None:
    """Register `spark.read.format("offsetwatch")` (see spark_jobs/datasource.py)."""
    from offsetwatch.spark_jobs.datasource import OffsetwatchDataSource

    spark.dataSource.register(OffsetwatchDataSource)
