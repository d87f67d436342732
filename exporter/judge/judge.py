"""The judge: builds the snapshot that every reader serves from the main loop's state.

Pure (no I/O, no threads); the main loop calls `judge` on its schedule and publishes the
result, which HTTP threads then only read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from offsetwatch.exporter.judge.snapshot import EMPTY_SNAPSHOT, Snapshot, SnapshotBuilder
from offsetwatch.exporter.state.store import StateStore
from offsetwatch.exporter.stats import Freshness


@dataclass(slots=True)
class Judge:
    builder: SnapshotBuilder
    #: the status window (ms) the state's windows roll by
    window_ms: int
    #: the latest snapshot, served until the next one replaces it
    snapshot: Snapshot = EMPTY_SNAPSHOT

    def judge(
        self,
        store: StateStore,
        now_ms: int,
        ready: bool,
        freshness: Freshness | None = None,
        share_freshness: Freshness | None = None,
    ) -> Snapshot:
        """The snapshot of `store` at `now_ms`: a full one when `ready`, else the
        counters-only one of a catch-up (no rows, lag, status nor diagnosis: nothing shows
        them before ready); `freshness` says which groups' state the cluster confirmed, and
        `share_freshness` which share partitions' state (`__share_group_state`)."""
        store.offsets.roll_windows(now_ms, self.window_ms)
        store.share.roll_windows(now_ms, self.window_ms)
        share_errors = {"undecodable": sum(store.share_ingestor.decode_errors.values())}
        if not ready:
            snapshot = self.builder.catching_up(
                store.offsets, now_ms, share=store.share, share_errors=share_errors
            )
        else:
            snapshot = self.builder.build(
                store.offsets,
                store.histories,
                now_ms,
                True,
                share=store.share,
                share_errors=share_errors,
                topic_names=store.topic_names.names,
                denied_topics=store.denied_topics,
                share_state_refused=store.share_state_refused,
                catching_up=store.catching_up,
                owned=store.owned,
            )
            # KIP-848 assignments name topics by id (4.1+): the sampler looks the unnamed up
            store.topic_names.publish_unknown_assigned(self.builder.views.take_unnamed())
        if freshness is not None:
            snapshot = replace(snapshot, freshness=freshness)
        if share_freshness is not None:
            snapshot = replace(snapshot, share_freshness=share_freshness)
        self.snapshot = snapshot
        return snapshot
