"""A real broker secured as production clusters are: SASL_SSL with SCRAM-SHA-512, a second
listener with mutual TLS, and the StandardAuthorizer with `allow.everyone.if.no.acl.found`
false. The tests make their certificates themselves (openssl and keytool, a CA of their own).

The broker keeps its PLAINTEXT listener for the tests' own admin work (creating users and
ACLs, committing as a client would, Kafka's reference answers): there the principal is
`User:ANONYMOUS`, a super user. Everything under test connects to `sasl_ssl` or `mtls` as a
principal with exactly the ACLs the test grants.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.real_broker import Broker, own_broker

STORE_PASSWORD: Final = "offsetwatch-test-store"
#: the principal of the mutual-TLS client certificate (Kafka's default principal builder)
MTLS_PRINCIPAL: Final = "User:CN=offsetwatch-mtls"
MECHANISM: Final = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class Certificates:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    @property
    def keystore(self) -> Path:
        return self.directory / "server.p12"

    @property
    def truststore(self) -> Path:
        return self.directory / "truststore.p12"


def _run(*command: str, cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")


def make_certificates(directory: Path) -> Certificates:
    """A CA, a server certificate for 127.0.0.1/localhost in a PKCS12 keystore, the CA in a
    PKCS12 truststore, and a client certificate (PEM) for the mutual-TLS listener."""
    directory.mkdir(parents=True, exist_ok=True)
    days, subj = "2", "/O=offsetwatch tests"
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", days,
         "-subj", f"{subj}/CN=offsetwatch-test-ca", "-keyout", "ca.key", "-out", "ca.pem",
         cwd=directory)  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn, ext in (("server", "localhost", ["-extfile", "san.ext"]),
                          ("client", "offsetwatch-mtls", [])):  # fmt: skip
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)  # fmt: skip
        _run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey",
             "ca.key", "-CAcreateserial", "-days", days, "-out", f"{name}.pem", *ext,
             cwd=directory)  # fmt: skip
    _run("openssl", "pkcs12", "-export", "-in", "server.pem", "-inkey", "server.key",
         "-certfile", "ca.pem", "-name", "server", "-out", "server.p12",
         "-passout", f"pass:{STORE_PASSWORD}", cwd=directory)  # fmt: skip
    _run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
         "-keystore", "truststore.p12", "-storetype", "PKCS12",
         "-storepass", STORE_PASSWORD, cwd=directory)  # fmt: skip
    return Certificates(directory)


def issue_client_certificate(
    certificates: Certificates, cert_path: Path, key_path: Path, not_after: datetime.datetime
) -> None:
    """A new key and a client certificate for `MTLS_PRINCIPAL`, signed by the tests' CA and
    valid until `not_after` (to the second: openssl's own tool counts in days). Each file is
    written beside its place and renamed over it, as cert-manager replaces a mounted file."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    directory = certificates.directory
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate(certificates.ca.read_bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, MTLS_PRINCIPAL.split("CN=")[1])])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    for path, data in (
        (key_path, key_pem),
        (cert_path, certificate.public_bytes(serialization.Encoding.PEM)),
    ):
        partial = path.with_name(path.name + ".new")
        partial.write_bytes(data)
        partial.rename(path)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True, slots=True)
