"""The real flags and environment variables of `offsetwatch export`, from its parser."""

from __future__ import annotations

import argparse

from offsetwatch.cli import build_parser
from offsetwatch.commands import ENV_KAFKA_PREFIX, env_names


def export_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices["export"]
            return found
    raise AssertionError("offsetwatch has no export command")


def export_flags() -> set[str]:
    return {option for action in export_parser()._actions for option in action.option_strings}


def export_env_names() -> set[str]:
    return {name for action in export_parser()._actions for name in env_names(action)}


def is_export_env(name: str) -> bool:
    """An option's variable, or a librdkafka property (OFFSETWATCH_KAFKA_<NAME>)."""
    return name in export_env_names() or (
        name.startswith(ENV_KAFKA_PREFIX) and len(name) > len(ENV_KAFKA_PREFIX)
    )


def flags_in(argv: list[str]) -> list[str]:
    return [arg.split("=", 1)[0] for arg in argv if arg.startswith("-")]
