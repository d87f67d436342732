"""The exporter health dashboard: offsetwatch itself, for the people who run it."""

from __future__ import annotations

from typing import Final

from offsetwatch.dashboards import common
from offsetwatch.dashboards.common import exporter
from offsetwatch.dashboards.grafana import (
    YES_NO,
    Dashboard,
    Query,
    Row,
    Variable,
    stat,
    state_timeline,
    timeseries,
)

UID: Final = common.EXPORTER_HEALTH_UID


def _rate(metric: str) -> str:
    return f"rate({exporter(metric)}[$__rate_interval])"


def _status() -> Row:
    return Row(
        "Status",
        (
            stat(
                "Exporter scraped",
                "Prometheus scrapes of offsetwatch (up); OffsetwatchExporterDown fires on 0.",
                "none",
                Query(f"min({exporter('up')})", instant=True),
                steps=(("red", None), ("green", 1)),
                mappings=(("DOWN", "red"), ("UP", "green")),
                colour="background",
                w=4,
            ),
            stat(
                "Ready",
                "1 once the first pass over __consumer_offsets is done (/readyz 200).",
                "none",
                Query(f"min({exporter('offsetwatch_ready')})", instant=True),
                steps=(("red", None), ("green", 1)),
                mappings=(("CATCHING UP", "red"), ("READY", "green")),
                colour="background",
                w=4,
            ),
            stat(
                "Kafka source",
                "Connection of the consumer of __consumer_offsets (OffsetwatchSourceDown).",
                "none",
                Query(f"min({exporter('offsetwatch_source_up')})", instant=True),
                steps=(("red", None), ("green", 1)),
                mappings=(("DOWN", "red"), ("UP", "green")),
                colour="background",
                w=4,
            ),
            stat(
                "Uptime",
                "Time since the exporter's pipeline started.",
                "s",
                Query(f"min(time() - {exporter('offsetwatch_start_time_seconds')})", instant=True),
                w=4,
            ),
            stat(
                "Version",
                "offsetwatch version per exporter.",
                "none",
                Query(exporter("offsetwatch_build_info"), "{{version}}", instant=True),
                text_mode="name",
                w=4,
            ),
            stat(
                "Tracked partitions",
                "(group, topic, partition) entries in the latest snapshot.",
                "short",
                Query(f"sum({exporter('offsetwatch_tracked_partitions')})", instant=True),
                w=4,
            ),
            state_timeline(
                "Scraped, ready, Kafka source",
                "Prometheus scrapes (up), the end of the first pass over __consumer_offsets "
                "(ready) and the connection to Kafka (source up), per exporter.",
                Query(exporter("up"), "scraped {{instance}}"),
                Query(exporter("offsetwatch_ready"), "ready {{instance}}"),
                Query(exporter("offsetwatch_source_up"), "source up {{instance}}"),
                mappings=YES_NO,
                show_values=True,
                h=5,
            ),
        ),
    )


def _ingest() -> Row:
    return Row(
        "Ingest of __consumer_offsets",
        (
            timeseries(
                "Records read by type",
                "Records of __consumer_offsets read per second, by record type (offset commits, "
                "group metadata, KIP-848 records, tombstones...).",
                "cps",
                Query(
                    f"sum by (instance, type) ({_rate('offsetwatch_records_total')})",
                    "{{type}} {{instance}}",
                ),
            ),
            common.decode_errors_panel(w=12),
            timeseries(
                "Own lag on __consumer_offsets",
                "Records of __consumer_offsets not read yet (high watermark - position), total "
                "per exporter: lag and status trail the real consumers by this much "
                "(OffsetwatchSourceBehind).",
                "short",
                Query(f"sum by (instance) ({exporter('offsetwatch_source_lag')})", "{{instance}}"),
                table_legend=False,
            ),
            timeseries(
                "Own lag per partition",
                "The same per __consumer_offsets partition: one hot coordinator partition shows "
                "up here.",
                "short",
                Query(exporter("offsetwatch_source_lag"), "partition {{partition}}"),
            ),
        ),
    )


def _loops() -> Row:
    return Row(
        "Snapshots, sampling, checkpoints",
        (
            common.ages_panel(w=12),
            timeseries(
                "Snapshot, log-end sample and checkpoint duration",
                "How long the last snapshot build, log-end sampling round and checkpoint took. "
                "A snapshot that takes longer than --snapshot-interval-s means stale lag.",
                "s",
                Query(exporter("offsetwatch_snapshot_duration_seconds"), "snapshot {{instance}}"),
                Query(
                    exporter("offsetwatch_log_end_sample_duration_seconds"),
                    "log-end sample {{instance}}",
                ),
                Query(
                    exporter("offsetwatch_checkpoint_duration_seconds"), "checkpoint {{instance}}"
                ),
                table_legend=False,
            ),
        ),
    )


def _scrape() -> Row:
    return Row(
        "Scrape",
        (
            timeseries(
                "Scrape size",
                "Samples per scrape, tracked (group, topic, partition) entries and groups: the "
                "cardinality knobs are --granularity and the group/topic filters.",
                "short",
                Query(exporter("scrape_samples_scraped"), "samples {{instance}}"),
                Query(exporter("offsetwatch_tracked_partitions"), "partitions {{instance}}"),
                Query(exporter("offsetwatch_groups"), "groups {{instance}}"),
                table_legend=False,
            ),
            timeseries(
                "Scrape duration",
                "How long Prometheus takes to scrape /metrics; keep it well under the scrape "
                "timeout.",
                "s",
                Query(exporter("scrape_duration_seconds"), "{{instance}}"),
                table_legend=False,
            ),
        ),
    )


def _downstream() -> Row:
    return Row(
        "Publishing and archive",
        (
            timeseries(
                "Published and archived",
                "Records republished to --publish-topic and written to --archive-dir per second.",
                "cps",
                Query(
                    f"sum by (instance) ({_rate('offsetwatch_published_total')})",
                    "published {{instance}}",
                ),
                Query(
                    f"sum by (instance) ({_rate('offsetwatch_archive_records_total')})",
                    "archived {{instance}}",
                ),
                table_legend=False,
            ),
            timeseries(
                "Publish errors, DLQ, quarantine, loop errors",
                "Totals since the exporter started: failed publishes, records sent to the "
                "dead-letter topic or set aside, failures of the main loop, and Kafka clients "
                "replaced because they had no broker address left.",
                "short",
                Query(exporter("offsetwatch_publish_errors_total"), "publish errors {{instance}}"),
                Query(exporter("offsetwatch_dlq_total"), "DLQ {{instance}}"),
                Query(exporter("offsetwatch_quarantined_total"), "quarantined {{instance}}"),
                Query(exporter("offsetwatch_loop_errors_total"), "loop errors {{instance}}"),
                Query(
                    exporter("offsetwatch_clients_replaced_total"),
                    "{{client}} replaced {{instance}}",
                ),
                table_legend=False,
            ),
        ),
    )


def build() -> Dashboard:
    return Dashboard(
        uid=UID,
        title="offsetwatch / Exporter health",
        description=(
            "offsetwatch itself: scrape and readiness, ingest of __consumer_offsets, decode "
            "errors, its own lag, loop ages, scrape size, publishing and archive."
        ),
        variables=(
            Variable("job", "Job", "offsetwatch_build_info"),
            Variable("instance", "Exporter", 'offsetwatch_build_info{job=~"$job"}', multi=True),
        ),
        rows=(_status(), _ingest(), _loops(), _scrape(), _downstream()),
        links=common.links(UID),
    )
