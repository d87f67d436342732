"""Alert rows to files: JSON lines or Parquet, appended (Spark's own writers)."""

from __future__ import annotations

from typing import Final, Literal

from pyspark.sql import DataFrame

AlertFileFormat = Literal["jsonl", "parquet"]
FILE_FORMATS: Final = ("jsonl", "parquet")


def write_alert_files(alerts: DataFrame, path: str, file_format: AlertFileFormat) -> None:
    """Append `alerts` under `path` (a directory of part files, one JSON object per line for
    jsonl); readers take the row with an end over the active one of the same `alert_id`."""
    writer = alerts.write.mode("append")
    if file_format == "jsonl":
        writer.json(path)
    elif file_format == "parquet":
        writer.parquet(path)
    else:
        raise ValueError(f"alert file format must be one of {FILE_FORMATS}, got {file_format!r}")
