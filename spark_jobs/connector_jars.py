"""Spark's own Kafka connector (`spark-sql-kafka-0-10`), resolved from Maven Central once.

pip's pyspark ships no connector: the jar and the few it needs that Spark does not ship
(`spark-token-provider-kafka-0-10`, `kafka-clients`, `commons-pool2`) are resolved with Maven
(which honours the mirrors of `~/.m2/settings.xml`) into `~/.cache/offsetwatch/spark-kafka/
<version>/`, and given to the session as `spark.jars`. Jars Spark already has (Scala,
Hadoop's client, compression codecs) are left out: two copies of a class on one classpath
fail at run time, not at start-up.

The connector's version must be Spark's own. Where Maven Central has none for this Spark yet,
the newest connector this project tested with this Spark is used instead (TESTED_ON_NEWER),
and the session says so once.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ARTIFACT: Final = "org.apache.spark:spark-sql-kafka-0-10_2.13"
#: a directory of connector jars (an offline install, or a cluster's own copy)
JARS_ENV: Final = "OFFSETWATCH_SPARK_KAFKA_JARS"
#: where resolved connectors are kept
CACHE_ENV: Final = "OFFSETWATCH_SPARK_KAFKA_CACHE"
#: Spark release -> the connector release tested on it when Maven has none of its own yet
TESTED_ON_NEWER: Final = {"4.3": "4.2.0"}
_MARKER: Final = "ready"
_JAR_VERSION = re.compile(r"-\d+(\.\d+)+([-.][\w.]+)?\.jar$")


class ConnectorUnavailable(Exception):
    """The connector cannot be had here (no Maven, no network, no release for this Spark)."""


@dataclass(frozen=True, slots=True)
class Connector:
    """A resolved connector: its release and the jars to add to the session."""

    version: str
    jars: tuple[Path, ...]
    #: a note for the operator (the connector's release is not Spark's), or None
    note: str | None = None

    @property
    def spark_jars(self) -> str:
        return ",".join(str(jar) for jar in self.jars)


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "offsetwatch" / "spark-kafka"


def candidates(spark: str) -> list[str]:
    """Connector releases to try for Spark `spark`, best first."""
    minor = ".".join(spark.split(".")[:2])
    out = [spark]
    fallback = TESTED_ON_NEWER.get(minor)
    if fallback is not None and fallback != spark:
        out.append(fallback)
    return out


def artifact_name(jar: str) -> str:
    """`kafka-clients-3.9.2.jar` -> `kafka-clients`."""
    return _JAR_VERSION.sub("", jar)


def spark_shipped() -> set[str]:
    """Artifact names of the jars pip's pyspark ships."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {artifact_name(jar.name) for jar in jars.glob("*.jar")}


def resolve(spark: str | None = None) -> Connector:
    """The connector for this Spark: from JARS_ENV, the cache, or Maven Central (cached)."""
    spark = spark or spark_version()
    configured = os.environ.get(JARS_ENV)
    if configured:
        jars = tuple(sorted(Path(configured).glob("*.jar")))
        if not any(artifact_name(j.name) == ARTIFACT.split(":")[1] for j in jars):
            raise ConnectorUnavailable(
                f"{JARS_ENV}={configured} holds no {ARTIFACT.split(':')[1]} jar: point it at "
                "a directory with the connector and its dependencies, or unset it"
            )
        return Connector("(from " + JARS_ENV + ")", jars)
    failures: list[str] = []
    for version in candidates(spark):
        try:
            jars = fetch(version)
        except ConnectorUnavailable as error:
            failures.append(str(error))
            continue
        note = None
        if version != spark:
            note = (
                f"Maven has no Spark Kafka connector {spark}: using {version}, the newest "
                f"tested with Spark {spark}"
            )
        return Connector(version, jars, note)
    raise ConnectorUnavailable("; ".join(failures))


def fetch(version: str) -> tuple[Path, ...]:
    """The connector `version`'s jars in the cache, resolved with Maven first if needed."""
    root = cache_root()
    home = root / version
    if (home / _MARKER).exists():
        return tuple(sorted(home.glob("*.jar")))
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorUnavailable(
            "Maven (mvn) is not on PATH: install it (apt-get install maven) to fetch Spark's "
            f"Kafka connector, or set {JARS_ENV} to a directory of its jars"
        )
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{version}.lock"):
        if (home / _MARKER).exists():
            return tuple(sorted(home.glob("*.jar")))
        work = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root))
        try:
            (work / "pom.xml").write_text(_pom(version), encoding="utf-8")
            done = subprocess.run(
                [
                    mvn,
                    "-B",
                    "-q",
                    "-f",
                    str(work / "pom.xml"),
                    "dependency:copy-dependencies",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={work / 'libs'}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                said = (done.stdout + done.stderr).strip().splitlines()
                reason = next((line for line in said if "ERROR" in line), said[-1] if said else "")
                raise ConnectorUnavailable(
                    f"Maven could not resolve {ARTIFACT}:{version} ({reason.strip()[:200]})"
                )
            shipped = spark_shipped()
            kept = [
                j for j in (work / "libs").glob("*.jar") if artifact_name(j.name) not in shipped
            ]
            staged = Path(tempfile.mkdtemp(prefix=f".{version}-jars-", dir=root))
            for jar in kept:
                jar.rename(staged / jar.name)
            (staged / _MARKER).write_text(f"{ARTIFACT}:{version}\n", encoding="utf-8")
            if home.exists():
                shutil.rmtree(home)
            staged.rename(home)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tuple(sorted(home.glob("*.jar")))


def _pom(version: str) -> str:
    group, artifact = ARTIFACT.split(":")
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>offsetwatch</groupId><artifactId>spark-kafka</artifactId>"
        f"<version>{version}</version><packaging>pom</packaging><dependencies><dependency>"
        f"<groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency></dependencies></project>\n"
    )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One resolution per release at a time (parallel jobs, test workers)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
