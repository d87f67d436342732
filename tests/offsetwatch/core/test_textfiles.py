"""Operator-written text files (offsetwatch.core.textfiles): UTF-8, or one clear error."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from offsetwatch.core.textfiles import TextFileError, read_text


@pytest.mark.parametrize(
    "data",
    [b"a = 1\n", codecs.BOM_UTF8 + b"a = 1\n"],  # a byte-order mark some editors add: dropped
)
def test_utf8_with_or_without_a_byte_order_mark(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(data)
    assert read_text(path, "config file") == "a = 1\n"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (codecs.BOM_UTF16_LE + "a = 1\n".encode("utf-16-le"), "it looks like UTF-16"),
        ("a = 1\n".encode("utf-16-be"), "it looks like UTF-16"),  # no mark, NUL bytes
        (b"a = '\xe9t\xe9'\n", "byte 5 is not UTF-8"),  # Latin-1
    ],
)
def test_other_encodings_say_to_save_as_utf8(tmp_path: Path, data: bytes, words: str) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(data)
    with pytest.raises(TextFileError) as refused:
        read_text(path, "config file")
    assert str(refused.value) == f"config file {path} is not UTF-8 text ({words}): save it as UTF-8"


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(TextFileError, match="not found"):
        read_text(tmp_path / "absent.toml", "config file")
    with pytest.raises(TextFileError, match="is a directory"):
        read_text(tmp_path, "config file")
