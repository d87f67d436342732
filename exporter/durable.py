"""Kept for the modules that still import `fsync_directory` from here (exporter/archive.py,
spark_jobs/lake_store.py, offsetwatch/consumer_helpers/file_store.py): the helper lives in
offsetwatch.core.atomic with the one atomic-write helper. Delete once they import it there."""

from __future__ import annotations

from offsetwatch.core.atomic import fsync_directory as fsync_directory
