"""`OffsetBroker` on confluent-kafka's AdminClient.

Batching: DescribeGroups and ListOffsets take every group / partition in one call (librdkafka
splits them per coordinator / leader). OffsetFetch and OffsetCommit take one group per call
in confluent-kafka, so those calls are all issued before any answer is awaited: the requests
travel together instead of one round trip after another.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Final

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)

# OffsetSpec is re-exported by confluent_kafka.admin without __all__, which strict mypy refuses.
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from offsetwatch.core.acl_hints import Resource, grant_line
from offsetwatch.offset_ops.broker import EARLIEST, LATEST, OffsetQuery
from offsetwatch.offset_ops.model import (
    Committed,
    GroupInfo,
    GroupListing,
    MemberInfo,
    NotAuthorized,
    OffsetOpsError,
    OutcomeUnknown,
    TopicPartitionKey,
    Unsupported,
)

_TIMEOUT_S: Final = 30.0
# What a broker answers a commit from outside a group that has (or still tracks) members.
_MEMBER_ERRORS: Final = frozenset(
    {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "STALE_MEMBER_EPOCH"}
)
_NOT_FOUND: Final = frozenset({KafkaError.GROUP_ID_NOT_FOUND})


def _error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        return error
    return None


def _check_supported(exc: BaseException, what: str) -> None:
    error = _error(exc)
    if error is not None and error.code() == KafkaError._UNSUPPORTED_FEATURE:
        raise Unsupported(f"the cluster does not support {what}") from exc


def _name(value: Any) -> str:
    return str(getattr(value, "name", value)).upper()


def _key(tp: TopicPartition) -> TopicPartitionKey:
    return (tp.topic, tp.partition)


def _metadata(tp: TopicPartition) -> str:
    try:
        text: str | None = tp.metadata
    except UnicodeDecodeError as error:
        # confluent-kafka decodes metadata on access and raises on bytes that are not UTF-8
        # (the offset is fine); the exception holds the exact bytes, kept here losslessly.
        return bytes(error.object).decode("utf-8", "surrogateescape")
    return text or ""


def _committed(tp: TopicPartition) -> Committed:
    epoch = tp.leader_epoch
    return Committed(tp.offset, _metadata(tp), -1 if epoch is None else epoch)


def _topic_partition(key: TopicPartitionKey, committed: Committed) -> TopicPartition:
    # confluent-kafka cannot send a NUL inside a string (and reads metadata up to the first
    # one); a trailing NUL some clients add carries no meaning.
    extra: dict[str, Any] = {}
    metadata = committed.metadata.rstrip("\0")
    try:
        metadata.encode()
    except UnicodeEncodeError:
        raise OffsetOpsError(
            f"the metadata of {key[0]}:{key[1]} is not UTF-8 ({metadata!r}): confluent-kafka "
            "cannot write it"
        ) from None
    if metadata:
        extra["metadata"] = metadata
    if committed.leader_epoch >= 0:
        extra["leader_epoch"] = committed.leader_epoch
    return TopicPartition(key[0], key[1], committed.offset, **extra)


class AdminBroker:
    """Broker I/O for the offset commands; `properties` are librdkafka settings."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        self._properties: dict[str, str | int | float | bool] = dict(properties)
        # librdkafka would log every failed connection attempt; errors reach us as results.
        self._properties.setdefault("log_level", "0")
        self._admin = AdminClient(self._properties)
        self._requests = 0
        self._partition_counts: dict[str, int] | None = None

    @property
    def requests(self) -> int:
        return self._requests

    def list_groups(self) -> list[GroupListing]:
        self._requests += 1
        result = self._admin.list_consumer_groups(request_timeout=_TIMEOUT_S).result()
        for exc in result.errors:
            _check_supported(KafkaException(exc), "ListGroups")
            raise OffsetOpsError(f"listing groups failed: {exc}")
        return sorted(
            (
                GroupListing(x.group_id, _name(x.type), _name(x.state), x.is_simple_consumer_group)
                for x in result.valid
            ),
            key=lambda listing: listing.group_id,
        )

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        if not group_ids:
            return {}
        self._requests += 1
        futures = self._admin.describe_consumer_groups(
            list(dict.fromkeys(group_ids)), request_timeout=_TIMEOUT_S
        )
        out: dict[str, GroupInfo] = {}
        for group_id, future in futures.items():
            try:
                description = future.result()
            except KafkaException as exc:
                _check_supported(exc, "DescribeGroups (librdkafka's mock cluster does not)")
                error = _error(exc)
                if error is not None and error.code() in _NOT_FOUND:
                    out[group_id] = GroupInfo(group_id, "UNKNOWN", "DEAD", "", "", False)
                    continue
                if error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    raise NotAuthorized(
                        f"not authorized to describe group {group_id!r} ({error.str()}); grant "
                        f"it: {self.grant('Describe', 'group', group_id)}",
                        "group",
                        group_id,
                        "Describe",
                    ) from exc
                raise OffsetOpsError(f"describing group {group_id!r} failed: {exc}") from exc
            out[group_id] = self._group_info(description)
        return out

    @staticmethod
    def _group_info(description: Any) -> GroupInfo:
        coordinator = description.coordinator
        members = tuple(
            MemberInfo(
                m.member_id,
                m.client_id,
                m.host,
                m.group_instance_id,
                tuple(sorted(_key(tp) for tp in m.assignment.topic_partitions)),
            )
            for m in description.members
        )
        return GroupInfo(
            group_id=description.group_id,
            type=_name(description.type),
            state=_name(description.state),
            coordinator=f"{coordinator.host}:{coordinator.port} ({coordinator.id})"
            if coordinator is not None
            else "",
            assignor=description.partition_assignor or "",
            is_simple=description.is_simple_consumer_group,
            members=members,
        )

    def partition_counts(self) -> dict[str, int]:
        if self._partition_counts is None:
            self._requests += 1
            try:
                metadata = self._admin.list_topics(timeout=_TIMEOUT_S)
            except KafkaException as exc:
                raise OffsetOpsError(f"cannot read cluster metadata: {exc}") from exc
            self._partition_counts = {
                name: len(topic.partitions)
                for name, topic in metadata.topics.items()
                if not name.startswith("__") and topic.error is None
            }
        return dict(self._partition_counts)

    def _all_partitions(self) -> list[TopicPartitionKey]:
        return [(t, p) for t, n in sorted(self.partition_counts().items()) for p in range(n)]

    def committed(
        self, requests: Mapping[str, Sequence[TopicPartitionKey] | None]
    ) -> dict[str, dict[TopicPartitionKey, Committed]]:
        out = self._fetch(requests)
        # An OffsetFetch naming no partitions means "all of them" to Kafka, but librdkafka's
        # mock answers it with nothing. Asking again by name costs one request per group
        # that really has no offsets and makes the mock answer.
        retry = {g: self._all_partitions() for g, parts in requests.items() if parts is None}
        retry = {g: parts for g, parts in retry.items() if not out[g]}
        if retry and any(retry.values()):
            out.update(self._fetch(retry))
        return out

    def _fetch(
        self, requests: Mapping[str, Sequence[TopicPartitionKey] | None]
    ) -> dict[str, dict[TopicPartitionKey, Committed]]:
        futures: dict[str, Future[Any]] = {}
        for group_id, partitions in requests.items():
            named = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
            request = ConsumerGroupTopicPartitions(group_id, named)
            self._requests += 1
            futures.update(
                self._admin.list_consumer_group_offsets([request], request_timeout=_TIMEOUT_S)
            )
        out: dict[str, dict[TopicPartitionKey, Committed]] = {}
        for group_id, future in futures.items():
            try:
                tps: Iterable[TopicPartition] = future.result().topic_partitions
            except KafkaException as exc:
                raise OffsetOpsError(f"reading offsets of group {group_id!r}: {exc}") from exc
            for tp in tps:
                if tp.error is not None:
                    raise OffsetOpsError(
                        f"reading offsets of group {group_id!r}, {tp.topic}:{tp.partition}: "
                        f"{tp.error}"
                    )
            out[group_id] = {_key(tp): _committed(tp) for tp in tps if tp.offset >= 0}
        return out

    def list_offsets(
        self, partitions: Sequence[TopicPartitionKey], query: OffsetQuery
    ) -> dict[TopicPartitionKey, int]:
        if not partitions:
            return {}
        if query == EARLIEST:
            spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        elif query == LATEST:
            spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        else:
            spec = OffsetSpec.for_timestamp(int(query))
        out: dict[TopicPartitionKey, int] = {}
        pending = list(partitions)
        deadline = time.monotonic() + _TIMEOUT_S
        while pending:
            self._requests += 1
            futures = self._admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in pending}, request_timeout=_TIMEOUT_S
            )
            retry: list[TopicPartitionKey] = []
            for tp, future in futures.items():
                try:
                    out[_key(tp)] = future.result().offset
                except KafkaException as exc:
                    error = _error(exc)
                    # a leader moving (a broker restart, a rolling upgrade, a new partition
                    # coming online) is asked again, as Kafka's own tools do
                    if error is not None and error.retriable() and time.monotonic() < deadline:
                        retry.append(_key(tp))
                        continue
                    if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        raise OffsetOpsError(
                            f"not authorized to describe topic {tp.topic!r}, so its log end is "
                            f"unknown; grant it: {self.grant('Describe', 'topic', tp.topic)}"
                        ) from exc
                    raise OffsetOpsError(
                        f"listing offsets of {tp.topic}:{tp.partition} failed: {_error_text(exc)}"
                    ) from exc
            if retry:
                time.sleep(0.5)
            pending = retry
        return out

    def may_list_every_group(self) -> bool | None:
        self._requests += 1
        try:
            described = self._admin.describe_cluster(
                include_authorized_operations=True, request_timeout=_TIMEOUT_S
            ).result()
        except KafkaException:
            return None
        # asked for and answered, no operations come back as None (every supported Kafka
        # answers DescribeCluster with them)
        names = {_name(op) for op in described.authorized_operations or ()}
        return bool(names & {"DESCRIBE", "ALTER", "ALL"})

    def refused_topics(self, topics: Collection[str]) -> dict[str, str]:
        if not topics:
            return {}
        self._requests += 1
        futures = self._admin.describe_topics(
            TopicCollection(sorted(topics)), request_timeout=_TIMEOUT_S
        )
        refused: dict[str, str] = {}
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                error = _error(exc)
                if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    refused[name] = f"{error.name()}: {error.str()}"
        return refused

    def grant(self, operation: str, resource: Resource, name: str = "") -> str:
        return grant_line(self._properties, operation, resource, name)

    def _check_commit_authorized(
        self, group_id: str, error: KafkaError, topic: str, outcome: str
    ) -> None:
        """An OffsetCommit refused for an ACL raises NotAuthorized naming the grant: the
        group's Read, or Read on a topic it commits for (`outcome` says what was committed)."""
        if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            resource: Resource = "group"
            name, what = group_id, f"group {group_id!r}"
        elif error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and topic:
            resource, name, what = "topic", topic, f"topic {topic!r}"
        else:
            return
        raise NotAuthorized(
            f"not authorized to commit offsets of group {group_id!r}: committing needs Read "
            f"on {what} ({error.str()}); grant it: {self.grant('Read', resource, name)}; "
            f"{outcome}",
            resource,
            name,
            "Read",
        )

    def alter(self, group_id: str, offsets: Mapping[TopicPartitionKey, Committed]) -> None:
        """Raises OffsetOpsError when the broker answered and refused (saying what, if
        anything, it committed), OutcomeUnknown when no answer came after sending."""
        if not offsets:
            return
        tps = [_topic_partition(key, c) for key, c in sorted(offsets.items())]
        self._requests += 1
        futures = self._admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id, tps)], request_timeout=_TIMEOUT_S
        )
        try:
            result = futures[group_id].result()
        except KafkaException as exc:
            error = _error(exc)
            if error is None or _may_have_been_sent(error):
                raise OutcomeUnknown(group_id, _error_text(exc)) from exc
            self._check_commit_authorized(group_id, error, "", "nothing was committed")
            raise OffsetOpsError(
                f"committing offsets of group {group_id!r}: {_error_text(exc)}; nothing was "
                "committed"
            ) from exc
        # alter_consumer_group_offsets reports the broker's per-partition answer only here
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if not failed:
            return
        if any(_may_have_been_sent(tp.error) for tp in failed):
            tp = next(tp for tp in failed if _may_have_been_sent(tp.error))
            raise OutcomeUnknown(group_id, f"{tp.topic}:{tp.partition}: {tp.error.str()}")
        tp = failed[0]
        applied = len(result.topic_partitions) - len(failed)
        what = (
            "nothing was committed"
            if not applied
            else f"the other {applied} partition(s) were committed"
        )
        for refused in failed:
            self._check_commit_authorized(group_id, refused.error, refused.topic, what)
        if tp.error.name() in _MEMBER_ERRORS:
            raise OffsetOpsError(
                f"the broker refused to commit offsets of group {group_id!r} "
                f"({tp.error.name()}): the group has members; stop its consumers first"
            )
        raise OffsetOpsError(
            f"the broker refused to commit offsets of group {group_id!r} on {len(failed)} "
            f"partition(s), first {tp.topic}:{tp.partition} ({tp.error.name()}: "
            f"{tp.error.str()}); {what}"
        )


# librdkafka's own errors (negative codes) raised before anything is sent; every other one
# of them (a timeout, a dropped connection, the client closing) can come after the request
# left, when only the broker knows whether it applied it.
_NOT_SENT: Final = frozenset({KafkaError._INVALID_ARG, KafkaError._UNSUPPORTED_FEATURE})
# The broker's answers that do not prove the commit was dropped: a write to __consumer_offsets
# that timed out waiting for its replicas may still be in the log, and read back on the
# coordinator's next load.
_BROKER_UNSURE: Final = frozenset({KafkaError.REQUEST_TIMED_OUT})


def _may_have_been_sent(error: KafkaError) -> bool:
    """True when the outcome is unknown: no answer came, or one that proves nothing.

    Any other broker error (a positive code) is its answer to the request: nothing it refused
    was applied."""
    code = error.code()
    return (code < 0 and code not in _NOT_SENT) or code in _BROKER_UNSURE


def _error_text(exc: KafkaException) -> str:
    error = _error(exc)
    if error is None:
        return str(exc)
    return f"{error.name()}: {error.str()}"
