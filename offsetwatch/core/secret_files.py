"""Kafka settings kept in files, and the files a client's settings depend on.

`<property>.file=PATH` gives a librdkafka property the content of a file:
`-X sasl.password.file=/run/secrets/kafka-password`, `OFFSETWATCH_KAFKA_SASL_PASSWORD_FILE`,
or `"sasl.password.file"` in the exporter's `[kafka]` table. A secret given on the command
line or in the environment shows in /proc and cannot change while the process runs, while
Kubernetes secrets, Vault agents and cert-manager rotate credentials by replacing files.
librdkafka has no property ending in `.file`, so the suffix cannot shadow one of its own.

librdkafka reads its own file properties (`ssl.certificate.location`, ...) once, when a
client is made. `watched_files` and `fingerprint` tell a long-running process when any file
its settings name has been replaced, so that it makes new clients (the exporter's
credential watch, exporter/sources/credential_watch.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TypeVar

FILE_SUFFIX: Final = ".file"
#: librdkafka properties whose value names a file it loads when a client is made
FILE_PROPERTIES: Final = (
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.crl.location",
    "sasl.kerberos.keytab",
)
#: values of ssl.ca.location that name no file (librdkafka's own CA lookup)
_NOT_FILES: Final = frozenset({"probe"})

V = TypeVar("V")
#: what a file is known by: its path, and (device, inode, size, mtime) or why it cannot be read
Fingerprint = tuple[tuple[str, tuple[int, int, int, int] | str], ...]


class SecretFileError(ValueError):
    """A `<property>.file` setting that cannot give its property a value; says what to do."""


def is_file_setting(key: str) -> bool:
    return key.endswith(FILE_SUFFIX) and len(key) > len(FILE_SUFFIX)


def resolve_secret_files(
    config: Mapping[str, V], origins: Mapping[str, str] | None = None
) -> dict[str, V | str]:
    """`config` with every `<property>.file` replaced by the property, read from its file.

    Raises SecretFileError naming the setting (its origin: `-X sasl.password.file`, the
    variable, the file key) for a file that cannot be read or is empty, or for a property
    given both ways."""
    named = origins or {}
    resolved: dict[str, V | str] = {k: v for k, v in config.items() if not is_file_setting(k)}
    for key, value in config.items():
        if not is_file_setting(key):
            continue
        target = key[: -len(FILE_SUFFIX)]
        origin = named.get(key, key)
        if target in config:
            raise SecretFileError(
                f"{origin} and {named.get(target, target)} both set {target}: keep one"
            )
        if not isinstance(value, str) or not value:
            raise SecretFileError(f"{origin}: give the path of a file that holds {target}")
        resolved[target] = read_secret(Path(value), origin, target)
    return resolved


def read_secret(path: Path, origin: str, target: str) -> str:
    """The file's text without its trailing line break (editors and `echo` add one that is
    no part of the secret)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problem = "does not exist"
    except IsADirectoryError:
        problem = "is a directory"
    except PermissionError:
        problem = "is not readable by this user"
    except UnicodeDecodeError:
        problem = "is not UTF-8 text"
    except OSError as error:
        problem = f"cannot be read ({error.strerror or error})"
    else:
        value = text.rstrip("\r\n")
        if value:
            return value
        problem = "is empty"
    raise SecretFileError(f"{origin}: {path} {problem}; it must hold the {target}")


def watched_files(config: Mapping[str, object]) -> tuple[Path, ...]:
    """Every file the settings make a client read: `<property>.file` ones and librdkafka's
    own file properties, in a stable order."""
    paths = {
        str(value)
        for key, value in config.items()
        if isinstance(value, str)
        and value
        and value not in _NOT_FILES
        and (is_file_setting(key) or key in FILE_PROPERTIES)
    }
    return tuple(Path(p) for p in sorted(paths))


def fingerprint(paths: tuple[Path, ...]) -> Fingerprint:
    """What each file is now. Replacing a file (a rename over it, a new Kubernetes secret
    symlink, an edit in place) changes its inode, size or modification time; stat follows
    symlinks, so a swapped link counts as the file it now points to."""
    out: list[tuple[str, tuple[int, int, int, int] | str]] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as error:
            out.append((str(path), error.strerror or type(error).__name__))
            continue
        out.append((str(path), (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)))
    return tuple(out)
