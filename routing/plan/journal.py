"""Rows of ``journal/`` and ``rejected/`` (SPEC §3.5), built the same way everywhere.

Journal events: ROUTED, REDELIVERY_SCHEDULED, ACKED, DEAD_LETTERED, EXPIRED, MOVED,
RETRIED, DROPPED. ``detail`` carries what a reader needs to follow the message
(``address``, ``to_address``, ``to_queue``, ``copy_id``, ``reason``, ``redeliver_at``);
entries whose value is null are left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from routing.plan import schemas
from routing.plan._columns import chosen_values

ROUTED = "ROUTED"
REDELIVERY_SCHEDULED = "REDELIVERY_SCHEDULED"
ACKED = "ACKED"
DEAD_LETTERED = "DEAD_LETTERED"
EXPIRED = "EXPIRED"
MOVED = "MOVED"
RETRIED = "RETRIED"
DROPPED = "DROPPED"

# DEAD_LETTERED reasons besides NO_ROUTE (SPEC §5.3, §5.4)
MAX_DELIVERY_ATTEMPTS = "MAX_DELIVERY_ATTEMPTS"
SEND_TO_DLA = "SEND_TO_DLA"  # an operator's management row of that op

# DROPPED reasons (SPEC §5.2, §5.4)
NO_ROUTE = "NO_ROUTE"
NO_DLA = "NO_DLA"
DLA_NO_BINDINGS = "DLA_NO_BINDINGS"
NO_EXPIRY_ADDRESS = "NO_EXPIRY_ADDRESS"
EXPIRY_NO_BINDINGS = "EXPIRY_NO_BINDINGS"


def detail(entries: Mapping[str, Column]) -> Column:
    """A ``map<string,string>`` of the non-null entries."""
    if not entries:
        return F.create_map().cast("map<string,string>")
    pairs = []
    for key, value in entries.items():
        text = value.cast("string")
        pairs.append((text.isNotNull(), F.struct(F.lit(key).alias("key"), text.alias("value"))))
    return F.map_from_entries(chosen_values(pairs, "struct<key:string,value:string>"))


def journal_columns(
    *,
    at: Column,
    queue: Column,
    event: Column | str,
    delivery_count: Column,
    details: Mapping[str, Column] | None = None,
) -> list[Column]:
    """The columns of a journal row, to select from rows whose ``message_id`` it records
    (built once by a caller that journals pass after pass: each build is py4j calls)."""
    return [
        at.cast("timestamp").alias("at"),
        queue.cast("string").alias("queue"),
        F.col("message_id").cast("long").alias("message_id"),
        (F.lit(event) if isinstance(event, str) else event).alias("event"),
        delivery_count.cast("int").alias("delivery_count"),
        detail(details or {}).alias("detail"),
    ]


def journal_rows(
    rows: DataFrame,
    *,
    at: Column,
    queue: Column,
    event: Column | str,
    delivery_count: Column,
    details: Mapping[str, Column] | None = None,
) -> DataFrame:
    """One journal row per row of ``rows`` (whose ``message_id`` it records)."""
    return rows.select(
        *journal_columns(
            at=at, queue=queue, event=event, delivery_count=delivery_count, details=details
        )
    )


def routed_columns() -> list[Column]:
    """The ROUTED journal row of a queue entry (``routed_at``, ``queue``, message columns)."""
    return journal_columns(
        at=F.col("routed_at"),
        queue=F.col("queue"),
        event=ROUTED,
        delivery_count=F.lit(0),
        details={"address": F.col("address"), "copy_reason": F.col("copy_reason")},
    )


def message_json() -> Column:
    """A message row as JSON (binary body as base64), for ``rejected.row``."""
    return F.to_json(F.struct(*[F.col(c) for c in schemas.MESSAGE.names]))


def rejected_rows(
    rows: DataFrame, *, source: Column, row: Column, reason: Column, at: Column
) -> DataFrame:
    """One ``rejected`` row per row of ``rows``."""
    return rows.select(
        source.cast("string").alias("source"),
        row.cast("string").alias("row"),
        reason.cast("string").alias("reason"),
        at.cast("timestamp").alias("at"),
    )
