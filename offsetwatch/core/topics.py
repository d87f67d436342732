"""Kafka's names that offsetwatch reads by default."""

from __future__ import annotations

from typing import Final

#: the internal topic Kafka's group coordinator writes offset commits and group metadata to
OFFSETS_TOPIC: Final = "__consumer_offsets"

#: Kafka's own rule for a topic name (org.apache.kafka.common.internals.Topic.validate)
_MAX_NAME_LENGTH: Final = 249
_LEGAL: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse `name` as a topic, or None: refused where it is configured,
    not by the broker after the exporter has read the whole offsets topic."""
    if name in ("", ".", ".."):
        return f"{name!r} is not a topic name Kafka allows"
    if len(name) > _MAX_NAME_LENGTH:
        return f"is {len(name)} characters long; Kafka allows at most {_MAX_NAME_LENGTH}"
    bad = sorted(set(name) - _LEGAL)
    if bad:
        return (
            f"{name!r} has characters Kafka refuses in a topic name ({''.join(bad)!r}): use "
            "letters, digits, '.', '_' and '-'"
        )
    return None


def internal_topic_problem(name: str) -> str | None:
    """Why nothing of ours may write to `name`, or None: Kafka's internal topics
    (__consumer_offsets, __share_group_state, __transaction_state, __cluster_metadata) all
    start with two underscores."""
    if not name.startswith("__"):
        return None
    return (
        f"must not be a Kafka internal topic ({name!r}: names starting with __ are Kafka's "
        "own): choose a topic of your own"
    )