class SecuredBroker:
    broker: Broker
    sasl_ssl_port: int
    mtls_port: int
    certificates: Certificates

    @property
    def sasl_ssl(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def mtls(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"

    def sasl_properties(self, user: str, password: str) -> dict[str, str]:
        """librdkafka settings of a client of `user` on the SASL_SSL listener."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.certificates.ca),
        }

    def mtls_properties(self) -> dict[str, str]:
        """librdkafka settings of the client certificate's principal (`MTLS_PRINCIPAL`)."""
        certificates = self.certificates
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(certificates.ca),
            "ssl.certificate.location": str(certificates.client_cert),
            "ssl.key.location": str(certificates.client_key),
        }

    def add_user(self, user: str, password: str) -> None:
        admin = self.broker.admin()
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        futures = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, info, password.encode())]
        )
        for future in futures.values():
            future.result(timeout=30)

    def grant(self, principal: str, acls: Sequence[tuple[str, str, str]]) -> None:
        """Allow `principal` each (resource type, name, operation), e.g.
        ("topic", "__consumer_offsets", "read"); a name ending in * is a prefix."""
        admin = self.broker.admin()  # referenced until its futures answer
        futures = admin.create_acls([_binding(principal, *acl) for acl in acls])
        for future in futures.values():
            future.result(timeout=30)
        self._wait_acls(principal, acls, present=True)

    def revoke(self, principal: str, acls: Sequence[tuple[str, str, str]]) -> None:
        filters = [_binding(principal, *acl, as_filter=True) for acl in acls]
        admin = self.broker.admin()  # referenced until its futures answer
        futures = admin.delete_acls(filters)
        for future in futures.values():
            future.result(timeout=30)
        self._wait_acls(principal, acls, present=False)

    def _wait_acls(
        self, principal: str, acls: Sequence[tuple[str, str, str]], present: bool
    ) -> None:
        """Until the authorizer reads what was asked (ACLs reach it through the metadata log)."""
        admin = self.broker.admin()
        wanted = {_key(principal, *acl) for acl in acls}
        deadline = time.monotonic() + 30
        while True:
            described = admin.describe_acls(
                AclBindingFilter(
                    ResourceType.ANY,
                    None,
                    ResourcePatternType.ANY,
                    principal,
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
            ).result(timeout=30)
            have = {
                (b.principal, b.restype, b.name, b.resource_pattern_type, b.operation)
                for b in described
            }
            if (wanted <= have) == present and (present or not wanted & have):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"ACLs of {principal} not applied: {have} vs {wanted}")
            time.sleep(0.2)


_RESOURCES: Final = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.BROKER,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
}


def _parts(resource: str, name: str, operation: str) -> tuple[Any, str, Any, Any]:
    pattern = ResourcePatternType.LITERAL
    if name.endswith("*") and name != "*":
        name, pattern = name[:-1], ResourcePatternType.PREFIXED
    if resource == "cluster":
        name = "kafka-cluster"
    return _RESOURCES[resource], name, pattern, AclOperation[operation.upper()]


def _key(principal: str, resource: str, name: str, operation: str) -> tuple[Any, ...]:
    restype, name, pattern, op = _parts(resource, name, operation)
    return (principal, restype, name, pattern, op)


def _binding(
    principal: str, resource: str, name: str, operation: str, as_filter: bool = False
) -> Any:
    restype, name, pattern, op = _parts(resource, name, operation)
    kind = AclBindingFilter if as_filter else AclBinding
    return kind(restype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


@contextlib.contextmanager
def secured_broker(directory: Path, *properties: str) -> Iterator[SecuredBroker]:
    """A broker of the test's own with the SASL_SSL and mutual-TLS listeners (module doc)."""
    certificates = make_certificates(directory / "certs")
    sasl_port, mtls_port = _free_port(), _free_port()
    store = f"{certificates.directory}"
    settings = [
        # the launcher's PLAINTEXT and CONTROLLER listeners keep their ports; two are added
        "listener.security.protocol.map="
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
        f"sasl.enabled.mechanisms={MECHANISM}",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={store}/server.p12",
        f"ssl.keystore.password={STORE_PASSWORD}",
        "ssl.truststore.type=PKCS12",
        f"ssl.truststore.location={store}/truststore.p12",
        f"ssl.truststore.password={STORE_PASSWORD}",
        "listener.name.ssl.ssl.client.auth=required",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        "super.users=User:ANONYMOUS",
        *properties,
    ]
    listeners = (("SASL_SSL", sasl_port), ("SSL", mtls_port))
    with own_broker(directory / "broker", *settings, extra_listeners=listeners) as broker:
        secured = SecuredBroker(broker, sasl_port, mtls_port, certificates)
        yield secured


def is_authorization_error(error: BaseException) -> bool:
    err = error.args[0] if isinstance(error, KafkaException) and error.args else None
    return err is not None and "AUTHORIZATION" in str(getattr(err, "name", lambda: "")())
