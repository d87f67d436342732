"""The kafka source's options as Spark's connector takes them (no Spark, no broker)."""

from __future__ import annotations

import pytest

from offsetwatch.spark_jobs.sources.kafka_connector_options import (
    GROUP_ID_PREFIX,
    connector_read,
    java_properties,
)
from offsetwatch.spark_jobs.sources.kafka_options import KafkaOptionError

BOOT = {"kafka.bootstrap.servers": "b1:9092,b2:9092"}


def test_defaults_read_consumer_offsets_committed_from_the_start() -> None:
    read = connector_read(BOOT)
    assert read.topic == "__consumer_offsets" and read.format == "raw" and not read.quarantine
    assert read.options == {
        "subscribe": "__consumer_offsets",
        "startingOffsets": "earliest",
        "groupIdPrefix": GROUP_ID_PREFIX,
        "kafka.bootstrap.servers": "b1:9092,b2:9092",
        "kafka.isolation.level": "read_committed",
    }


def test_a_stream_starts_at_latest_unless_told_as_spark_does() -> None:
    assert "startingOffsets" not in connector_read(BOOT, stream=True).options
    with pytest.raises(KafkaOptionError, match="batch reads only"):
        connector_read({**BOOT, "endingOffsets": "latest"}, stream=True)


def test_offset_options_pass_under_spark_names_in_any_case() -> None:
    read = connector_read(
        {
            **BOOT,
            "topic": "offsetwatch.records",
            "startingtimestamp": "1700000000000",
            "MAXOFFSETSPERTRIGGER": "500",
            "failOnDataLoss": "false",
            "output": "quarantine",
        }
    )
    assert read.format == "json" and read.quarantine
    assert read.options["subscribe"] == "offsetwatch.records"
    assert read.options["startingTimestamp"] == "1700000000000"
    assert "startingOffsets" not in read.options  # the timestamp is the start
    assert read.options["maxOffsetsPerTrigger"] == "500"
    assert read.options["failOnDataLoss"] == "false"


def test_the_same_checks_as_the_python_reader() -> None:
    with pytest.raises(KafkaOptionError, match=r"kafka\.bootstrap\.servers"):
        connector_read({})
    with pytest.raises(KafkaOptionError, match="format"):
        connector_read({**BOOT, "format": "xml"})
    with pytest.raises(KafkaOptionError, match="'startingOffsets'"):
        connector_read({**BOOT, "startingOffsets": "soon"})
    with pytest.raises(KafkaOptionError, match="not an option"):
        connector_read({**BOOT, "subscribePattern": "__.*"})


def test_sasl_scram_becomes_a_jaas_config() -> None:
    java = java_properties(
        "b:9093",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "ow",
            "sasl.password": 'p"w\\d',
            "ssl.ca.location": "/etc/kafka/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
            "log_level": "3",
        },
    )
    assert java["kafka.security.protocol"] == "SASL_SSL"
    assert java["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="ow" password="p\\"w\\\\d";'
    )
    assert java["kafka.ssl.truststore.type"] == "PEM"
    assert java["kafka.ssl.truststore.location"] == "/etc/kafka/ca.pem"
    assert java["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert "kafka.log_level" not in java


def test_a_property_without_a_java_counterpart_is_refused_by_name() -> None:
    with pytest.raises(KafkaOptionError, match=r"'ssl\.key\.location'.*java\.kafka\..*python"):
        java_properties("b:9093", {"ssl.key.location": "/k.pem"})
    with pytest.raises(KafkaOptionError, match="GSSAPI"):
        java_properties("b:9093", {"sasl.username": "u", "sasl.password": "p"})


def test_java_properties_pass_as_they_are() -> None:
    read = connector_read({**BOOT, "java.kafka.ssl.keystore.location": "/ks.p12"})
    assert read.options["kafka.ssl.keystore.location"] == "/ks.p12"
