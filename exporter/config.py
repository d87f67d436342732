"""The exporter's configuration: one frozen `ExporterConfig`, loaded from four layers.

Precedence, lowest first:

1. the defaults of `ExporterConfig`;
2. a TOML file (`--config FILE`, or the `OFFSETWATCH_CONFIG` environment variable);
3. `OFFSETWATCH_*` environment variables;
4. command-line flags.

Every setting has the same name in all three places: the field `http_port` is `http_port` in
the TOML file, `OFFSETWATCH_HTTP_PORT` in the environment and `--http-port` on the command
line. The brokers take both spellings everywhere, Kafka's first (offsetwatch.core.connection,
shared with every command): `--bootstrap-server`/`--bootstrap-servers`,
`OFFSETWATCH_BOOTSTRAP_SERVER`/`OFFSETWATCH_BOOTSTRAP_SERVERS`, `bootstrap_server`/
`bootstrap_servers` in the file; the two names set to different values in one layer is an
error. librdkafka properties (any of them: SASL, SSL, timeouts...) are passed through
untouched:

* TOML: a `[kafka]` table, `"sasl.mechanism" = "SCRAM-SHA-512"` (quoted or dotted keys);
* environment: `OFFSETWATCH_KAFKA_SASL_MECHANISM=SCRAM-SHA-512` (after `OFFSETWATCH_KAFKA_`,
  `_` becomes `.`, `__` becomes a literal `_`, and the name is lower-cased);
* command line: `-X sasl.mechanism=SCRAM-SHA-512` (repeatable, like kcat; the same option
  as every other command's).

Kafka properties merge key by key across the layers. Optional settings ("None = off": the
publish topic, the archive directory, the checkpoint path...) are switched off again by an
empty value in the environment or on the command line.

Example file:

    bootstrap_servers = "broker-1:9092,broker-2:9092"
    cluster_name = "prod-eu"
    granularity = "topic"
    group_deny = "^console-consumer-"
    checkpoint_path = "/var/lib/offsetwatch/state.ckpt"

    [kafka]
    "security.protocol" = "SASL_SSL"
    "sasl.mechanism" = "SCRAM-SHA-512"
    "sasl.username" = "offsetwatch"
    # keep the password out of the file: OFFSETWATCH_KAFKA_SASL_PASSWORD=...

Validation errors are `ConfigError`s whose message says what to change. `redacted()` gives a
dict safe to log: secrets among the Kafka properties are masked.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

from offsetwatch.core.connection import (
    BOOTSTRAP_DEST,
    BOOTSTRAP_ENV,
    BOOTSTRAP_FLAGS,
    ENV_KAFKA_PREFIX,
    ConnectionOptionError,
    add_connection_options,
    bootstrap_from_env,
    check_client_config,
    kafka_property_name,
    put_property,
)
from offsetwatch.core.empty_values import empty_means_off
from offsetwatch.core.environment import PREFIX as ENV_PREFIX
from offsetwatch.core.secret_files import SecretFileError, is_file_setting, resolve_secret_files
from offsetwatch.core.textfiles import TextFileError, read_text
from offsetwatch.core.topics import OFFSETS_TOPIC, internal_topic_problem, topic_name_problem
from offsetwatch.durations import MAX_WAIT_S
from offsetwatch.exporter.fleet.identity import replica_name_problem, url_problem
from offsetwatch.exporter.fleet.membership import PROTOCOLS
from offsetwatch.exporter.state.diagnosis_history import RING_SIZE

ENV_CONFIG_FILE: Final = "OFFSETWATCH_CONFIG"

#: Port of the /metrics endpoint. Prometheus' exporter port list (9100-9999) is fully
#: allocated, so no number there is free; 9380 avoids the Kafka tools most likely to run next
#: to offsetwatch: kafka_exporter (9308), kafka-lag-exporter and Burrow (8000), KMinion (8080).
DEFAULT_HTTP_PORT: Final = 9380

GRANULARITIES: Final = ("partition", "topic", "group")
FLEET_PROTOCOLS: Final = PROTOCOLS
PUBLISH_FORMATS: Final = ("json", "avro")
PUBLISH_HEADER_FORMS: Final = ("source", "compact", "none")
ARCHIVE_FORMATS: Final = ("jsonl", "avro")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_SCHEMA_ID_MAX: Final = 0x7FFFFFFF
#: HTTP worker threads: beyond this, thread start-up fails before the first request
_MAX_WORKERS: Final = 1024
#: the HTTP server's connection bound: at least room for scrapes, a browser and its streams
_MIN_CONNECTIONS: Final = 16
_MAX_CONNECTIONS: Final = 65536

#: what redacted() prints instead of a secret
MASK: Final = "********"
_SECRET_WORDS: Final = ("password", "secret", "token")
#: secrets whose names do not say so: a private key in PEM, and the OAUTHBEARER config string
#: (it may carry client credentials)
_SECRET_PROPERTIES: Final = frozenset(
    {"ssl.key.pem", "ssl_key", "sasl.oauthbearer.config", "ssl.keystore.location.pem"}
)

Granularity = Literal["partition", "topic", "group"]
PublishFormat = Literal["json", "avro"]
PublishHeaders = Literal["source", "compact", "none"]
ArchiveFormat = Literal["jsonl", "avro"]


class ConfigError(ValueError):
    """A setting is invalid; the message names the flag and says what to do."""


def _empty_properties() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ExporterConfig:
    """Everything the exporter daemon needs to know. Validated on construction."""

    #: Kafka bootstrap servers, "host:port[,host:port...]"
    bootstrap_servers: str = "localhost:9092"
    #: the topic holding the group coordinator's records
    offsets_topic: str = OFFSETS_TOPIC
    #: librdkafka properties passed through to every client (SASL, SSL, timeouts...)
    kafka_properties: Mapping[str, str] = field(default_factory=_empty_properties)
    #: the cluster label of every metric (kafka-lag-exporter's `cluster_name`)
    cluster_name: str = "default"
    http_host: str = "0.0.0.0"
    http_port: int = DEFAULT_HTTP_PORT
    #: TLS and basic auth for every endpoint, in exporter-toolkit's format (web_config.py)
    web_config: Path | None = None
    #: worker threads of the HTTP server (bounds what clients can take)
    http_workers: int = 8
    #: seconds a whole request may take to arrive (slow clients are cut off)
    http_request_timeout_s: float = 10.0
    #: connections the HTTP server holds while their requests arrive (idle ones included)
    http_max_connections: int = 1024
    #: how often the log-end offsets of the tracked partitions are sampled
    sample_interval_s: float = 10.0
    #: a `__consumer_offsets` partition the cluster has not confirmed for this long is stale
    #: (not ready; its groups are marked stale); None: `stale_after_s_resolved`
    stale_after_s: float | None = None
    #: the archive and publish topic get every tracked partition's log end this often, and in
    #: between only the log ends that changed
    log_end_full_round_s: float = 300.0
    #: how often the lag/status snapshot served to scrapes is rebuilt
    snapshot_interval_s: float = 5.0
    #: the window the consumer status rules judge (docs/status-rules.md)
    status_window_s: float = 600.0
    #: WARN needs the lag to grow by more than this fraction of what was consumed in the
    #: window (rule 7 of docs/status-rules.md); 0 is Burrow's plain "lag grew"
    warn_min_growth_ratio: float = 0.05
    #: rebalances inside the status window that the diagnosis calls a storm
    storm_rebalances: int = 5
    #: seconds after a rebalance during which the diagnosis judges no ownership
    rebalance_grace_s: float = 60.0
    #: the finest level metrics are exported at
    granularity: Granularity = "partition"
    #: Python regexes searched in the group id / topic name (re.search, as the snapshot
    #: filters apply them: anchor with ^...$ to match the whole name); None = no filter
    group_allow: str | None = None
    group_deny: str | None = None
    topic_allow: str | None = None
    topic_deny: str | None = None
    #: also export kafka-lag-exporter's metric names (drop-in dashboards and alerts)
    kafka_lag_exporter_aliases: bool = False
    #: republish every decoded record (canonical form) to this topic; None = off
    publish_topic: str | None = None
    publish_format: PublishFormat = "json"
    #: Schema Registry id of decoder/offsetwatch_record.avsc: Avro messages get Confluent
    #: framing with it; None = bare Avro bodies
    publish_schema_id: int | None = None
    #: the source headers republished records carry (exporter/sinks/publisher.py HEADER_FORMS)
    publish_headers: PublishHeaders = "source"
    #: records that cannot be decoded are copied here, raw, with the error in headers
    publish_dlq_topic: str | None = None
    #: write rolling archive files of canonical records here (docs/archive-format.md); None = off
    archive_dir: Path | None = None
    archive_format: ArchiveFormat = "jsonl"
    #: gzip the JSON-lines archive files
    archive_gzip: bool = False
    #: zlib level of the gzip files: 1 compresses several times faster, 9 smallest
    archive_gzip_level: int = 6
    archive_roll_bytes: int = 128 * 1024 * 1024
    archive_roll_s: float = 600.0
    #: checkpoint state + positions here to restart without a full rebuild; None = off
    checkpoint_path: Path | None = None
    checkpoint_interval_s: float = 30.0
    log_level: str = "INFO"
    #: share the work with the other exporters of this fleet (a Kafka consumer group of that
    #: name over the offsets topic, docs/fleet.md); None = alone
    fleet: str | None = None
    #: this replica's name in the fleet; None: the host name
    fleet_replica: str | None = None
    #: the base URL the other replicas reach this one's HTTP API at; None: http(s)://HOST:PORT
    #: of the host name and --http-port
    fleet_url: str | None = None
    fleet_protocol: str = "auto"

    def __post_init__(self) -> None:
        # freeze a private copy: a caller's dict changing later must not change the config
        object.__setattr__(self, "kafka_properties", MappingProxyType(dict(self.kafka_properties)))
        object.__setattr__(self, "log_level", str(self.log_level).upper())
        _validate(self)

    @property
    def stale_after_s_resolved(self) -> float:
        """--stale-after-s, or its default: three sampling rounds, at least 30 s."""
        if self.stale_after_s is not None:
            return self.stale_after_s
        return max(30.0, 3 * self.sample_interval_s)

    # -- filters -------------------------------------------------------------------------

    def allows_group(self, group: str) -> bool:
        """True when the group passes --group-allow and --group-deny."""
        return _allowed(group, self.group_allow, self.group_deny)

    def allows_topic(self, topic: str) -> bool:
        """True when the topic passes --topic-allow and --topic-deny."""
        return _allowed(topic, self.topic_allow, self.topic_deny)

    # -- logging -------------------------------------------------------------------------

    def redacted(self) -> dict[str, Any]:
        """All settings as a JSON-friendly dict, with secret Kafka properties masked."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["kafka_properties"] = {
            key: MASK if is_secret_property(key) and not is_file_setting(key) else value
            for key, value in sorted(self.kafka_properties.items())
        }
        for name in ("archive_dir", "checkpoint_path", "web_config"):
            if out[name] is not None:
                out[name] = str(out[name])
        return out

    def client_properties(self, origins: Mapping[str, str] | None = None) -> dict[str, str]:
        """The librdkafka configuration of every client, `<property>.file` settings read
        now (offsetwatch/core/secret_files.py). Raises SecretFileError."""
        properties = resolve_secret_files(self.kafka_properties, origins)
        properties["bootstrap.servers"] = self.bootstrap_servers
        return properties

    def with_overrides(self, **changes: Any) -> ExporterConfig:
        """A validated copy with some settings changed (tests, embedding)."""
        return replace(self, **changes)


