"""group -> `__consumer_offsets` partition: Java String.hashCode over UTF-16, Kafka's Utils.abs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetwatch.decoder import Codec, group_of, partition_for
from offsetwatch.decoder.partitioner import (
    DEFAULT_PARTITIONS,
    java_string_hash,
    share_state_partition_for,
)
from tests.decoder.strategies import CONFORMANCE_RUNS, real_records, run_info


def reference_hash(text: str) -> int:
    """An independent String.hashCode: UTF-16 code units computed from the code points."""
    h = 0
    for char in text:
        point = ord(char)
        if point >= 0x10000:
            point -= 0x10000
            units = [0xD800 + (point >> 10), 0xDC00 + (point & 0x3FF)]
        else:
            units = [point]
        for unit in units:
            h = (31 * h + unit) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def reference_partition(text: str, partitions: int) -> int:
    h = reference_hash(text)
    # Kafka's Utils.abs: Math.abs with Integer.MIN_VALUE mapped to 0 (not h & 0x7fffffff)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@pytest.mark.parametrize(
    ("group", "hash_code", "partition"),
    [
        ("g1", 3242, 42),
        ("my-group", -1906497762, 12),
        ("polygenelubricants", -(1 << 31), 0),
    ],
)
def test_spec_examples(group: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group) == hash_code
    assert partition_for(group, 50) == partition
    assert partition_for(group) == partition
    assert DEFAULT_PARTITIONS == 50


def test_abs_is_not_a_sign_mask() -> None:
    # "my-group" hashes negative: & 0x7fffffff would give 240985886 % 50 == 36
    assert (java_string_hash("my-group") & 0x7FFFFFFF) % 50 == 36
    assert partition_for("my-group", 50) == 12


def test_empty_group() -> None:
    assert java_string_hash("") == 0
    assert partition_for("", 50) == 0


@pytest.mark.parametrize(
    ("group", "hash_code"),
    [
        # U+1F600 = D83D DE00 in UTF-16: 31 * 0xD83D + 0xDE00 (not the code point 0x1F600)
        ("\U0001f600", 31 * 0xD83D + 0xDE00),
        ("\U00010000", 31 * 0xD800 + 0xDC00),
        ("\U0010ffff", 31 * 0xDBFF + 0xDFFF),
        ("é", 0xE9),
        ("\u4e2d\u6587", 31 * 0x4E2D + 0x6587),
        ("\x00", 0),
    ],
)
def test_non_bmp_characters_hash_as_surrogate_pairs(group: str, hash_code: int) -> None:
    assert java_string_hash(group) == hash_code
    assert partition_for(group, 50) == abs(hash_code) % 50


def test_surrogate_pair_changes_the_partition() -> None:
    group = "grp-\U0001f600"
    code_point_hash = 0
    for char in group:
        code_point_hash = (31 * code_point_hash + ord(char)) & 0xFFFFFFFF
    assert partition_for(group, 50) == reference_partition(group, 50)
    assert partition_for(group, 50) != code_point_hash % 50


@settings(max_examples=300, deadline=None)
@given(
    group=st.text(max_size=40)
    # Java strings may hold lone surrogates too
    | st.text(st.characters(categories=["Cs", "Lo", "So", "Ll"]), max_size=20),
    partitions=st.integers(1, 1000),
)
def test_matches_reference_implementation(group: str, partitions: int) -> None:
    assert java_string_hash(group) == reference_hash(group)
    assert partition_for(group, partitions) == reference_partition(group, partitions)
    assert 0 <= partition_for(group, partitions) < partitions


@pytest.mark.parametrize("partitions", [0, -1])
def test_partition_count_must_be_positive(partitions: int) -> None:
    with pytest.raises(ValueError):
        partition_for("g1", partitions)


@pytest.mark.parametrize("run", CONFORMANCE_RUNS)
def test_every_conformance_group_lives_in_its_partition(conformance_dir: Path, run: str) -> None:
    partitions = run_info(conformance_dir, run)["offsets.topic.num.partitions"]
    assert isinstance(partitions, int) and partitions > 0
    codec = Codec()
    groups: dict[str, set[int]] = {}
    for r in real_records(conformance_dir, run):
        group = group_of(codec.decode(r.key, r.value, r.partition, r.offset))
        assert group is not None
        groups.setdefault(group, set()).add(r.partition)
    wrong = {
        group: (sorted(seen), partition_for(group, partitions))
        for group, seen in groups.items()
        if seen != {partition_for(group, partitions)}
    }
    assert not wrong, f"group -> (partitions seen, computed): {wrong}"
    assert len(groups) > 1


@pytest.mark.parametrize(
    ("group", "topic_id", "partition", "partitions", "state_partition"),
    [
        # answered by Kafka 4.0.2's own code: Utils.abs(SharePartitionKey.asCoordinatorKey(
        # group, Uuid.fromString(topic_id), partition).hashCode()) % partitions
        ("orders-queue", "Ka5iZpX1TpOuKhN2w1Q3vA", 0, 50, 36),
        ("orders-queue", "Ka5iZpX1TpOuKhN2w1Q3vA", 7, 50, 43),
        ("q", "AAAAAAAAAAAAAAAAAAAAAQ", 3, 3, 2),
        ("billing-share-ü", "x0CwYmbVR3-8nNq2mZ-3_g", 12, 50, 13),
    ],
)
def test_share_state_partition_is_the_share_coordinators(
    group: str, topic_id: str, partition: int, partitions: int, state_partition: int
) -> None:
    assert share_state_partition_for(group, topic_id, partition, partitions) == state_partition
