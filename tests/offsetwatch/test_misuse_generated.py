"""Every option of every command at the classes of bad values (issue 31 item 4).

Generated from the CLI's own parser definitions, so an option added tomorrow is covered
without a line here: each value-taking option given '', each numeric option at its bounds,
past them, at 0, negative, nan, inf and huge, each OFFSETWATCH_* variable of an option empty
and misspelled, and the exporter's settings from flags, variables and the TOML file alike.

A refusal must be exit 2 and one `offsetwatch: error:` line naming the option, the variable
or the file key. Acceptance must give a value a command can use (a finite number, an integer
that fits Kafka's int64). Nothing here connects anywhere: values are parsed, not run, except
the few end-to-end cases at the bottom, which stop before any work.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offsetwatch.cli import build_parser, main
from offsetwatch.commands import BOUNDS, INT64_MAX, env_names, option_env_names
from offsetwatch.core.empty_values import takes_empty
from offsetwatch.core.environment import stray_variable_error, stray_variables
from offsetwatch.exporter.config import _SETTINGS, ConfigError, load_config

#: the fewest arguments with which each command parses (nothing is run)
MINIMAL: dict[tuple[str, ...], list[str]] = {
    ("decode",): ["in.jsonl"],
    ("demo",): [],
    ("export",): [],
    ("groups", "list"): [],
    ("groups", "describe"): ["g"],
    ("offsets", "export"): ["--group", "g"],
    ("offsets", "reset"): ["--group", "g", "--to-earliest"],
    ("offsets", "migrate"): ["--from-group", "a", "--to-group", "b"],
    ("spark", "analyze"): ["--lake", "lake"],
    ("spark", "compact"): ["--lake", "lake"],
    ("spark", "offsets-at"): ["--input", "in", "--group", "g", "--time", "2026-01-01T00:00Z"],
    ("spark", "package"): [],
    ("spark", "report"): ["--lake", "lake", "--group", "g"],
    ("spark", "stream"): [],
}

Command = tuple[str, ...]
JUNK = ("", " ", "nan", "-nan", "inf", "-inf", "1e309", "-1e309", "-1", "0", "9" * 40, "\x00")


def _commands(
    parser: argparse.ArgumentParser, path: Command = ()
) -> Iterator[tuple[Command, argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _commands(child, (*path, name))


def _takes_value(action: argparse.Action) -> bool:
    return (
        bool(action.option_strings)
        and action.nargs != 0
        and not isinstance(action, argparse._HelpAction | argparse.BooleanOptionalAction)
    )


def _options() -> Iterator[tuple[Command, argparse.ArgumentParser, argparse.Action]]:
    for command, parser in _commands(build_parser()):
        for action in parser._actions:
            if _takes_value(action):
                yield command, parser, action


def _flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def _id(case: tuple[Any, ...]) -> str:
    command, _, action = case[:3]
    return " ".join((*command, _flag(action), *map(str, case[3:])))


OPTIONS = list(_options())
NUMERIC = [o for o in OPTIONS if hasattr(o[2].type, BOUNDS)]
#: options with a converter of their own (sizes, partitions, regexes, start positions, ...)
CONVERTED = [o for o in OPTIONS if callable(o[2].type) and not hasattr(o[2].type, BOUNDS)]
EXPORTER_NUMBERS = [s for s in _SETTINGS if s.kind in ("int", "float")]


def _refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], *names: str, code: int = 2
) -> str:
    assert main(argv) == code, argv
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("offsetwatch: error: "), err
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert "Traceback" not in err
    return lines[0]


def test_every_command_has_a_minimal_argv_that_parses() -> None:
    commands = {command for command, _ in _commands(build_parser())}
    assert commands == set(MINIMAL)
    parser = build_parser()
    for command, argv in MINIMAL.items():
        args = parser.parse_args([*command, *argv])
        assert not getattr(args, "env_errors", []), command


@pytest.mark.parametrize("case", OPTIONS, ids=_id)
def test_an_empty_value_is_refused_where_it_is_parsed(
    case: tuple[Command, argparse.ArgumentParser, argparse.Action],
    capsys: pytest.CaptureFixture[str],
) -> None:
    command, _, action = case
    flag = _flag(action)
    if not takes_empty(action):
        for empty in ("", "  "):
            _refused(capsys, [*command, *MINIMAL[command], flag, empty], flag)
        return
    # the exporter reads '' itself: off for an optional setting, refused for the others
    setting = next(s for s in _SETTINGS if s.flag == flag)
    if action.choices is not None:  # '' is no choice: refused where parsed
        _refused(capsys, [*command, flag, ""], flag)
        return
    args = build_parser().parse_args([*command, flag, ""])
    if setting.optional:
        assert getattr(load_config(args, {}), setting.name) in (None, ""), flag
    else:
        with pytest.raises(ConfigError, match=flag):
            load_config(args, {})


@pytest.mark.parametrize(
    "case", [o for o in OPTIONS if env_names(o[2])], ids=lambda c: _id(c) + " env"
)
def test_an_empty_variable_is_refused_or_not_read(
    case: tuple[Command, argparse.ArgumentParser, argparse.Action],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused naming the variable, or not read by this command at all (same as unset)."""
    command, _, action = case
    variables = env_names(action)
    for name in variables:
        monkeypatch.setenv(name, "")
    if command == ("export",):
        setting = next((s for s in _SETTINGS if s.flag == _flag(action)), None)
        args = build_parser().parse_args([*command])
        if setting is None or setting.optional:
            try:
                load_config(args, {name: "" for name in variables})
            except ConfigError as error:  # -X's variable is a librdkafka property's name
                assert variables[0] in str(error), error
        else:
            with pytest.raises(ConfigError, match=variables[0]):
                load_config(args, {name: "" for name in variables})
        return
    try:
        args = build_parser().parse_args([*command, *MINIMAL[command]])
    except SystemExit as stop:
        assert stop.code == 2
        line = capsys.readouterr().err.strip()
        assert any(name in line for name in variables), line
        return
    errors = getattr(args, "env_errors", [])
    if errors:
        assert any(name in errors[0] for name in variables), errors
        return
    monkeypatch.delenv(variables[0])
    for name in variables:
        monkeypatch.delenv(name, raising=False)
    unset = build_parser().parse_args([*command, *MINIMAL[command]])
    assert getattr(args, action.dest) == getattr(unset, action.dest), (
        f"{variables} set to '' was read as {getattr(args, action.dest)!r}"
    )


