"""`groups describe --exporter` shows the exporter's diagnosis: cause and reason per group.

The exporter's answer is the real `/api/v1/groups/NAME` body (exporter/serve/api.py) of a group with
one stuck member of three, built from real-format records (tests/exporter/judge/test_diagnosis.py).
"""

from __future__ import annotations

from offsetwatch.exporter.serve.api import group_detail
from offsetwatch.offset_ops import render
from offsetwatch.offset_ops.describe import GroupReport, PartitionRow
from tests.exporter.judge.test_diagnosis import stuck_snapshot


def _report(group: str) -> GroupReport:
    scenario = stuck_snapshot()
    assert scenario.snapshot is not None
    body = group_detail(scenario.snapshot, group)
    assert body is not None
    rows = [PartitionRow("orders", p, 100, 200, None, 1.0, "STALL") for p in range(2)]
    return GroupReport(group, None, rows, body)


def test_the_table_ends_with_the_cause_and_the_reason() -> None:
    total = render.group_total(_report("g"))
    first, second = total.splitlines()
    assert first == "group g: 2 partitions, total lag 200, state unknown"
    assert second.startswith("STALL, cause stuck_member: partitions 2 and 5 of orders")
    assert "g-client-2 on 10.1.2.3 (g-m2)" in second
    assert second.endswith("(falling behind)")


def test_an_ok_group_has_no_diagnosis_line() -> None:
    assert render.group_total(_report("ok")).count("\n") == 1


def test_json_carries_cause_and_the_whole_diagnosis() -> None:
    out = render.report_json(_report("g"), with_exporter=True)
    assert out["cause"] == "stuck_member"
    assert out["diagnosis"]["suspects"][0]["member_id"] == "g-m2"
    assert render.report_json(_report("ok"), with_exporter=True)["cause"] is None
