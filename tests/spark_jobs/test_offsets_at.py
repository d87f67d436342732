"""offsets-at: the offsets a group had at several instants, by hand and from real Kafka 4.0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.decoder.canonical import dumps
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.compact import compact_records
from offsetwatch.spark_jobs.lake_flatten import (
    derive_group_events,
    flatten_commits,
    group_records,
    split_events,
)
from offsetwatch.spark_jobs.lake_store import Lake
from offsetwatch.spark_jobs.offsets_at import (
    UnknownGroupError,
    committed_at,
    offsets_at,
    offsets_at_from_path,
    parse_time,
)
from tests.spark_jobs.lake_records import (
    classic,
    commit,
    delete,
    frame,
    group_tombstone,
    segment_history,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

#: g: commits, a deletion, a recommit, a group deletion, a new life, a commit that expires
HISTORY = [
    classic("g", 1, ["m1"], 1_000, 0),
    commit("g", "orders", 0, 10, 1_000, 1),
    commit("g", "orders", 1, 20, 1_000, 2),
    commit("g", "orders", 0, 15, 2_000, 3),
    delete("g", "orders", 1, 3_000, 4),
    commit("g", "orders", 1, 5, 4_000, 5),
    group_tombstone("g", 5_000, 6),
    commit("g", "payments", 0, 7, 6_000, 7, expire=6_500),
    commit("g", "orders", 0, 99, 6_100, 8),
    commit("other", "orders", 0, 1, 1_000, 9),
]
EXPECTED = {
    500: {},
    1_000: {("orders", 0): 10, ("orders", 1): 20},
    2_500: {("orders", 0): 15, ("orders", 1): 20},
    3_000: {("orders", 0): 15},
    4_999: {("orders", 0): 15, ("orders", 1): 5},
    5_000: {},
    6_200: {("orders", 0): 99, ("payments", 0): 7},
    6_500: {("orders", 0): 99},
}


def _frames(spark: SparkSession, records: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Cached: each test asks at several instants, and deriving the group events again for
    each (Python workers replaying every group's records) was most of its time."""
    events, _ = split_events(derive_group_events(spark, group_records(records), None))
    return flatten_commits(records).cache(), events.cache()


def _as_dict(rows: DataFrame) -> dict[tuple[str, int], int]:
    return {(r["topic"], r["partition"]): r["offset"] for r in rows.collect()}


def test_known_history_at_each_instant(spark: SparkSession) -> None:
    commits, events = _frames(spark, frame(spark, HISTORY))
    for instant, expected in EXPECTED.items():
        assert _as_dict(offsets_at(commits, events, "g", instant)) == expected, instant


def test_aborted_and_open_transactions_never_count(spark: SparkSession) -> None:
    records = frame(
        spark,
        [
            commit("t", "orders", 0, 10, 1_000, 0),
            commit("t", "orders", 0, 50, 2_000, 1),
            commit("t", "orders", 0, 60, 3_000, 2),
        ],
        txn=["committed", "aborted", "pending"],
    )
    commits, events = _frames(spark, records)
    assert _as_dict(offsets_at(commits, events, "t", 10_000)) == {("orders", 0): 10}


def test_from_the_lake_and_unknown_group(spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    compact_records(spark, frame(spark, HISTORY), lake, [], lake.manifest(), lambda _: None)
    for instant, expected in EXPECTED.items():
        assert offsets_at_from_path(lake.root, "g", instant, spark) == expected
    with pytest.raises(UnknownGroupError, match="'nobody'"):
        offsets_at_from_path(lake.root, "nobody", 6_000, spark)


def _oracle(
    history: list[dict[str, Any]], status: list[str], group: str, at: int
) -> dict[Any, Any]:
    """Independent replay: last record per key in log order, tombstones delete."""
    offsets: dict[tuple[str, int], int] = {}
    ordered = sorted(
        zip(history, status, strict=True), key=lambda x: (x[0]["partition"], x[0]["offset"])
    )
    for record, outcome in ordered:
        if record["type"] != "offset_commit" or record["group"] != group:
            continue
        if record["timestamp"] > at or outcome in ("aborted", "pending"):
            continue
        key = (record["key"]["topic"], record["key"]["partition"])
        if record["tombstone"]:
            offsets.pop(key, None)
        else:
            offsets[key] = record["value"]["offset"]
    return offsets


@pytest.mark.parametrize("run", ["main", "expiry", "codec-zstd"])
def test_kafka_runs_match_ground_truth_and_replay(
    spark: SparkSession, conformance_dir: Path, run: str
) -> None:
    run_dir = conformance_dir / "runs" / run
    history, status = segment_history(run_dir)
    commits, events = _frames(spark, frame(spark, history, txn=status))
    final = json.loads((run_dir / "groups-final.json").read_text())
    end = max(r["timestamp"] for r in history)
    # share groups have no offsets in __consumer_offsets
    truth = {
        group: {(o["topic"], o["partition"]): o["committed_offset"] for o in info["offsets"]}
        for group, info in final.items()
        if "offsets" in info
    }
    assert truth
    # every group in one query; offsets_at (the same query for one group) on the busiest one
    at_end: dict[str, dict[tuple[str, int], int]] = {group: {} for group in truth}
    for row in committed_at(commits, events, end).collect():
        at_end.setdefault(row["group"], {})[(row["topic"], row["partition"])] = row["offset"]
    assert at_end == truth
    busiest = max(truth, key=lambda group: len(truth[group]))
    assert _as_dict(offsets_at(commits, events, busiest, end)) == truth[busiest]
    times = sorted({r["timestamp"] for r in history})
    groups = sorted({r["group"] for r in history if r["type"] == "offset_commit"})
    for at in [times[len(times) * k // 5] for k in range(1, 5)]:
        got: dict[str, dict[tuple[str, int], int]] = {}
        for row in committed_at(commits, events, at).collect():
            got.setdefault(row["group"], {})[(row["topic"], row["partition"])] = row["offset"]
        expected = {g: o for g in groups if (o := _oracle(history, status, g, at))}
        assert got == expected, at


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1795291757128", 1795291757128),
        ("2026-11-21T08:00:00Z", 1795248000000),
        ("2026-11-21T09:00:00+01:00", 1795248000000),
        ("2026-11-21 08:00:00", 1795248000000),
    ],
)
def test_parse_time(text: str, ms: int) -> None:
    assert parse_time(text) == ms


def test_parse_time_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("yesterday")


def test_lake_schema_of_commits(spark: SparkSession) -> None:
    assert (
        flatten_commits(frame(spark, HISTORY)).schema.fieldNames() == ls.COMMITS_SCHEMA.fieldNames()
    )


def test_from_an_archive_and_from_decode_json(spark: SparkSession, tmp_path: Path) -> None:
    text = "".join(dumps(r) + "\n" for r in HISTORY)
    archive = tmp_path / "archive" / "date=2026-11-21"
    archive.mkdir(parents=True)
    (archive / "offsetwatch-1-000000.jsonl").write_text(text)
    decoded = tmp_path / "history.json"  # offsetwatch decode --format json > history.json
    decoded.write_text(text)
    for path in (tmp_path / "archive", decoded):
        for instant in (2_500, 5_000, 6_200):
            assert offsets_at_from_path(path, "g", instant, spark) == EXPECTED[instant], path
    with pytest.raises(UnknownGroupError):
        offsets_at_from_path(decoded, "nobody", 6_200, spark)
