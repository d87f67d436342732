"""Kafka's names that offsetwatch reads by default."""

from __future__ import annotations

from typing import Final

#: the internal topic Kafka's group coordinator writes offset commits and group metadata to
OFFSETS_TOPIC: Final = "__consumer_offsets"
