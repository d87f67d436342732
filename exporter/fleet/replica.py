"""One replica's part in its fleet: who it is, how its source joins the fleet's group, and the
fleet view it keeps up to date on a thread of its own (a part of the exporter,
exporter/supervisor.py)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka.admin import AdminClient

from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.fleet.identity import ReplicaIdentity
from offsetwatch.exporter.fleet.membership import GroupMembership, membership
from offsetwatch.exporter.fleet.view import REFRESH_S, FleetView, FleetWatch
from offsetwatch.exporter.stats import PartHealth
from offsetwatch.exporter.supervisor import Supervised

log = logging.getLogger(__name__)

#: how long one description of the fleet's group may take
DESCRIBE_TIMEOUT_S: Final = 5.0


def replica_identity(config: ExporterConfig, tls: bool) -> ReplicaIdentity:
    """--fleet-replica and --fleet-url, or the host name and http(s)://HOST:--http-port."""
    host = socket.gethostname() or "localhost"
    name = config.fleet_replica or host.split(".")[0]
    url = config.fleet_url or f"{'https' if tls else 'http'}://{host}:{config.http_port}"
    return ReplicaIdentity(name, url.rstrip("/"))


class FleetPart:
    """The replica's identity and membership, and the fleet view (`view`), described every
    REFRESH_S by an admin client of its own on the part's thread."""

    def __init__(
        self,
        config: ExporterConfig,
        identity: ReplicaIdentity,
        kafka_config: Callable[[], Mapping[str, object]],
        partition_count: Callable[[], int],
    ) -> None:
        assert config.fleet is not None
        self.fleet = config.fleet
        self.identity = identity
        self.membership: GroupMembership = membership(
            config.fleet, identity.client_id(), config.fleet_protocol
        )
        self._kafka_config = kafka_config
        self._admin: Any = None
        self.watch = FleetWatch(config.fleet, config.offsets_topic, self._describe, partition_count)
        self.health = PartHealth("fleet_view")
        self._part = Supervised("fleet_view", self._round, health=self.health)

    @property
    def view(self) -> FleetView:
        return self.watch.view

    def start(self) -> None:
        self._part.start()

    def stop(self) -> None:
        self._part.stop()

    def renew(self) -> None:
        """New client settings (credentials rotated): the next description makes a new
        admin client."""
        self._admin = None

    def _round(self) -> None:
        self.watch.refresh()
        self._part.stopping.wait(REFRESH_S)

    def _describe(self, fleet: str) -> tuple[str, list[Any]]:
        if self._admin is None:
            settings: dict[str, Any] = {
                **self._kafka_config(),
                "client.id": f"offsetwatch-fleet-view-{fleet}",
            }
            self._admin = AdminClient(settings)
        futures = self._admin.describe_consumer_groups([fleet], request_timeout=DESCRIBE_TIMEOUT_S)
        description = futures[fleet].result(timeout=DESCRIBE_TIMEOUT_S + 5)
        state = getattr(description.state, "name", str(description.state))
        return state, list(description.members)
