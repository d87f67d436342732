"""The HTTPS client of a running `offsetwatch export` (`groups ... --exporter URL`).

An exporter secured as docs/security.md recommends has TLS (a private CA, maybe client
certificates) and basic auth: the client takes a CA file, a client certificate and key, and a
user whose password comes from a file or OFFSETWATCH_EXPORTER_PASSWORD, never from the URL
(it would show in process lists, shell history and error lines). The URL is checked when
parsed, and every answer is checked for the exporter's shape, so a wrong server is one line
("does not answer like an offsetwatch exporter"), never "unknown group" or a traceback.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from offsetwatch.offset_ops.model import OffsetOpsError

#: the variable the password may come from (else --exporter-password-file)
PASSWORD_ENV: Final = "OFFSETWATCH_EXPORTER_PASSWORD"


def _shown(parts: urllib.parse.SplitResult) -> str:
    """The URL without its credentials: safe for an error line."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def check_exporter_url(text: str) -> str:
    """The base URL of an exporter (`http[s]://host[:port][/prefix]`), without a trailing
    slash; OffsetOpsError naming what is wrong otherwise."""
    try:
        parts = urllib.parse.urlsplit(text.strip())
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as error:
        raise OffsetOpsError(f"--exporter: not a URL ({error})") from None
    shown = _shown(parts)
    if parts.scheme not in ("http", "https"):
        raise OffsetOpsError(
            f"--exporter {shown or text!r}: give http:// or https:// and the exporter's "
            "address, e.g. https://monitor:9380"
        )
    if not parts.hostname:
        raise OffsetOpsError(f"--exporter {shown}: no host in the URL")
    if parts.username is not None or parts.password is not None:
        raise OffsetOpsError(
            f"--exporter {shown}: credentials in the URL are refused (they would show in "
            f"process lists and logs): give --exporter-user and the password in "
            f"--exporter-password-file or {PASSWORD_ENV}"
        )
    if parts.query or parts.fragment:
        raise OffsetOpsError(
            f"--exporter {shown}: a query or fragment is not part of an exporter's address: "
            "give its base URL only"
        )
    if "/api/" in f"{parts.path}/" or parts.path.rstrip("/").endswith(("/metrics", "/api")):
        raise OffsetOpsError(
            f"--exporter {shown}: give the exporter's base URL "
            f"({parts.scheme}://{parts.netloc}), not one of its endpoints"
        )
    return shown.rstrip("/")


@dataclass(frozen=True, slots=True)
class ExporterAccess:
    """Where the exporter is and how to prove who we are to it."""

    url: str
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)


def read_password(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise OffsetOpsError(f"--exporter-password-file {path}: cannot read it ({error})") from None
    return text.rstrip("\r\n")


def _pair_error(cert_file: Path, key_file: Path | None, error: OSError) -> str:
    """The line for a certificate and key that did not load, naming the option at fault.

    OpenSSL says "PEM lib" whether the certificate or the key could not be read, so the
    certificate is read again on its own: when it holds one, the key is what failed. Only a
    regular file is read twice: a FIFO (`<(vault read ...)`) gives its content once.
    """
    if key_file is None:
        return (
            f"--exporter-cert {cert_file}: cannot load the certificate and its key ({error}); "
            "a key in another file goes to --exporter-key"
        )
    if isinstance(error, ssl.SSLError) and error.reason == "KEY_VALUES_MISMATCH":
        return (
            f"--exporter-key {key_file} is not the key of --exporter-cert {cert_file}: give "
            "the key the certificate was made for"
        )
    if not cert_file.is_file():
        return (
            f"--exporter-cert {cert_file} / --exporter-key {key_file}: cannot load the "
            f"certificate and its key ({error}); check both files"
        )
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=str(cert_file))
    except (OSError, ssl.SSLError) as cert_error:
        return (
            f"--exporter-cert {cert_file}: cannot load a certificate from it ({cert_error}); "
            "give the client certificate in PEM"
        )
    return (
        f"--exporter-key {key_file}: cannot load a private key from it ({error}); give the "
        "certificate's private key in PEM, unencrypted"
    )


