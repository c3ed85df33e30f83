"""Table schemas of SPEC §3, defined once in Arrow and derived for Spark.

Tables the job creates have nullable columns: "not null" in the SPEC is a rule the
job enforces on input (a row breaking it goes to ``rejected``), not a Delta
constraint that would make a producer's bad row fail the whole commit.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

TIMESTAMP = pa.timestamp("us", tz="UTC")
STRING_MAP = pa.map_(pa.string(), pa.string())

MESSAGE = pa.schema(
    [
        ("message_id", pa.int64()),
        ("address", pa.string()),
        ("routing_type", pa.string()),
        ("sent_at", TIMESTAMP),
        ("expiration", TIMESTAMP),
        ("priority", pa.int32()),
        ("durable", pa.bool_()),
        ("user_id", pa.string()),
        ("properties", STRING_MAP),
        ("property_types", STRING_MAP),
        ("body", pa.binary()),
        ("copy_reason", pa.string()),
        ("to_queue", pa.string()),
    ]
)
"""A message row of ``addresses/*`` (SPEC §3.1)."""

MESSAGE_REQUIRED = ("message_id", "address", "sent_at")
"""Columns a producer's table must have; the ones after ``sent_at`` may be left out."""

DELIVERY = pa.schema(
    [
        ("queue", pa.string()),
        ("message_id", pa.int64()),
        ("outcome", pa.string()),
        ("at", TIMESTAMP),
    ]
)
"""A row of ``deliveries/`` (SPEC §3.2)."""

MANAGEMENT = pa.schema(
    [
        ("op", pa.string()),
        ("queue", pa.string()),
        ("message_id", pa.int64()),
        ("filter", pa.string()),
        ("to_queue", pa.string()),
        ("at", TIMESTAMP),
    ]
)
"""A row of ``management/`` (SPEC §3.3)."""

MANAGEMENT_REQUIRED = ("op", "queue", "at")

QUEUE_STATE = pa.schema(
    [
        ("queue", pa.string()),
        ("status", pa.string()),
        ("delivery_count", pa.int32()),
        ("redeliver_at", TIMESTAMP),
        ("routed_at", TIMESTAMP),
        ("status_at", TIMESTAMP),
    ]
)

QUEUE_MESSAGE = pa.schema(list(MESSAGE) + list(QUEUE_STATE))
"""A row of ``queue_messages/`` (SPEC §3.4): the message as it sits in a queue."""

QUEUE_MESSAGES_PARTITION = "status"
"""``queue_messages`` is partitioned by status so the job reads only PENDING files."""

PENDING, ACKED, DEAD_LETTERED, EXPIRED, MOVED, DROPPED = (
    "PENDING",
    "ACKED",
    "DEAD_LETTERED",
    "EXPIRED",
    "MOVED",
    "DROPPED",
)
STATUSES = (PENDING, ACKED, DEAD_LETTERED, EXPIRED, MOVED, DROPPED)
"""A queue row's ``status`` (SPEC §3.4): PENDING until an event ends the message there
(MOVED: left by MOVE or RETRY; DROPPED: nowhere to go). The journal's events that end
a message share these names (:mod:`routing.plan.journal`)."""

JOURNAL = pa.schema(
    [
        ("at", TIMESTAMP),
        ("queue", pa.string()),
        ("message_id", pa.int64()),
        ("event", pa.string()),
        ("delivery_count", pa.int32()),
        ("detail", STRING_MAP),
    ]
)
"""A row of ``journal/`` (SPEC §3.5)."""

REJECTED = pa.schema(
    [
        ("source", pa.string()),
        ("row", pa.string()),
        ("reason", pa.string()),
        ("at", TIMESTAMP),
    ]
)
"""A row of ``rejected/`` (SPEC §3.5)."""


PRODUCER_ID = pa.schema([("message_id", pa.int64()), ("batch_id", pa.int64())])
"""A row of ``_state/producer_ids/``: a producer id the job accepted, and in which batch.

SPEC §3.1 makes a producer's ``message_id`` unique in the lake; this table is how a
later micro-batch knows an id was taken by an earlier one.
"""


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow table schema."""
    return from_arrow_schema(schema)
