"""A part on its own thread is restarted with backoff when it fails, and says so."""

from __future__ import annotations

import threading

from offsetwatch.exporter.supervisor import Supervised
from tests.exporter.daemon_helpers import wait_for


def test_a_failing_round_is_run_again_and_its_health_shows_the_outage() -> None:
    outcomes = [RuntimeError("broker gone"), RuntimeError("still gone"), None]
    ran = threading.Event()
    failing_seen: list[bool] = []
    supervised: Supervised

    def round_() -> None:
        failing_seen.append(not supervised.health.up)
        outcome = outcomes.pop(0) if outcomes else None
        if outcome is not None:
            raise outcome
        ran.set()
        supervised.stopping.wait(0.01)

    supervised = Supervised("test-part", round_, backoff_min_s=0.01, backoff_max_s=0.02)
    supervised.start()
    try:
        wait_for(ran.is_set, "a round that works after two failures")
        wait_for(lambda: supervised.health.up, "the health cleared by the round that worked")
    finally:
        assert supervised.stop(5)
    health = supervised.health
    assert health.restarts_total == 2
    assert health.last_error == "RuntimeError: still gone"
    # the second and third rounds ran while the part counted as failing
    assert failing_seen[:3] == [False, True, True]
