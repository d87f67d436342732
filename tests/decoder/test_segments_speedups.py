"""decoder/_speedups.c's record loop (`decode_records`) against the Python loop it stands in
for: the same batches from a real broker's segments, and the same batches or the same error
from any corruption of batches it reads (records without headers, every codec)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetwatch.decoder import segments
from offsetwatch.decoder.errors import DecodeError
from offsetwatch.decoder.segments import Codec, RecordSpec, iter_batches, read_segment, write_batch
from tests.decoder.test_segments import collect

pytestmark = pytest.mark.skipif(
    segments._C_RECORDS is None, reason="the C accelerator is not built"
)


def _plain_segment() -> bytes:
    """Batches of every codec whose records have no headers (the C loop's shape), with 1-, 2-
    and 3-byte varints, null and empty keys and values, and a producer sequence."""
    specs = [
        RecordSpec(0, 10**12, b"k" * 70, None),
        RecordSpec(1, 10**12 - 5, None, b"v" * 300),
        RecordSpec(200, 10**12 + 70000, b"", b""),
        RecordSpec(201, 10**12, b"key", b"value" * 3000),
    ]
    return b"".join(
        write_batch(specs, base_offset=7 + 1000 * i, codec=codec, base_sequence=i * 10 - 1)
        for i, codec in enumerate(Codec)
    )


_PLAIN = _plain_segment()


def outcome(data: bytes, verify: bool, monkeypatch: pytest.MonkeyPatch, c: bool) -> Any:
    with monkeypatch.context() as patch:
        if not c:
            patch.setattr(segments, "_C_RECORDS", None)
        try:
            return collect(iter_batches(data, verify_crc=verify))
        except DecodeError as error:
            return ("error", str(error))


def test_the_plain_segment_is_read_by_the_c_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = segments._C_RECORDS
    assert real is not None

    def counting(*args: Any) -> Any:
        result = real(*args)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(segments, "_C_RECORDS", counting)
    batches, _tail = collect(iter_batches(_PLAIN))
    assert len(batches) == len(Codec) and all(calls) and len(calls) == len(Codec)
    monkeypatch.undo()
    assert outcome(_PLAIN, True, monkeypatch, c=False) == (batches, _tail)


def test_real_segments_give_the_same_batches(
    conformance_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted((conformance_dir / "runs").rglob("*.log"))
    assert files
    for file in files:
        data = file.read_bytes()
        assert outcome(data, True, monkeypatch, c=True) == outcome(
            data, True, monkeypatch, c=False
        ), file
    assert list(read_segment(files[0]))  # the public reader goes through the same path


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.integers(0, len(_PLAIN) - 1), st.integers(0, 255)), min_size=1, max_size=4
    ),
    st.integers(0, len(_PLAIN)),
)
def test_corrupted_records_give_the_same_batches_or_error(
    monkeypatch: pytest.MonkeyPatch, mutations: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(_PLAIN)
    for at, value in mutations:
        data[at] = value
    mutated = bytes(data[:cut])
    # without the CRC check the corruption reaches the record loops
    assert outcome(mutated, False, monkeypatch, c=True) == outcome(
        mutated, False, monkeypatch, c=False
    )
