"""The lake's bookkeeping: which input was compacted, and crash-safe publication of new files.

Everything lives in `LAKE/_offsetwatch/` (Spark and Hive skip names starting with `_`):

    manifest.json            input files done (path -> size, mtime), the current group state
    staging/<run>/           a run's Parquet output before publication
    commit-<run>.json        the commit record: the renames that publish the run, new manifest
    group_state/<run>/       per-group state the next run's group events continue from

A run writes everything to `staging/<run>/`, then writes its commit record atomically: that
is the commit point. Publication renames every staged file into `LAKE/<table>/date=.../`
(names carry the run id, so they never collide), writes the new manifest, and deletes the
commit record. A crash before the commit record leaves only staging, deleted at the next
start (roll back); a crash after it is finished at the next start (roll forward: the renames
still to do are done, those done are skipped). The lake therefore never holds half a run
and never a run twice.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from offsetwatch.core.atomic import write_text_atomic

BOOKKEEPING: Final = "_offsetwatch"
MANIFEST: Final = "manifest.json"
STAGING: Final = "staging"
GROUP_STATE: Final = "group_state"
_COMMIT_PREFIX: Final = "commit-"
_FORMAT_VERSION: Final = 1


class LakeError(ValueError):
    """The lake's bookkeeping cannot be used; the message names the file and what to do."""


@dataclass(frozen=True, slots=True)
class InputFile:
    path: str
    size: int
    mtime_ns: int


@dataclass(slots=True)
class Manifest:
    #: absolute path -> [size, mtime_ns] of every input file already in the lake
    files: dict[str, list[int]] = field(default_factory=dict)
    #: the group_state/<run> directory holding the current group state, if any
    group_state: str | None = None
    runs: int = 0

    def is_done(self, item: InputFile) -> bool:
        return self.files.get(item.path) == [item.size, item.mtime_ns]

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": _FORMAT_VERSION,
                "runs": self.runs,
                "group_state": self.group_state,
                "files": self.files,
            },
            indent=1,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        return cls(
            files={k: list(v) for k, v in data["files"].items()},
            group_state=data.get("group_state"),
            runs=int(data.get("runs", 0)),
        )


def _is_hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def stat_files(paths: Iterable[Path]) -> list[InputFile]:
    """What the manifest records of input files, sorted by path."""
    out = []
    for item in sorted({p.resolve() for p in paths}):
        stat = item.stat()
        out.append(InputFile(str(item), stat.st_size, stat.st_mtime_ns))
    return out


@dataclass(frozen=True, slots=True)
class Lake:
    root: Path

    @property
    def bookkeeping(self) -> Path:
        return self.root / BOOKKEEPING

    def table(self, name: str) -> Path:
        return self.root / name

    def has_table(self, name: str) -> bool:
        table = self.table(name)
        return table.is_dir() and any(table.rglob("*.parquet"))

    def manifest(self) -> Manifest:
        """The lake's manifest (empty for a new lake); LakeError naming the file when it
        cannot be read or is not one."""
        path = self.bookkeeping / MANIFEST
        if not path.exists():
            return Manifest()
        try:
            return Manifest.from_json(path.read_text("utf-8"))
        except OSError as error:
            raise LakeError(f"cannot read the lake's manifest {path}: {error.strerror}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            # ValueError covers JSON and UTF-8 errors: a cut or edited file
            raise LakeError(
                f"the lake's manifest {path} is damaged ({type(error).__name__}: {error}); it "
                "records which inputs the lake holds: restore it from a backup, or compact "
                "into a new --lake"
            ) from None

    def group_state_path(self, manifest: Manifest) -> Path | None:
        if manifest.group_state is None:
            return None
        return self.bookkeeping / GROUP_STATE / manifest.group_state

    def recover(self) -> list[str]:
        """Finish committed runs, drop uncommitted ones; returns what was done (one line each)."""
        done: list[str] = []
        book = self.bookkeeping
        if not book.is_dir():
            return done
        for record in sorted(book.glob(f"{_COMMIT_PREFIX}*.json")):
            run = Run(self, record.stem[len(_COMMIT_PREFIX) :])
            run.publish(json.loads(record.read_text("utf-8")))
            done.append(f"finished run {run.run_id} that was interrupted after its commit")
        staging = book / STAGING
        if staging.is_dir():
            for leftover in sorted(staging.iterdir()):
                shutil.rmtree(leftover, ignore_errors=True)
                done.append(f"dropped uncommitted run {leftover.name}")
        current = self.manifest().group_state
        states = book / GROUP_STATE
        if states.is_dir():
            for old in states.iterdir():
                if old.name != current:  # a crash between the manifest switch and the cleanup
                    shutil.rmtree(old, ignore_errors=True)
        return done

    def new_run(self) -> Run:
        run_id = f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"
        return Run(self, run_id)


@dataclass(frozen=True, slots=True)
class Run:
    """One compaction run: staged output, then an atomic commit."""

    lake: Lake
    run_id: str

    @property
    def staging(self) -> Path:
        return self.lake.bookkeeping / STAGING / self.run_id

    def staged_table(self, name: str) -> Path:
        return self.staging / name

    def _commit_record(self) -> Path:
        return self.lake.bookkeeping / f"{_COMMIT_PREFIX}{self.run_id}.json"

    def _moves(self, tables: Iterable[str]) -> list[list[str]]:
        moves: list[list[str]] = []
        for table in tables:
            staged = self.staged_table(table)
            if not staged.is_dir():
                continue
            for directory, dirnames, filenames in os.walk(staged):
                dirnames[:] = [d for d in dirnames if not _is_hidden(d)]
                for name in sorted(filenames):
                    if _is_hidden(name) or not name.endswith(".parquet"):
                        continue
                    source = Path(directory) / name
                    relative = source.parent.relative_to(staged)
                    target = self.lake.table(table) / relative / f"{self.run_id}-{name}"
                    moves.append([str(source), str(target)])
        state = self.staged_table(GROUP_STATE)
        if state.is_dir():
            target = self.lake.bookkeeping / GROUP_STATE / self.run_id
            moves.append([str(state), str(target)])
        return moves

    def commit(self, tables: Iterable[str], manifest: Manifest) -> int:
        """The commit point: record the renames and the new manifest, then publish.
        Returns the number of files published."""
        moves = self._moves(tables)
        record = {"moves": moves, "manifest": json.loads(manifest.to_json())}
        self.lake.bookkeeping.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self._commit_record(), json.dumps(record))
        self.publish(record)
        return len(moves)

    def publish(self, record: Mapping[str, object]) -> None:
        """Do the renames still to do, then switch the manifest (idempotent: roll forward)."""
        moves = record["moves"]
        assert isinstance(moves, list)
        for source, target in moves:
            source_path, target_path = Path(source), Path(target)
            if source_path.exists():
                target_path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(source_path, target_path)
        manifest_data = record["manifest"]
        manifest = Manifest.from_json(json.dumps(manifest_data))
        previous = self.lake.manifest().group_state
        write_text_atomic(self.lake.bookkeeping / MANIFEST, manifest.to_json())
        if previous is not None and previous != manifest.group_state:
            shutil.rmtree(self.lake.bookkeeping / GROUP_STATE / previous, ignore_errors=True)
        self._commit_record().unlink(missing_ok=True)
        shutil.rmtree(self.staging, ignore_errors=True)

    def abandon(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
