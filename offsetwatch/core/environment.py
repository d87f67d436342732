"""Which OFFSETWATCH_* environment variables exist, and the one line for one that does not.

A variable that looks like ours but names nothing (`OFFSETWATCH_HTTP_PROT=9000`) would
otherwise be ignored in silence, and the daemon would run with the default the operator meant
to change. Every command refuses it before doing any work, with the closest real name; the
TOML file does the same for its keys (exporter/config.py).

The names come from three places: every option of every command (`--http-port` is
OFFSETWATCH_HTTP_PORT, computed from the parsers), the librdkafka properties
(OFFSETWATCH_KAFKA_<PROPERTY>, checked by librdkafka itself), and the few variables below
that no option stands for. tests/offsetwatch/core/test_environment.py scans the sources so
that a variable read anywhere in the project is known here.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Final

from offsetwatch.core.connection import ENV_KAFKA_PREFIX

__all__ = ["OTHER_VARIABLES", "stray_variable_error", "stray_variables"]

PREFIX: Final = "OFFSETWATCH_"

#: read by the product, but no option stands for them (name: what it is)
OTHER_VARIABLES: Final = {
    "OFFSETWATCH_EXPORTER_PASSWORD": "the password of groups --exporter-user",
    "OFFSETWATCH_NO_SPEEDUPS": "1 turns the C accelerators off (decoder, exporter)",
    "OFFSETWATCH_SPARK_KAFKA_JARS": "Spark's Kafka connector jars, for offline machines",
    "OFFSETWATCH_SPARK_KAFKA_CACHE": "where Spark's Kafka connector jars are cached",
    "OFFSETWATCH_CHROMIUM": "the browser of the console's screenshots",
}

#: the project's own tools (tests, benchmarks, the broker launcher); never a setting
_TOOLING: Final = frozenset(
    {
        "OFFSETWATCH_BENCH_DIR",
        "OFFSETWATCH_BROKER_CACHE",
        "OFFSETWATCH_BROKER_START_TIMEOUT_S",
        "OFFSETWATCH_BROKER_VERSION",
        "OFFSETWATCH_CONFORMANCE_DIR",
    }
)
_TOOLING_PREFIX: Final = "OFFSETWATCH_TEST_"


def _is_known(name: str, options: Collection[str]) -> bool:
    return (
        name in options
        or name in OTHER_VARIABLES
        or name in _TOOLING
        or name.startswith(_TOOLING_PREFIX)
        # librdkafka properties: any name, checked by librdkafka when the client is made
        or (name.startswith(ENV_KAFKA_PREFIX) and len(name) > len(ENV_KAFKA_PREFIX))
    )


def stray_variables(environ: Mapping[str, str], options: Collection[str]) -> list[str]:
    """OFFSETWATCH_* variables set in `environ` that name nothing (`options`: the variables
    of every command's options)."""
    return sorted(
        name for name in environ if name.startswith(PREFIX) and not _is_known(name, options)
    )


def stray_variable_error(names: list[str], options: Collection[str]) -> str:
    """One line for the stray variables: the closest real name of each, and what to do."""
    # the shared prefix would make every name look close to every other
    known = sorted({name.removeprefix(PREFIX) for name in (*options, *OTHER_VARIABLES)})
    parts = []
    for name in names:
        close = difflib.get_close_matches(name.removeprefix(PREFIX), known, n=1, cutoff=0.6)
        hint = f" (did you mean {PREFIX}{close[0]}?)" if close else ""
        parts.append(f"environment variable {name} names no setting{hint}")
    return "; ".join(parts) + ": fix or unset it (see the command's --help for its variables)"
