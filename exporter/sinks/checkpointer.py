"""The checkpoint as a sink of the exporter's own progress: restore at start, save on the main
loop's schedule, and the health that /readyz and `offsetwatch_sink_up{sink="checkpoint"}`
show while saving fails (exporter/sinks/checkpoint.py holds the file format)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.sinks.checkpoint import (
    CheckpointError,
    CheckpointMeta,
    CheckpointNotFound,
    load_checkpoint,
    save_checkpoint,
)
from offsetwatch.exporter.state.share_state import ShareStateStore
from offsetwatch.exporter.state.store import StateStore
from offsetwatch.exporter.stats import PipelineStats, SinkHealth

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class Restored:
    """Where a restored checkpoint left off."""

    positions: dict[int, int]
    cluster_id: str | None
    #: per position, when the sinks could first have taken a record after it
    resume_since_ms: dict[int, int] | None
    share_positions: dict[int, int] | None


class Checkpointer:
    """Saves and restores `StateStore` and the positions (main loop only)."""

    def __init__(
        self, config: ExporterConfig, stats: PipelineStats, clock_ms: Callable[[], int]
    ) -> None:
        self.config = config
        self.path = None if config.checkpoint_path is None else Path(config.checkpoint_path)
        self.stats = stats
        self.clock_ms = clock_ms
        self.health = SinkHealth("checkpoint")
        self._next_log = 0.0

    def meta(self, cluster_id: str | None) -> CheckpointMeta:
        return CheckpointMeta.for_cluster(
            self.config.offsets_topic, cluster_id, self.config.bootstrap_servers
        )

    def restore(self, store: StateStore) -> Restored | None:
        """Load the checkpoint into `store`; None (and `store` untouched) without one."""
        path = self.path
        if path is None:
            return None
        try:
            loaded = load_checkpoint(path, expect=self.meta(None), codec=store.codec)
        except CheckpointNotFound:
            log.info(
                "no checkpoint at %s: reading %s from the start", path, self.config.offsets_topic
            )
            return None
        except CheckpointError as error:
            log.warning("%s; rebuilding the state from the start of the topic", error)
            return None
        share_positions: dict[int, int] | None = None
        share: ShareStateStore | None = None
        if loaded.share_state is not None:
            # absent from checkpoints written before share groups: read that topic anew
            share = ShareStateStore.from_json(loaded.share_state["store"])
            share_positions = {int(p): int(o) for p, o in loaded.share_state["positions"].items()}
        store.restore(loaded.state.groups, loaded.positions, share, share_positions)
        log.info(
            "resumed from checkpoint %s: %d groups, %d partitions of %s",
            path,
            len(store.offsets.groups),
            len(loaded.positions),
            self.config.offsets_topic,
        )
        return Restored(
            dict(loaded.positions),
            loaded.meta.cluster_id,
            loaded.resume_since_ms,
            share_positions,
        )

    def save(
        self,
        store: StateStore,
        positions: Callable[[], dict[int, int]],
        since_bounds: Callable[[dict[int, int]], dict[int, int]],
        cluster_id: str | None,
    ) -> bool:
        """Save; False (logged, counted, retried at the next interval) when it failed.
        `positions` gives the positions every sink has taken (it may raise: a sink that
        cannot be made durable fails the checkpoint), `since_bounds` their resume bounds."""
        path = self.path
        if path is None:
            return True
        started = time.perf_counter()
        try:
            capped = positions()
            path.parent.mkdir(parents=True, exist_ok=True)
            save_checkpoint(
                path,
                store.offsets,
                capped,
                meta=self.meta(cluster_id),
                codec=store.codec,
                resume_since_ms=since_bounds(capped),
                share_state={
                    "positions": {str(p): o for p, o in store.share_positions.items()},
                    "store": store.share.to_json(),
                },
            )
        except Exception as error:
            self._failed(path, error)
            return False
        if self.health.failing_since_ms:
            log.warning("checkpoint to %s works again", path)
            self.health.failing_since_ms = 0
        self.stats.checkpoint_duration_s = time.perf_counter() - started
        self.stats.checkpoint_time_ms = self.clock_ms()
        return True

    def _failed(self, path: Path, error: Exception) -> None:
        health = self.health
        health.errors_total += 1
        health.last_error = f"{type(error).__name__}: {error}"
        first = not health.failing_since_ms
        if first:
            health.failing_since_ms = self.clock_ms()
        now = time.monotonic()
        if first or now >= self._next_log:
            log.error(
                "checkpoint to %s failed: %s; retried every %g s (a restart meanwhile "
                "rebuilds the state from the start of %s: slower, nothing lost); check that "
                "the path is a writable file on a disk with free space",
                path,
                health.last_error,
                self.config.checkpoint_interval_s,
                self.config.offsets_topic,
            )
            self._next_log = now + 60.0
