"""Records read off by column (the fast path of the decoding sources) == the dict path."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetwatch.decoder.canonical import Canonical
from offsetwatch.decoder.layout import ZERO_UUID
from offsetwatch.decoder.records import OffsetCommitKey, OffsetCommitValue, Record
from offsetwatch.spark_jobs.schema import TXN_COLUMN, CanonicalRows
from offsetwatch.spark_jobs.sources.columns import flat_batches
from tests.decoder.strategies import all_type_versions, records

_ROWS = CanonicalRows()
_CANONICAL = Canonical()

_MIXED = st.lists(
    st.one_of(
        records(0),
        records(1),
        st.sampled_from(all_type_versions()).flatmap(lambda kv: records(kv[0], kv[1])),
    ),
    min_size=1,
    max_size=40,
)


def _by_dicts(recs: list[Record], txn: list[str | None]) -> list[dict[str, Any]]:
    dicts = []
    for record, status in zip(recs, txn, strict=True):
        row = _CANONICAL.to_dict(record)
        row[TXN_COLUMN] = status
        dicts.append(row)
    rows: list[dict[str, Any]] = _ROWS.to_batch(dicts).to_pylist()
    return rows


@settings(max_examples=150, deadline=None)
@given(recs=_MIXED, statuses=st.lists(st.sampled_from(["none", "committed", None]), min_size=40))
def test_columns_equal_the_dict_path(recs: list[Record], statuses: list[str | None]) -> None:
    recs = [
        Record(r.key_type, r.key, r.value_version, r.value, 0, offset, r.timestamp)
        for offset, r in enumerate(recs)
    ]
    txn = statuses[: len(recs)]
    batches, rest = flat_batches(_ROWS, recs, txn)
    fast = [row for batch in batches for row in batch.to_pylist()]
    fast += _by_dicts([recs[i] for i in rest], [txn[i] for i in rest])
    assert sorted(fast, key=lambda row: row["offset"]) == _by_dicts(recs, txn)
    assert all(batch.schema == _ROWS.arrow for batch in batches)


def test_offset_commits_take_the_column_path() -> None:
    commits = [
        Record(
            1,
            OffsetCommitKey("g", "t", p),
            3,
            OffsetCommitValue(p, 0, "", 1, -1, ZERO_UUID),
            0,
            p,
            5,
        )
        for p in range(10)
    ]
    batches, rest = flat_batches(_ROWS, commits, ["none"] * len(commits))
    assert rest == []
    assert [b.num_rows for b in batches] == [len(commits)]
