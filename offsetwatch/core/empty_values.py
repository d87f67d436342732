"""Which options may be given an empty value.

Every option that takes a value refuses '' where it is parsed, from the command line and from
its OFFSETWATCH_* variable alike (offsetwatch.commands.OneLineParser): '' as a path is the
working directory, as a host every interface, as a group or topic a name Kafka refuses later
with a worse message. An option for which '' is a value of its own (it switches something
off), or whose command checks the value itself with a better message, is marked here.
"""

from __future__ import annotations

import argparse
from typing import Final

__all__ = ["EMPTY_VALUE", "empty_means_off", "takes_empty"]

_EMPTY_OK: Final = "offsetwatch_empty_ok"
EMPTY_VALUE: Final = "must not be empty: give a value, or leave the option out for its default"


def empty_means_off(action: argparse.Action) -> argparse.Action:
    """Let this option take '' (its command reads '' itself)."""
    setattr(action, _EMPTY_OK, True)
    return action


def takes_empty(action: argparse.Action) -> bool:
    return bool(getattr(action, _EMPTY_OK, False))