def is_secret_property(name: str) -> bool:
    """A librdkafka property whose value must never be logged."""
    lowered = name.lower()
    return lowered in _SECRET_PROPERTIES or any(word in lowered for word in _SECRET_WORDS)


def _allowed(name: str, allow: str | None, deny: str | None) -> bool:
    if allow is not None and re.search(allow, name) is None:
        return False
    return deny is None or re.search(deny, name) is None


# ---------------------------------------------------------------------------------------------
# The settings: type, flag, help. One table drives the CLI, the environment and the TOML file.


@dataclass(frozen=True, slots=True)
class _Setting:
    name: str
    kind: Literal["str", "int", "float", "bool", "path"]
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    optional: bool = False

    @property
    def flag(self) -> str:
        if self.name == _BOOTSTRAP:
            return BOOTSTRAP_FLAGS[0]
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


_BOOTSTRAP: Final = "bootstrap_servers"
#: the file's other spelling of bootstrap_servers (Kafka's singular)
_BOOTSTRAP_ALIAS: Final = "bootstrap_server"

_SETTINGS: Final = (
    _Setting(
        _BOOTSTRAP,
        "str",
        "Kafka brokers to bootstrap from, comma separated host:port pairs. Any broker of the "
        "cluster works: the client discovers the others.",
        "HOST:PORT[,...]",
    ),
    _Setting(
        "offsets_topic",
        "str",
        "The topic the group coordinator writes to. Only change it for a broker whose "
        "offsets.topic name differs, or to replay a copy of the topic.",
        "TOPIC",
    ),
    _Setting(
        "cluster_name",
        "str",
        "Value of the cluster_name label on every metric, to tell clusters apart when one "
        "Prometheus scrapes several exporters.",
        "NAME",
    ),
    _Setting(
        "http_host",
        "str",
        "Address the HTTP server (/metrics, /api) listens on; 127.0.0.1 keeps it local.",
        "HOST",
    ),
    _Setting("http_port", "int", "Port of the HTTP server (0 picks a free one).", "PORT"),
    _Setting(
        "web_config",
        "path",
        "Web configuration file in the format of Prometheus' exporter-toolkit "
        "(--web.config.file): TLS certificate and key, client CA, basic-auth users with "
        "bcrypt hashes. Applies to every endpoint. See docs/security.md.",
        "FILE",
        optional=True,
    ),
    _Setting(
        "http_workers",
        "int",
        "Worker threads of the HTTP server; they serve whole requests only (idle and slow "
        "connections wait without one). Requests beyond 8 per worker waiting get an "
        "immediate 503; the JSON API may use at most half the workers, so /metrics keeps "
        "answering while /api is busy.",
        "N",
    ),
    _Setting(
        "http_request_timeout_s",
        "float",
        "Seconds a whole request (TLS handshake, request line and headers) may take to "
        "arrive; slower clients are disconnected, and idle keep-alive connections closed.",
        "SECONDS",
    ),
    _Setting(
        "http_max_connections",
        "int",
        "Connections the HTTP server holds while their requests arrive, idle keep-alive "
        "ones included; past it the oldest connection of the client address holding the "
        "most is closed, so one client's flood cannot lock out a scrape. Keep it below the "
        "process's open-file limit (ulimit -n).",
        "N",
    ),
    _Setting(
        "sample_interval_s",
        "float",
        "Seconds between two samples of the log-end offsets of the tracked partitions. "
        "Lag in seconds is interpolated between samples, so shorter is more precise but "
        "costs more ListOffsets requests.",
        "SECONDS",
    ),
    _Setting(
        "stale_after_s",
        "float",
        "Seconds after which a __consumer_offsets partition whose state the cluster has not "
        "confirmed is stale: /readyz says not ready and why, and its groups are marked stale "
        "in the API. Each sampling round confirms it: the partition's leader answers its log "
        "end and the exporter has read up to it. Default: 3 x --sample-interval-s, at least "
        "30.",
        "SECONDS",
        optional=True,
    ),
    _Setting(
        "log_end_full_round_s",
        "float",
        "With --archive-dir or --publish-topic, log-end samples are written there too "
        "(type log_end, docs/archive-format.md): each sampling round writes the partitions "
        "whose log end changed, and every this many seconds a round writes all of them, so "
        "idle partitions stay visible to history jobs.",
        "SECONDS",
    ),
    _Setting(
        "snapshot_interval_s",
        "float",
        "Seconds between two rebuilds of the lag/status snapshot that scrapes read. A scrape "
        "never computes anything: it sees data at most this old.",
        "SECONDS",
    ),
    _Setting(
        "status_window_s",
        "float",
        "Window, in seconds, over which a consumer's status (OK, WARN, STALL, STOP, REWIND) "
        "is judged; see docs/status-rules.md. Make it several commit intervals long.",
        "SECONDS",
    ),
    _Setting(
        "warn_min_growth_ratio",
        "float",
        "WARN (falling behind) needs the lag to grow over the window by more than this "
        "fraction of what the consumer consumed in it (docs/status-rules.md rule 7). The "
        "default 0.05 absorbs the lag's sawtooth of one commit interval plus one sample "
        "interval of traffic while that is under 2.5 percent of the window; raise it for consumers "
        "that commit rarely (Kafka Streams: every 30 s) or short windows; 0 is Burrow's plain "
        "'lag grew'.",
        "RATIO",
    ),
    _Setting(
        "storm_rebalances",
        "int",
        "A group with at least this many rebalances inside the status window is diagnosed as a "
        "rebalance storm, with the instances that kept joining and leaving as suspects "
        f"(docs/diagnosis.md). 1-{RING_SIZE}.",
        "N",
    ),
    _Setting(
        "rebalance_grace_s",
        "float",
        "Seconds after a rebalance during which the diagnosis blames no member: the assignment "
        "is about to change, and partitions are briefly unowned. 0 judges at once.",
        "SECONDS",
    ),
    _Setting(
        "granularity",
        "str",
        "Finest level of the lag metrics: 'partition' exports one series per group and "
        "partition, 'topic' sums per group and topic, 'group' per group. Coarser levels cut "
        "the series count on big clusters.",
        choices=GRANULARITIES,
    ),
    _Setting(
        "group_allow",
        "str",
        "Only export groups whose id contains a match of this Python regex; anchor it to "
        "match the whole id, e.g. '^(orders-.*|billing)$'.",
        "REGEX",
        optional=True,
    ),
    _Setting(
        "group_deny",
        "str",
        "Never export groups whose id contains a match of this regex, e.g. "
        "'^console-consumer-'. Applied after --group-allow.",
        "REGEX",
        optional=True,
    ),
    _Setting(
        "topic_allow",
        "str",
        "Only export partitions of topics whose name contains a match of this regex "
        "(anchor with ^...$ for whole names).",
        "REGEX",
        optional=True,
    ),
    _Setting(
        "topic_deny",
        "str",
        "Never export partitions of topics whose name contains a match of this regex, "
        "e.g. '^_' for internal topics. Applied after --topic-allow.",
        "REGEX",
        optional=True,
    ),
    _Setting(
        "kafka_lag_exporter_aliases",
        "bool",
        "Also export the metric names of kafka-lag-exporter (kafka_consumergroup_group_lag "
        "and friends), so its dashboards and alerts keep working unchanged.",
    ),
    _Setting(
        "publish_topic",
        "str",
        "Republish every decoded record, in offsetwatch's canonical form, to this topic "
        "(keyed by record identity: make it a compacted topic). In a fleet each record is "
        "published once by the replicas together (docs/fleet.md). Empty: off.",
        "TOPIC",
        optional=True,
    ),
    _Setting(
        "publish_format",
        "str",
        "Encoding of republished records: 'json' (canonical JSON) or 'avro' (the schema of "
        "decoder/offsetwatch_record.avsc; with Confluent Schema Registry framing when "
        "--publish-schema-id is set, bare Avro bodies otherwise).",
        choices=PUBLISH_FORMATS,
    ),
    _Setting(
        "publish_schema_id",
        "int",
        "Schema Registry id under which decoder/offsetwatch_record.avsc is registered; "
        "written into the 5-byte header of every Avro message. Empty: bare Avro bodies.",
        "ID",
        optional=True,
    ),
    _Setting(
        "publish_headers",
        "str",
        "What names each republished record's source (what a restart reads back to publish "
        "nothing twice): 'source' the four offsetwatch.source.* headers; 'compact' one "
        "header, offsetwatch.source = CLUSTER/TOPIC/PARTITION/OFFSET; 'none' no header: "
        "a restart reads the position from the record itself, so the topic must hold this "
        "source's records alone. Fewer headers publish faster (docs/canonical-schema.md). "
        "Dead letters always carry the four.",
        choices=PUBLISH_HEADER_FORMS,
    ),
    _Setting(
        "publish_dlq_topic",
        "str",
        "Dead-letter topic: records that cannot be decoded are copied here unchanged, with "
        "the error in the headers, instead of stopping the exporter. Empty: off.",
        "TOPIC",
        optional=True,
    ),
    _Setting(
        "archive_dir",
        "path",
        "Write rolling archive files of canonical records under this directory, partitioned "
        "by date and hour for Spark (docs/archive-format.md); a fleet replica writes under "
        "DIR/<its replica name>/. Empty: off.",
        "DIR",
        optional=True,
    ),
    _Setting(
        "archive_format",
        "str",
        "Archive file format: 'jsonl' (one canonical JSON per line) or 'avro' (Avro "
        "container files with the schema embedded).",
        choices=ARCHIVE_FORMATS,
    ),
    _Setting("archive_gzip", "bool", "Gzip the JSON-lines archive files (.jsonl.gz)."),
    _Setting(
        "archive_gzip_level",
        "int",
        "zlib level of --archive-gzip, 1-9: 1 compresses JSON lines several times faster "
        "than the default 6 (a catch-up's archive keeps pace with the reads) into somewhat "
        "larger files; 9 is the smallest and slowest.",
        "LEVEL",
    ),
    _Setting(
        "archive_roll_bytes",
        "int",
        "Start a new archive file once the current one reaches this many bytes.",
        "BYTES",
    ),
    _Setting(
        "archive_roll_s",
        "float",
        "Start a new archive file once the current one is this many seconds old, so readers "
        "see data at most this late.",
        "SECONDS",
    ),
    _Setting(
        "checkpoint_path",
        "path",
        "Save state and read positions to this file every --checkpoint-interval-s seconds and "
        "at shutdown, and resume from it at start instead of re-reading the whole offsets "
        "topic. Empty: off.",
        "FILE",
        optional=True,
    ),
    _Setting("checkpoint_interval_s", "float", "Seconds between two checkpoints.", "SECONDS"),
    _Setting("log_level", "str", "Log level.", choices=LOG_LEVELS),
    _Setting(
        "fleet",
        "str",
        "Share the work with the other exporters started with the same name: they join a "
        "Kafka consumer group of that name over __consumer_offsets, and each reads, keeps and "
        "exports only the groups of the partitions the group assigns it; a replica that dies "
        "is replaced by the others within the group's session timeout. Any replica answers "
        "the API for every group. Needs Read on the group of that name. With --publish-topic "
        "or --archive-dir the replicas commit how far each partition reached the sinks to "
        "that group, so that its next owner writes nothing twice. See docs/fleet.md. "
        "Empty: alone.",
        "NAME",
        optional=True,
    ),
    _Setting(
        "fleet_replica",
        "str",
        "This replica's name in the fleet (letters, digits, '.', '_', '-'; unique in the "
        "fleet). Default: the host name.",
        "NAME",
        optional=True,
    ),
    _Setting(
        "fleet_url",
        "str",
        "Base URL at which the other replicas reach this one's HTTP API, e.g. "
        "http://ow-1.monitoring:9380. Default: the host name and --http-port (https with "
        "--web-config TLS).",
        "URL",
        optional=True,
    ),
    _Setting(
        "fleet_protocol",
        "str",
        "The consumer group protocol of the fleet: 'consumer' (KIP-848, Kafka 4.0+), 'classic' "
        "(cooperative-sticky, a 10 s session: faster take-over of a replica that dies "
        "without leaving) or 'auto' (KIP-848 where a broker says its group coordinator runs it, "
        "else classic, as on Kafka 3.9).",
        choices=FLEET_PROTOCOLS,
    ),
)
_BY_NAME: Final = {s.name: s for s in _SETTINGS}
_FIELD_DEFAULTS: Final[dict[str, Any]] = {
    f.name: f.default for f in fields(ExporterConfig) if f.name != "kafka_properties"
}
assert set(_BY_NAME) == set(_FIELD_DEFAULTS), "every ExporterConfig field needs a _Setting"