def _past(low: float, high: float, is_int: bool) -> list[str]:
    step = 1 if is_int else max(abs(low) * 0.5, 0.001)
    return [str(low - step), str(high + 1)]


@pytest.mark.parametrize("case", NUMERIC, ids=_id)
def test_a_number_at_and_past_its_bounds(
    case: tuple[Command, argparse.ArgumentParser, argparse.Action],
    capsys: pytest.CaptureFixture[str],
) -> None:
    command, parser, action = case
    flag = _flag(action)
    low, high = getattr(action.type, BOUNDS)
    is_int = action.type.__name__ == "integer"  # type: ignore[union-attr]
    for edge in (low, high):
        assert parser._get_values(action, [str(edge)]) == edge, (flag, edge)
    for value in (*_past(low, high, is_int), "nan", "inf", "-inf", "1e309", "9" * 40):
        _refused(capsys, [*command, *MINIMAL[command], f"{flag}={value}"], flag)
    for value in ("0", "-1"):
        if not low <= float(value) <= high:
            _refused(capsys, [*command, *MINIMAL[command], f"{flag}={value}"], flag)


@pytest.mark.parametrize("case", CONVERTED, ids=_id)
def test_junk_for_a_converted_option_is_refused_or_usable(
    case: tuple[Command, argparse.ArgumentParser, argparse.Action],
    capsys: pytest.CaptureFixture[str],
) -> None:
    command, parser, action = case
    flag = _flag(action)
    for value in JUNK:
        try:
            parsed = parser._get_values(action, [value])
        except argparse.ArgumentError as error:
            assert flag in str(error) or any(o in str(error) for o in action.option_strings)
            _refused(capsys, [*command, *MINIMAL[command], f"{flag}={value}"], flag)
            continue
        for number in _numbers(parsed):
            assert math.isfinite(number), (flag, value, parsed)
            assert abs(number) <= INT64_MAX, (flag, value, parsed)


