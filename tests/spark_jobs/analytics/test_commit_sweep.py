"""commit_sweep.sweep on one partition's history: lives, a rewind and its way back, commit
intervals, a group deletion resetting the partition (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa

from offsetwatch.spark_jobs.analytics.commit_sweep import INPUT_COLUMNS, sweep

TICK = 60_000
#: (ts, offset, source offset) of group g's commits to t-0; None: the group's deletion
EVENTS = [
    (1_000, 10, 1),
    (61_000, 20, 2),
    (62_000, 5, 3),  # rewind 20 -> 5
    (63_000, 25, 4),  # back past 20
    (70_000, None, 5),  # group deleted
    (120_000, 3, 6),  # a new life: neither a rewind nor an interval
]


def _table() -> pa.Table:
    deleted = [e[1] is None for e in EVENTS]
    # shuffled: the sweep orders by source offset itself
    rows = list(reversed(range(len(EVENTS))))
    return pa.table(
        {
            "group": ["g"] * len(rows),
            "topic": [None if deleted[i] else "t" for i in rows],
            "partition": pa.array([None if deleted[i] else 0 for i in rows], pa.int32()),
            "ts": [EVENTS[i][0] for i in rows],
            "offset": [EVENTS[i][1] for i in rows],
            "is_reset": [deleted[i] for i in rows],
            "source_offset": [EVENTS[i][2] for i in rows],
        }
    ).select(list(INPUT_COLUMNS))


def test_buckets_of_one_partition() -> None:
    result = sweep(_table(), TICK)
    assert result is not None
    got = {
        (r["life"], r["rewind_seq"], r["bucket_ms"], r["on_tick"]): r for r in result.to_pylist()
    }
    assert sorted(got) == [
        (0, 0, 0, False),
        (0, 0, 60_000, False),
        (0, 1, 60_000, False),
        (1, 1, 60_000, False),
        (1, 1, 120_000, True),
    ]
    first = got[(0, 0, 0, False)]
    assert (first["n"], first["interval_n"], first["interval_sum_ms"]) == (1, 0, None)
    assert first["first"] == {"ts": 1_000, "source_offset": 1, "offset": 10}
    assert got[(0, 0, 60_000, False)]["interval_max_ms"] == 60_000
    rewound = got[(0, 1, 60_000, False)]
    assert (rewound["n"], rewound["rewind_ms"], rewound["rewind_from"], rewound["rewind_to"]) == (
        2,
        62_000,
        20,
        5,
    )
    assert (rewound["back_ms"], rewound["max_offset"], rewound["interval_sum_ms"]) == (
        63_000,
        25,
        2_000,
    )
    assert rewound["first"]["offset"] == 5 and rewound["last"] == {
        "ts": 63_000,
        "source_offset": 4,
        "offset": 25,
    }
    reset = got[(1, 1, 60_000, False)]
    assert (reset["n"], reset["first"], reset["reset_ms"], reset["interval_sum_ms"]) == (
        0,
        None,
        70_000,
        7_000,
    )
    after = got[(1, 1, 120_000, True)]
    assert (after["n"], after["interval_n"], after["rewind_ms"], after["back_ms"]) == (
        1,
        0,
        None,
        None,
    )
    assert result.schema.names[:3] == ["group", "topic", "partition"]
    assert {r["topic"] for r in result.to_pylist()} == {"t"}


def test_nothing_in_nothing_out() -> None:
    assert sweep(_table().slice(0, 0), TICK) is None