# ---------------------------------------------------------------------------------------------
# Validation


def _fail(name: str, message: str) -> ConfigError:
    return ConfigError(f"{_BY_NAME[name].flag if name in _BY_NAME else name} {message}")


_ROLL_BYTES_MAX: Final = 2**63 - 1


def _validate_fleet(config: ExporterConfig) -> None:
    if config.fleet is None:
        for name in ("fleet_replica", "fleet_url"):
            if getattr(config, name) is not None:
                raise _fail(name, "only goes with --fleet NAME")
        return
    problem = replica_name_problem(config.fleet)
    if problem is not None:
        raise _fail("fleet", f"{config.fleet!r} cannot name a fleet: {problem}")
    # --publish-topic and --archive-dir go with --fleet: each partition's sink position is
    # committed to the fleet's group for its next owner (exporter/fleet/sink_commits.py), and
    # each replica archives under its own name (docs/fleet.md, "Sinks")
    if config.fleet_replica is not None:
        problem = replica_name_problem(config.fleet_replica)
        if problem is not None:
            raise _fail("fleet_replica", f"{config.fleet_replica!r}: {problem}")
    if config.fleet_url is not None:
        problem = url_problem(config.fleet_url)
        if problem is not None:
            raise _fail("fleet_url", f"{config.fleet_url!r}: {problem}")
    elif config.http_port == 0:
        raise _fail(
            "fleet_url",
            "is needed with --http-port 0: the other replicas must know where this one "
            "answers (give a fixed --http-port, or the URL it is reached at)",
        )