def _numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _numbers(item)
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            yield from _numbers(getattr(value, field.name))


@pytest.mark.parametrize("setting", EXPORTER_NUMBERS, ids=lambda s: s.flag)
@pytest.mark.parametrize("source", ["flag", "variable", "file"])
def test_exporter_numbers_from_every_source(setting: Any, source: str, tmp_path: Path) -> None:
    """nan, inf, huge, negative and 0 for every numeric setting: refused naming where the
    value came from, or a finite value in range of what the setting feeds."""
    for text in ("nan", "inf", "-inf", "1e309", "9" * 40, "-1", "0", "-0.5"):
        if setting.kind == "int" and "." in text:
            continue
        argv, env = ["export"], {}
        named = setting.flag
        if source == "flag":
            argv += [f"{setting.flag}={text}"]
        elif source == "variable":
            env, named = {setting.env: text}, setting.env
        else:
            config = tmp_path / "offsetwatch.toml"
            value = {"nan": "nan", "inf": "inf", "-inf": "-inf", "1e309": "inf"}.get(text, text)
            config.write_text(f"{setting.name} = {value}\n")
            argv += ["--config", str(config)]
            named = setting.name
        args = build_parser().parse_args(argv)
        try:
            loaded = getattr(load_config(args, env), setting.name)
        except ConfigError as error:
            # a value from the file is named by the file, the flag spelling its key
            assert named in str(error) or (source == "file" and setting.flag in str(error)), (
                text,
                str(error),
            )
            assert "\n" not in str(error)
            continue
        assert math.isfinite(loaded), (setting.flag, text, loaded)
        assert abs(loaded) <= INT64_MAX, (setting.flag, text, loaded)
        assert loaded >= 0, (setting.flag, text, loaded)


def _misspellings(name: str) -> list[str]:
    body = name.removeprefix("OFFSETWATCH_")
    swapped = body[1] + body[0] + body[2:] if len(body) > 2 else body + "X"
    return ["OFFSETWATCH_" + body[:-1], "OFFSETWATCH_" + swapped, name + "S"]


ALL_VARIABLES = sorted(option_env_names([build_parser()]))


@pytest.mark.parametrize("name", ALL_VARIABLES)
def test_a_misspelled_variable_is_refused_with_the_closest_name(name: str) -> None:
    for wrong in _misspellings(name):
        if wrong in ALL_VARIABLES or wrong.startswith("OFFSETWATCH_KAFKA_"):
            continue  # a real name, or a librdkafka property librdkafka checks
        assert stray_variables({wrong: "1"}, ALL_VARIABLES) == [wrong]
        line = stray_variable_error([wrong], ALL_VARIABLES)
        assert wrong in line and "did you mean OFFSETWATCH_" in line, line


def test_a_misspelled_variable_stops_a_command_before_its_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sample = tmp_path / "in.jsonl"
    sample.write_text("")
    monkeypatch.setenv("OFFSETWATCH_HTTP_PROT", "9000")
    line = _refused(capsys, ["decode", str(sample)], "OFFSETWATCH_HTTP_PROT")
    assert "did you mean OFFSETWATCH_HTTP_PORT?" in line
    assert capsys.readouterr().out == ""
    monkeypatch.delenv("OFFSETWATCH_HTTP_PROT")
    for name in ("OFFSETWATCH_KAFKA_CLIENT_ID", "OFFSETWATCH_TEST_KAFKA_HOME"):
        monkeypatch.setenv(name, "x")  # librdkafka's and the project's tools' are not refused
    assert main(["decode", str(sample)]) == 0, capsys.readouterr().err
