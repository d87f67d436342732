"""The `kafka` source's options as Spark's own Kafka connector takes them.

Every command and the `offsetwatch` data source speak librdkafka's properties (`kafka.<name>`,
what `-X` and `OFFSETWATCH_KAFKA_*` give); the connector runs Kafka's Java client, whose names
differ for security. The offset options (`startingOffsets`, `endingOffsets`, the timestamp
forms, `maxOffsetsPerTrigger`, `minPartitions`, `failOnDataLoss`,
`kafkaConsumer.pollTimeoutMs`) are the connector's own names already and pass as they are.

A librdkafka property without a Java counterpart here is refused by name rather than dropped:
a dropped `ssl.*` would connect in plaintext or fail far from its cause. Java properties can
be given as they are with the prefix `java.kafka.` (`java.kafka.ssl.truststore.location=...`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from offsetwatch.spark_jobs.sources.kafka_options import Format, KafkaOptionError, parse_options

#: options the connector takes under the same names (Spark's spelling, given case-insensitively)
PASSED: Final = (
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "failOnDataLoss",
    "kafkaConsumer.pollTimeoutMs",
    "groupIdPrefix",
)
#: the connector's driver joins groups of this prefix to plan a read of an internal topic
#: (see kafka_connector.INTERNAL_TOPICS): named so that an operator can tell them apart
GROUP_ID_PREFIX: Final = "offsetwatch-spark-connector"
#: Java client properties given as they are
JAVA_PREFIX: Final = "java.kafka."
#: options of ours that are not the client's
_OURS: Final = frozenset({"topic", "format", "output", "reader"})
#: librdkafka and Java agree on these names and values
_SAME: Final = frozenset(
    {
        "sasl.kerberos.service.name",
        "security.protocol",
        "client.id",
        "isolation.level",
        "request.timeout.ms",
        "session.timeout.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "socket.connection.setup.timeout.ms",
        "connections.max.idle.ms",
        "metadata.max.age.ms",
        "client.rack",
    }
)
#: librdkafka name -> Java name, same value
_RENAMED: Final = {
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.mechanism": "sasl.mechanism",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
}
_LOGIN_MODULES: Final = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka-only properties that mean nothing to the Java client: left out
_CLIENT_ONLY: Final = frozenset(
    {"log_level", "debug", "api.version.request", "statistics.interval.ms"}
)


@dataclass(frozen=True, slots=True)
class ConnectorRead:
    """One read through the connector: its options, and how to decode what it gives."""

    options: dict[str, str]
    topic: str
    format: Format
    quarantine: bool


def connector_read(options: Mapping[str, str], *, stream: bool = False) -> ConnectorRead:
    """The connector's options for the `kafka` source's `options` (KafkaOptionError names a
    bad or untranslatable one)."""
    parsed = parse_options(options)  # the same checks and defaults as the Python reader
    if stream and parsed.ending is not None:
        raise KafkaOptionError(
            "endingOffsets / endingTimestamp apply to batch reads only: a stream has no end"
        )
    given = {str(k).lower(): (str(k), str(v)) for k, v in options.items()}
    out: dict[str, str] = {"subscribe": parsed.topic}
    for name in PASSED:
        if name.lower() in given:
            out[name] = given[name.lower()][1]
    out.setdefault("groupIdPrefix", GROUP_ID_PREFIX)
    if not stream and "startingoffsets" not in given and not _timestamp_start(given):
        out["startingOffsets"] = "earliest"
    out.update(java_properties(parsed.bootstrap_servers, parsed.consumer_properties))
    for lowered, (name, value) in given.items():
        if lowered.startswith(JAVA_PREFIX):
            out["kafka." + name[len(JAVA_PREFIX) :]] = value
    known = {n.lower() for n in PASSED} | _OURS
    for lowered, (name, _value) in given.items():
        if lowered in known or lowered.startswith(("kafka.", JAVA_PREFIX)):
            continue
        if lowered == "bootstrap.servers":
            continue
        raise KafkaOptionError(f"option {name!r} is not an option of the kafka source")
    return ConnectorRead(out, parsed.topic, parsed.format, parsed.quarantine_output)


def _timestamp_start(given: Mapping[str, tuple[str, str]]) -> bool:
    return "startingtimestamp" in given or "startingoffsetsbytimestamp" in given


def java_properties(bootstrap: str, librdkafka: Mapping[str, str]) -> dict[str, str]:
    """`kafka.<Java property>` options for the connector from librdkafka properties."""
    out = {"kafka.bootstrap.servers": bootstrap, "kafka.isolation.level": "read_committed"}
    properties = dict(librdkafka)
    username = properties.pop("sasl.username", None)
    password = properties.pop("sasl.password", None)
    for name, value in sorted(properties.items()):
        if name in _CLIENT_ONLY:
            continue
        if name in _RENAMED:
            out["kafka." + _RENAMED[name]] = value
        elif name in _SAME:
            out["kafka." + name] = value
        elif name == "ssl.ca.location":
            out["kafka.ssl.truststore.type"] = "PEM"
            out["kafka.ssl.truststore.location"] = value
        elif name == "ssl.endpoint.identification.algorithm":
            out["kafka.ssl.endpoint.identification.algorithm"] = "" if value == "none" else value
        else:
            raise KafkaOptionError(
                f"librdkafka property {name!r} has no translation for Spark's Kafka connector: "
                f"give the Java client's property as {JAVA_PREFIX}<name>=<value>, or read with "
                "--kafka-reader python"
            )
    if username is not None or password is not None:
        mechanism = out.get("kafka.sasl.mechanism", "GSSAPI").upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None or username is None or password is None:
            raise KafkaOptionError(
                "sasl.username and sasl.password translate for the connector only with "
                f"sasl.mechanism PLAIN or SCRAM-SHA-256/512, both set (got {mechanism}): give "
                f"{JAVA_PREFIX}sasl.jaas.config instead"
            )
        out["kafka.sasl.jaas.config"] = (
            f'{module} required username="{_jaas_quoted(username)}" '
            f'password="{_jaas_quoted(password)}";'
        )
    return out


def _jaas_quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