def _validate(config: ExporterConfig) -> None:
    servers = [s.strip() for s in config.bootstrap_servers.split(",") if s.strip()]
    if not servers:
        raise _fail("bootstrap_servers", "must name at least one broker, e.g. broker:9092")
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise _fail(
                "bootstrap_servers",
                f"must be comma separated host:port pairs (got {server!r})",
            )
    if not config.offsets_topic:
        raise _fail("offsets_topic", "must not be empty (Kafka's is __consumer_offsets)")
    if not config.cluster_name:
        raise _fail("cluster_name", "must not be empty: it labels every metric")
    if not 0 <= config.http_port <= 65535:
        raise _fail("http_port", f"must be a TCP port, 0-65535 (got {config.http_port})")
    if not 2 <= config.http_workers <= _MAX_WORKERS:
        raise _fail("http_workers", f"must be 2-{_MAX_WORKERS} (got {config.http_workers})")
    if not _MIN_CONNECTIONS <= config.http_max_connections <= _MAX_CONNECTIONS:
        raise _fail(
            "http_max_connections",
            f"must be {_MIN_CONNECTIONS}-{_MAX_CONNECTIONS} (got {config.http_max_connections})",
        )
    if config.web_config is not None:
        from offsetwatch.exporter.serve.web_config import WebConfigError, load_web_config

        try:
            load_web_config(config.web_config)
        except WebConfigError as error:
            raise _fail("web_config", str(error)) from None
    for name in (
        "http_request_timeout_s",
        "sample_interval_s",
        "log_end_full_round_s",
        "snapshot_interval_s",
        "status_window_s",
        "archive_roll_s",
        "checkpoint_interval_s",
    ):
        value = getattr(config, name)
        # these are waits (a thread's, librdkafka's): longer than MAX_WAIT_S overflows them
        if not 0 < value <= MAX_WAIT_S:
            raise _fail(
                name, f"must be a positive number of seconds, at most {MAX_WAIT_S} (got {value})"
            )
    if config.stale_after_s is not None and not (
        2 * config.sample_interval_s <= config.stale_after_s <= MAX_WAIT_S
    ):
        raise _fail(
            "stale_after_s",
            f"({config.stale_after_s:g}) must span at least two samples and at most "
            f"{MAX_WAIT_S} s: make it at least 2 x --sample-interval-s "
            f"({2 * config.sample_interval_s:g})",
        )
    if config.status_window_s < 2 * config.sample_interval_s:
        raise _fail(
            "status_window_s",
            f"({config.status_window_s:g}) must span at least two samples: make it at least "
            f"2 x --sample-interval-s ({2 * config.sample_interval_s:g})",
        )
    if not 0 <= config.warn_min_growth_ratio <= 10:
        raise _fail(
            "warn_min_growth_ratio",
            f"must be a fraction of the consumed messages, 0-10 (got "
            f"{config.warn_min_growth_ratio:g}); 0.05 is the default",
        )
    if not 1 <= config.storm_rebalances <= RING_SIZE:
        raise _fail(
            "storm_rebalances",
            f"must be 1-{RING_SIZE}: the rebalances the exporter keeps per group "
            f"(got {config.storm_rebalances})",
        )
    if not 0 <= config.rebalance_grace_s <= MAX_WAIT_S:
        grace = config.rebalance_grace_s
        raise _fail("rebalance_grace_s", f"must be 0 or a positive number of seconds (got {grace})")
    _check_choice(config, "granularity", GRANULARITIES)
    _check_choice(config, "publish_format", PUBLISH_FORMATS)
    _check_choice(config, "publish_headers", PUBLISH_HEADER_FORMS)
    _check_choice(config, "archive_format", ARCHIVE_FORMATS)
    _check_choice(config, "log_level", LOG_LEVELS)
    _check_choice(config, "fleet_protocol", FLEET_PROTOCOLS)
    for name in ("group_allow", "group_deny", "topic_allow", "topic_deny"):
        pattern = getattr(config, name)
        if pattern is None:
            continue
        try:
            re.compile(pattern)
        except re.error as error:
            raise ConfigError(
                f"invalid regex for {_BY_NAME[name].flag}: {error} (in {pattern!r}); it is a "
                "Python regular expression searched in the name, e.g. '^orders-'"
            ) from None
    _validate_fleet(config)
    for name in ("offsets_topic", "publish_topic", "publish_dlq_topic"):
        topic = getattr(config, name)
        problem = None if topic is None else topic_name_problem(topic)
        if problem is not None:
            raise _fail(name, problem)
    for name in ("publish_topic", "publish_dlq_topic"):
        topic = getattr(config, name)
        if topic is not None and topic == config.offsets_topic:
            raise _fail(name, f"must not be the offsets topic {topic!r}: never write into it")
        internal = None if topic is None else internal_topic_problem(topic)
        if internal is not None:
            raise _fail(name, f"{internal}, e.g. offsets-decoded")
    if config.publish_dlq_topic is not None and config.publish_dlq_topic == config.publish_topic:
        raise _fail("publish_dlq_topic", "must differ from --publish-topic")
    if config.publish_schema_id is not None and not (
        0 <= config.publish_schema_id <= _SCHEMA_ID_MAX
    ):
        raise _fail(
            "publish_schema_id",
            f"must be a Schema Registry id, 0-{_SCHEMA_ID_MAX} (got {config.publish_schema_id})",
        )
    if config.archive_gzip and config.archive_format != "jsonl":
        raise _fail(
            "archive_gzip",
            "only applies to --archive-format jsonl (Avro files compress their blocks)",
        )
    if not 1 <= config.archive_gzip_level <= 9:
        raise _fail(
            "archive_gzip_level", f"must be a zlib level, 1-9 (got {config.archive_gzip_level})"
        )
    if not 1024 <= config.archive_roll_bytes <= _ROLL_BYTES_MAX:
        # past int64 it is no size a file can reach: the count of bytes written overflows
        # nothing in Python, but the metric and the Spark reader's offsets are int64
        raise _fail(
            "archive_roll_bytes",
            f"must be 1024 to {_ROLL_BYTES_MAX} (got {config.archive_roll_bytes})",
        )
    for key, value in config.kafka_properties.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key:
            raise ConfigError(
                f"Kafka property {key!r}: names and values must be non-empty strings "
                f"(got {type(value).__name__} value)"
            )
    if "bootstrap.servers" in config.kafka_properties:
        raise ConfigError(
            "set the brokers with --bootstrap-server (OFFSETWATCH_BOOTSTRAP_SERVER, "
            "bootstrap_server in the file), not the Kafka property bootstrap.servers"
        )


