"""Every command that talks to Kafka takes the same connection options, in both spellings:
`--bootstrap-server` (Kafka's) and `--bootstrap-servers`, `OFFSETWATCH_BOOTSTRAP_SERVER` and
`OFFSETWATCH_BOOTSTRAP_SERVERS`, `-X KEY=VALUE` (offsetwatch.core.connection).

Parse-level for each command; the exporter runs with `--bootstrap-server` against the mock
cluster in tests/offsetwatch/test_export_cmd.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.cli import build_parser, main
from offsetwatch.commands import _offset_common
from offsetwatch.commands.spark import compact as compact_cmd
from offsetwatch.core.connection import kafka_config
from offsetwatch.exporter.config import load_config
from offsetwatch.offset_ops import admin

COMMANDS = {
    "decode": ["decode"],
    "groups list": ["groups", "list"],
    "groups describe": ["groups", "describe", "g"],
    "offsets export": ["offsets", "export", "--group", "g"],
    "offsets reset": ["offsets", "reset", "--group", "g", "--all-topics", "--to-earliest"],
    "offsets migrate": ["offsets", "migrate", "--from-group", "a", "--to-group", "b"],
    "spark stream": ["spark", "stream", "--checkpoint", "c"],
    "spark compact": ["spark", "compact", "--source", "kafka", "--lake", "l"],
    "export": ["export"],
}
BOTH = {"OFFSETWATCH_BOOTSTRAP_SERVER": "a:1", "OFFSETWATCH_BOOTSTRAP_SERVERS": "b:2"}


@pytest.fixture(autouse=True)
def _no_connection_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OFFSETWATCH_BOOTSTRAP_SERVER",
        "OFFSETWATCH_BOOTSTRAP_SERVERS",
        "OFFSETWATCH_CONFIG",
    ):
        monkeypatch.delenv(name, raising=False)


def brokers(args: argparse.Namespace, environ: dict[str, str]) -> str:
    """What the command's own resolution makes of the parsed line."""
    if args.command == "export":
        return load_config(args, environ).bootstrap_servers
    return kafka_config(args, environ)["bootstrap.servers"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("flag", ["--bootstrap-server", "--bootstrap-servers"])
def test_both_flag_spellings(command: str, flag: str) -> None:
    args = build_parser().parse_args([*COMMANDS[command], flag, "b:9092", "-X", "acks=all"])
    assert brokers(args, {}) == "b:9092"
    assert args.kafka_properties == [("acks", "all")]


def test_spark_stream_keeps_its_older_kafka_flag() -> None:
    args = build_parser().parse_args([*COMMANDS["spark stream"], "--kafka", "b:9092"])
    assert brokers(args, {}) == "b:9092"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["OFFSETWATCH_BOOTSTRAP_SERVER", "OFFSETWATCH_BOOTSTRAP_SERVERS"])
def test_both_variable_spellings_and_the_flag_wins(command: str, name: str) -> None:
    args = build_parser().parse_args(COMMANDS[command])
    assert brokers(args, {name: "e:1"}) == "e:1"
    args = build_parser().parse_args([*COMMANDS[command], "--bootstrap-server", "f:1"])
    assert brokers(args, {name: "e:1"}) == "f:1"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_kafkas_spelling_first(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command.split(), "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--bootstrap-server HOST:PORT[,...], --bootstrap-servers" in out
    assert "OFFSETWATCH_BOOTSTRAP_SERVER or OFFSETWATCH_BOOTSTRAP_SERVERS" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_variables_that_disagree_stop_the_command_in_one_line(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in BOTH.items():
        monkeypatch.setenv(name, value)
    opened: list[dict[str, Any]] = []
    monkeypatch.setattr(admin, "AdminBroker", lambda config: opened.append(config))
    assert main(COMMANDS[command]) == 2
    err = capsys.readouterr().err.strip()
    assert "OFFSETWATCH_BOOTSTRAP_SERVER=a:1 and OFFSETWATCH_BOOTSTRAP_SERVERS=b:2 differ" in err
    assert len(err.splitlines()) == 1 and not opened


@pytest.mark.parametrize("name", ["OFFSETWATCH_BOOTSTRAP_SERVER", "OFFSETWATCH_BOOTSTRAP_SERVERS"])
def test_decode_reads_the_live_topic_of_either_variable(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, "127.0.0.1:1")  # nothing listens: the error names the brokers
    assert main(["decode", "--timeout", "1"]) == 2
    assert f"cannot reach Kafka at 127.0.0.1:1 (from {name})" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["OFFSETWATCH_BOOTSTRAP_SERVER", "OFFSETWATCH_BOOTSTRAP_SERVERS"])
@pytest.mark.parametrize("command", ["groups list", "offsets export"])
def test_groups_and_offsets_open_the_brokers_of_either_variable(
    name: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Opened(Exception):
        pass

    def open_admin(config: dict[str, str]) -> None:
        raise Opened(config)

    monkeypatch.setenv(name, "e:1")
    # an option of `export`, not a librdkafka property: every command knows every option
    monkeypatch.setenv("OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES", "1")
    monkeypatch.setattr(admin, "AdminBroker", open_admin)
    # e:1 does not resolve: the probe of an unreachable cluster is tested in test_mistakes
    monkeypatch.setattr(_offset_common, "probe_cluster", lambda *args: None)
    with pytest.raises(Opened) as opened:
        main(COMMANDS[command])
    assert opened.value.args[0] == {"bootstrap.servers": "e:1"}


def test_spark_stream_takes_the_kafka_input_from_either_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OFFSETWATCH_BOOTSTRAP_SERVERS", "e:1")
    # the input is accepted (Kafka): what is missing next is the checkpoint
    assert main(["spark", "stream"]) == 2
    assert "--checkpoint DIR is required" in capsys.readouterr().err
    # --archive wins over brokers from the environment, which then only serve --alerts-topic
    assert main(["spark", "stream", "--archive", str(tmp_path)]) == 2
    assert "--checkpoint DIR is required" in capsys.readouterr().err
    assert main(["spark", "stream", "--archive", str(tmp_path), "--kafka", "b:1"]) == 2
    assert "give exactly one input" in capsys.readouterr().err


def test_spark_compact_passes_the_connection_to_the_kafka_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OFFSETWATCH_BOOTSTRAP_SERVER", "e:1")
    monkeypatch.setenv("OFFSETWATCH_KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("OFFSETWATCH_KAFKA_LAG_EXPORTER_ALIASES", "1")  # export's option
    parser = build_parser()
    argv = [*COMMANDS["spark compact"], "-X", "client.id=c", "--option", "topic=t"]
    options = compact_cmd._source_options(parser.parse_args(argv))
    assert options == {
        "kafka.bootstrap.servers": "e:1",
        "kafka.security.protocol": "SSL",
        "kafka.client.id": "c",
        "topic": "t",
    }


def test_spark_compact_refuses_brokers_for_a_file_source(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["spark", "compact", "--lake", "l", "--bootstrap-server", "b:1"]) == 2
    assert "only apply to --source kafka" in capsys.readouterr().err
