"""Options of the `kafka` source, parsed once on the driver into a picklable value.

Names follow Spark's own Kafka connector where it has one (`kafka.bootstrap.servers`,
`startingOffsets`, `endingOffsets`, `startingTimestamp`, `startingOffsetsByTimestamp`,
`endingTimestamp`, `endingOffsetsByTimestamp`, `failOnDataLoss`, `maxOffsetsPerTrigger`,
`minPartitions`, `kafkaConsumer.pollTimeoutMs`, `kafka.<property>`), so a job moves between
the two with few changes. Spark hands data-source options over case-insensitively, so every
name is compared lowercased.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from offsetwatch.core.topics import OFFSETS_TOPIC
from offsetwatch.spark_jobs.sources import OUTPUT_QUARANTINE, InputError, output_of

Format = Literal["raw", "json", "avro"]
FORMATS: Final = ("raw", "json", "avro")

#: Kafka's own sentinels in per-partition JSON offsets, as in Spark's connector
LATEST: Final = -1
EARLIEST: Final = -2

#: properties the source sets itself: letting a user override them would break the reading
#: contract (no group membership, no commits, stop at the planned end, fail on lost data)
_RESERVED: Final = frozenset(
    {
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "auto.offset.reset",
        "enable.partition.eof",
    }
)

#: librdkafka defaults the source chooses; `kafka.<property>` options override them
_CONSUMER_DEFAULTS: Final[Mapping[str, str]] = {
    "isolation.level": "read_committed",
    "log_level": "3",
}


class KafkaOptionError(InputError):
    """An option of the kafka source is missing or malformed (the message says which)."""


#: a starting or ending position: "earliest", "latest", or per-partition offsets / timestamps
@dataclass(frozen=True, slots=True)
class PositionSpec:
    #: "earliest", "latest", "offsets" (per_partition holds offsets, -2/-1 sentinels allowed),
    #: or "timestamp" (per_partition holds epoch ms; `everywhere` applies to every partition)
    kind: Literal["earliest", "latest", "offsets", "timestamp"]
    per_partition: Mapping[int, int] = field(default_factory=dict)
    everywhere: int | None = None


EARLIEST_SPEC: Final = PositionSpec("earliest")
LATEST_SPEC: Final = PositionSpec("latest")


@dataclass(frozen=True, slots=True)
class KafkaSourceOptions:
    bootstrap_servers: str
    topic: str = OFFSETS_TOPIC
    format: Format = "raw"
    starting: PositionSpec = EARLIEST_SPEC
    #: None when the option was not given (batch: latest; streaming: not allowed)
    ending: PositionSpec | None = None
    #: `starting` was set explicitly (streaming defaults to latest otherwise, like Spark)
    starting_given: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    poll_timeout_ms: int = 120_000
    #: option("output", "quarantine"): yield the quarantine rows of the range, not records
    quarantine_output: bool = False
    #: librdkafka properties from `kafka.<property>` options (bootstrap.servers excluded)
    consumer_properties: Mapping[str, str] = field(default_factory=dict)

    def consumer_config(self, group_id: str) -> dict[str, str | int | bool]:
        """librdkafka configuration of a reading consumer: assign + seek only, never commits.

        librdkafka insists on a group.id even for a consumer that only assigns; it is never
        used to join a group or commit, since nothing here subscribes or commits.
        """
        config: dict[str, str | int | bool] = dict(_CONSUMER_DEFAULTS)
        config.update(self.consumer_properties)
        config.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                # a position that became invalid (retention) must surface, not jump silently
                "auto.offset.reset": "error",
                # the end of a range can be a transaction marker the client never delivers:
                # the EOF event is what tells a reader it has reached the end
                "enable.partition.eof": True,
            }
        )
        return config


def parse_options(options: Mapping[str, str]) -> KafkaSourceOptions:
    """Validate the data-source options; raises KafkaOptionError naming the bad option."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    bootstrap = lowered.get("kafka.bootstrap.servers") or lowered.get("bootstrap.servers")
    if not bootstrap:
        raise KafkaOptionError(
            "the kafka source needs option 'kafka.bootstrap.servers' (host:port[,host:port])"
        )
    topic = lowered.get("topic", OFFSETS_TOPIC)
    fmt = lowered.get("format", "raw" if topic == OFFSETS_TOPIC else "json").lower()
    if fmt not in FORMATS:
        raise KafkaOptionError(f"option 'format' must be one of {', '.join(FORMATS)} (got {fmt!r})")
    starting = _position(lowered, topic, "starting", allow_earliest=True)
    ending = _position(lowered, topic, "ending", allow_earliest=False)
    properties = {
        key.removeprefix("kafka."): value
        for key, value in lowered.items()
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers"
    }
    reserved = sorted(set(properties) & _RESERVED)
    if reserved:
        raise KafkaOptionError(
            f"option 'kafka.{reserved[0]}' is not allowed: the kafka source sets it itself "
            "(it assigns partitions and never joins a group or commits)"
        )
    return KafkaSourceOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        format=fmt,  # type: ignore[arg-type]  # checked against FORMATS above
        starting=starting or EARLIEST_SPEC,
        ending=ending,
        starting_given=starting is not None,
        fail_on_data_loss=_boolean(lowered, "failOnDataLoss", True),
        max_offsets_per_trigger=_positive(lowered, "maxOffsetsPerTrigger"),
        min_partitions=_positive(lowered, "minPartitions"),
        poll_timeout_ms=_positive(lowered, "kafkaConsumer.pollTimeoutMs") or 120_000,
        quarantine_output=output_of(lowered) == OUTPUT_QUARANTINE,
        consumer_properties=properties,
    )


