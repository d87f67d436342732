"""The sinks of a fleet replica, exactly once across its partitions' owners
(exporter/fleet/sink_commits.py has the commits and why; docs/fleet.md the whole story).

`FleetSinks` wraps the replica's `RecordSinks` (main loop only):

* `gain`: partitions the group gave this replica, with their sink commits. Every record
  below a commit is skipped (the earlier owners' sinks have it), and what the sinks took at
  or after it since its bound is read back at once - the publish and dead-letter topics by
  their `offsetwatch.source.*` headers, and every replica's archive files under
  `--archive-dir` (each replica writes under its own name) - to skip those records too;
* `hand_over`: the group revokes partitions: nothing more of them is written, the producer
  is flushed, and the commits their next owner starts from are returned;
* `commits`: the periodic (and final) commits of the partitions owned.

It drives `RecordSinks` by its own methods (`put`, `checkpoint_positions`, `since_bounds`)
and by the two skip sets, whose floors and closed partitions (`SkipSet.floor`, `close`)
make every write path of `RecordSinks` skip what is not this replica's to write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from offsetwatch.exporter.fleet.sink_commits import SinkCommit
from offsetwatch.exporter.sinks.record_sinks import RecordSinks, SinkPartition
from offsetwatch.exporter.sinks.resume_dedup import (
    PartitionMarks,
    SkipSet,
    scan_archive,
    scan_topics,
)

log = logging.getLogger(__name__)


def archive_dirs(root: Path) -> list[Path]:
    """Every replica's archive under `root` (each replica's own subdirectory, and the root
    itself for files an exporter alone wrote there)."""
    dirs = [root]
    try:
        dirs += sorted(
            p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("date=", "."))
        )
    except OSError as error:
        log.warning("cannot list %s for the replicas' archives: %s", root, error)
    return dirs


@dataclass(slots=True)
class FleetSinks:
    """See the module doc."""

    sinks: RecordSinks
    #: --archive-dir: every replica's archive is under it, each in its own subdirectory
    archive_root: Path | None = None
    #: per partition gained, the commit it came with: this owner's commits never move back
    #: behind it (the records below it were skipped, not written)
    _gained: dict[int, SinkCommit] = field(default_factory=dict)
    #: records already written that the gains' scans found, in all
    found_published: int = 0
    found_archived: int = 0
    last_scan_s: float = 0.0

    def _skips(self) -> tuple[SkipSet, SkipSet]:
        # the sets RecordSinks keeps for its whole life (a fleet replica never replaces them:
        # it runs no start-up read-back, exporter/daemon.py)
        sinks = self.sinks
        return sinks._published_skip, sinks._archived_skip

    def gain(
        self,
        commits: tuple[SinkCommit, ...],
        kafka_config: dict[str, object],
        cluster_id: str | None,
    ) -> None:
        """Partitions gained with their sink commits (see the module doc). Waits on Kafka
        (at most the scan's timeout) before the batch that brought the gain is ingested: a
        gain is rare, and nothing of those partitions may be written before it is known."""
        if not commits:
            return
        started = time.monotonic()
        sinks = self.sinks
        config = sinks.config
        positions = {c.partition: c.offset for c in commits}
        since = min(c.since_ms for c in commits)
        published: set[tuple[int, int]] = set()
        if sinks.publisher is not None:
            topics = [sinks.publisher.output_topic]
            if config.publish_dlq_topic is not None:
                topics.append(config.publish_dlq_topic)
            published = scan_topics(
                kafka_config,
                topics,
                positions,
                since,
                source_topic=config.offsets_topic,
                cluster_id=cluster_id,
                values_of=sinks.values_of(),
            )
        archived: set[tuple[int, int]] = set()
        if sinks.archive is not None and self.archive_root is not None:
            for directory in archive_dirs(self.archive_root):
                archived |= scan_archive(directory, positions, since)
        published_skip, archived_skip = self._skips()
        for commit in commits:
            partition = commit.partition
            self._gained[partition] = commit
            mine_published = frozenset(o for p, o in published if p == partition)
            mine_archived = frozenset(o for p, o in archived if p == partition)
            last = max(mine_published | mine_archived, default=None)
            # the commit's bound comes along as the oldest mark, and the records found keep it
            # until the commits pass them (as after a crash: SinceMarks.found)
            marks = PartitionMarks(
                commit.since_ms, (), None if last is None else (last, commit.since_ms)
            )
            sinks.take(partition)  # nothing of an earlier time of ours stays
            sinks.put(SinkPartition(partition, marks, mine_published, mine_archived))
            published_skip.floor(partition, commit.offset)
            archived_skip.floor(partition, commit.offset)
        found_published = sum(1 for p, _ in published if p in positions)
        found_archived = sum(1 for p, _ in archived if p in positions)
        self.found_published += found_published
        self.found_archived += found_archived
        self.last_scan_s = time.monotonic() - started
        log.info(
            "partitions gained: their sinks had reached %s; after that %d records were "
            "already published and %d archived (read back in %.1f s): none is written twice",
            positions,
            found_published,
            found_archived,
            self.last_scan_s,
        )

    def close(self, partitions: set[int] | tuple[int, ...]) -> None:
        """Write nothing more of `partitions` (handed over, or lost)."""
        for skip in self._skips():
            for partition in partitions:
                skip.close(partition)

    def hand_over(
        self,
        partitions: tuple[int, ...],
        positions: Mapping[int, int],
        next_to_read: dict[int, int],
        timeout_s: float,
    ) -> list[SinkCommit]:
        """The group revokes `partitions`: write nothing more of them, wait (at most
        `timeout_s`) for the producer's deliveries, and return the commits their next owner
        starts from."""
        self.close(partitions)
        publisher = self.sinks.publisher
        if publisher is not None:
            still = publisher.flush(timeout_s)
            if still:
                log.warning(
                    "handing over partitions %s: %d deliveries still unconfirmed after %g s; "
                    "the commit stays before them and the next owner writes them",
                    list(partitions),
                    still,
                    timeout_s,
                )
        held = {p: positions[p] for p in partitions if p in positions}
        commits = self.commits(held, next_to_read)
        for partition in partitions:
            self._gained.pop(partition, None)
        return commits

    def commits(
        self, positions: Mapping[int, int], next_to_read: dict[int, int]
    ) -> list[SinkCommit]:
        """What to commit for `positions` (the positions read): each capped where a sink has
        not surely taken every record before it, with its resume bound; none for a partition
        not past the commit it was gained with (that commit stands)."""
        if not positions:
            return []
        capped = self.sinks.checkpoint_positions(dict(positions))
        bounds = self.sinks.since_bounds(capped, next_to_read)
        out: list[SinkCommit] = []
        for partition, position in sorted(capped.items()):
            gained = self._gained.get(partition)
            if gained is not None and position <= gained.offset:
                continue
            out.append(SinkCommit(partition, position, bounds[partition]))
        return out

    def lost(self, partition: int) -> None:
        """The partition is gone (the daemon dropped it)."""
        self._gained.pop(partition, None)
