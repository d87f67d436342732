"""Group descriptions against what a real Kafka 4.0.0 broker and its own tool reported.

The mock cluster has no DescribeGroups/ListGroups, so the broker here replays the answers
captured from Kafka 4.0.0 (groups-final.json) and the rendering is compared with the table
`kafka-consumer-groups.sh --describe --all-groups --offsets` printed at the same moment.
"""

from __future__ import annotations

from pathlib import Path

from offsetwatch.offset_ops.describe import build_reports
from offsetwatch.offset_ops.render import members_rows, offsets_header, offsets_rows, state_row
from tests.offsetwatch.offset_ops.doubles import RecordedBroker, recorded_groups


def _kafka_offsets_rows(conformance_dir: Path) -> list[tuple[str, ...]]:
    """The data lines of kafka-consumer-groups --describe --offsets, final section, sorted."""
    text = (conformance_dir / "runs" / "main" / "groups-describe.txt").read_text(encoding="utf-8")
    final = text.split("######## AFTER", 1)[1]
    section = final.split("--describe --all-groups --offsets", 1)[1].split("\n###", 1)[0]
    rows = []
    for line in section.splitlines():
        fields = line.split()
        if len(fields) == 9 and fields[0] != "GROUP":
            rows.append(tuple(fields))
    return sorted(rows)


def test_describe_all_groups_matches_kafka_consumer_groups(conformance_dir: Path) -> None:
    groups = recorded_groups(conformance_dir)
    broker = RecordedBroker(groups)
    group_ids = [listing.group_id for listing in broker.list_groups()]
    reports = build_reports(broker, group_ids)
    ours = sorted(
        tuple(str("-" if cell is None else cell) for cell in row)
        for report in reports
        for row in offsets_rows(report, with_exporter=False)
    )
    kafka = _kafka_offsets_rows(conformance_dir)
    assert kafka, "no rows parsed from groups-describe.txt"
    assert ours == kafka, (sorted(set(kafka) - set(ours))[:5], sorted(set(ours) - set(kafka))[:5])
    # Batched: one describe round, one offset fetch per group, one ListOffsets round.
    assert broker.requests == 1 + 1 + len(group_ids) + 1


def test_members_and_state_of_a_live_kip848_group(conformance_dir: Path) -> None:
    broker = RecordedBroker(recorded_groups(conformance_dir))
    (report,) = build_reports(broker, ["live-consumer-1ed0"])
    assert [row[1:6] for row in members_rows(report)] == [
        ["90t3KvT1TQqxt4SQCyyojg", "/127.0.0.1", "rdkafka", 3, "orders:0,1,2"],
        ["UQRd1WB6QfKplMy76W26EA", "/127.0.0.1", "rdkafka", 3, "orders:3,4,5"],
    ]
    assert state_row(report)[2:6] == ["uniform", "STABLE", "CONSUMER", 2]
    owners = {(row.topic, row.partition): row.member for row in report.rows}
    assert owners[("orders", 4)] is not None
    assert owners[("orders", 4)].member_id == "UQRd1WB6QfKplMy76W26EA"
    assert report.total_lag == sum(r.lag or 0 for r in report.rows) == 12


def test_exporter_columns(conformance_dir: Path) -> None:
    broker = RecordedBroker(recorded_groups(conformance_dir))
    exporter = {
        "live-consumer-1ed0": {
            "generation": None,
            "assignment_epoch": 7,
            "partitions": [{"topic": "orders", "partition": 0, "lag_seconds": 1.5, "status": "OK"}],
        }
    }
    (report,) = build_reports(broker, ["live-consumer-1ed0"], exporter=exporter)
    rows = offsets_rows(report, with_exporter=True)
    assert offsets_header(True)[-2:] == ("LAG-SECONDS", "STATUS")
    assert rows[0][-2:] == [1.5, "OK"]
    assert rows[1][-2:] == [None, None]
    assert state_row(report)[-1] == 7
