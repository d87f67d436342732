"""New Kafka clients when the credential files their settings name are replaced.

librdkafka loads certificates, keys, CAs and (through `<property>.file`) passwords once, when
a client is made (offsetwatch/core/secret_files.py). A certificate renewed by cert-manager, a
key rotated by Vault or a SCRAM password changed in a mounted secret would otherwise reach
the exporter only at a restart: until then every new connection fails, and the daemon goes
stale as soon as a broker restarts or re-authentication comes due. The main loop asks every
second (`poll`, a few stat() calls on local files, no network), and on a change hands the new
settings to every part that holds a client: they swap it on their own threads.

A file caught half written (or settings librdkafka refuses) is said once and the clients keep
what they have; the files are looked at again on their next change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from offsetwatch.core.connection import ConnectionOptionError
from offsetwatch.core.secret_files import (
    Fingerprint,
    SecretFileError,
    fingerprint,
    watched_files,
)

log = logging.getLogger(__name__)

Settings = dict[str, object]


@dataclass(slots=True)
class CredentialWatch:
    """Which files the clients' settings depend on, and what they were when last used."""

    #: the settings of every client, `<property>.file` ones read at the call
    settings: Callable[[], Settings]
    #: refuses settings librdkafka cannot load (it loads the files when a client is made)
    check: Callable[[Mapping[str, object]], None]
    files: tuple[Path, ...]
    seen: Fingerprint
    #: the files' state whose settings were refused (said once)
    refused: Fingerprint | None = None
    #: how many times new settings were handed to the clients
    renewals_total: int = 0

    @classmethod
    def of(
        cls,
        raw: Mapping[str, object],
        settings: Callable[[], Settings],
        check: Callable[[Mapping[str, object]], None],
    ) -> CredentialWatch | None:
        """A watch over the files `raw` (the configured properties) names; None if none."""
        files = watched_files(raw)
        if not files:
            return None
        return cls(settings, check, files, fingerprint(files))

    def poll(self) -> Settings | None:
        """The new settings when a watched file changed and they load; None otherwise."""
        now = fingerprint(self.files)
        if now == self.seen or now == self.refused:
            return None
        changed = [
            path for (path, state), (_p, old) in zip(now, self.seen, strict=True) if state != old
        ]
        try:
            settings = self.settings()
            self.check(settings)
        except (SecretFileError, ConnectionOptionError) as error:
            self.refused = now
            log.warning(
                "Kafka credential files changed (%s) but cannot be used: %s; the clients keep "
                "the settings they have, and the files are read again when they next change",
                ", ".join(changed),
                error,
            )
            return None
        self.seen, self.refused = now, None
        self.renewals_total += 1
        log.info(
            "Kafka credential files changed (%s): the source readers, the log-end sampler "
            "and the publisher take new clients",
            ", ".join(changed),
        )
        return settings
