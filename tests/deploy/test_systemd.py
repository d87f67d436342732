"""deploy/systemd: the unit verifies, is hardened, and passes only real options.

`systemd-analyze verify` and `systemd-analyze security --offline` run where systemd-analyze
exists (skipped otherwise; failed under CI=true), on a copy whose ExecStart and
EnvironmentFile point at this checkout's offsetwatch and an empty file, since
/opt/offsetwatch does not exist here. The service itself was not started (no systemd as PID 1
in this environment).
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.cli_options import export_flags, flags_in, is_export_env

SYSTEMD = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
UNIT = SYSTEMD / "offsetwatch.service"
ENV_EXAMPLE = SYSTEMD / "offsetwatch.env.example"
OFFSETWATCH = Path(sys.executable).with_name("offsetwatch")


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser


def _systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        message = "systemd-analyze not found (Debian: apt-get install systemd)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def test_exec_start_runs_export_with_real_flags() -> None:
    argv = shlex.split(_unit()["Service"]["ExecStart"])
    assert argv[0].endswith("/offsetwatch") and argv[1] == "export"
    assert set(flags_in(argv[2:])) <= export_flags()


def test_hardening_and_restart_policy() -> None:
    service = _unit()["Service"]
    expected = {
        "DynamicUser": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "Restart": "on-failure",
        "StateDirectory": "offsetwatch",
        "EnvironmentFile": "/etc/offsetwatch/offsetwatch.env",
    }
    assert {key: service.get(key) for key in expected} == expected
    assert service.get("CapabilityBoundingSet") == ""


def test_environment_file_example_uses_real_variables() -> None:
    names = re.findall(r"^([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), flags=re.M)
    assert "OFFSETWATCH_BOOTSTRAP_SERVER" in names
    unknown = [name for name in names if not is_export_env(name)]
    assert not unknown, f"not options of offsetwatch export: {unknown}"


def _local_copy(tmp_path: Path) -> Path:
    env_file = tmp_path / "offsetwatch.env"
    env_file.write_text("")
    text = UNIT.read_text()
    text = text.replace("/opt/offsetwatch/bin/offsetwatch", str(OFFSETWATCH))
    text = text.replace("/etc/offsetwatch/offsetwatch.env", str(env_file))
    unit = tmp_path / "offsetwatch.service"
    unit.write_text(text)
    return unit


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = _systemd_analyze()
    result = subprocess.run(
        [tool, "verify", str(_local_copy(tmp_path))], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "offsetwatch.service" not in result.stderr, result.stderr  # no warnings on our unit


def test_systemd_analyze_security_exposure_is_low(tmp_path: Path) -> None:
    tool = _systemd_analyze()
    result = subprocess.run(
        [tool, "security", "--offline=true", str(_local_copy(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= 2.0, result.stdout  # systemd calls < 2 "OK"
    assert "offsetwatch.service:" not in result.stderr, result.stderr
