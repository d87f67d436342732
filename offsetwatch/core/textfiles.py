"""Text files the operator writes (the exporter's TOML, the web configuration): read as
UTF-8, with one clear error for every way that fails.

Editors on some systems save UTF-16 ("Unicode" in Notepad) or put a byte-order mark before
UTF-8: the mark is accepted, UTF-16 is refused with what to do instead of a decoder's
traceback.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Final

__all__ = ["TextFileError", "read_text"]

_UTF16_MARKS: Final = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class TextFileError(ValueError):
    """The file cannot be read as text; the message names it and says what to do."""


def read_text(path: Path, what: str) -> str:
    """The text of `path` (UTF-8, a leading byte-order mark dropped). `what` names the file in
    messages ("config file", "--web-config file")."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TextFileError(f"{what} {path} not found: cannot read it") from None
    except IsADirectoryError:
        raise TextFileError(f"{what} {path} is a directory: give a file") from None
    except OSError as error:
        raise TextFileError(
            f"cannot read {what} {path}: {error.strerror or error}; check its permissions"
        ) from None
    # UTF-16 of ASCII text is valid UTF-8 with a NUL in every other byte: no text file of
    # ours holds a NUL, so one is UTF-16 (or binary), whatever the decoder says
    if data.startswith(_UTF16_MARKS) or b"\0" in data:
        hint = "it looks like UTF-16"
    else:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            hint = f"byte {error.start} is not UTF-8"
    raise TextFileError(f"{what} {path} is not UTF-8 text ({hint}): save it as UTF-8")
