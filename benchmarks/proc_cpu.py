"""CPU seconds of a process tree between two /proc snapshots (the Spark benchmarks' measure).

    table = proc_table()
    before = tree(table, os.getpid())
    ...  # the measured action
    seconds = cpu_between(before, tree(proc_table(), os.getpid()))

A snapshot holds, per process, its parent and its clock ticks: its own (utime + stime) and
those of the children it reaped (cutime + cstime). `cpu_between` takes the difference per
process, not of the totals: Spark stops idle Python workers, whose ticks then leave a sum of
the live processes (spark_lake_pace's 10M plain kafka read came out at -876 CPU s that way)
and do not reliably reach a parent's child times. Its own module, not real_broker.py: that
one starts brokers and pulls in confluent-kafka, which spark_sources.py does not need.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_TICKS: Final = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProcTicks:
    """One process in a snapshot."""

    parent: int
    #: clock ticks it ran itself (utime + stime)
    own: int
    #: clock ticks of the children it waited for (cutime + cstime)
    reaped: int


#: pid -> its ticks
Snapshot = dict[int, ProcTicks]


def proc_table() -> Snapshot:
    """Every process /proc shows now (one that exits while it is read is left out)."""
    table: Snapshot = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the command name in parentheses may hold spaces and ")": split after the last one
        fields = stat.rsplit(")", 1)[1].split()
        table[int(entry)] = ProcTicks(
            int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
        )
    return table


def tree(table: Snapshot, root: int | None) -> Snapshot:
    """`root` and every process under it in `table` (empty if root is None or gone)."""
    if root is None or root not in table:
        return {}
    children: dict[int, list[int]] = {}
    for pid, ticks in table.items():
        children.setdefault(ticks.parent, []).append(pid)
    out: Snapshot = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        out[pid] = table[pid]
        stack.extend(children.get(pid, ()))
    return out


def spark_jvm_pid() -> int | None:
    """The pid of the active Spark session's JVM (the gateway pyspark launched), if any."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    pid = getattr(getattr(gateway, "proc", None), "pid", None)
    return pid if isinstance(pid, int) else None


def cpu_between(before: Snapshot, after: Snapshot) -> float:
    """CPU seconds the processes used between two snapshots: per process, its own and its
    reaped children's ticks since the first (a new one: all of them). A process gone by the
    second counts nothing after the first: Spark stops idle Python workers after a minute,
    and their ticks do not reliably reach a parent's child times; where they do, the
    parent's rise by the ticks it had before is taken back, so nothing is counted twice.
    Workers doing an action's work live to its end (they are reused)."""
    ticks = 0
    for pid, now in after.items():
        then = before.get(pid)
        if then is None:
            ticks += now.own + now.reaped
        else:
            ticks += max(0, now.own - then.own) + max(0, now.reaped - then.reaped)
    for pid, then in before.items():
        if pid not in after and then.parent in after and then.parent in before:
            rise = after[then.parent].reaped - before[then.parent].reaped
            ticks -= min(max(0, rise), then.own + then.reaped)
    return ticks / _TICKS
