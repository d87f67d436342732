"""The connection options every command shares (offsetwatch.core.connection)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from offsetwatch.core.connection import (
    ConnectionOptionError,
    add_connection_options,
    bootstrap_from_env,
    check_client_config,
    kafka_config,
    kafka_config_origins,
    kafka_error_text,
    kafka_properties_from_env,
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_connection_options(parser)
    return parser.parse_args(list(argv))


def test_kafka_spelling_first_and_the_plural_too() -> None:
    parser = argparse.ArgumentParser()
    add_connection_options(parser)
    usage = parser.format_usage()
    assert usage.index("--bootstrap-server ") < usage.index("-X KEY=VALUE")
    assert "--bootstrap-servers" not in usage  # the alias is in --help, not in the usage line
    for flag in ("--bootstrap-server", "--bootstrap-servers"):
        assert parse(flag, "b:9092").bootstrap_server == "b:9092"


def test_properties_keep_everything_after_the_first_equals_sign() -> None:
    args = parse("-X", "sasl.jaas.config=a=b", "--kafka-property", " client.id =x")
    assert args.kafka_properties == [("sasl.jaas.config", "a=b"), ("client.id", "x")]


def test_a_bad_property_is_refused_without_echoing_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("-X", "sasl.password:hunter2")
    err = capsys.readouterr().err
    assert "expected KEY=VALUE" in err and "hunter2" not in err


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"OFFSETWATCH_BOOTSTRAP_SERVER": "a:1"}, "a:1"),
        ({"OFFSETWATCH_BOOTSTRAP_SERVERS": "a:1"}, "a:1"),
        ({"OFFSETWATCH_BOOTSTRAP_SERVER": "a:1", "OFFSETWATCH_BOOTSTRAP_SERVERS": " a:1 "}, "a:1"),
        ({"OFFSETWATCH_BOOTSTRAP_SERVER": "", "OFFSETWATCH_BOOTSTRAP_SERVERS": "b:2"}, "b:2"),
    ],
)
def test_either_variable(environ: dict[str, str], expected: str | None) -> None:
    assert bootstrap_from_env(environ) == expected


def test_two_variables_that_disagree_are_refused_in_one_line() -> None:
    environ = {"OFFSETWATCH_BOOTSTRAP_SERVER": "a:1", "OFFSETWATCH_BOOTSTRAP_SERVERS": "b:2"}
    with pytest.raises(ConnectionOptionError) as error:
        bootstrap_from_env(environ)
    message = str(error.value)
    assert "OFFSETWATCH_BOOTSTRAP_SERVER=a:1" in message and "set only one" in message
    assert "\n" not in message


def test_precedence_environment_then_flags() -> None:
    environ = {
        "OFFSETWATCH_KAFKA_BOOTSTRAP_SERVERS": "from-property-env:1",
        "OFFSETWATCH_KAFKA_CLIENT_ID": "env",
        "OFFSETWATCH_KAFKA_SASL_PASSWORD": "secret",
        "OFFSETWATCH_BOOTSTRAP_SERVERS": "from-env:1",
    }
    assert kafka_config(parse(), environ) == {
        "bootstrap.servers": "from-env:1",
        "client.id": "env",
        "sasl.password": "secret",
    }
    args = parse("-X", "client.id=flag", "-X", "bootstrap.servers=from-x:1")
    assert kafka_config(args, environ)["client.id"] == "flag"
    assert kafka_config(args, environ)["bootstrap.servers"] == "from-x:1"
    args = parse("-X", "bootstrap.servers=from-x:1", "--bootstrap-servers", "from-flag:1")
    assert kafka_config(args, environ)["bootstrap.servers"] == "from-flag:1"


def test_reserved_variables_are_options_not_properties() -> None:
    environ = {"OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES": "1", "OFFSETWATCH_KAFKA_ACKS": "all"}
    assert kafka_properties_from_env(environ, {"OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES"}) == [
        ("acks", "all")
    ]


def test_origins_name_the_flag_or_variable_of_each_property() -> None:
    args = parse("--bootstrap-server", "b:1", "-X", "acks=all")
    env = {"OFFSETWATCH_KAFKA_SASL_MECHANISM": "PLAIN", "OFFSETWATCH_BOOTSTRAP_SERVERS": "e:1"}
    config, origins = kafka_config_origins(args, env)
    assert config == kafka_config(args, env)
    assert origins == {
        "sasl.mechanism": "OFFSETWATCH_KAFKA_SASL_MECHANISM",
        "acks": "-X acks",
        "bootstrap.servers": "--bootstrap-server",
    }
    assert kafka_config_origins(parse(), env)[1]["bootstrap.servers"] == (
        "OFFSETWATCH_BOOTSTRAP_SERVERS"
    )


@pytest.mark.parametrize(
    ("properties", "words"),
    [
        ({"nosuch.prop": "1"}, ['-X nosuch.prop: No such configuration property: "nosuch.prop"']),
        ({"security.protocol": "BOGUS"}, ["-X security.protocol:", 'Invalid value "BOGUS"']),
        ({"session.timeout.ms": "99999999999"}, ["-X session.timeout.ms:", "outside allowed"]),
        ({"log_level": "abc"}, ["-X log_level:"]),
        ({"error_cb": "x"}, ["-X error_cb:", "callable"]),
        (  # found in rd_kafka_new, not in the property's own check: named all the same
            {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
            ["-X ssl.ca.location:"],
        ),
    ],
)
def test_settings_that_cannot_work_name_their_origin(
    properties: dict[str, str], words: list[str]
) -> None:
    origins = {name: f"-X {name}" for name in properties}
    for kind in ("consumer", "producer", "admin"):
        with pytest.raises(ConnectionOptionError) as refused:
            check_client_config(properties, origins, kind)  # type: ignore[arg-type]
        message = str(refused.value)
        assert "KafkaError{" not in message and "Failed to create" not in message
        for word in words:
            assert word in message, message


def test_a_refused_secret_value_is_never_echoed() -> None:
    with pytest.raises(ConnectionOptionError) as refused:
        check_client_config(
            {"sasl.password": "hunter2", "nosuch.prop": "hunter2"},
            {"sasl.password": "-X sasl.password", "nosuch.prop": "-X nosuch.prop"},
        )
    assert "hunter2" not in str(refused.value)


def test_settings_that_work_pass() -> None:
    check_client_config({"bootstrap.servers": "127.0.0.1:1", "acks": "all"}, {}, "producer")
    check_client_config({"group.protocol": "consumer"}, {}, "consumer")


def test_kafka_error_text_drops_the_repr() -> None:
    from confluent_kafka import KafkaError, KafkaException

    error = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed while waiting"))
    assert kafka_error_text(error) == "Failed while waiting"
    assert kafka_error_text(ValueError("plain")) == "plain"


def test_a_property_from_a_file_is_read_and_named_by_its_setting(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    environ = {"OFFSETWATCH_KAFKA_SASL_PASSWORD_FILE": str(secret)}
    config, origins = kafka_config_origins(parse(), environ)
    assert config == {"sasl.password": "from-file"}
    assert origins == {"sasl.password": "OFFSETWATCH_KAFKA_SASL_PASSWORD_FILE"}
    # -X wins over the environment, whichever of the two forms each one uses
    config, origins = kafka_config_origins(parse("-X", "sasl.password=flag"), environ)
    assert (config, origins) == ({"sasl.password": "flag"}, {"sasl.password": "-X sasl.password"})
    args = parse("-X", f"sasl.password.file={secret}")
    config, origins = kafka_config_origins(args, {"OFFSETWATCH_KAFKA_SASL_PASSWORD": "env"})
    assert (config, origins) == (
        {"sasl.password": "from-file"},
        {"sasl.password": "-X sasl.password.file"},
    )


def test_a_missing_secret_file_is_one_line_naming_the_option(tmp_path: Path) -> None:
    args = parse("-X", f"sasl.password.file={tmp_path / 'nope'}")
    with pytest.raises(ConnectionOptionError) as raised:
        kafka_config(args, {})
    assert str(raised.value) == (
        f"-X sasl.password.file: {tmp_path / 'nope'} does not exist; it must hold the sasl.password"
    )
