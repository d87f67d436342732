"""`offsetwatch spark stream`: alerts continuously, with Structured Streaming.

Input: the exporter's archive directory (Spark's file stream over the JSON-lines files with
the canonical schema) or a Kafka topic (the `offsetwatch` data source's stream reader, whose
Kafka offsets are the stream's offsets). Records get an event-time column and a watermark.

Each micro-batch (`AlertBatch`, run by foreachBatch on the driver) does, under
`STATE = <checkpoint>/offsetwatch`:

1. flatten the batch into commits, log ends and group events (the lake's own functions) and
   write them to `STATE/<table>/batch=<id>` - overwritten if Spark runs the batch again, so a
   re-run is idempotent. Group events continue from the group states the previous batch saved;
2. run the analytics (episode detection) over the state of the last `history_ms` of event
   time up to this batch;
3. turn the episodes into alerts and keep those not emitted by an earlier batch: an open
   episode once as active, an ended one once as ended. The earlier batches' alert files
   (`<alerts_dir>/batch-<id>.jsonl`, written atomically) are the ledger, so a batch Spark runs
   again after a crash writes the same file again and a restart from the checkpoint neither
   repeats nor loses an alert;
4. hand them to the sinks: Alertmanager (through its persistent outbox) and Kafka;
5. drop the state no later batch reads (parts older than the history, superseded group
   states), so the state stays the size of `history_ms` however long the stream runs, and
   fold the earlier ledger files into `.ledger-index.json` (alerts that ended before the
   history are dropped from it), so a batch reads the index and the newest files rather
   than every file ever written; the files stay (they are also the JSON-lines alert sink).

`warm_up` runs that work once on a made-up history before the query starts, so that the first
real batch does not also pay for code generation and the Python workers' start.

Spark's checkpoint records which input each batch covered; this module's state and ledger
record what each batch produced. Both are keyed by the batch id, which is what makes the
restart exact.

The package's parts, one job each: `sources` (the input streams and their watermark),
`state` (each batch's lake parts, the history a batch reads, and pruning), `ledger` (the
alert ledger files and their index), `warm_up`, and `alert_batch` (the foreachBatch function
that ties them together, and the query).
"""

from offsetwatch.spark_jobs.streaming.alert_batch import (
    AlertBatch,
    AlertSinks,
    StreamSettings,
    start_stream,
)
from offsetwatch.spark_jobs.streaming.ledger import (
    LedgerIndex,
    emitted_before,
    new_alerts,
    update_ledger_index,
    write_ledger,
)
from offsetwatch.spark_jobs.streaming.sources import (
    ARCHIVE_GLOB,
    EVENT_TIME,
    archive_stream,
    kafka_stream,
    with_watermark,
)
from offsetwatch.spark_jobs.streaming.warm_up import warm_up

__all__ = [
    "ARCHIVE_GLOB",
    "EVENT_TIME",
    "AlertBatch",
    "AlertSinks",
    "LedgerIndex",
    "StreamSettings",
    "archive_stream",
    "emitted_before",
    "kafka_stream",
    "new_alerts",
    "start_stream",
    "update_ledger_index",
    "warm_up",
    "with_watermark",
    "write_ledger",
]
