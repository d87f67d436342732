"""Which partition leaders the log-end sampler leaves alone for a while, and why.

librdkafka's AdminClient, asked ListOffsets for a partition whose leader is down but still
named by the metadata (a killed broker, for the ~9 s until the controller fences it; forever
when the cluster has lost its quorum), reconnects to that broker in a loop without backoff
until the request times out: a whole core for `request_timeout`, every sampling round
(measured on a 3-node cluster: 90-116% of a core with one or two nodes down, 1% without the
dead leader in the request). So a leader that answered none of its partitions is not asked
again for a while (5 s, doubling up to 60 s); then it is probed with a short timeout, and
asked as before once it answers or the metadata names another leader. Its partitions keep
their last known log end (with its age) meanwhile, as for any partition without an answer.

Pure: the sampler feeds it each round's outcome and the monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_DELAY_S = 5.0
MAX_DELAY_S = 60.0
#: a leader that is back answers ListOffsets in milliseconds; one still down costs a core
#: for as long as the probe waits
PROBE_TIMEOUT_S = 3.0


@dataclass(slots=True)
class _Silence:
    failures: int
    retry_at: float


@dataclass(slots=True)
class LeaderBackoff:
    """Leaders (broker ids) that answered nothing, and when each is asked again."""

    first_delay_s: float = FIRST_DELAY_S
    max_delay_s: float = MAX_DELAY_S
    _silent: dict[int, _Silence] = field(default_factory=dict)

    def plan(self, leader: int, now: float) -> str:
        """ "ask" (as usual), "probe" (backoff over: ask with a short timeout) or "skip"."""
        silence = self._silent.get(leader)
        if silence is None:
            return "ask"
        return "probe" if now >= silence.retry_at else "skip"

    def retry_in_s(self, leader: int, now: float) -> float:
        silence = self._silent.get(leader)
        return 0.0 if silence is None else max(0.0, silence.retry_at - now)

    def silent(self, leader: int, now: float) -> float:
        """`leader` answered none of its partitions: the delay until it is asked again."""
        silence = self._silent.get(leader)
        failures = 1 if silence is None else silence.failures + 1
        delay = min(self.max_delay_s, self.first_delay_s * 2.0 ** (failures - 1))
        self._silent[leader] = _Silence(failures, now + delay)
        return delay

    def answered(self, leader: int) -> bool:
        """`leader` answered: True if it had been silent."""
        return self._silent.pop(leader, None) is not None

    def keep_only(self, leaders: set[int]) -> None:
        """Forget leaders the metadata no longer names for any sampled partition."""
        for leader in [known for known in self._silent if known not in leaders]:
            del self._silent[leader]

    @property
    def silent_leaders(self) -> tuple[int, ...]:
        return tuple(sorted(self._silent))
