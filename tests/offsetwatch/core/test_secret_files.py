"""Kafka settings kept in files (offsetwatch.core.secret_files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetwatch.core.secret_files import (
    SecretFileError,
    fingerprint,
    resolve_secret_files,
    watched_files,
)


def test_a_file_setting_becomes_its_property_without_the_trailing_line_break(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret=with spaces \n")
    config = {"sasl.password.file": str(secret), "sasl.username": "monitor"}
    assert resolve_secret_files(config) == {
        "sasl.password": "s3cret=with spaces ",
        "sasl.username": "monitor",
    }


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_text("\n"), "is empty"),
        (lambda p: p.write_bytes(b"\xff\xfe"), "is not UTF-8 text"),
    ],
)
def test_a_file_that_cannot_give_a_value_names_the_setting_and_the_file(
    tmp_path: Path, make: object, problem: str
) -> None:
    path = tmp_path / "password"
    make(path)  # type: ignore[operator]
    origins = {"sasl.password.file": "OFFSETWATCH_KAFKA_SASL_PASSWORD_FILE"}
    with pytest.raises(SecretFileError) as raised:
        resolve_secret_files({"sasl.password.file": str(path)}, origins)
    assert str(raised.value) == (
        f"OFFSETWATCH_KAFKA_SASL_PASSWORD_FILE: {path} {problem}; it must hold the sasl.password"
    )


def test_an_unreadable_file_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raised by read_text itself: the suite runs as root, which reads a mode-0 file."""
    path = tmp_path / "password"
    path.write_text("x")

    def refuse(self: Path, encoding: str | None = None) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    with pytest.raises(SecretFileError, match="is not readable by this user"):
        resolve_secret_files({"sasl.password.file": str(path)})


def test_a_property_given_both_ways_is_refused(tmp_path: Path) -> None:
    (tmp_path / "p").write_text("x")
    with pytest.raises(SecretFileError, match=r"both set sasl\.password: keep one"):
        resolve_secret_files({"sasl.password": "y", "sasl.password.file": str(tmp_path / "p")})


def test_the_watched_files_are_every_file_a_client_loads() -> None:
    config = {
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/client.pem",
        "ssl.key.location": "/etc/client.key",
        "sasl.password.file": "/run/secrets/pw",
        "client.id": "/not/a/file",
    }
    assert watched_files(config) == tuple(
        Path(p) for p in ("/etc/ca.pem", "/etc/client.key", "/etc/client.pem", "/run/secrets/pw")
    )
    # librdkafka's own lookup of the system's CAs names no file
    assert watched_files({"ssl.ca.location": "probe"}) == ()


def test_a_file_replaced_changes_the_fingerprint_and_one_left_alone_does_not(
    tmp_path: Path,
) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("old")
    paths = (cert, tmp_path / "missing")
    before = fingerprint(paths)
    assert fingerprint(paths) == before
    assert before[1] == (str(tmp_path / "missing"), "No such file or directory")
    replacement = tmp_path / "client.pem.new"
    replacement.write_text("new")
    replacement.rename(cert)  # how cert-manager and editors replace a file
    assert fingerprint(paths) != before


def test_a_swapped_symlink_counts_as_its_new_target(tmp_path: Path) -> None:
    """Kubernetes updates a mounted secret by pointing a symlink at a new directory."""
    for name, text in (("v1", "one"), ("v2", "two")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "password").write_text(text)
    data = tmp_path / "..data"
    data.symlink_to("v1")
    secret = tmp_path / "password"
    secret.symlink_to("..data/password")
    before = fingerprint((secret,))
    data.unlink()
    data.symlink_to("v2")
    assert fingerprint((secret,)) != before
    assert resolve_secret_files({"sasl.password.file": str(secret)}) == {"sasl.password": "two"}
