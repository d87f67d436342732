"""Synchronous commits from the helpers, with per-partition errors made visible."""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaException, TopicPartition

from offsetwatch.consumer_helpers.errors import ConsumerHelperError

_LOG = logging.getLogger(__name__)


def commit_or_raise(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Commit and wait; a partition the broker refused raises (commit() only raises when the
    whole request fails)."""
    if not offsets:
        return
    try:
        results = consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        raise ConsumerHelperError(f"commit of {len(offsets)} partitions: {exc}") from exc
    for item in results or []:
        if item.error is not None:
            raise ConsumerHelperError(
                f"commit of {item.topic}[{item.partition}] at {item.offset}: {item.error}"
            )


def commit_or_warn(consumer: Consumer, offsets: list[TopicPartition], why: str) -> None:
    """A commit whose failure the caller can live with: logged, not raised (`why` says what
    happens instead)."""
    try:
        commit_or_raise(consumer, offsets)
    except ConsumerHelperError as exc:
        _LOG.warning("%s; %s", exc, why)
