"""What every part that holds a Kafka client needs: a config safe to log, and when to give a
client up for a new one. Shared by the sources, the sampler and the publisher.

Secrets: `redact` masks every property whose name holds a secret marker, and callables.

Broker addresses: whether a librdkafka client still knows where a broker is, from its
statistics reports.

librdkafka (2.16) forgets every broker that a metadata answer leaves out, bootstrap ones
included. A broker that was hung (SIGSTOP, a long GC pause, a frozen VM) leaves itself out of
its answers for the moment its KRaft controller fences it once it runs again (its session
timed out meanwhile; it is unfenced a few tens of ms later). A client whose metadata request
lands in that moment keeps no broker with an address: a consumer keeps only the group
coordinator's stand-in, with an empty node name, a producer or admin client nothing at all.
librdkafka bootstraps again only when a connection it still has goes down, so such a client
never connects again. The remedy is a new client; this module says when one is needed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

# Substrings of librdkafka property names whose values are secrets. Matching by substring also
# covers the variants (ssl.keystore.password, sasl.oauthbearer.client.secret, ...).
_SECRET_MARKERS = ("password", "secret", "sasl.jaas", "oauthbearer.config", "token", "key.pem")
REDACTED = "[redacted]"


def redact(config: Mapping[str, object]) -> dict[str, object]:
    """A copy of a librdkafka config that is safe to log: secrets and callables masked."""
    safe: dict[str, object] = {}
    for key, value in config.items():
        lowered = key.lower()
        if any(marker in lowered for marker in _SECRET_MARKERS):
            safe[key] = REDACTED
        elif callable(value) or isinstance(value, logging.Logger):
            # Callbacks and loggers are not config values an operator can act on; their repr
            # could drag in closures with secrets.
            safe[key] = f"<{type(value).__name__}>"
        else:
            safe[key] = value
    return safe


#: statistics reports in a row without a broker address after which a client is given up
#: on: a single report can fall between librdkafka forgetting the brokers and bootstrapping
#: again after a connection went down
ADDRESSLESS_AFTER_REPORTS = 2


def has_broker_address(brokers: Mapping[str, Any]) -> bool:
    """Whether any broker handle of a statistics report (its `brokers` object) has an
    address. A handle without a `nodename` field counts as having one: only librdkafka's
    own empty name says it has none."""
    return any(b.get("nodename", "?") for b in brokers.values() if isinstance(b, Mapping))


class AddressWatch:
    """Counts statistics reports in a row in which a client had no broker address."""

    __slots__ = ("after", "reports")

    def __init__(self, after: int = ADDRESSLESS_AFTER_REPORTS) -> None:
        self.after = after
        self.reports = 0

    def observe(self, brokers: Mapping[str, Any]) -> bool:
        """Count one report's broker handles; True once the client is to be replaced."""
        if has_broker_address(brokers):
            self.reports = 0
            return False
        self.reports += 1
        return self.reports >= self.after

    def observe_json(self, stats_json: str) -> bool:
        """`observe` for a raw statistics report; an unreadable one changes nothing."""
        try:
            stats = json.loads(stats_json)
        except ValueError:
            return False
        brokers = stats.get("brokers") if isinstance(stats, dict) else None
        return self.observe(brokers) if isinstance(brokers, dict) else False

    def reset(self) -> None:
        self.reports = 0


class ClientGenerations:
    """Which client of a series replacing each other librdkafka's callbacks belong to: one
    given up on may still call them while it closes, and must not count."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current = 0

    def callbacks(self, **callbacks: Callable[[Any], None]) -> dict[str, Callable[[Any], None]]:
        """The callbacks (by librdkafka property name) for a client of the current
        generation: each does nothing once `advance` has been called."""
        generation = self.current

        def guarded(callback: Callable[[Any], None]) -> Callable[[Any], None]:
            def call(argument: Any) -> None:
                if generation == self.current:
                    callback(argument)

            return call

        return {name: guarded(callback) for name, callback in callbacks.items()}

    def advance(self) -> None:
        self.current += 1