class ExporterClient:
    """GETs JSON from one exporter; each failure is one OffsetOpsError line."""

    def __init__(self, access: ExporterAccess, timeout_s: float = 30.0) -> None:
        self.url = check_exporter_url(access.url)
        self._timeout_s = timeout_s
        self._headers = {"Accept": "application/json"}
        if access.user is not None:
            if access.password is None:
                raise OffsetOpsError(
                    f"--exporter-user {access.user}: no password: give "
                    f"--exporter-password-file FILE or {PASSWORD_ENV}"
                )
            token = base64.b64encode(f"{access.user}:{access.password}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._context: ssl.SSLContext | None = None
        if self.url.startswith("https://"):
            self._context = self._tls(access)
        elif access.ca_file or access.cert_file:
            raise OffsetOpsError(
                f"--exporter {self.url}: --exporter-ca and --exporter-cert need an https:// URL"
            )

    def _tls(self, access: ExporterAccess) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(
                cafile=None if access.ca_file is None else str(access.ca_file)
            )
        except (OSError, ssl.SSLError) as error:
            raise OffsetOpsError(
                f"--exporter-ca {access.ca_file}: cannot load it ({error})"
            ) from None
        if access.cert_file is not None:
            try:
                context.load_cert_chain(
                    str(access.cert_file),
                    None if access.key_file is None else str(access.key_file),
                )
            except (OSError, ssl.SSLError) as error:
                raise OffsetOpsError(
                    _pair_error(access.cert_file, access.key_file, error)
                ) from None
        elif access.key_file is not None:
            raise OffsetOpsError("--exporter-key needs --exporter-cert")
        return context

    def get(self, path: str) -> Any | None:
        """The decoded JSON of `path`, None for the exporter's own 404."""
        address = f"{self.url}{path}"
        request = urllib.request.Request(address, headers=self._headers)
        try:
            with urllib.request.urlopen(
                request, timeout=self._timeout_s, context=self._context
            ) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            self._http_error(address, error)
            return None  # the exporter's own 404
        except urllib.error.URLError as error:
            raise OffsetOpsError(self._unreachable(address, error.reason)) from None
        except OSError as error:
            raise OffsetOpsError(self._unreachable(address, error)) from None
        try:
            return json.loads(body)
        except ValueError:
            raise OffsetOpsError(self._not_an_exporter(address, "not JSON")) from None

    def _http_error(self, address: str, error: urllib.error.HTTPError) -> None:
        """Returns for the exporter's own 404 (its JSON error); raises for the rest."""
        body = error.read()
        if error.code == 404:
            try:
                answer = json.loads(body)
            except ValueError:
                answer = None
            if isinstance(answer, dict) and "error" in answer:
                return  # the exporter's own "unknown group"
            raise OffsetOpsError(self._not_an_exporter(address, "404 without its JSON"))
        if error.code == 401:
            hint = (
                "check --exporter-user and its password"
                if "Authorization" in self._headers
                else "it asks for basic auth: give --exporter-user and "
                f"--exporter-password-file or {PASSWORD_ENV}"
            )
            raise OffsetOpsError(f"--exporter {self.url}: {address} refused us (401): {hint}")
        raise OffsetOpsError(f"--exporter {self.url}: {address} answered {error.code}")

    def _unreachable(self, address: str, reason: object) -> str:
        text = str(reason)
        if isinstance(reason, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY" in text:
            return (
                f"--exporter {self.url}: the server's certificate is not trusted ({text}): "
                "give its CA with --exporter-ca FILE"
            )
        if isinstance(reason, ssl.SSLError) or "SSL" in text or "TLS" in text:
            return (
                f"--exporter {self.url}: TLS failed ({text}): an exporter that wants a client "
                "certificate needs --exporter-cert (and --exporter-key); an http:// exporter "
                "needs an http:// URL"
            )
        return f"--exporter {self.url}: cannot read {address} ({text})"

    def _not_an_exporter(self, address: str, what: str) -> str:
        return (
            f"--exporter {self.url}: does not answer like an offsetwatch exporter ({address}: "
            f"{what}): check the URL (the address of `offsetwatch export`, port 9380 by default)"
        )

    # -- the exporter's answers, checked for their shape -------------------------------------

    def groups(self) -> list[dict[str, Any]]:
        path = "/api/v1/groups"
        answer = self.get(path)
        if not isinstance(answer, list) or not all(
            isinstance(g, dict) and isinstance(g.get("group"), str) and "kind" in g for g in answer
        ):
            raise OffsetOpsError(self._not_an_exporter(f"{self.url}{path}", "not a list of groups"))
        return answer

    def group(self, group_id: str) -> dict[str, Any] | None:
        path = f"/api/v1/groups/{urllib.parse.quote(group_id, safe='')}"
        answer = self.get(path)
        if answer is None:
            return None
        if not isinstance(answer, dict) or not isinstance(answer.get("partitions", []), list):
            raise OffsetOpsError(self._not_an_exporter(f"{self.url}{path}", "not a group"))
        return answer
