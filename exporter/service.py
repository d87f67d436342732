"""Assembles a running exporter: daemon main loop, log-end sampler and HTTP server."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from offsetwatch.decoder.registry import SHARE_STATE_TOPIC
from offsetwatch.exporter.config import ExporterConfig
from offsetwatch.exporter.daemon import Exporter
from offsetwatch.exporter.judge.snapshot import Snapshot
from offsetwatch.exporter.serve.http_server import ExporterHttpServer
from offsetwatch.exporter.serve.metrics import MetricsConfig, SnapshotCollector
from offsetwatch.exporter.serve.web_config import load_web_config
from offsetwatch.exporter.sources.log_end_sampler import LogEndSampler
from offsetwatch.exporter.stats import PipelineStats

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ExporterService:
    """One exporter with everything around it; `start()` then `run()` or `run_in_background()`."""

    config: ExporterConfig
    exporter: Exporter = field(init=False)
    sampler: LogEndSampler = field(init=False)
    http: ExporterHttpServer = field(init=False)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        cfg = self.config
        self.exporter = Exporter(cfg)
        self.exporter.open()
        self.sampler = LogEndSampler(
            self.exporter.kafka_config(),
            partitions=self.exporter.tracked_partitions,
            on_sample=self.exporter.on_sample,
            interval_s=cfg.sample_interval_s,
            topic_ids=self.exporter.topic_id_names.unknown_ids,
            on_topic_names=self.exporter.topic_id_names.offer,
            on_admin_replaced=self.exporter.on_sampler_admin_replaced,
            source_topic=cfg.offsets_topic,
            source_partitions=self.exporter.source_partitions,
            on_source_ends=self.exporter.on_source_ends,
            on_denied=self.exporter.on_denied,
            share_state_topic=SHARE_STATE_TOPIC,
            share_state_partitions=self.exporter.share_state_partitions,
            on_share_state_ends=self.exporter.on_share_state_ends,
            # a fleet replica takes partitions over from others: their groups' history is
            # rebuilt from Kafka's timestamps, so lag seconds and STALL hold across a handover
            backfill_window_s=cfg.status_window_s if cfg.fleet is not None else 0.0,
            on_backfill=self.exporter.on_backfill,
        )
        self.exporter.readers.request_sample = self.sampler.wake
        self.exporter.readers.renew_sampler = self.sampler.reconfigure
        self.exporter.stats.parts.append(self.sampler.health)
        collector = SnapshotCollector(
            self._latest,
            MetricsConfig(
                granularity=cfg.granularity,
                kafka_lag_exporter_aliases=cfg.kafka_lag_exporter_aliases,
                cluster_name=cfg.cluster_name,
            ),
        )
        self.http = ExporterHttpServer(
            collector,
            host=cfg.http_host,
            port=cfg.http_port,
            web_config=load_web_config(cfg.web_config) if cfg.web_config else None,
            workers=cfg.http_workers,
            request_timeout=cfg.http_request_timeout_s,
            max_connections=cfg.http_max_connections,
            history=self.exporter.console_history,
            live=self.exporter.live,
            fleet=self.exporter.fleet,
        )

    def _latest(self) -> tuple[Snapshot, PipelineStats]:
        return self.exporter.snapshot, self.exporter.stats

    def start(self) -> None:
        self.http.start()
        self.sampler.start()

    def run(self) -> None:
        """Run the main loop in this thread until stop() or SIGTERM/SIGINT, then shut down."""
        self.exporter.install_signal_handlers()
        try:
            self.exporter.run()
        finally:
            self.shutdown()

    def run_in_background(self) -> None:
        self._thread = threading.Thread(
            target=self.exporter.run, name="offsetwatch-exporter", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the background main loop and shut down; False if the loop did not end within
        timeout_s, and then its Kafka clients are left open: closing a client while another
        thread is inside one of its calls crashes the process in librdkafka."""
        self.exporter.stop()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout_s)
        if thread.is_alive():
            log.error(
                "the exporter's main loop did not end within %g s (a Kafka call that does "
                "not return?): its clients stay open and no final checkpoint is written; the "
                "last periodic checkpoint stands",
                timeout_s,
            )
            self.sampler.stop()
            self.http.stop()
            return False
        self.shutdown()
        return True

    def shutdown(self) -> None:
        self.sampler.stop()
        self.exporter.close()
        self.http.stop()
        log.info("exporter stopped")