def _check_choice(config: ExporterConfig, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(config, name)
    if value not in choices:
        raise _fail(name, f"must be one of {', '.join(choices)} (got {value!r})")


# ---------------------------------------------------------------------------------------------
# Command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the exporter's flags. Unset flags stay None, so lower layers show through."""
    group = parser.add_argument_group(
        "exporter settings",
        "Each flag can also be set in the TOML file given to --config (same name with "
        "underscores) or in an OFFSETWATCH_* environment variable; flags win over the "
        "environment, which wins over the file.",
    )
    group.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        default=None,
        help=f"TOML file with settings (env {ENV_CONFIG_FILE}). Top-level keys are the flag "
        "names with underscores; librdkafka properties go in a [kafka] table.",
    )
    bootstrap = _BY_NAME[_BOOTSTRAP]
    add_connection_options(
        group,
        bootstrap_help=f"{bootstrap.help} Default: {_FIELD_DEFAULTS[_BOOTSTRAP]}.",
        property_help="prefer the environment for passwords: command lines are visible to "
        "every user of the host",
    )
    for setting in _SETTINGS:
        if setting is bootstrap:
            continue
        default = _FIELD_DEFAULTS[setting.name]
        shown = "off" if default is None else default
        help_text = f"{setting.help} (env {setting.env}; default: {shown})"
        if setting.kind == "bool":
            group.add_argument(
                setting.flag,
                dest=setting.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
            continue
        # '' is read by _from_text: off for an optional setting, refused with the setting's
        # own hint for the others (from flags, variables and the file alike)
        empty_means_off(
            group.add_argument(
                setting.flag,
                dest=setting.name,
                metavar=setting.metavar,
                choices=_ci_choices(setting.choices) if setting.choices else None,
                default=None,
                help=help_text,
            )
        )


class _CaseInsensitive(tuple[str, ...]):
    """argparse choices that accept any case (log levels)."""

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and super().__contains__(item.lower())


def _ci_choices(choices: tuple[str, ...]) -> tuple[str, ...]:
    if all(c.isupper() for c in choices):
        return _CaseInsensitive(c.lower() for c in choices)
    return choices


# ---------------------------------------------------------------------------------------------
# Loading


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


_PARSERS: Final[dict[str, Callable[[str], Any]]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": _parse_bool,
    "path": Path,
}
_KIND_WORDS: Final = {
    "str": "text",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "path": "a path",
}


def _from_text(setting: _Setting, text: str, source: str) -> Any:
    """A setting's value from environment/command-line text ('' = off when optional)."""
    if setting.optional and text == "":
        return None
    if text.strip() == "" and setting.kind in ("str", "path"):
        # an empty value is never a choice of its own: '' as --http-host bound every
        # interface while the log said 127.0.0.1
        raise ConfigError(
            f"{setting.flag} must not be empty (got {text!r} from {source}): give a value, "
            "or leave it out for the default"
            + (" (0.0.0.0 listens on every interface)" if setting.name == "http_host" else "")
        )
    try:
        return _PARSERS[setting.kind](text)
    except ValueError:
        raise ConfigError(
            f"{setting.flag} must be {_KIND_WORDS[setting.kind]} (got {text!r} from {source})"
        ) from None


def _from_toml(setting: _Setting, value: Any, source: str) -> Any:
    kind = setting.kind
    ok = (
        (kind in ("str", "path") and isinstance(value, str))
        or (kind == "bool" and isinstance(value, bool))
        or (kind == "int" and isinstance(value, int) and not isinstance(value, bool))
        or (kind == "float" and isinstance(value, int | float) and not isinstance(value, bool))
    )
    if not ok:
        raise ConfigError(f"{setting.name} in {source} must be {_KIND_WORDS[kind]} (got {value!r})")
    if kind in ("str", "path") and not setting.optional and value.strip() == "":
        raise ConfigError(
            f"{setting.name} in {source} must not be empty: give a value, or leave it out "
            "for the default"
        )
    if kind == "path":
        return Path(value) if value else None
    if kind == "float":
        return float(value)
    return value


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML dotted keys (`sasl.mechanism = ...` is a nested table) back to property names."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _property_text(name: str, value: Any, source: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigError(
        f"Kafka property {name} in {source} must be a string, number or boolean (got {value!r})"
    )


