"""One replica's part in its fleet: who it is, how its source joins the fleet's group, and the
fleet view it keeps up to date on a thread of its own (a part of the exporter,
exporter/supervisor.py)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ResourceType,
)

from offsetwatch.exporter.config import ConfigError, ExporterConfig
from offsetwatch.exporter.fleet.identity import ReplicaIdentity
from offsetwatch.exporter.fleet.membership import (
    REBALANCE_PROTOCOLS,
    GroupMembership,
    membership,
    rebalance_protocols,
)
from offsetwatch.exporter.fleet.sink_commits import is_sink_commit
from offsetwatch.exporter.fleet.view import REFRESH_S, FleetMember, FleetView, FleetWatch
from offsetwatch.exporter.stats import PartHealth
from offsetwatch.exporter.supervisor import Supervised

log = logging.getLogger(__name__)

#: how long one description of the fleet's group may take
DESCRIBE_TIMEOUT_S: Final = 5.0
#: how long the start-up check that the fleet's group is no application's may take: a
#: cluster that does not answer is the source's readiness to report, not a reason to hang
NAME_CHECK_TIMEOUT_S: Final = 5.0

#: the settings that change what a replica exports, or the values it exports: every replica
#: of a fleet must have the same, else the fleet's union mixes two exports (a group filtered
#: out by one replica and kept by another shows or not depending on which holds it)
FINGERPRINTED: Final = (
    "offsets_topic",
    "cluster_name",
    "granularity",
    "group_allow",
    "group_deny",
    "topic_allow",
    "topic_deny",
    "kafka_lag_exporter_aliases",
    "status_window_s",
    "warn_min_growth_ratio",
    "storm_rebalances",
    "rebalance_grace_s",
)


def coordinator_protocols(admin: Any, timeout_s: float) -> frozenset[str] | None:
    """The group protocols a broker's coordinator runs (`REBALANCE_PROTOCOLS`), asked of the
    lowest broker id; None where the broker has no such setting (before 3.7). Raises what the
    Admin API raises (DescribeConfigs on the cluster refused, no answer)."""
    brokers = sorted(admin.list_topics(timeout=timeout_s).brokers)
    if not brokers:
        return None
    resource = ConfigResource(ResourceType.BROKER, str(brokers[0]))
    entries = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(
        timeout_s
    )
    entry = entries.get(REBALANCE_PROTOCOLS)
    return rebalance_protocols(None if entry is None else entry.value)


class FleetNameTaken(ConfigError):
    """The fleet's group id is a real application's consumer group: joining it would take
    partitions from that application (or it would take ours)."""


def settings_fingerprint(config: ExporterConfig) -> str:
    """12 hex digits of SHA-256 over the FINGERPRINTED settings as canonical JSON: short
    enough for the client id, long enough that two different settings never look alike."""
    chosen = {name: getattr(config, name) for name in FINGERPRINTED}
    text = json.dumps(chosen, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def replica_identity(config: ExporterConfig, tls: bool) -> ReplicaIdentity:
    """--fleet-replica and --fleet-url, or the host name and http(s)://HOST:--http-port;
    with the fingerprint of the settings that change what it exports."""
    host = socket.gethostname() or "localhost"
    name = config.fleet_replica or host.split(".")[0]
    url = config.fleet_url or f"{'https' if tls else 'http'}://{host}:{config.http_port}"
    return ReplicaIdentity(name, url.rstrip("/"), settings_fingerprint(config))


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
        self.watch = FleetWatch(
            config.fleet, config.offsets_topic, self._describe, partition_count, me=identity
        )
        self.health = PartHealth("fleet_view")
        self._part = Supervised("fleet_view", self._round, health=self.health)

    @property
    def view(self) -> FleetView:
        return self.watch.view

    def mismatched(self) -> tuple[FleetMember, ...]:
        """The replicas that export with other settings than this one, as last described."""
        return self.view.mismatched(self.identity.fingerprint)

    def start(self) -> None:
        self._part.start()

    def check_name_free(self, timeout_s: float = NAME_CHECK_TIMEOUT_S) -> None:
        """Refuse a fleet whose group id an application uses: the group has members that are
        no offsetwatch replica, or committed offsets other than the fleet's own sink commits
        (exporter/fleet/sink_commits.py: their metadata says so). Raises
        FleetNameTaken with one line naming the group; a question Kafka does not answer
        within `timeout_s` is one WARNING, and the start goes on."""
        try:
            taken = self._application_in_group(timeout_s)
        except (KafkaException, concurrent.futures.TimeoutError, OSError, ValueError) as error:
            log.warning(
                "fleet %s: could not check within %g s that no application uses the "
                "consumer group %s (%s); starting anyway",
                self.fleet,
                timeout_s,
                self.fleet,
                _error_text(error),
            )
            return
        if taken is not None:
            raise FleetNameTaken(
                f"--fleet {self.fleet}: the consumer group {self.fleet!r} is used by an "
                f"application ({taken}); a replica would join it and take partitions of "
                "__consumer_offsets as that application's member. Choose another --fleet name"
            )

    def choose_protocol(self, timeout_s: float = NAME_CHECK_TIMEOUT_S) -> None:
        """With `--fleet-protocol auto`: join with the classic protocol where a broker says
        its coordinator runs no KIP-848 groups (exporter/fleet/membership.py says why the
        error alone is not enough). A question Kafka does not answer leaves the choice to
        the broker's error, with one INFO line."""
        if self.membership.protocol != "consumer" or not self.membership.may_fall_back:
            return
        try:
            protocols = coordinator_protocols(self._admin_client(), timeout_s)
        except (KafkaException, concurrent.futures.TimeoutError, OSError, ValueError) as error:
            log.info(
                "fleet %s: could not ask a broker for %s (%s): joining with KIP-848, and "
                "with the classic protocol if the broker refuses it",
                self.fleet,
                REBALANCE_PROTOCOLS,
                _error_text(error),
            )
            return
        chosen = self.membership.for_broker(protocols)
        if chosen is not self.membership:
            log.info(
                "fleet %s: the brokers' group coordinator runs %s, no KIP-848 groups: joining "
                "with the classic protocol (cooperative-sticky)",
                self.fleet,
                ",".join(sorted(protocols or ())),
            )
            self.membership = chosen

    def _application_in_group(self, timeout_s: float) -> str | None:
        """What shows that an application uses the fleet's group (None: nothing does)."""
        admin = self._admin_client()
        deadline = time.monotonic() + timeout_s
        request_timeout = max(1.0, timeout_s - 0.5)
        described = admin.describe_consumer_groups([self.fleet], request_timeout=request_timeout)
        try:
            description = described[self.fleet].result(timeout=_left(deadline))
        except KafkaException as error:
            if not _not_found(error):
                raise
        else:
            strangers = sorted(
                {
                    str(m.client_id)
                    for m in description.members
                    if ReplicaIdentity.parse(str(m.client_id)) is None
                }
            )
            if strangers:
                return f"members with client ids {', '.join(map(repr, strangers[:5]))}" + (
                    f" and {len(strangers) - 5} more" if len(strangers) > 5 else ""
                )
        # asked only once the description answered: with both requests in flight, a
        # describe refused at once (a broker still loading its coordinators) was followed by a
        # segfault in librdkafka's main thread (reproduced twice on a fresh broker)
        offsets = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(self.fleet)], request_timeout=request_timeout
        )
        try:
            committed = offsets[self.fleet].result(timeout=_left(deadline))
        except KafkaException as error:
            if _not_found(error):
                return None
            raise
        held = [
            tp
            for tp in committed.topic_partitions or ()
            if tp.offset >= 0 and not is_sink_commit(tp.metadata)
        ]
        if held:
            topics = sorted({tp.topic for tp in held})
            return f"offsets committed on {len(held)} partition(s) of {', '.join(topics[:5])}"
        return None

    def _admin_client(self) -> Any:
        if self._admin is None:
            settings: dict[str, Any] = {
                **self._kafka_config(),
                "client.id": f"offsetwatch-fleet-view-{self.fleet}",
            }
            self._admin = AdminClient(settings)
        return self._admin

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
        admin = self._admin_client()
        futures = admin.describe_consumer_groups([fleet], request_timeout=DESCRIBE_TIMEOUT_S)
        description = futures[fleet].result(timeout=DESCRIBE_TIMEOUT_S + 5)
        state = getattr(description.state, "name", str(description.state))
        return state, list(description.members)


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


def _not_found(error: KafkaException) -> bool:
    """The group does not exist (a KIP-848 describe of an unknown group says so; the classic
    one answers a Dead group with no members, which needs no special case)."""
    err = error.args[0] if error.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND


def _error_text(error: BaseException) -> str:
    if isinstance(error, concurrent.futures.TimeoutError):
        return "no answer"
    err = error.args[0] if error.args else None
    return err.str() if isinstance(err, KafkaError) else str(error) or type(error).__name__
