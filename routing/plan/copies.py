"""Making copies: the one function behind divert, dead-letter, expiry, MOVE and RETRY copies.

Follows Artemis's ``DivertImpl`` and ``QueueImpl.makeCopy``/``move`` with the SPEC's
breadcrumb history (§5.4–§5.6):

- a new ``message_id`` from :func:`routing.plan.ids.copy_id` (parent id + hop);
- the breadcrumb map and its types rebuilt by the one vectorized UDF
  (:func:`routing.plan.breadcrumbs.rebuild_typed_breadcrumbs`), ``_AMQ_ORIG_QUEUE`` = the
  queue or divert left (none for send-to-dla-on-no-route);
- diverts keep the expiration and set the routing type per ``routing-type``;
  every other copy clears the expiration and takes as routing type the
  ``_AMQ_ORIG_ROUTING_TYPE`` of the message it copies (null when it has none);
- ``sent_at`` is when the copy was made;
- ``property_types`` are the parent's, the breadcrumbs typed (SPEC §3.1):
  :func:`routing.plan.breadcrumbs.breadcrumb_types_py` says how.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from routing.broker.config import ROUTING_TYPES
from routing.broker.properties import LONG
from routing.plan import schemas
from routing.plan.breadcrumbs import ORIG_ROUTING_TYPE, rebuild_typed_breadcrumbs
from routing.plan.ids import copy_id

ACTUAL_EXPIRY = "_AMQ_ACTUAL_EXPIRY"
# the copy's properties and their types (rebuilt together, then as the copy keeps them),
# made first
_REBUILT, _PROPERTIES, _TYPES = "_rebuilt", "_properties", "_types"


def valid_routing_type(value: Column) -> Column:
    """``value`` if it is ANYCAST or MULTICAST, else null."""
    return F.when(value.isin(*ROUTING_TYPES), value)


def original_routing_type() -> Column:
    """Routing type of a dead-letter/expiry/move/retry copy (Artemis ``QueueImpl.move``)."""
    return valid_routing_type(F.col("properties")[ORIG_ROUTING_TYPE])


def make_copies(
    reason: Column,
    left: Column,
    target_address: Column,
    at: Column,
    *,
    target_queue: Column | None = None,
    routing_type: Column | None = None,
    keep_expiration: bool = False,
    keep_id: bool = False,
    actual_expiry: Column | None = None,
) -> Callable[[DataFrame], DataFrame]:
    """Replace each row's message columns by those of its copy; other columns stay.

    :param reason: ``copy_reason`` (:data:`routing.broker.ids.COPY_REASONS`).
    :param left: the queue or divert the parent left (null: no ``_AMQ_ORIG_QUEUE``).
    :param target_address: the address the copy is sent to.
    :param at: when the copy is made (its ``sent_at``).
    :param target_queue: MOVE and RETRY: the one queue it goes to (``to_queue``).
    :param routing_type: the copy's routing type; default :func:`original_routing_type`.
    :param keep_expiration: diverts keep the parent's expiration; other copies clear it.
    :param keep_id: the message itself, not a copy, goes on (send-to-dla-on-no-route,
        Artemis's ``PostOfficeImpl.maybeSendToDLA``): it keeps its ``message_id``.
    :param actual_expiry: an expiry copy's ``_AMQ_ACTUAL_EXPIRY``, epoch ms (a ``long``
        property; null: not an expiry copy).

    Example::

        dead = rows.transform(make_copies(F.lit("DEAD_LETTER"), F.col("queue"),
                                          F.col("dead_letter_address"), F.col("at")))
    """
    queue = target_queue if target_queue is not None else F.lit(None).cast("string")
    # the columns are built once, here: a transform kept by its caller (the router keeps
    # its own) is applied pass after pass without rebuilding them (py4j calls)
    typed_copy = rebuild_typed_breadcrumbs(
        F.col("properties"),
        F.col("property_types"),
        F.col("address"),
        left,
        F.col("message_id"),
        F.col("routing_type"),
    )
    rebuilt = F.col(_REBUILT)
    properties, types = rebuilt["properties"], rebuilt["property_types"]
    if actual_expiry is not None:
        # a message expiring a second time replaces its _AMQ_ACTUAL_EXPIRY
        properties = F.when(
            actual_expiry.isNotNull(),
            F.map_concat(
                F.map_filter(properties, lambda k, _: k != F.lit(ACTUAL_EXPIRY)),
                F.create_map(F.lit(ACTUAL_EXPIRY), actual_expiry.cast("string")),
            ),
        ).otherwise(properties)
        types = F.when(
            actual_expiry.isNotNull(),
            F.map_concat(
                F.map_filter(types, lambda k, _: k != F.lit(ACTUAL_EXPIRY)),
                F.create_map(F.lit(ACTUAL_EXPIRY), F.lit(LONG)),
            ),
        ).otherwise(types)
    new = {
        "message_id": F.col("message_id")
        if keep_id
        else copy_id(F.col("message_id"), reason, left, target_address, queue),
        "address": target_address,
        "routing_type": routing_type if routing_type is not None else original_routing_type(),
        "sent_at": at,
        "expiration": F.col("expiration") if keep_expiration else F.lit(None).cast("timestamp"),
        "properties": F.col(_PROPERTIES),
        "property_types": F.col(_TYPES),
        "copy_reason": reason,
        "to_queue": queue,
    }
    message = [new[c].alias(c) if c in new else F.col(c) for c in schemas.MESSAGE.names]

    def transform(rows: DataFrame) -> DataFrame:
        # the rebuilt maps are computed from the parent's columns before the copy's columns
        # are named: in the select that names them, "properties" and "routing_type" would
        # be the copy's (Spark resolves a name to an alias made earlier in the same select
        # list, in a lambda at least)
        others = [c for c in rows.columns if c not in schemas.MESSAGE.names]
        rebuilt = rows.withColumn(_REBUILT, typed_copy)
        return rebuilt.withColumns({_PROPERTIES: properties, _TYPES: types}).select(
            *message, *others
        )

    return transform