def _read_toml(path: Path) -> dict[str, Any]:
    where = f"(check --config / {ENV_CONFIG_FILE})"
    try:
        return tomllib.loads(read_text(path, "config file"))
    except TextFileError as error:
        raise ConfigError(f"{error} {where}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _apply_file(
    path: Path,
    values: dict[str, Any],
    kafka: dict[str, str],
    sources: dict[str, str],
    origins: dict[str, str],
) -> None:
    document = _read_toml(path)
    source = str(path)
    if _BOOTSTRAP_ALIAS in document:
        alias = document.pop(_BOOTSTRAP_ALIAS)
        if _BOOTSTRAP in document and document[_BOOTSTRAP] != alias:
            raise ConfigError(
                f"{_BOOTSTRAP_ALIAS} and {_BOOTSTRAP} in {source} differ: keep only one of them"
            )
        document[_BOOTSTRAP] = alias
    for key, value in document.items():
        if key == "kafka":
            if not isinstance(value, dict):
                raise ConfigError(f"'kafka' in {source} must be a table: [kafka]")
            for name, item in _flatten(value).items():
                text = _property_text(name, item, source)
                put_property(
                    kafka, origins, name, text, f'"{name}" in the [kafka] table of {source}'
                )
            continue
        setting = _BY_NAME.get(key)
        if setting is None:
            raise ConfigError(
                f"unknown setting {key!r} in {source}"
                f"{_suggest(key, [*_BY_NAME, _BOOTSTRAP_ALIAS, 'kafka'])}"
            )
        values[key] = _from_toml(setting, value, source)
        sources[key] = source


