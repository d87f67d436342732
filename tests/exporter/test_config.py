"""Exporter configuration: layering, environment mapping, TOML files, validation, redaction."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.exporter import config as config_module
from offsetwatch.exporter.config import (
    DEFAULT_HTTP_PORT,
    MASK,
    ConfigError,
    ExporterConfig,
    add_arguments,
    is_secret_property,
    load_config,
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="offsetwatch export")
    add_arguments(p)
    return p


def load(argv: Sequence[str] = (), env: dict[str, str] | None = None) -> ExporterConfig:
    return load_config(parser().parse_args(list(argv)), env or {})


@pytest.fixture(autouse=True)
def checked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], dict[str, str], str]]:
    """What load_config asked librdkafka to check, instead of asking it: these tests are about
    layering and use plausible settings librdkafka would refuse on this machine (a CA file
    that is not here, a SASL password without a user). The check itself, through
    `offsetwatch export`, is in tests/offsetwatch/test_mistakes.py."""
    calls: list[tuple[dict[str, Any], dict[str, str], str]] = []

    def record(config: Mapping[str, Any], origins: Mapping[str, str], kind: str) -> None:
        calls.append((dict(config), dict(origins), kind))

    monkeypatch.setattr(config_module, "check_client_config", record)
    return calls


def test_librdkafka_checks_the_settings_with_their_origins(
    tmp_path: Path, checked: list[tuple[dict[str, Any], dict[str, str], str]]
) -> None:
    path = write_toml(tmp_path, '[kafka]\n"security.protocol" = "SSL"\n"acks" = "1"\n')
    env = {"OFFSETWATCH_KAFKA_SASL_MECHANISM": "PLAIN", "OFFSETWATCH_KAFKA_ACKS": "all"}
    load(["--config", str(path), "-X", "client.id=me", "--publish-topic", "out"], env)
    properties = {
        "security.protocol": "SSL",
        "acks": "all",
        "sasl.mechanism": "PLAIN",
        "client.id": "me",
        "bootstrap.servers": "localhost:9092",
    }
    origins = {
        "security.protocol": f'"security.protocol" in the [kafka] table of {path}',
        "acks": "OFFSETWATCH_KAFKA_ACKS",  # the environment wins over the file
        "sasl.mechanism": "OFFSETWATCH_KAFKA_SASL_MECHANISM",
        "client.id": "-X client.id",
    }
    # a consumer reads the offsets topic; a producer republishes (--publish-topic)
    assert checked == [(properties, origins, "consumer"), (properties, origins, "producer")]


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "offsetwatch.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------- defaults


def test_defaults() -> None:
    config = load()
    assert config == ExporterConfig()
    assert config.bootstrap_servers == "localhost:9092"
    assert config.offsets_topic == "__consumer_offsets"
    assert config.http_host == "0.0.0.0"
    assert config.http_port == DEFAULT_HTTP_PORT == 9380
    assert config.sample_interval_s == 10
    assert config.snapshot_interval_s == 5
    assert config.status_window_s == 600
    assert config.granularity == "partition"
    assert config.kafka_properties == {}
    assert config.publish_topic is None and config.archive_dir is None
    assert config.checkpoint_path is None and config.checkpoint_interval_s == 30
    assert config.log_level == "INFO"


def test_every_field_has_a_flag_an_env_name_and_help() -> None:
    text = parser().format_help()
    for f in dataclasses.fields(ExporterConfig):
        if f.name == "kafka_properties":
            assert "-X KEY=VALUE" in text
            continue
        flag = "--" + f.name.replace("_", "-")
        assert flag in text, flag
        assert "OFFSETWATCH_" + f.name.upper() in text.replace("\n", "").replace(" ", ""), f.name


# --------------------------------------------------------------------------------- layering


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
        http_port = 1001
        cluster_name = "from-file"
        granularity = "topic"
        log_level = "debug"
        [kafka]
        "client.id" = "file"
        "socket.timeout.ms" = 1000
        """,
    )
    env = {
        "OFFSETWATCH_HTTP_PORT": "1002",
        "OFFSETWATCH_CLUSTER_NAME": "from-env",
        "OFFSETWATCH_KAFKA_CLIENT_ID": "env",
    }
    argv = ["--config", str(path), "--http-port", "1003", "-X", "client.id=flag"]
    config = load(argv, env)
    assert config.http_port == 1003  # flag > env > file
    assert config.cluster_name == "from-env"  # env > file
    assert config.granularity == "topic"  # file > default
    assert config.log_level == "DEBUG"
    assert config.snapshot_interval_s == 5  # default
    # Kafka properties merge key by key
    assert config.kafka_properties == {"client.id": "flag", "socket.timeout.ms": "1000"}