def _position(
    options: Mapping[str, str], topic: str, which: str, allow_earliest: bool
) -> PositionSpec | None:
    # Spark's precedence: a global timestamp, then per-partition timestamps, then offsets.
    timestamp = options.get(f"{which}timestamp")
    if timestamp is not None:
        return PositionSpec("timestamp", everywhere=_integer(f"{which}Timestamp", timestamp))
    by_timestamp = options.get(f"{which}offsetsbytimestamp")
    if by_timestamp is not None:
        name = f"{which}OffsetsByTimestamp"
        return PositionSpec("timestamp", per_partition=_partition_json(name, by_timestamp, topic))
    text = options.get(f"{which}offsets")
    if text is None:
        return None
    name = f"{which}Offsets"
    word = text.strip().lower()
    if word == "latest":
        return LATEST_SPEC
    if word == "earliest":
        if not allow_earliest:
            raise KafkaOptionError(f"option '{name}' cannot be 'earliest' (nothing would be read)")
        return EARLIEST_SPEC
    offsets = _partition_json(name, text, topic)
    for partition, offset in offsets.items():
        if offset < EARLIEST or (offset == EARLIEST and not allow_earliest):
            raise KafkaOptionError(f"option '{name}': offset {offset} of partition {partition}")
    return PositionSpec("offsets", per_partition=offsets)


def _partition_json(name: str, text: str, topic: str) -> dict[int, int]:
    """`{"<topic>": {"0": 23, "1": -2}}`, Spark's per-partition notation."""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    hint = f'earliest, latest or JSON like {{"{topic}": {{"0": 23, "1": -2}}}}'
    if not isinstance(parsed, dict):
        raise KafkaOptionError(f"option '{name}' must be {hint} (got {text!r})")
    others = sorted(set(parsed) - {topic})
    if others:
        raise KafkaOptionError(
            f"option '{name}' names topic {others[0]!r}, but the source reads {topic!r}"
        )
    per_partition = parsed.get(topic)
    if not isinstance(per_partition, dict):
        raise KafkaOptionError(f"option '{name}' must be {hint} (got {text!r})")
    out: dict[int, int] = {}
    for partition, offset in per_partition.items():
        if not (str(partition).isdigit() and isinstance(offset, int)):
            raise KafkaOptionError(f"option '{name}' must be {hint} (got {text!r})")
        out[int(partition)] = offset
    return out


def _integer(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise KafkaOptionError(f"option '{name}' must be an integer (got {text!r})") from None


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    value = _integer(name, text)
    if value <= 0:
        raise KafkaOptionError(f"option '{name}' must be positive (got {value})")
    return value


def _boolean(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise KafkaOptionError(f"option '{name}' must be true or false (got {text!r})")