def _apply_env(
    environ: Mapping[str, str],
    values: dict[str, Any],
    kafka: dict[str, str],
    sources: dict[str, str],
    origins: dict[str, str],
) -> None:
    by_env = {s.env: s for s in _SETTINGS if s.name != _BOOTSTRAP}
    try:
        brokers = bootstrap_from_env(environ)
    except ConnectionOptionError as error:
        raise ConfigError(str(error)) from None
    if brokers is not None:
        values[_BOOTSTRAP] = brokers
        sources[_BOOTSTRAP] = " / ".join(name for name in BOOTSTRAP_ENV if environ.get(name))
    for key in sorted(environ):
        if not key.startswith(ENV_PREFIX) or key in BOOTSTRAP_ENV:
            continue
        text = environ[key]
        setting = by_env.get(key)
        # exact setting names first: OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES is a setting
        if setting is not None:
            values[setting.name] = _from_text(setting, text, key)
            sources[setting.name] = key
        elif key.startswith(ENV_KAFKA_PREFIX) and len(key) > len(ENV_KAFKA_PREFIX):
            name = kafka_property_name(key[len(ENV_KAFKA_PREFIX) :])
            put_property(kafka, origins, name, text, key)
        # other OFFSETWATCH_* variables (OFFSETWATCH_CONFIG, test settings) are not ours


