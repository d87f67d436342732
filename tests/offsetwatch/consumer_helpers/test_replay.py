"""ReplayController's pure parts: replay ids, and the metadata a real broker hands back.

Replays on the real broker (test_real_broker.py), for eager, cooperative and KIP-848 groups:
from the beginning and from a time, once across a member joining (with the naive seek as the
control that does replay twice), from a snapshot with clamping, and with auto-commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offsetwatch.consumer_helpers import (
    FromBeginning,
    ReplayController,
    replay_id_of,
    replay_metadata,
)


def test_replay_id_survives_the_trailing_nul_of_a_real_broker(conformance_dir: Path) -> None:
    groups = json.loads(
        (conformance_dir / "runs" / "main" / "groups-final.json").read_text(encoding="utf-8")
    )
    with_nul = [
        row["metadata"]
        for record in groups.values()
        for row in record.get("offsets", [])
        if (row["metadata"] or "").endswith("\x00")
    ]
    # What Kafka 4.0 returned for metadata committed by confluent-kafka 2.16.1.
    assert "manual-rewind\x00" in with_nul
    assert all(replay_id_of(text) is None for text in with_nul)
    assert replay_id_of(replay_metadata("fix-1234") + "\x00") == "fix-1234"
    assert replay_id_of(replay_metadata("fix-1234")) == "fix-1234"
    assert replay_id_of("") is None
    assert replay_id_of(None) is None


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\x00b"])
def test_replay_ids_are_checked(bad: str) -> None:
    with pytest.raises(ValueError, match="replay id"):
        ReplayController(bad, FromBeginning())
