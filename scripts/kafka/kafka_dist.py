"""Apache Kafka releases from Maven Central, resolved by Maven into a local cache.

A release is the jars of `kafka_2.13` and `kafka-tools` with their dependencies (what the
binary distribution's `libs/` holds for a broker and the CLI tools), `kafka-streams` for the
releases with streams groups (4.1+: the tests run real Streams applications), a logging backend, and
two small configuration files. Every jar is checked against `libs.sha256`; nothing of Kafka is
vendored in the repository. Standard library only: the launcher runs before any venv exists.

    cache/<version>/libs/*.jar          the class path
    cache/<version>/tools.json          CLI script name -> main class in these jars
    cache/<version>/config/             log configuration for brokers and tools
    cache/<version>/ready               written last: the release is complete and verified

The cache is `$OFFSETWATCH_BROKER_CACHE`, else `$XDG_CACHE_HOME/offsetwatch/kafka`, else
`~/.cache/offsetwatch/kafka`. Maven's own repository (`~/.m2`) keeps the downloads, so a
release that is fetched again, or shares jars with another, costs no download.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
VERSIONS_FILE: Final = HERE / "versions.toml"
LOCK_FILE: Final = HERE / "libs.sha256"

#: Kafka's CLI scripts and the main classes they ran in the supported releases (from each
#: release's bin/*.sh); the first class found in a release's jars is its tool
TOOL_CLASSES: Final[dict[str, tuple[str, ...]]] = {
    "kafka-acls.sh": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
    "kafka-broker-api-versions.sh": (
        "org.apache.kafka.tools.BrokerApiVersionsCommand",
        "kafka.admin.BrokerApiVersionsCommand",
    ),
    "kafka-client-metrics.sh": ("org.apache.kafka.tools.ClientMetricsCommand",),
    "kafka-cluster.sh": ("org.apache.kafka.tools.ClusterTool",),
    "kafka-configs.sh": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-console-consumer.sh": ("org.apache.kafka.tools.consumer.ConsoleConsumer",),
    "kafka-console-producer.sh": (
        "org.apache.kafka.tools.ConsoleProducer",
        "kafka.tools.ConsoleProducer",
    ),
    "kafka-console-share-consumer.sh": ("org.apache.kafka.tools.consumer.ConsoleShareConsumer",),
    "kafka-consumer-groups.sh": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",),
    "kafka-consumer-perf-test.sh": ("org.apache.kafka.tools.ConsumerPerformance",),
    "kafka-delegation-tokens.sh": ("org.apache.kafka.tools.DelegationTokenCommand",),
    "kafka-delete-records.sh": ("org.apache.kafka.tools.DeleteRecordsCommand",),
    "kafka-dump-log.sh": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "kafka-e2e-latency.sh": ("org.apache.kafka.tools.EndToEndLatency",),
    "kafka-features.sh": ("org.apache.kafka.tools.FeatureCommand",),
    "kafka-get-offsets.sh": ("org.apache.kafka.tools.GetOffsetShell",),
    "kafka-groups.sh": ("org.apache.kafka.tools.GroupsCommand",),
    "kafka-leader-election.sh": ("org.apache.kafka.tools.LeaderElectionCommand",),
    "kafka-log-dirs.sh": ("org.apache.kafka.tools.LogDirsCommand",),
    "kafka-metadata-quorum.sh": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-producer-perf-test.sh": ("org.apache.kafka.tools.ProducerPerformance",),
    "kafka-reassign-partitions.sh": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",),
    "kafka-share-groups.sh": ("org.apache.kafka.tools.consumer.group.ShareGroupCommand",),
    "kafka-storage.sh": ("kafka.tools.StorageTool",),
    "kafka-streams-application-reset.sh": ("org.apache.kafka.tools.StreamsResetter",),
    "kafka-streams-groups.sh": ("org.apache.kafka.tools.streams.StreamsGroupCommand",),
    "kafka-topics.sh": ("org.apache.kafka.tools.TopicCommand",),
    "kafka-transactions.sh": ("org.apache.kafka.tools.TransactionsCommand",),
    "kafka-verifiable-consumer.sh": ("org.apache.kafka.tools.VerifiableConsumer",),
    "kafka-verifiable-producer.sh": ("org.apache.kafka.tools.VerifiableProducer",),
}
BROKER_CLASS: Final = "kafka.Kafka"

#: a line the log configuration below writes once the node serves (KafkaRaftServer, 3.9-4.4)
STARTED_LINE: Final = "Kafka Server started"


class KafkaDistError(Exception):
    """One line that says what is missing and what to do."""


@dataclass(frozen=True, slots=True)
class Catalog:
    default: str
    matrix: tuple[str, ...]
    artifacts: tuple[str, ...]
    log4j1_lines: tuple[str, ...]
    log4j2_lines: tuple[str, ...]
    log4j2_version: str
    log4j2_artifacts: tuple[str, ...]
    streams_lines: tuple[str, ...]
    streams_artifacts: tuple[str, ...]

    def has_streams(self, version: str) -> bool:
        """Whether the release has streams groups, so its cache holds Kafka Streams too."""
        return line_of(version) in self.streams_lines

    def resolve(self, wanted: str | None) -> str:
        """A supported version: exact (`4.1.2`), or a line (`4.1`, its tested patch)."""
        text = (wanted or "").strip() or self.default
        if text in self.matrix:
            return text
        for version in self.matrix:
            if line_of(version) == text:
                return version
        if line_of(text) in {line_of(v) for v in self.matrix}:
            return text  # another patch of a supported line: fetched, pinned on `lock`
        raise KafkaDistError(
            f"Kafka {text} is not supported: use one of {', '.join(self.matrix)} "
            f"(or a line such as {line_of(self.default)}); see {VERSIONS_FILE}"
        )

    def logging(self, version: str) -> str:
        line = line_of(version)
        if line in self.log4j1_lines:
            return "log4j1"
        if line in self.log4j2_lines:
            return "log4j2"
        raise KafkaDistError(f"no logging backend set for Kafka {line} in {VERSIONS_FILE}")


def line_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def catalog() -> Catalog:
    data = tomllib.loads(VERSIONS_FILE.read_text(encoding="utf-8"))
    log4j2 = data["logging"]["log4j2"]
    return Catalog(
        default=str(data["default"]),
        matrix=tuple(data["matrix"]),
        artifacts=tuple(data["artifacts"]),
        log4j1_lines=tuple(data["logging"]["log4j1"]["lines"]),
        log4j2_lines=tuple(log4j2["lines"]),
        log4j2_version=str(log4j2["version"]),
        log4j2_artifacts=tuple(log4j2["artifacts"]),
        streams_lines=tuple(data["streams"]["lines"]),
        streams_artifacts=tuple(data["streams"]["artifacts"]),
    )


def cache_root() -> Path:
    configured = os.environ.get("OFFSETWATCH_BROKER_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "offsetwatch" / "kafka"


@dataclass(frozen=True, slots=True)
class Release:
    """A fetched, verified release in the cache."""

    version: str
    home: Path

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def class_path(self) -> str:
        return str(self.libs / "*")

    @property
    def logging(self) -> str:
        return catalog().logging(self.version)

    def tool_class(self, script: str) -> str:
        tools = json.loads((self.home / "tools.json").read_text())
        name = script if script.endswith(".sh") else f"{script}.sh"
        if name not in tools:
            known = ", ".join(sorted(tools))
            raise KafkaDistError(f"Kafka {self.version} has no tool {script}: it has {known}")
        return str(tools[name])

    def tool_log_options(self) -> list[str]:
        if self.logging == "log4j1":
            return [f"-Dlog4j.configuration=file:{self.home / 'config' / 'tools-log4j.properties'}"]
        return [f"-Dlog4j2.configurationFile={self.home / 'config' / 'tools-log4j2.properties'}"]


def release(version: str) -> Release:
    """The release in the cache, fetched first when it is not there yet."""
    home = cache_root() / version
    if (home / "ready").exists():
        return Release(version, home)
    return fetch(version)


def fetch(version: str, *, update_lock: bool = False) -> Release:
    """Resolve `version` with Maven into the cache and check every jar against the lock."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    home = root / version
    with locked(root / f".{version}.lock"):
        if (home / "ready").exists() and not update_lock:
            return Release(version, home)
        java_or_fail()
        mvn = shutil.which("mvn")
        if mvn is None:
            raise KafkaDistError(
                "Maven (mvn) is not on PATH: install it (apt-get install maven) to fetch Kafka "
                f"{version} from Maven Central; without Maven, OFFSETWATCH_TEST_KAFKA_HOME="
                "../shared/kafka runs the tests on the vendored Kafka 4.0.0"
            )
        books = catalog()
        work = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root))
        try:
            (work / "pom.xml").write_text(_pom(books, version), encoding="utf-8")
            done = subprocess.run(
                [
                    mvn,
                    "-B",
                    "-q",
                    "-f",
                    str(work / "pom.xml"),
                    "dependency:copy-dependencies",
                    f"-DoutputDirectory={work / 'libs'}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                said = (done.stdout + done.stderr).strip().splitlines()
                reason = next((line for line in said if "ERROR" in line), said[-1] if said else "")
                raise KafkaDistError(
                    f"Maven could not resolve Kafka {version} from Maven Central "
                    f"({reason.strip()}): check that https://repo.maven.apache.org is "
                    "reachable, or a mirror in ~/.m2/settings.xml"
                )
            hashes = _hashes(work / "libs")
            if update_lock:
                _write_lock(version, hashes)
            else:
                _verify(version, hashes)
            _write_config(work, books.logging(version))
            (work / "tools.json").write_text(json.dumps(_tools(work / "libs"), indent=1) + "\n")
            (work / "pom.xml").unlink()
            if home.exists():
                shutil.rmtree(home)
            work.rename(home)
            (home / "ready").write_text("verified against libs.sha256\n")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return Release(version, home)


def java_or_fail() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaDistError(
            "java is not on PATH: Kafka needs Java 17 or newer "
            "(apt-get install openjdk-17-jre-headless)"
        )
    return java


def _pom(books: Catalog, version: str) -> str:
    def dependency(coordinate: str, at: str) -> str:
        group, artifact = coordinate.split(":")
        return (
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{at}</version></dependency>"
        )

    wanted = [dependency(c, version) for c in books.artifacts]
    if books.has_streams(version):
        wanted += [dependency(c, version) for c in books.streams_artifacts]
    managed: list[str] = []
    if books.logging(version) == "log4j2":
        pinned = [dependency(c, books.log4j2_version) for c in books.log4j2_artifacts]
        wanted += pinned
        managed = pinned  # Kafka's own log4j-api/core versions differ by release: one for all
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>offsetwatch</groupId><artifactId>kafka-release</artifactId>"
        f"<version>{version}</version><packaging>pom</packaging>"
        f"<dependencyManagement><dependencies>{''.join(managed)}</dependencies>"
        f"</dependencyManagement><dependencies>{''.join(wanted)}</dependencies></project>\n"
    )


def _hashes(libs: Path) -> dict[str, str]:
    return {
        jar.name: hashlib.sha256(jar.read_bytes()).hexdigest() for jar in sorted(libs.glob("*.jar"))
    }


def _lock_lines() -> list[str]:
    if not LOCK_FILE.exists():
        return []
    return [line for line in LOCK_FILE.read_text().splitlines() if line.strip()]


def _locked_hashes(version: str) -> dict[str, str]:
    pinned: dict[str, str] = {}
    for line in _lock_lines():
        digest, path = line.split(maxsplit=1)
        at, _, name = path.partition("/")
        if at == version:
            pinned[name] = digest
    return pinned


def _verify(version: str, hashes: dict[str, str]) -> None:
    pinned = _locked_hashes(version)
    if not pinned:
        raise KafkaDistError(
            f"Kafka {version} has no pinned jars in {LOCK_FILE}: run "
            f"`scripts/kafka/broker lock {version}` and review the lines it adds"
        )
    for name in sorted(set(pinned) | set(hashes)):
        if name not in hashes:
            raise KafkaDistError(f"Kafka {version}: Maven did not resolve {name} of {LOCK_FILE}")
        if name not in pinned:
            raise KafkaDistError(f"Kafka {version}: Maven resolved {name}, not in {LOCK_FILE}")
        if pinned[name] != hashes[name]:
            raise KafkaDistError(
                f"Kafka {version}: {name} has SHA-256 {hashes[name]}, {LOCK_FILE} pins "
                f"{pinned[name]}: remove it from ~/.m2 and fetch again, or review the release"
            )


def _write_lock(version: str, hashes: dict[str, str]) -> None:
    kept = [
        line for line in _lock_lines() if not line.split(maxsplit=1)[1].startswith(f"{version}/")
    ]
    kept += [f"{digest}  {version}/{name}" for name, digest in hashes.items()]
    kept.sort(key=lambda line: line.split(maxsplit=1)[1])
    LOCK_FILE.write_text("\n".join(kept) + "\n")


def _tools(libs: Path) -> dict[str, str]:
    wanted = {
        cls.replace(".", "/") + ".class" for classes in TOOL_CLASSES.values() for cls in classes
    }
    wanted.add(BROKER_CLASS.replace(".", "/") + ".class")
    present: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            present.update(name for name in archive.namelist() if name in wanted)
    if BROKER_CLASS.replace(".", "/") + ".class" not in present:
        raise KafkaDistError(f"no {BROKER_CLASS} in the jars of {libs}: not a Kafka broker release")
    tools: dict[str, str] = {}
    for script, classes in TOOL_CLASSES.items():
        for cls in classes:
            if cls.replace(".", "/") + ".class" in present:
                tools[script] = cls
                break
    return tools


def _write_config(home: Path, logging: str) -> None:
    config = home / "config"
    config.mkdir()
    if logging == "log4j1":
        (config / "tools-log4j.properties").write_text(
            "log4j.rootLogger=WARN, stderr\n"
            "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stderr.Target=System.err\n"
            "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
    else:
        (config / "tools-log4j2.properties").write_text(
            "status = warn\n"
            "appender.stderr.type = Console\n"
            "appender.stderr.name = stderr\n"
            "appender.stderr.target = SYSTEM_ERR\n"
            "appender.stderr.layout.type = PatternLayout\n"
            "appender.stderr.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = WARN\n"
            "rootLogger.appenderRef.stderr.ref = stderr\n"
        )


def server_log_config(logging: str, logs: Path) -> tuple[str, str, str]:
    """(file name, text, JVM option) of a node's log configuration writing `logs/server.log`."""
    server_log = logs / "server.log"
    if logging == "log4j1":
        text = (
            "log4j.rootLogger=INFO, server\n"
            "log4j.appender.server=org.apache.log4j.FileAppender\n"
            f"log4j.appender.server.File={server_log}\n"
            "log4j.appender.server.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.server.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\n"
            "log4j.logger.state.change.logger=WARN\n"
        )
        name = "log4j.properties"
        return name, text, f"-Dlog4j.configuration=file:{logs.parent / name}"
    text = (
        "status = warn\n"
        "appender.server.type = File\n"
        "appender.server.name = server\n"
        f"appender.server.fileName = {server_log}\n"
        "appender.server.layout.type = PatternLayout\n"
        "appender.server.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.server.ref = server\n"
        "logger.request.name = kafka.request.logger\n"
        "logger.request.level = WARN\n"
        "logger.state.name = state.change.logger\n"
        "logger.state.level = WARN\n"
    )
    name = "log4j2.properties"
    return name, text, f"-Dlog4j2.configurationFile={logs.parent / name}"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` (created) for the block: one fetch per release at a time,
    one start of the tests' shared broker."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