def _apply_args(
    args: argparse.Namespace,
    values: dict[str, Any],
    kafka: dict[str, str],
    sources: dict[str, str],
    origins: dict[str, str],
) -> None:
    for setting in _SETTINGS:
        # the brokers' flag has the dest every command's connection options share
        dest = BOOTSTRAP_DEST if setting.name == _BOOTSTRAP else setting.name
        given = getattr(args, dest, None)
        if given is None:
            continue
        if isinstance(given, str):  # every flag but the booleans is parsed here
            given = _from_text(setting, given, setting.flag)
        values[setting.name] = given
        sources[setting.name] = setting.flag
    # (key, value) pairs, checked by the -X option itself (offsetwatch.core.connection)
    for name, value in getattr(args, "kafka_properties", None) or ():
        put_property(kafka, origins, name, value, f"-X {name}")


def load_config(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> ExporterConfig:
    """Defaults < TOML file < OFFSETWATCH_* environment < flags (see the module docs)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    kafka: dict[str, str] = {}
    sources: dict[str, str] = {}
    #: property -> the flag, variable or file key it came from (for error messages)
    origins: dict[str, str] = {}
    config_file = getattr(args, "config", None) or env.get(ENV_CONFIG_FILE) or None
    if config_file is not None:
        _apply_file(Path(config_file), values, kafka, sources, origins)
    _apply_env(env, values, kafka, sources, origins)
    _apply_args(args, values, kafka, sources, origins)
    try:
        config = ExporterConfig(**values, kafka_properties=kafka)
    except ConfigError as error:
        raise ConfigError(_with_source(str(error), sources)) from None
    check_kafka_settings(config, origins)
    return config


def check_kafka_settings(config: ExporterConfig, origins: Mapping[str, str] | None = None) -> None:
    """Refuse at start the librdkafka settings that can never work (an unknown property, a
    bad value, an SSL file librdkafka cannot load), naming where each came from: otherwise
    the daemon would start, serve /healthz, and fail in a background thread."""
    named = dict(origins or {})
    try:
        properties = config.client_properties(named)
        for key in [k for k in named if is_file_setting(k)]:
            named.setdefault(key[: -len(".file")], named[key])
        check_client_config(properties, named, "consumer")
        if config.publish_topic is not None:
            check_client_config(properties, named, "producer")
    except (ConnectionOptionError, SecretFileError) as error:
        raise ConfigError(str(error)) from None


def _with_source(message: str, sources: dict[str, str]) -> str:
    """Say where a bad value came from when it was not the flag itself."""
    for name, source in sources.items():
        flag = _BY_NAME[name].flag
        if source != flag and (message.startswith(flag + " ") or f"for {flag}:" in message):
            return f"{message} [set by {source}]"
    return message
