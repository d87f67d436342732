"""What a replica tells the rest of the fleet about itself: its name and the URL its HTTP API
answers on, carried in the `client.id` of its group member.

Kafka's DescribeConsumerGroups gives every member's client id, host and assignment to any
client with Describe on the group, so a replica learns where each partition's owner answers
from the group itself: no topic, lock or registry of our own. The client id is free text to
Kafka (quotas and logs show it); `|` cannot appear in a URL's scheme or authority, nor in the
replica names `replica_name_problem` allows.

The fourth field, a short fingerprint of the settings that change what a replica exports
(exporter/fleet/replica.py), lets every replica see one that filters or aggregates otherwise:
the union of the fleet would be half filtered. Replicas from before it announce three fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

#: the client id's first field: members of the fleet's group that are not offsetwatch
#: replicas (a consumer someone pointed at the same group by mistake) are told apart
MARK: Final = "offsetwatch-fleet"
_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
_FINGERPRINT: Final = re.compile(r"[0-9a-f]{8,32}")


@dataclass(slots=True, frozen=True)
class ReplicaIdentity:
    """A replica: its name (unique in the fleet: the host name by default) and the base URL
    of its HTTP API as the other replicas reach it (None: it cannot be forwarded to), and the
    fingerprint of its export settings (None: a replica that announces none)."""

    name: str
    url: str | None
    fingerprint: str | None = None

    def client_id(self) -> str:
        base = f"{MARK}|{self.name}|{self.url or ''}"
        return base if self.fingerprint is None else f"{base}|{self.fingerprint}"

    @classmethod
    def parse(cls, client_id: str) -> ReplicaIdentity | None:
        """The identity in a member's client id; None for a client id of no replica."""
        parts = client_id.split("|")
        if len(parts) not in (3, 4) or parts[0] != MARK or not _NAME.fullmatch(parts[1]):
            return None
        fingerprint = parts[3] if len(parts) == 4 else None
        if fingerprint is not None and not _FINGERPRINT.fullmatch(fingerprint):
            return None
        url = parts[2] or None
        if url is not None and url_problem(url) is not None:
            url = None
        return cls(parts[1], url, fingerprint)


def replica_name_problem(name: str) -> str | None:
    """Why `name` cannot name a replica (None when it can)."""
    if _NAME.fullmatch(name):
        return None
    return "1 to 64 letters, digits, '.', '_' or '-'"


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a replica's base URL (None when it can): http(s), a host, and
    nothing after the authority but an optional path prefix."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        return str(error)
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    if not parts.hostname:
        return "it names no host"
    if parts.username is not None or parts.password is not None:
        return "credentials do not go in the URL"
    if parts.query or parts.fragment:
        return "it may have no query and no fragment"
    if "|" in url:
        return "it may not contain '|'"
    if port == 0:
        return "port 0 is not a port another replica can reach"
    return None
