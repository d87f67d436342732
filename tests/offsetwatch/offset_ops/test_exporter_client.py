"""The --exporter client against the exporter's real HTTP server secured as docs/security.md
recommends (TLS from a private CA, client certificates, basic auth), and against servers
that are not an exporter: each mistake one line, never a traceback or "unknown group"."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from offsetwatch.cli import main
from offsetwatch.exporter.serve.http_server import ExporterHttpServer
from offsetwatch.exporter.serve.web_config import load_web_config
from offsetwatch.offset_ops.exporter_client import (
    ExporterAccess,
    ExporterClient,
    check_exporter_url,
)
from offsetwatch.offset_ops.model import OffsetOpsError
from tests.exporter.serve.test_http_security import ca, pki, start

__all__ = ["ca", "pki"]  # fixtures

PASSWORD = "s3cret-api"


@pytest.fixture
def secured(pki: dict[str, Path], tmp_path: Path) -> Iterator[ExporterHttpServer]:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(
        f"tls_server_config:\n  cert_file: {pki['cert']}\n  key_file: {pki['key']}\n"
        f"  client_ca_file: {pki['ca']}\nbasic_auth_users:\n  ops: {hashed}\n",
        encoding="utf-8",
    )
    server = start(load_web_config(config))
    yield server
    server.stop()


def access(server: ExporterHttpServer, pki: dict[str, Path], **changes: object) -> ExporterAccess:
    values: dict[str, object] = {
        "url": f"https://127.0.0.1:{server.port}",
        "ca_file": pki["ca"],
        "cert_file": pki["client"],
        "user": "ops",
        "password": PASSWORD,
    }
    values.update(changes)
    return ExporterAccess(**values)  # type: ignore[arg-type]


def failure(client_access: ExporterAccess) -> str:
    with pytest.raises(OffsetOpsError) as raised:
        ExporterClient(client_access, timeout_s=5).groups()
    return str(raised.value)


def test_a_secured_exporter_answers_with_ca_client_certificate_and_password(
    secured: ExporterHttpServer, pki: dict[str, Path]
) -> None:
    client = ExporterClient(access(secured, pki))
    groups = client.groups()
    assert groups and all("group" in g for g in groups)
    assert client.group(groups[0]["group"]) is not None
    assert client.group("no-such-group") is None  # the exporter's own 404


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"password": "wrong"}, "refused us (401): check --exporter-user and its password"),
        ({"user": None}, "it asks for basic auth: give --exporter-user"),
        ({"ca_file": None}, "certificate is not trusted"),
        ({"cert_file": None}, "needs --exporter-cert"),
    ],
)
def test_each_missing_piece_is_one_line_that_names_it(
    secured: ExporterHttpServer, pki: dict[str, Path], changes: dict[str, object], said: str
) -> None:
    line = failure(access(secured, pki, **changes))
    assert said in line and "\n" not in line
    assert PASSWORD not in line


@pytest.mark.parametrize(
    ("cert", "key", "said"),
    [
        ("cert", "empty", "--exporter-key {key}: cannot load a private key from it"),
        ("cert", "other_key", "--exporter-key {key} is not the key of --exporter-cert {cert}"),
        ("empty", "key", "--exporter-cert {cert}: cannot load a certificate from it"),
        ("key", "cert", "--exporter-cert {cert}: cannot load a certificate from it"),
    ],
)
def test_a_certificate_and_key_that_do_not_load_name_the_one_at_fault(
    pki: dict[str, Path], tmp_path: Path, cert: str, key: str, said: str
) -> None:
    """OpenSSL says "PEM lib" for either file of the pair: the line must still name the
    option to fix (it named --exporter-cert for a key that could not be read)."""
    import trustme

    (tmp_path / "empty").write_text("")
    (tmp_path / "other_key").write_bytes(trustme.CA().issue_cert("other").private_key_pem.bytes())
    files = {**pki, "empty": tmp_path / "empty", "other_key": tmp_path / "other_key"}
    with pytest.raises(OffsetOpsError) as raised:
        ExporterClient(
            ExporterAccess("https://127.0.0.1:9", cert_file=files[cert], key_file=files[key])
        )
    assert said.format(cert=files[cert], key=files[key]) in str(raised.value)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://ops:hunter2@monitor:9380", "credentials in the URL are refused"),
        ("http://monitor:9380/?x=1", "a query or fragment"),
        ("http://monitor:9380/#top", "a query or fragment"),
        ("http://monitor:9380/api/v1/groups", "not one of its endpoints"),
        ("http://monitor:9380/metrics", "not one of its endpoints"),
        ("ftp://monitor:9380", "give http:// or https://"),
        ("monitor:9380", "give http:// or https://"),
        ("http://:9380", "no host"),
        ("http://monitor:port", "not a URL"),
    ],
)
def test_urls_are_checked_when_parsed(url: str, said: str) -> None:
    with pytest.raises(OffsetOpsError) as raised:
        check_exporter_url(url)
    assert said in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_a_base_path_behind_a_proxy_is_kept() -> None:
    assert check_exporter_url("https://proxy/offsetwatch/") == "https://proxy/offsetwatch"


class _NotAnExporter(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/api/v1/groups/"):
            body, status, kind = b"<html>Not Found</html>", 404, "text/html"
        else:
            body, status, kind = b'{"status": "up", "version": 3}', 200, "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def other_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAnExporter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_server_that_is_not_an_exporter_is_said_so(other_server: str) -> None:
    client = ExporterClient(ExporterAccess(other_server), timeout_s=5)
    for ask in (client.groups, lambda: client.group("orders")):
        with pytest.raises(OffsetOpsError) as raised:
            ask()
        assert "does not answer like an offsetwatch exporter" in str(raised.value)


def test_the_command_refuses_a_url_with_a_password_before_any_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["groups", "describe", "orders", "--exporter", "https://ops:hunter2@monitor:9380"]
    assert main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "credentials in the URL are refused" in err and "hunter2" not in err
    assert len(err.strip().splitlines()) == 1  # before Kafka was asked anything


def test_the_password_comes_from_a_file_or_the_environment(
    secured: ExporterHttpServer,
    pki: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from offsetwatch.cli import build_parser
    from offsetwatch.commands.groups import exporter_client

    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n", encoding="utf-8")
    base = ["groups", "list", "--exporter", f"https://127.0.0.1:{secured.port}"]
    base += ["--exporter-ca", str(pki["ca"]), "--exporter-cert", str(pki["client"])]
    base += ["--exporter-user", "ops"]
    from_file = exporter_client(
        build_parser().parse_args([*base, "--exporter-password-file", str(secret)])
    )
    assert from_file is not None and from_file.groups()
    monkeypatch.setenv("OFFSETWATCH_EXPORTER_PASSWORD", PASSWORD)
    from_env = exporter_client(build_parser().parse_args(base))
    assert from_env is not None and from_env.groups()
