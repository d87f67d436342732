"""New client settings when a credential file is replaced (exporter.sources.credential_watch)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from offsetwatch.core.connection import ConnectionOptionError
from offsetwatch.core.secret_files import resolve_secret_files
from offsetwatch.exporter.sources.credential_watch import CredentialWatch


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".new")
    partial.write_text(text)
    partial.rename(path)


def _watch(raw: dict[str, str], refuse: set[str] | None = None) -> CredentialWatch | None:
    def check(settings: Mapping[str, object]) -> None:
        if refuse and settings.get("sasl.password") in refuse:
            raise ConnectionOptionError("librdkafka refuses it")

    return CredentialWatch.of(raw, lambda: dict(resolve_secret_files(raw)), check)


def test_settings_that_name_no_file_need_no_watch() -> None:
    assert _watch({"security.protocol": "SASL_SSL", "sasl.password": "x"}) is None


def test_a_replaced_password_file_gives_new_settings_once(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("one\n")
    watch = _watch({"sasl.password.file": str(secret)})
    assert watch is not None
    assert watch.poll() is None  # nothing changed since start
    _replace(secret, "two\n")
    assert watch.poll() == {"sasl.password": "two"}
    assert watch.poll() is None
    assert watch.renewals_total == 1


def test_a_file_caught_half_written_is_said_once_and_tried_at_its_next_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "password"
    secret.write_text("one")
    watch = _watch({"sasl.password.file": str(secret)}, refuse={"half"})
    assert watch is not None
    _replace(secret, "half")
    assert watch.poll() is None and watch.poll() is None
    refusals = [r for r in caplog.records if "cannot be used" in r.getMessage()]
    assert len(refusals) == 1 and str(secret) in refusals[0].getMessage()
    secret.unlink()  # a missing file is a change too, and is refused with the reason
    assert watch.poll() is None
    assert "does not exist" in caplog.records[-1].getMessage()
    _replace(secret, "whole")
    assert watch.poll() == {"sasl.password": "whole"}
