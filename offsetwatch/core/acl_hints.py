"""The line an operator runs when an ACL is missing: `kafka-acls.sh ... --add`, for the
principal the client settings tell, the operation and the resource that were refused
(docs/security.md lists what each command needs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

__all__ = ["Resource", "grant_line", "principal_of"]

Resource = Literal["topic", "group", "cluster", "transactional_id"]

_FLAGS: Final[Mapping[str, str]] = {
    "topic": "--topic",
    "group": "--group",
    "cluster": "--cluster",
    "transactional_id": "--transactional-id",
}


def principal_of(properties: Mapping[str, object]) -> str:
    """The principal the broker sees for these client settings, as far as they tell: the SASL
    user, or a placeholder naming where the certificate's subject is."""
    user = properties.get("sasl.username")
    if isinstance(user, str) and user:
        return f"User:{user}"
    certificate = properties.get("ssl.certificate.location")
    if isinstance(certificate, str) and certificate:
        return f"'User:<the subject of {certificate}, e.g. CN=...>'"
    return "'User:<the client's principal>'"


def grant_line(
    properties: Mapping[str, object], operation: str, resource: Resource, name: str = ""
) -> str:
    """`kafka-acls.sh` granting `operation` on the resource to the client's principal."""
    bootstrap = properties.get("bootstrap.servers") or "BROKER:9092"
    target = _FLAGS[resource] if resource == "cluster" else f"{_FLAGS[resource]} '{name}'"
    return (
        f"kafka-acls.sh --bootstrap-server {bootstrap} --add --allow-principal "
        f"{principal_of(properties)} --operation {operation} {target}"
    )
