"""An in-process exporter a real-broker test steps itself, and the helpers those tests share:
waiting for a condition while stepping, `offsetwatch ... --format json` in-process, and the
tables Kafka's CLI tools print."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from offsetwatch.cli import main as cli_main
from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.serve.api import group_detail
from offsetwatch.exporter.sources.log_end_sampler import LogEndSampler

#: generous: up to 8 engineers share 2 cores
DEADLINE_S: Final = 120.0


@dataclass(slots=True)
class Watched:
    """An opened exporter and its log-end sampler, whose rounds run on the test's thread."""

    exporter: Exporter
    sampler: LogEndSampler

    def step(self) -> None:
        self.exporter.step()
        # the sampler's round on the test's thread: log ends and unknown topic ids
        self.sampler.sample_once()
        self.exporter.step()

    def detail(self, group: str) -> dict[str, Any] | None:
        exp = self.exporter
        return group_detail(exp.build_snapshot(exp.clock_ms()), group)


def watch(exp: Exporter) -> Watched:
    """`exp` (opened) with a sampler wired as the daemon wires its own."""
    sampler = LogEndSampler(
        exp.kafka_config(),
        partitions=exp.tracked_partitions,
        on_sample=exp.on_sample,
        topic_ids=exp.topic_id_names.unknown_ids,
        on_topic_names=exp.topic_id_names.offer,
        # what confirms the share groups' state (none asked while the topic does not exist)
        share_state_topic=SHARE_STATE_TOPIC,
        share_state_partitions=exp.share_state_partitions,
        on_share_state_ends=exp.on_share_state_ends,
    )
    return Watched(exp, sampler)


def until(
    condition: Callable[[], Any],
    what: str | Callable[[], str],
    step: Callable[[], object],
    *,
    pause_s: float = 0.0,
) -> Any:
    """`step()` then `condition()` until it is true (its value is returned), at most
    `DEADLINE_S`; `what` says what was waited for when it never came."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        step()
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"not within {DEADLINE_S:g} s: {what if isinstance(what, str) else what()}"
            )
        if pause_s:
            time.sleep(pause_s)


def offsetwatch_json(*argv: str) -> Any:
    """`offsetwatch ARGV --format json` in this process: its JSON answer."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main([*argv, "--format", "json"])
    assert code == 0, (argv, out.getvalue())
    return json.loads(out.getvalue())


_COLUMN: Final = re.compile(r"COORDINATOR \(ID\)|\S+")


def tool_table(out: str, group: str | None = None) -> list[dict[str, str]]:
    """A Kafka tool's table, a row per line keyed by its header's column names.

    Kafka's tools pad each column to its widest value, so a value starts where its column's
    name does (the last column runs to the line's end); the columns differ between releases.
    The header is the first line starting with GROUP; with `group`, only that group's rows
    count (some releases' tools print more lines)."""
    lines = [line for line in out.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("GROUP")), None)
    if header is None:
        return []
    columns = [(m.group(0), m.start()) for m in _COLUMN.finditer(lines[header])]
    rows = []
    for line in lines[header + 1 :]:
        if group is not None and not line.startswith(group + " "):
            continue
        ends = [start for _name, start in columns[1:]] + [len(line)]
        rows.append(
            {
                name: line[start:end].strip()
                for (name, start), end in zip(columns, ends, strict=True)
            }
        )
    return rows
