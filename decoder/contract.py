"""The contract of the canonical record: its field names, its schema version, and the
transaction rule (docs/canonical-schema.md).

Every writer of canonical records (`decode`'s JSON and Avro, the exporter's archive and
republished topic) and every reader (the Spark sources and the lake, the history restore)
spells the top-level fields through this module, so a field cannot be written under one name
and read under another. The per-type `key` / `value` fields are the record layouts of
`records.py`; this module owns the envelope around them.

Schema versions:

1. offsetwatch 0.1: the envelope without `transaction` and `schema_version` (a record
   without `schema_version` is of version 1; `decode` added `transaction` only to
   transactional records).
2. every record carries `transaction` (null when the writer does not know of a transaction)
   and `schema_version`.

A reader meets a record of a newer version than `SCHEMA_VERSION` only when an older
offsetwatch reads what a newer one wrote. It does not guess at it: `problem()` says so, and
the readers quarantine the record with that message, naming the file and position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

#: the version this offsetwatch writes and the newest it reads
SCHEMA_VERSION: Final = 2
#: what a record without a `schema_version` field is
FIRST_SCHEMA_VERSION: Final = 1

# -- the envelope: every canonical record has these top-level fields ----------------------------
TYPE: Final = "type"
KEY_TYPE: Final = "key_type"
VALUE_VERSION: Final = "value_version"
TOMBSTONE: Final = "tombstone"
NEWER_VERSION: Final = "newer_version"
PARTITION: Final = "partition"
OFFSET: Final = "offset"
TIMESTAMP: Final = "timestamp"
GROUP: Final = "group"
KEY: Final = "key"
VALUE: Final = "value"
#: the outcome of the transaction that wrote the record, where the writer knows it
TRANSACTION: Final = "transaction"
SCHEMA: Final = "schema_version"

#: the envelope in the order records are written (JSON key order, Avro field order)
ENVELOPE: Final = (
    TYPE,
    KEY_TYPE,
    VALUE_VERSION,
    TOMBSTONE,
    NEWER_VERSION,
    PARTITION,
    OFFSET,
    TIMESTAMP,
    GROUP,
    KEY,
    VALUE,
    TRANSACTION,
    SCHEMA,
)
#: fields without which an object is no canonical record at all
REQUIRED: Final = (TYPE, PARTITION, OFFSET)

# -- record types the envelope itself defines (the others are `registry.RECORD_TYPES` names) ----
OFFSET_COMMIT_TYPE: Final = "offset_commit"
#: a key type this decoder does not know: key and value kept as raw bytes
UNKNOWN_TYPE: Final = "unknown"
#: a log-end sample of a data partition, written by the exporter (not a Kafka record)
LOG_END_TYPE: Final = "log_end"

# -- transactions ----------------------------------------------------------------------------
#: outcomes of a transactional record, from the COMMIT/ABORT markers of its producer
COMMITTED: Final = "committed"
ABORTED: Final = "aborted"
#: no marker yet: the transaction is still open (it may yet commit or abort)
PENDING: Final = "pending"
OUTCOMES: Final = (COMMITTED, ABORTED, PENDING)
#: The one rule of which records count: the group coordinator applies a transactional offset
#: commit only when its COMMIT marker arrives, and drops it on ABORT. Records of aborted and
#: still-open transactions are therefore never a group's committed offsets.
NOT_COUNTED: Final = (ABORTED, PENDING)


def counts(outcome: str | None) -> bool:
    """Whether a record with this `transaction` outcome is applied by the group coordinator
    (None: not transactional, or the writer could not know, e.g. a read_committed reader)."""
    return outcome not in NOT_COUNTED


# -- checking what a reader meets ------------------------------------------------------------
#: quarantine reasons of records that break the contract
REASON_NEWER_SCHEMA: Final = "newer_schema_version"
REASON_BAD_SCHEMA: Final = "bad_schema_version"
REASON_BAD_TRANSACTION: Final = "bad_transaction"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a record breaks the contract: a quarantine reason and a one-line message."""

    reason: str
    message: str

    def at(self, file: str | None, position: int | None) -> str:
        """The message naming where the record was read (file and line / byte position)."""
        where = file or "<input>"
        if position is not None:
            where = f"{where}:{position}"
        return f"{where}: {self.message}"


def schema_version_of(record: Mapping[str, Any]) -> Any:
    return record.get(SCHEMA, FIRST_SCHEMA_VERSION)


def problem(record: Mapping[str, Any]) -> Problem | None:
    """What is wrong with a canonical record's envelope for this reader, or None.

    A record of a newer schema version may mean something this reader cannot tell (a new
    outcome, a field that changes what counts), so it is refused rather than half read.
    """
    version = schema_version_of(record)
    if version is None:
        version = FIRST_SCHEMA_VERSION
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return Problem(REASON_BAD_SCHEMA, f"{SCHEMA} {version!r} is not a schema version")
    if version > SCHEMA_VERSION:
        return Problem(
            REASON_NEWER_SCHEMA,
            f"record of {SCHEMA} {version}, newer than this offsetwatch reads "
            f"({SCHEMA_VERSION}): upgrade offsetwatch to read it",
        )
    outcome = record.get(TRANSACTION)
    if outcome is not None and outcome not in OUTCOMES:
        return Problem(
            REASON_BAD_TRANSACTION,
            f"{TRANSACTION} {outcome!r} is none of {', '.join(OUTCOMES)} (or null)",
        )
    return None