def test_config_file_from_the_environment(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'cluster_name = "env-file"\n')
    assert load([], {"OFFSETWATCH_CONFIG": str(path)}).cluster_name == "env-file"
    other = tmp_path / "other.toml"
    other.write_text('cluster_name = "flag-file"\n')
    config = load(["--config", str(other)], {"OFFSETWATCH_CONFIG": str(path)})
    assert config.cluster_name == "flag-file"


# --------------------------------------------------------------------------------- environment


def test_environment_mapping() -> None:
    env = {
        "OFFSETWATCH_BOOTSTRAP_SERVERS": "k1:9092,k2:9092",
        "OFFSETWATCH_HTTP_PORT": "9999",
        "OFFSETWATCH_SAMPLE_INTERVAL_S": "2.5",
        "OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES": "yes",  # a setting, not a Kafka property
        "OFFSETWATCH_ARCHIVE_DIR": "/data/archive",
        "OFFSETWATCH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "OFFSETWATCH_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "OFFSETWATCH_KAFKA_SASL_PASSWORD": "hunter2",
        "OFFSETWATCH_KAFKA_LOG__LEVEL": "6",  # __ is a literal underscore
        "OFFSETWATCH_CONFORMANCE_DIR": "/somewhere",  # not ours: ignored
        "KAFKA_SASL_MECHANISM": "PLAIN",  # no prefix: ignored
    }
    config = load([], env)
    assert config.bootstrap_servers == "k1:9092,k2:9092"
    assert config.http_port == 9999
    assert config.sample_interval_s == 2.5
    assert config.kafka_lag_exporter_aliases is True
    assert config.archive_dir == Path("/data/archive")
    assert config.kafka_properties == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.password": "hunter2",
        "log_level": "6",
    }


