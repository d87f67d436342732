"""`--web-config FILE`: TLS and basic auth in the format of Prometheus' exporter-toolkit.

The same file node_exporter, kafka_exporter and every exporter built on exporter-toolkit read
(`--web.config.file`), so operators keep one format and one set of habits:

    tls_server_config:
      cert_file: server.crt          # paths are relative to this file's directory
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # default when client_ca_file is set
      client_ca_file: clients-ca.crt
      min_version: TLS12             # TLS10..TLS13, default TLS12
      max_version: TLS13
    http_server_config:
      headers:                       # added to every response
        Strict-Transport-Security: max-age=31536000
    basic_auth_users:                # user: bcrypt hash (htpasswd -nBC 10 "" | tr -d ':')
      prometheus: $2y$10$...

Settings that cannot be honoured with Python's ssl module are refused rather than ignored when
they would weaken security (`client_allowed_sans`, `RequestClientCert`/`RequireAnyClientCert`,
which accept unverified certificates); Go-specific tuning (`cipher_suites`,
`curve_preferences`, `prefer_server_cipher_suites`, `http2`) is ignored with a warning:
OpenSSL's defaults apply.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import ssl
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import bcrypt
import yaml

from offsetwatch.core.textfiles import TextFileError, read_text

__all__ = ["BasicAuth", "TlsSettings", "WebConfig", "WebConfigError", "load_web_config"]

log = logging.getLogger(__name__)

_TLS_VERSIONS: Final = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH: Final = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNVERIFIED_CLIENT_AUTH: Final = ("RequestClientCert", "RequireAnyClientCert")
_TLS_KEYS: Final = {
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "min_version",
    "max_version",
}
_IGNORED_TLS_KEYS: Final = {"cipher_suites", "curve_preferences", "prefer_server_cipher_suites"}
_TOP_KEYS: Final = {"tls_server_config", "http_server_config", "basic_auth_users"}


class WebConfigError(ValueError):
    """The web configuration file cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    max_version: str | None = None

    def context(self) -> ssl.SSLContext:
        """A server-side SSLContext; loads the certificate, key and client CA now."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = _TLS_VERSIONS[self.min_version]
        if self.max_version is not None:
            context.maximum_version = _TLS_VERSIONS[self.max_version]
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
            if self.client_ca_file is not None:
                context.load_verify_locations(cafile=self.client_ca_file)
        except (OSError, ssl.SSLError) as error:
            raise WebConfigError(f"cannot load the TLS certificate, key or CA: {error}") from None
        context.verify_mode = _CLIENT_AUTH[self.client_auth_type]
        return context


@dataclass(frozen=True, slots=True)
class WebConfig:
    tls: TlsSettings | None = None
    #: user -> bcrypt hash
    basic_auth_users: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def load_web_config(path: str | Path) -> WebConfig:
    """Parse and check a web configuration file (TLS files are loaded to check them)."""
    source = Path(path)
    try:
        document = yaml.safe_load(read_text(source, "web configuration file"))
    except TextFileError as error:
        raise WebConfigError(str(error)) from None
    except yaml.YAMLError as error:
        raise WebConfigError(f"{source}: not valid YAML: {error}") from None
    if document is None:
        return WebConfig()
    if not isinstance(document, dict):
        raise WebConfigError(f"{source}: expected a mapping at the top level")
    unknown = sorted(set(document) - _TOP_KEYS)
    if unknown:
        raise WebConfigError(
            f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})"
        )
    base = source.resolve().parent
    tls = _tls(document.get("tls_server_config"), base, source)
    config = WebConfig(
        tls=tls,
        basic_auth_users=MappingProxyType(_users(document.get("basic_auth_users"), source)),
        headers=MappingProxyType(_headers(document.get("http_server_config"), source)),
    )
    if tls is not None:
        tls.context()  # fail at start-up, not at the first scrape
    return config


def _mapping(value: Any, where: str, source: Path) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{source}: {where} must be a mapping")
    return value


def _tls(value: Any, base: Path, source: Path) -> TlsSettings | None:
    section = _mapping(value, "tls_server_config", source)
    if not section:
        return None
    for key in sorted(set(section) & _IGNORED_TLS_KEYS):
        log.warning("%s: tls_server_config.%s is ignored: OpenSSL's defaults apply", source, key)
    if "client_allowed_sans" in section:
        raise WebConfigError(
            f"{source}: tls_server_config.client_allowed_sans is not supported; restrict "
            "clients with a dedicated client_ca_file instead"
        )
    unknown = sorted(set(section) - _TLS_KEYS - _IGNORED_TLS_KEYS)
    if unknown:
        raise WebConfigError(f"{source}: unknown key tls_server_config.{unknown[0]}")
    for key in ("cert_file", "key_file"):
        if not section.get(key):
            raise WebConfigError(f"{source}: tls_server_config.{key} is required for TLS")
    ca = section.get("client_ca_file")
    auth = section.get("client_auth_type") or ("RequireAndVerifyClientCert" if ca else "")
    auth = auth or "NoClientCert"
    if auth in _UNVERIFIED_CLIENT_AUTH:
        raise WebConfigError(
            f"{source}: client_auth_type {auth} accepts unverified certificates and is not "
            "supported; use VerifyClientCertIfGiven or RequireAndVerifyClientCert"
        )
    if auth not in _CLIENT_AUTH:
        raise WebConfigError(
            f"{source}: client_auth_type {auth!r} is not one of {', '.join(_CLIENT_AUTH)}"
        )
    if auth != "NoClientCert" and not ca:
        raise WebConfigError(f"{source}: client_auth_type {auth} needs client_ca_file")
    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", None)):
        version = section.get(key) or default
        if version is not None and version not in _TLS_VERSIONS:
            raise WebConfigError(
                f"{source}: tls_server_config.{key} {version!r} is not one of "
                f"{', '.join(_TLS_VERSIONS)}"
            )
        versions[key] = version
    return TlsSettings(
        cert_file=base / str(section["cert_file"]),
        key_file=base / str(section["key_file"]),
        client_auth_type=auth,
        client_ca_file=base / str(ca) if ca else None,
        min_version=versions["min_version"] or "TLS12",
        max_version=versions["max_version"],
    )


def _users(value: Any, source: Path) -> dict[str, bytes]:
    users = {}
    for user, hashed in _mapping(value, "basic_auth_users", source).items():
        encoded = str(hashed).encode()
        if not encoded.startswith((b"$2a$", b"$2b$", b"$2y$")):
            raise WebConfigError(
                f"{source}: basic_auth_users.{user} is not a bcrypt hash "
                "(make one with: htpasswd -nBC 10 '' | tr -d ':')"
            )
        users[str(user)] = encoded
    return users


def _headers(value: Any, source: Path) -> dict[str, str]:
    section = _mapping(value, "http_server_config", source)
    if section.get("http2"):
        log.warning("%s: http_server_config.http2 is ignored: HTTP/1.1 is served", source)
    headers = _mapping(section.get("headers"), "http_server_config.headers", source)
    return {str(k): str(v) for k, v in headers.items()}


class BasicAuth:
    """Checks `Authorization: Basic` headers against bcrypt hashes.

    bcrypt is deliberately slow (~50-100 ms at cost 10); Prometheus sends the same credentials
    every scrape, so verified credentials are remembered (by a keyed digest, never in clear) in
    a small LRU. Wrong passwords are never cached and always pay the full bcrypt cost.
    """

    def __init__(self, users: Mapping[str, bytes], cache_size: int = 64) -> None:
        self._users = dict(users)
        self._cache: OrderedDict[bytes, None] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._key = hashlib.sha256(repr(sorted(self._users.items())).encode()).digest()
        # an unknown user pays the same bcrypt cost as a known one: no user enumeration by time
        self._decoy = bcrypt.hashpw(b"decoy", bcrypt.gensalt(10)) if self._users else b""

    def __bool__(self) -> bool:
        return bool(self._users)

    def check(self, header: str | None) -> bool:
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        user, sep, password = decoded.partition(b":")
        if not sep:
            return False
        digest = hmac.new(self._key, decoded, hashlib.sha256).digest()
        with self._lock:
            if digest in self._cache:
                self._cache.move_to_end(digest)
                return True
        known = self._users.get(user.decode("utf-8", "replace"))
        try:
            ok = bcrypt.checkpw(password, known or self._decoy) and known is not None
        except ValueError:
            return False
        if ok:
            with self._lock:
                self._cache[digest] = None
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return ok
