"""Offset operations: look at consumer groups and change their committed offsets.

Broker I/O sits behind `OffsetBroker` (broker.py; `AdminBroker` in admin.py is the
confluent-kafka Admin API implementation); everything else here is pure: reset planning and
validation (plan.py), scopes (scope.py), CSV files (csv_io.py), group descriptions
(describe.py), migration (migrate.py) and rendering (render.py).
"""

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

__all__ = [
    "Committed",
    "GroupInfo",
    "GroupListing",
    "MemberInfo",
    "NotAuthorized",
    "OffsetOpsError",
    "OutcomeUnknown",
    "TopicPartitionKey",
    "Unsupported",
]