def test_empty_environment_value_switches_an_optional_setting_off(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'publish_topic = "decoded"\ncheckpoint_path = "/x/c"\n')
    env = {"OFFSETWATCH_PUBLISH_TOPIC": "", "OFFSETWATCH_CHECKPOINT_PATH": ""}
    config = load(["--config", str(path)], env)
    assert config.publish_topic is None
    assert config.checkpoint_path is None
    assert load(["--config", str(path), "--publish-topic", ""]).publish_topic is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("OFFSETWATCH_HTTP_PORT", "eighty", "--http-port must be an integer (got 'eighty' from "),
        ("OFFSETWATCH_SAMPLE_INTERVAL_S", "10s", "--sample-interval-s must be a number"),
        ("OFFSETWATCH_ARCHIVE_GZIP", "maybe", "--archive-gzip must be true or false"),
    ],
)
def test_environment_type_errors(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load([], {name: value})
    assert message in str(error.value)
    assert name in str(error.value)


@pytest.mark.parametrize(("text", "expected"), [("1", True), ("off", False), ("TRUE", True)])
def test_environment_booleans(text: str, expected: bool) -> None:
    assert load([], {"OFFSETWATCH_ARCHIVE_GZIP": text}).archive_gzip is expected


# --------------------------------------------------------------------------------- TOML


def test_toml_file(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
        bootstrap_servers = "broker:9093"
        sample_interval_s = 15          # an int is fine for a float setting
        kafka_lag_exporter_aliases = true
        group_deny = "^console-consumer-"
        checkpoint_path = "/var/lib/offsetwatch/state.ckpt"

        [kafka]
        security.protocol = "SSL"       # dotted key: a nested table in TOML
        "ssl.ca.location" = "/etc/ca.pem"
        "enable.ssl.certificate.verification" = false
        """,
    )
    config = load(["--config", str(path)])
    assert config.bootstrap_servers == "broker:9093"
    assert config.sample_interval_s == 15.0
    assert config.kafka_lag_exporter_aliases is True
    assert config.group_deny == "^console-consumer-"
    assert config.checkpoint_path == Path("/var/lib/offsetwatch/state.ckpt")
    assert config.kafka_properties == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/ca.pem",
        "enable.ssl.certificate.verification": "false",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "htp_port = 1",
            r"unknown setting 'htp_port' in .*; did you mean 'http_port'",
        ),
        ('http_port = "80"', "http_port in .* must be an integer"),
        ("kafka_lag_exporter_aliases = 1", "must be true or false"),
        ("kafka = 3", r"'kafka' in .* must be a table: \[kafka\]"),
        ('[kafka]\n"x" = [1]', "Kafka property x in .* must be a string, number or boolean"),
        ("http_port = ", "is not valid TOML"),
    ],
)
def test_toml_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write_toml(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load(["--config", str(path)])


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file .*nope\.toml not found"):
        load(["--config", str(tmp_path / "nope.toml")])


# --------------------------------------------------------------------------------- flags


def test_flags() -> None:
    config = load(
        [
            "--bootstrap-servers",
            "a:1,b:2",
            "--granularity",
            "group",
            "--kafka-lag-exporter-aliases",
            "--status-window-s",
            "120",
            "--storm-rebalances",
            "3",
            "--warn-min-growth-ratio",
            "0",
            "--rebalance-grace-s",
            "0",
            "--checkpoint-path",
            "/tmp/c",
            "--log-level",
            "warning",
            "-X",
            "sasl.mechanism=PLAIN",
            "--kafka-property",
            "sasl.jaas=a=b",  # only the first '=' splits
        ]
    )
    assert config.bootstrap_servers == "a:1,b:2"
    assert config.granularity == "group"
    assert config.kafka_lag_exporter_aliases is True
    assert config.status_window_s == 120.0
    assert (config.storm_rebalances, config.rebalance_grace_s) == (3, 0.0)
    assert config.warn_min_growth_ratio == 0.0
    assert config.checkpoint_path == Path("/tmp/c")
    assert config.log_level == "WARNING"
    assert config.kafka_properties == {"sasl.mechanism": "PLAIN", "sasl.jaas": "a=b"}


def test_negative_boolean_flag_beats_the_environment() -> None:
    env = {"OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES": "true"}
    assert load([], env).kafka_lag_exporter_aliases is True
    assert load(["--no-kafka-lag-exporter-aliases"], env).kafka_lag_exporter_aliases is False


@pytest.mark.parametrize("flag", ["--bootstrap-server", "--bootstrap-servers"])
def test_both_spellings_of_the_brokers_flag(flag: str) -> None:
    assert load([flag, "a:1,b:2"]).bootstrap_servers == "a:1,b:2"


@pytest.mark.parametrize("name", ["OFFSETWATCH_BOOTSTRAP_SERVER", "OFFSETWATCH_BOOTSTRAP_SERVERS"])
def test_both_spellings_of_the_brokers_variable(name: str) -> None:
    assert load([], {name: "e:1"}).bootstrap_servers == "e:1"
    assert load(["--bootstrap-server", "f:1"], {name: "e:1"}).bootstrap_servers == "f:1"


def test_brokers_variables_that_disagree_are_refused() -> None:
    both = {"OFFSETWATCH_BOOTSTRAP_SERVER": "a:1", "OFFSETWATCH_BOOTSTRAP_SERVERS": "a:1"}
    assert load([], both).bootstrap_servers == "a:1"
    with pytest.raises(ConfigError, match="differ: set only one of them"):
        load([], {**both, "OFFSETWATCH_BOOTSTRAP_SERVERS": "b:2"})


@pytest.mark.parametrize("key", ["bootstrap_server", "bootstrap_servers"])
def test_both_spellings_of_the_brokers_key_in_the_file(tmp_path: Path, key: str) -> None:
    path = write_toml(tmp_path, f'{key} = "file:1"\n')
    assert load(["--config", str(path)]).bootstrap_servers == "file:1"


def test_brokers_keys_that_disagree_in_the_file_are_refused(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'bootstrap_server = "a:1"\nbootstrap_servers = "b:2"\n')
    with pytest.raises(ConfigError, match=r"bootstrap_server and bootstrap_servers in .* differ"):
        load(["--config", str(path)])


def test_a_bad_brokers_variable_names_the_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"--bootstrap-server must .*\[set by OFFSETWATCH_BOOTSTRAP_SERVER\]"
    ):
        load([], {"OFFSETWATCH_BOOTSTRAP_SERVER": "kafka"})


def test_bad_kafka_property_flag(capsys: pytest.CaptureFixture[str]) -> None:
    # the -X of every command (offsetwatch.core.connection): refused while parsing, never echoed
    with pytest.raises(SystemExit):
        load(["-X", "sasl.password:hunter2"])
    err = capsys.readouterr().err
    assert "expected KEY=VALUE" in err and "hunter2" not in err


def test_argparse_rejects_bad_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--granularity", "x"])
    assert "invalid choice: 'x'" in capsys.readouterr().err


# --------------------------------------------------------------------------------- validation


def test_granularity_message_names_the_choices() -> None:
    with pytest.raises(ConfigError) as error:
        ExporterConfig(granularity="x")  # type: ignore[arg-type]
    assert str(error.value) == "--granularity must be one of partition, topic, group (got 'x')"


def test_message_says_where_a_bad_value_came_from() -> None:
    with pytest.raises(ConfigError) as error:
        load([], {"OFFSETWATCH_GRANULARITY": "x"})
    assert str(error.value) == (
        "--granularity must be one of partition, topic, group (got 'x') "
        "[set by OFFSETWATCH_GRANULARITY]"
    )


def test_invalid_regex_message() -> None:
    with pytest.raises(ConfigError) as error:
        load(["--group-allow", "orders-(["])
    message = str(error.value)
    assert message.startswith("invalid regex for --group-allow: ")
    assert "'orders-(['" in message


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"bootstrap_servers": " , "}, "--bootstrap-server must name at least one broker"),
        ({"bootstrap_servers": "kafka"}, "--bootstrap-server must be comma separated host:port"),
        ({"http_port": 70000}, "--http-port must be a TCP port, 0-65535 (got 70000)"),
        ({"sample_interval_s": 0}, "--sample-interval-s must be a positive number of seconds"),
        ({"checkpoint_interval_s": -1}, "--checkpoint-interval-s must be a positive number"),
        ({"status_window_s": 15}, "--status-window-s (15) must span at least two samples"),
        ({"storm_rebalances": 0}, "--storm-rebalances must be 1-20: the rebalances the exporter"),
        ({"storm_rebalances": 21}, "--storm-rebalances must be 1-20"),
        ({"warn_min_growth_ratio": -0.1}, "--warn-min-growth-ratio must be a fraction of the"),
        ({"rebalance_grace_s": -1}, "--rebalance-grace-s must be 0 or a positive number"),
        ({"publish_format": "xml"}, "--publish-format must be one of json, avro"),
        ({"archive_format": "csv"}, "--archive-format must be one of jsonl, avro"),
        ({"log_level": "loud"}, "--log-level must be one of DEBUG, INFO"),
        ({"publish_topic": "__consumer_offsets"}, "--publish-topic must not be the offsets topic"),
        (
            {"publish_topic": "out", "publish_dlq_topic": "__share_group_state"},
            "--publish-dlq-topic must not be a Kafka internal topic",
        ),
        ({"publish_topic": "bad topic"}, "--publish-topic 'bad topic' has characters Kafka"),
        ({"offsets_topic": "x" * 250}, "--offsets-topic is 250 characters long; Kafka allows"),
        ({"publish_topic": ".."}, "--publish-topic '..' is not a topic name Kafka allows"),
        (
            {"publish_topic": "out", "publish_dlq_topic": "out"},
            "--publish-dlq-topic must differ from --publish-topic",
        ),
        ({"publish_schema_id": -1}, "--publish-schema-id must be a Schema Registry id"),
        (
            {"archive_gzip": True, "archive_format": "avro"},
            "--archive-gzip only applies to --archive-format jsonl",
        ),
        ({"archive_roll_bytes": 10}, "--archive-roll-bytes must be 1024 to"),
        ({"archive_gzip_level": 0}, "--archive-gzip-level must be a zlib level, 1-9"),
        ({"archive_gzip_level": 10}, "--archive-gzip-level must be a zlib level, 1-9"),
        ({"publish_headers": "all"}, "--publish-headers must be one of source, compact, none"),
        (
            {"kafka_properties": {"bootstrap.servers": "x:1"}},
            "set the brokers with --bootstrap-server",
        ),
        ({"kafka_properties": {"acks": 1}}, "Kafka property 'acks': names and values must be"),
    ],
)
def test_validation_messages(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        ExporterConfig(**changes)  # type: ignore[arg-type]
    assert message in str(error.value)


def test_avro_publishing_with_and_without_schema_registry_framing() -> None:
    framed = ExporterConfig(publish_topic="out", publish_format="avro", publish_schema_id=7)
    assert framed.publish_schema_id == 7
    bare = ExporterConfig(publish_topic="out", publish_format="avro")
    assert bare.publish_schema_id is None


def test_config_is_immutable() -> None:
    properties = {"client.id": "a"}
    config = ExporterConfig(kafka_properties=properties)
    properties["client.id"] = "changed"
    assert config.kafka_properties == {"client.id": "a"}
    with pytest.raises(TypeError):
        config.kafka_properties["client.id"] = "b"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.http_port = 1  # type: ignore[misc]
    assert config.with_overrides(http_port=1).http_port == 1
    with pytest.raises(ConfigError):
        config.with_overrides(http_port=-1)


def test_filters() -> None:
    config = ExporterConfig(group_allow="^orders-", group_deny="-test$", topic_deny="^_")
    assert config.allows_group("orders-eu")
    assert not config.allows_group("orders-eu-test")
    assert not config.allows_group("billing")
    assert config.allows_topic("payments")
    assert not config.allows_topic("_schemas")
    assert ExporterConfig().allows_group("anything")


# --------------------------------------------------------------------------------- redaction


def test_redacted_masks_secrets_and_keeps_the_rest() -> None:
    config = ExporterConfig(
        kafka_properties={
            "sasl.username": "monitor",
            "sasl.password": "hunter2",
            "ssl.key.password": "k1",
            "ssl.keystore.password": "k2",
            "sasl.oauthbearer.client.secret": "s",
            "sasl.oauthbearer.config": "principal=x clientSecret=y",
            "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
            "custom.auth.TOKEN": "t",
            "security.protocol": "SASL_SSL",
        },
        checkpoint_path=Path("/var/lib/c"),
    )
    shown = config.redacted()
    assert shown["kafka_properties"] == {
        "custom.auth.TOKEN": MASK,
        "sasl.oauthbearer.client.secret": MASK,
        "sasl.oauthbearer.config": MASK,
        "sasl.password": MASK,
        "sasl.username": "monitor",
        "security.protocol": "SASL_SSL",
        "ssl.key.password": MASK,
        "ssl.key.pem": MASK,
        "ssl.keystore.password": MASK,
    }
    assert shown["checkpoint_path"] == "/var/lib/c"
    assert shown["http_port"] == DEFAULT_HTTP_PORT
    text = json.dumps(shown)  # loggable as JSON
    for secret in ("hunter2", "k1", "k2", "clientSecret", "PRIVATE KEY"):
        assert secret not in text
    assert config.kafka_properties["sasl.password"] == "hunter2"  # the config keeps it


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("sasl.password", True),
        ("SSL.KEYSTORE.PASSWORD", True),
        ("sasl.oauthbearer.client.secret", True),
        ("sasl.username", False),
        ("ssl.ca.location", False),
        ("bootstrap.servers", False),
    ],
)
def test_is_secret_property(name: str, secret: bool) -> None:
    assert is_secret_property(name) is secret


def test_a_property_from_a_file_is_read_when_clients_are_made(
    tmp_path: Path, checked: list[tuple[dict[str, Any], dict[str, str], str]]
) -> None:
    secret = tmp_path / "password"
    secret.write_text("first\n")
    path = write_toml(tmp_path, f'[kafka]\n"sasl.password.file" = "{secret}"\n')
    config = load(["--config", str(path)])
    # kept as the file setting: a long-running exporter reads it again when it changes
    assert config.kafka_properties == {"sasl.password.file": str(secret)}
    assert config.redacted()["kafka_properties"] == {"sasl.password.file": str(secret)}
    assert checked[0][0]["sasl.password"] == "first"
    assert checked[0][1]["sasl.password"] == f'"sasl.password.file" in the [kafka] table of {path}'
    secret.write_text("second")
    assert config.client_properties()["sasl.password"] == "second"


def test_a_secret_file_that_cannot_be_read_stops_the_start_naming_it(tmp_path: Path) -> None:
    env = {"OFFSETWATCH_KAFKA_SSL_KEY_PASSWORD_FILE": str(tmp_path)}
    with pytest.raises(ConfigError) as raised:
        load([], env)
    assert str(raised.value) == (
        f"OFFSETWATCH_KAFKA_SSL_KEY_PASSWORD_FILE: {tmp_path} is a directory; it must hold "
        "the ssl.key.password"
    )


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"fleet_replica": "r1"}, "--fleet-replica only goes with --fleet NAME"),
        ({"fleet_url": "http://h:1"}, "--fleet-url only goes with --fleet NAME"),
        ({"fleet": "a b", "http_port": 1}, "--fleet 'a b' cannot name a fleet"),
        ({"fleet": "f", "http_port": 1, "fleet_replica": "a|b"}, "--fleet-replica 'a|b'"),
        ({"fleet": "f", "fleet_url": "ftp://h:1"}, "the scheme must be http or https"),
        ({"fleet": "f", "http_port": 0}, "--fleet-url is needed with --http-port 0"),
        ({"fleet": "f", "http_port": 1, "fleet_protocol": "x"}, "--fleet-protocol must be one"),
    ],
)
def test_fleet_settings_that_cannot_work_are_refused(settings: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)):
        ExporterConfig(**settings)


def test_a_fleet_replica_may_republish_and_archive() -> None:
    # each partition's sink position goes to the fleet's group (exporter/fleet/sink_commits.py)
    config = ExporterConfig(fleet="f", http_port=1, publish_topic="t", archive_dir=Path("a"))
    assert (config.publish_topic, config.archive_dir) == ("t", Path("a"))


def test_a_fleet_replica_with_its_defaults() -> None:
    config = ExporterConfig(fleet="prod", http_port=9380)
    assert (config.fleet_protocol, config.fleet_replica, config.fleet_url) == ("auto", None, None)
