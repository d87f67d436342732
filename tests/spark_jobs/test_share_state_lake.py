"""The lake's `share_state` table and `spark analyze`'s share episodes, on real Spark.

The input is the real Kafka 4.0 capture (tests/data/share_state) as `offsetwatch decode`
writes it, a share_group_partition_metadata record (encoder-built) naming its topic, and
log-end samples; compacted in two runs so the second run's updates combine onto the state
the first left in the lake. The pure module (tests/decoder/test_share_combine.py) carries
the detailed checks; this one proves the Spark path equals it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from offsetwatch.cli import main
from offsetwatch.core.status import StatusConfig
from offsetwatch.decoder.canonical import Canonical, dumps
from offsetwatch.decoder.codec import Codec
from offsetwatch.decoder.records import (
    GroupKey,
    Record,
    ShareGroupPartitionMetadataValue,
    TopicMetadata,
)
from offsetwatch.spark_jobs import lake_schema as ls
from offsetwatch.spark_jobs.analytics import AnalyticsSettings, analyze
from offsetwatch.spark_jobs.compact import compact
from offsetwatch.spark_jobs.lake_share_state import share_rows
from tests.decoder.test_share_combine import CAPTURE, CAPTURE_STATES, TOPIC, capture_records
from tests.spark_jobs.lake_records import log_end

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

LAST_TS = 1_795_767_080_835  # the capture's last record
MINUTE = 60_000


def _naming_record() -> dict[str, Any]:
    value = ShareGroupPartitionMetadataValue(
        (TopicMetadata(TOPIC["topic_id"], TOPIC["topic"], 1, ()),)
    )
    record = Record(9, GroupKey(TOPIC["group"]), 0, value, 7, 0, LAST_TS - 10_000)
    codec = Codec()
    key, raw = codec.encode(record)
    again = codec.decode(key, raw, 7, 0, LAST_TS - 10_000)
    assert codec.encode(again) == (key, raw)
    return Canonical().to_dict(again)


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps(r) + "\n" for r in records), encoding="utf-8")


def _quiet(_: str) -> None:
    pass


def test_share_state_table_and_episodes(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # decode output of the real segment, as a user makes it
    assert main(["decode", str(CAPTURE / "__share_group_state-0"), "--format", "json"]) == 0
    decoded = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert decoded == capture_records()
    lake, archive = tmp_path / "lake", tmp_path / "in"
    # log ends grow 20 a minute after the capture while the start offset stays at 2
    ends = [log_end(TOPIC["topic"], 0, 6 + 20 * i, LAST_TS + i * MINUTE) for i in range(8)]
    _jsonl(archive / "a.jsonl", [_naming_record(), *decoded[:3], *ends[:2]])
    first = compact(spark, "archive", lake, archive, progress=_quiet)
    assert first.rows[ls.SHARE_STATE] == 3
    assert first.rows[ls.COMMITS] == 0 and first.rows[ls.LOG_ENDS] == 2
    _jsonl(archive / "b.jsonl", [*decoded, *ends[2:]])  # at-least-once: 0-2 again
    second = compact(spark, "archive", lake, archive, progress=_quiet)
    assert second.rows[ls.SHARE_STATE] == 3

    table = spark.read.schema(ls.SHARE_STATE_SCHEMA).parquet(str(lake / ls.SHARE_STATE))
    rows = sorted((tuple(r) for r in table.collect()), key=lambda r: r[25])
    key = (TOPIC["group"], TOPIC["topic_id"], 0)
    expected = list(share_rows(key, decoded, None, {TOPIC["topic_id"]: TOPIC["topic"]}))
    assert [_plain(r[:-1]) for r in rows] == [_plain(e) for e in expected]
    for row, (start, _batches, tally, max_count) in zip(rows, CAPTURE_STATES, strict=True):
        assert (row[12], row[18:21], row[22]) == (start, tally, max_count)
    assert {str(r[-1]) for r in rows} == {"2026-11-27"}

    settings = AnalyticsSettings(status=StatusConfig(window_ms=2 * MINUTE))
    tables = {
        name: spark.read.schema(schema).parquet(str(lake / name))
        if (lake / name).is_dir()
        else spark.createDataFrame([], schema)
        for name, schema in (
            (ls.COMMITS, ls.COMMITS_SCHEMA),
            (ls.LOG_ENDS, ls.LOG_ENDS_SCHEMA),
            (ls.GROUP_EVENTS, ls.GROUP_EVENTS_SCHEMA),
        )
    }
    result = analyze(
        tables[ls.COMMITS], tables[ls.LOG_ENDS], tables[ls.GROUP_EVENTS], settings, table
    )
    episodes = [tuple(r) for r in result.diagnosed_episodes.collect()]
    # ticks on the minute: lag = log end - 2 - 4 acknowledged; it grows 20 a minute, so from
    # the first tick with a window behind it to the end of the data (open), peak at the last
    # sample: 6 + 20 * 7 - 6 = 140
    assert [e[:4] for e in episodes] == [("share_backlog", TOPIC["group"], TOPIC["topic"], 0)]
    (episode,) = episodes
    assert episode[5] is None and episode[6] == 140.0 and episode[7] == "records"
    assert json.loads(episode[8]) == {"causes": ["growing"], "start_offset": 2}
    assert episode[9] is None  # no diagnosis for share episodes


def _plain(row: Any) -> Any:
    """Rows with their nested rows / tuples / lists as plain lists, for comparing."""
    if isinstance(row, (list, tuple)):
        return [_plain(x) for x in row]
    return row
