"""decoder/avro_wire.py's long reader against fastavro's writer."""

from __future__ import annotations

import io

import pytest
from fastavro.io.binary_encoder import BinaryEncoder

from offsetwatch.decoder.avro_wire import Truncated, read_long

VALUES = [0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("value", VALUES)
def test_every_long_fastavro_writes_reads_back(value: int) -> None:
    out = io.BytesIO()
    encoder = BinaryEncoder(out)
    encoder.write_long(value)
    encoder.flush()
    data = b"\x07" + out.getvalue() + b"\x09"
    assert read_long(data, 1) == (value, len(data) - 1)
    with pytest.raises(Truncated):
        read_long(data[:-2], 1)


def test_a_varint_longer_than_ten_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        read_long(b"\xff" * 11 + b"\x01", 0)
