"""Spark analytics over the history lake: status timeline, windows, group stats, episodes.

Pure DataFrame -> DataFrame functions over the lake tables (lake_schema.py), with the
exporter's status rules and thresholds (offsetwatch/core/status.py) so the history and the live
exporter agree. `analyze` is the entry point.
"""

from offsetwatch.spark_jobs.analytics.analyze import AnalyticsResult, analyze
from offsetwatch.spark_jobs.analytics.settings import AnalyticsSettings

__all__ = ["AnalyticsResult", "AnalyticsSettings", "analyze"]
