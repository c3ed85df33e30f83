"""Applying events to queued messages: deliveries, management, expiry (SPEC §5.3, §5.4).

Each (queue, message) takes its events in ``(at, kind, input order)`` order, kind
being expiry < delivery < management (SPEC §5.4: at the same instant an ACK finds
the message already expired):

- ROLLBACK adds one to ``delivery_count``; when ``max-delivery-attempts`` > 0 and
  the count reaches it the message is dead-lettered, otherwise a redelivery is
  scheduled at ``at + min(max-redelivery-delay, delay * multiplier^(count-1))``
  (Artemis ``QueueImpl.calculateRedeliveryDelay``);
- ACK adds one and ends the message; an expiry, MOVE, RETRY or SEND_TO_DLA ends it;
- a message scheduled for redelivery is in its queue but no consumer receives it: a
  delivery before its ``redeliver_at``, or a MOVE or SEND_TO_DLA naming it by id then,
  is rejected (by filter, a RETRY, an expiry take it);
- the first ending event is the last one applied; events after it, or before the
  message entered the queue, are rejected (management rows expanded from a filter
  and expiries are skipped instead: they never named that message).

The fold reads only the few columns of a queue row that events change or look at
(:func:`fold_state`), never the message itself: the rows it joins, sorts and windows
stay narrow however large the properties and bodies are. Its results are narrow
too: the new state of each changed row (:attr:`Folded.updated`) and the moves that
make copies (:attr:`Folded.moves`); :func:`copies_of` joins the few moved messages
back to their rows to copy them (SPEC §5.4) through
:func:`routing.plan.copies.make_copies`.

The running figures of each message's events in order (position, delivery count, the
first ending event, the last applied one) come from one vectorized pass over the events
sorted by key and order (:mod:`routing.plan.sequences`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from routing.broker.ids import DEAD_LETTER, EXPIRY, MOVE, RETRY
from routing.broker.layout import DELIVERIES
from routing.plan import journal, schemas, sequences
from routing.plan._columns import is_in, literal_map
from routing.plan.breadcrumbs import ORIG_ADDRESS, ORIG_QUEUE
from routing.plan.copies import make_copies
from routing.plan.facts import moment
from routing.plan.ids import copy_id
from routing.plan.router import entering
from routing.plan.scratch import Scratch
from routing.plan.sequences import in_order

EXPIRE_KIND, DELIVERY_KIND, MANAGEMENT_KIND = 1, 2, 3
ACK, ROLLBACK = "ACK", "ROLLBACK"
OUTCOMES = (ACK, ROLLBACK)
"""A delivery's ``outcome`` (SPEC §3.2)."""
OP_MOVE, OP_RETRY, OP_SEND_TO_DLA = "MOVE", "RETRY", "SEND_TO_DLA"
OPS = (OP_MOVE, OP_RETRY, OP_SEND_TO_DLA)
"""A management row's ``op`` (SPEC §3.3)."""
KEY = ("queue", "message_id")

KIND = "_kind"
"""An event's kind (``*_KIND``), which is its rank at its instant."""
TO_QUEUE = "_to_queue"
"""A MOVE's destination queue (the management row's ``to_queue``)."""
BY_FILTER = "_by_filter"
"""The event is a management row's expanded from its filter: it never named the message,
so where it does not apply it is skipped, not rejected."""
O_SOURCE, O_VERSION, O_FILE, O_ROW = "_o_source", "_o_version", "_o_file", "_o_row"

EVENT_WHAT = ("outcome", "op", TO_QUEUE)
"""What an event does: a delivery's outcome, a management row's op and MOVE target."""
EVENT_ORDER = (O_SOURCE, O_VERSION, O_FILE, O_ROW)
"""Where an event was read: source table, version, file, row (``_o_*``)."""
ORDER = ("at", KIND, *EVENT_ORDER)
"""The order of a (queue, message)'s events (SPEC §5.4)."""
EVENT_COLUMNS = (*KEY, "at", KIND, *EVENT_WHAT, BY_FILTER, *EVENT_ORDER)
"""Columns of the events the fold takes (deliveries, management rows, expiries), whoever
makes them (:mod:`routing.plan.inputs`, :mod:`routing.plan.engine`). Events stay narrow:
the input row of an event that is rejected is rebuilt from these columns
(:func:`event_row`)."""

CHANGED = ("status", "delivery_count", "redeliver_at", "status_at")
"""The queue-row columns an event changes."""

STATE_COLUMNS = (*KEY, "delivery_count", "redeliver_at", "routed_at", "status_at")
_REDELIVERY = ("redelivery_delay", "redelivery_delay_multiplier", "max_redelivery_delay")
"""The queue's settings the redelivery times are computed from (in :mod:`sequences`)."""
"""What the fold reads of a queue row, besides the breadcrumbs a RETRY goes back to."""
RETRY_QUEUE, RETRY_ADDRESS = "_orig_queue", "_orig_address"
"""Where a RETRY sends the message back: the ``_AMQ_ORIG_QUEUE`` (``_AMQ_ORIG_ADDRESS``)
it carries. :func:`fold_state` is STATE_COLUMNS and these."""

END, TARGET, TARGET_QUEUE = "_end", "_target", "_target_queue"
MOVE_COLUMNS = (*KEY, "at", KIND, END, TARGET, TARGET_QUEUE)
"""A move: the message leaving ``queue`` at ``at`` for ``_target`` (``_target_queue``),
made by an event of ``_kind``; ``_end`` is the copy's reason."""


@dataclass
class Folded:
    updated: DataFrame  # new state of every changed row: KEY + CHANGED
    journal: DataFrame
    rejected: DataFrame
    moves: DataFrame  # MOVE_COLUMNS: the messages to copy (copies_of)
    unmatched: DataFrame  # events naming no message in play (EVENT_COLUMNS)
    decided: DataFrame  # every event with the facts it saw and its ending (checkpointed)


def fold_state(queue_rows: DataFrame) -> DataFrame:
    """The narrow view of PENDING queue rows that :func:`fold` joins events to.

    Example::

        folded = fold(events, fold_state(pending), facts, queue_addresses, scratch)
    """
    props = F.col("properties")
    return queue_rows.select(
        *STATE_COLUMNS,
        props.getItem(ORIG_QUEUE).alias(RETRY_QUEUE),
        props.getItem(ORIG_ADDRESS).alias(RETRY_ADDRESS),
    )


def no_pending_message() -> Column:
    """Why an event naming no PENDING message is rejected.

    One wording whether the message ended earlier in the same micro-batch or in an
    earlier one, so ``rejected`` does not depend on where batches are cut.
    """
    return F.concat(
        F.lit("no PENDING message "),
        F.col("message_id").cast("string"),
        F.lit(" in queue "),
        F.col("queue"),
    )


def retry_target_ok(bound: Column) -> Column:
    """RETRY needs an ``_AMQ_ORIG_ADDRESS`` and an ``_AMQ_ORIG_QUEUE`` naming a binding of
    the broker at the event's time (``bound``, over ``_orig_queue`` and ``at``): a queue
    that exists, or a divert, on whatever address (Artemis's ``QueueImpl.retryMessages``
    looks the name up with ``PostOffice.getBinding``, among all bindings)."""
    return F.coalesce(F.col(RETRY_ADDRESS).isNotNull() & bound, F.lit(False))


def retry_queue(queue_addresses: Mapping[str, str]) -> Column:
    """The queue a RETRY copy goes to, bypassing its filter (``to_queue``): the queue its
    ``_AMQ_ORIG_QUEUE`` names, unless that is a divert or the address's own name: then
    none, and the copy is routed at its address like a new message (``retryMessages``
    routes to the queue's id only for a queue binding whose name is not the address's).
    A queue of another address takes nothing there (routing: no route)."""
    name = F.col(RETRY_QUEUE)
    is_queue = is_in(name, queue_addresses)
    return F.when(is_queue & (name != F.col(RETRY_ADDRESS)), name)


def fold(
    events: DataFrame,
    state: DataFrame,
    facts: DataFrame,
    queue_addresses: Mapping[str, str],
    scratch: Scratch,
    retry_target_bound: Column | None = None,
) -> Folded:
    """Apply ``events`` to the PENDING rows ``state`` of their (queue, message).

    :param events: :data:`EVENT_COLUMNS`.
    :param state: :func:`fold_state` of the PENDING queue rows in play.
    :param facts: :func:`routing.plan.facts.queue_facts`.
    :param queue_addresses: queue name -> address, for MOVE and RETRY targets.
    :param scratch: the one frame everything below reads is checkpointed there.
    :param retry_target_bound: ``_orig_queue`` names a binding at ``at``: a queue that
        exists then, or a divert (None: the queues of ``queue_addresses``, which always
        exist).
    """
    known = F.col("routed_at").isNotNull()
    is_op = F.col(KIND) == MANAGEMENT_KIND
    if retry_target_bound is None:
        retry_target_bound = is_in(F.col(RETRY_QUEUE), queue_addresses)
    valid = ~is_op | (F.col("op") != OP_RETRY) | retry_target_ok(retry_target_bound)
    early = F.col("at") < F.col("routed_at")
    quietly = F.col(BY_FILTER) | (F.col(KIND) == EXPIRE_KIND)
    refusal = F.when(
        known & ~valid,
        F.lit(
            "RETRY: the message has no _AMQ_ORIG_ADDRESS, or no _AMQ_ORIG_QUEUE naming "
            "an existing queue or divert"
        ),
    ).when(known & early, F.lit("the message was not yet in the queue at that time"))
    eligible = known & F.col("_refusal").isNull()

    rollback = eligible & (F.col(KIND) == DELIVERY_KIND) & (F.col("outcome") == ROLLBACK)
    ack = eligible & (F.col(KIND) == DELIVERY_KIND) & (F.col("outcome") == ACK)
    # a consumer, and a MOVE or SEND_TO_DLA naming the message by id, need it deliverable
    by_id_op = is_op & ~F.col(BY_FILTER) & F.col("op").isin(OP_MOVE, OP_SEND_TO_DLA)
    ready = eligible & ((F.col(KIND) == DELIVERY_KIND) | by_id_op)
    read = ["max_delivery_attempts", *_REDELIVERY]
    joined = (
        events.join(state, list(KEY), "left")
        .join(facts.select("queue", *read), "queue", "left")
        .withColumn("_refusal", refusal)
        .withColumns(
            {
                sequences.ELIGIBLE: eligible,
                sequences.ROLLBACK: rollback,
                sequences.ACK: ack,
                sequences.TERMINAL: eligible & (F.col(KIND) != DELIVERY_KIND),
                sequences.READY: ready,
            }
        )
    )
    rows = scratch.keep(
        in_order(joined, KEY, ORDER)
        .join(facts.drop(*read), "queue", "left")
        .transform(_with_ending(queue_addresses))
    )
    # Each output below reads the checkpointed rows once, whatever its kinds of row: a
    # million-message batch keeps millions of wide rows, and every read deserializes them all.
    refused = known & F.col("_refusal").isNotNull() & ~quietly
    waiting = F.col(sequences.WAITING)
    missed = F.col(sequences.ELIGIBLE) & ~F.col(sequences.APPLIED) & ~quietly
    rejected = rejected_events(
        rows.where(refused | missed),
        F.when(refused, F.col("_refusal"))
        .when(waiting, waits_for_redelivery())
        .otherwise(no_pending_message()),
    )
    applied = rows.where(F.col(sequences.APPLIED))
    # a ROLLBACK that does not end the message schedules its redelivery; the message's first
    # ending event (an ending event is never such a ROLLBACK) ends it, and a copy goes to
    # its target if it has one
    rescheduling = F.col(sequences.ROLLBACK) & ~F.col(sequences.ENDS)
    ending = F.col(sequences.POS) == F.col(sequences.FIRST_END)
    moving = ending & F.col(TARGET).isNotNull()
    journals = journal.journal_rows(
        applied.where(rescheduling | ending),
        at=F.col("at"),
        queue=F.col("queue"),
        event=F.when(rescheduling, F.lit(journal.REDELIVERY_SCHEDULED)).otherwise(
            F.col("_journal_event")
        ),
        delivery_count=F.col(sequences.COUNT),
        details={
            "redeliver_at": F.when(rescheduling, _iso(F.col(sequences.REDELIVER_AT))),
            "to_address": F.when(moving, F.col(TARGET)),
            "to_queue": F.when(moving, F.col(TARGET_QUEUE)),
            "copy_id": F.when(
                moving,
                copy_id(
                    F.col("message_id"),
                    F.col(END),
                    F.col("queue"),
                    F.col(TARGET),
                    F.col(TARGET_QUEUE),
                ),
            ),
            "reason": F.when(ending, F.col("_why")),
        },
    )
    updated = applied.where(F.col(sequences.POS) == F.col(sequences.LAST)).select(
        *KEY,
        F.when(F.col(sequences.ENDS), F.col("_end_status"))
        .otherwise(F.lit(schemas.PENDING))
        .alias("status"),
        F.col(sequences.COUNT).cast("int").alias("delivery_count"),
        F.col(sequences.REDELIVER_AT_AFTER).alias("redeliver_at"),
        F.greatest(F.col("status_at"), F.col("at")).alias("status_at"),
    )
    unmatched = rows.where(~known).select(*EVENT_COLUMNS)
    return Folded(
        updated,
        journals,
        rejected,
        applied.where(moving).select(*MOVE_COLUMNS),
        unmatched,
        rows,
    )


def copies_of(moves: DataFrame, in_play: DataFrame, source_of) -> DataFrame:
    """The copies the moves make (SPEC §5.4): each moved message, joined back to its queue
    row, copied to its target (+ the router's internal columns, ready to be routed).

    Moves are few next to the rows in play, so they are broadcast and the rows are not
    shuffled.

    :param moves: :attr:`Folded.moves`.
    :param in_play: the queue rows the fold's state came from (message columns + KEY).
    :param source_of: address Column -> table Column of the copies.
    """
    parents = in_play.select(*schemas.MESSAGE.names, "queue").join(F.broadcast(moves), list(KEY))
    return parents.transform(
        make_copies(
            F.col(END),
            F.col("queue"),
            F.col(TARGET),
            F.col("at"),
            target_queue=F.col(TARGET_QUEUE),
            actual_expiry=F.when(F.col(END) == EXPIRY, F.unix_millis("at")),
        )
    ).select(
        *schemas.MESSAGE.names,
        # a copy enters at its event's rank (SPEC §5.4)
        *entering(source_of(F.col("address")), rank=F.col(KIND), producer=False),
    )


def event_row() -> Column:
    """An event's input row as JSON (``rejected.row``), as :mod:`routing.plan.inputs` writes it:
    a delivery, or a management row naming a message (whose ``filter`` is null)."""
    delivery = F.to_json(F.struct("queue", "message_id", "outcome", "at"))
    management = F.to_json(
        F.struct(
            "op",
            "queue",
            "message_id",
            F.lit(None).cast("string").alias("filter"),
            F.col(TO_QUEUE).alias("to_queue"),
            "at",
        )
    )
    return F.when(F.col(O_SOURCE) == DELIVERIES, delivery).otherwise(management)


def rejected_events(rows: DataFrame, reason: Column) -> DataFrame:
    """``rejected`` rows of delivery and management events."""
    return journal.rejected_rows(
        rows, source=F.col(O_SOURCE), row=event_row(), reason=reason, at=F.col("at")
    )


def _iso(at: Column) -> Column:
    """A time as the journal's details write it (UTC, µs)."""
    return F.date_format(at, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")


def waits_for_redelivery() -> Column:
    """Why a delivery, or a MOVE or SEND_TO_DLA by id, of a message scheduled for
    redelivery is rejected (SPEC §5.3): no consumer receives it, Artemis's by-id
    operations do not see it."""
    return F.concat(
        F.lit("message "),
        F.col("message_id").cast("string"),
        F.lit(" in queue "),
        F.col("queue"),
        F.lit(" waits for its redelivery at "),
        _iso(F.col(sequences.WAITS_UNTIL)),
    )


def endings_seen_differently(
    dla_bound_since: Column,
    expiry_bound_since: Column,
    retry_target_exists: tuple[Column, Column] | None = None,
) -> Column:
    """The events of :attr:`Folded.decided` that would end differently had the auto-created
    queues been created at other moments: the dead-letter (expiry) address bound since
    ``dla_bound_since`` (``expiry_bound_since``) rather than the moment the fold saw, or a
    RETRY's target existing as the second of ``retry_target_exists`` says rather than as
    the first (the fold's own)."""
    differ = F.col(sequences.ENDS) & (
        ((F.col(END) == DEAD_LETTER) & ~_bound("dla").eqNullSafe(_bound("dla", dla_bound_since)))
        | (
            (F.col(END) == EXPIRY)
            & ~_bound("expiry").eqNullSafe(_bound("expiry", expiry_bound_since))
        )
    )
    if retry_target_exists is not None:
        saw, would = retry_target_exists
        is_retry = (F.col(KIND) == MANAGEMENT_KIND) & (F.col("op") == OP_RETRY)
        differ = differ | (is_retry & ~saw.eqNullSafe(would))
    return differ


def _bound(prefix: str, since: Column | None = None) -> Column:
    """The dead-letter (``dla``) or expiry (``expiry``) address has a binding when the event
    happens: from the start, or one the event creates itself (``<prefix>_has_bindings``),
    or one another address's dead letter (expiry) created by then (``<prefix>_bound_since``,
    a moment: :func:`routing.plan.facts.queue_facts`; ``since`` instead, if given). An
    event's kind is its rank at its instant."""
    since = F.col(f"{prefix}_bound_since") if since is None else since
    by_then = F.coalesce(moment(F.col("at"), F.col(KIND)) >= since, F.lit(False))
    return F.col(f"{prefix}_has_bindings") | by_then


def _with_ending(queue_addresses: Mapping[str, str]):
    """Columns saying what an ending event does (meaningful on rows where ``_ends``).

    ``_end`` ACK / DEAD_LETTER / EXPIRY / MOVE / RETRY; ``_target`` the address a copy
    goes to (null: no copy — ACK, or nowhere to go); ``_target_queue`` for MOVE/RETRY;
    ``_end_status`` the queue row's status; ``_journal_event``; ``_why`` the reason.
    """
    exhausted = F.col(sequences.ROLLBACK) & F.col(sequences.ENDS)
    end = (
        F.when(F.col(KIND) == EXPIRE_KIND, F.lit(EXPIRY))
        .when(
            F.col(KIND) == DELIVERY_KIND,
            F.when(exhausted, F.lit(DEAD_LETTER)).otherwise(F.lit(ACK)),
        )
        .when(F.col("op") == OP_MOVE, F.lit(MOVE))
        .when(F.col("op") == OP_RETRY, F.lit(RETRY))
        .otherwise(F.lit(DEAD_LETTER))
    )
    dla, expiry = F.col("dead_letter_address"), F.col("expiry_address")
    target = (
        F.when(F.col(END) == DEAD_LETTER, F.when(_bound("dla"), dla))
        .when(F.col(END) == EXPIRY, F.when(_bound("expiry"), expiry))
        .when(F.col(END) == MOVE, literal_map(queue_addresses)[F.col(TO_QUEUE)])
        .when(F.col(END) == RETRY, F.col(RETRY_ADDRESS))
    )
    target_queue = F.when(F.col(END) == MOVE, F.col(TO_QUEUE)).when(
        F.col(END) == RETRY, retry_queue(queue_addresses)
    )
    gone = F.col(TARGET).isNull()
    status = (
        F.when(F.col(END) == ACK, F.lit(schemas.ACKED))
        .when(F.col(END).isin(MOVE, RETRY), F.lit(schemas.MOVED))
        .when(gone, F.lit(schemas.DROPPED))
        .when(F.col(END) == EXPIRY, F.lit(schemas.EXPIRED))
        .otherwise(F.lit(schemas.DEAD_LETTERED))
    )
    event = (
        F.when(F.col(END) == ACK, F.lit(journal.ACKED))
        .when(F.col(END) == MOVE, F.lit(journal.MOVED))
        .when(F.col(END) == RETRY, F.lit(journal.RETRIED))
        .when(gone, F.lit(journal.DROPPED))
        .when(F.col(END) == EXPIRY, F.lit(journal.EXPIRED))
        .otherwise(F.lit(journal.DEAD_LETTERED))
    )
    why = (
        F.when((F.col(END) == DEAD_LETTER) & dla.isNull(), F.lit(journal.NO_DLA))
        .when((F.col(END) == DEAD_LETTER) & gone, F.lit(journal.DLA_NO_BINDINGS))
        .when((F.col(END) == EXPIRY) & expiry.isNull(), F.lit(journal.NO_EXPIRY_ADDRESS))
        .when((F.col(END) == EXPIRY) & gone, F.lit(journal.EXPIRY_NO_BINDINGS))
        .when(
            (F.col(END) == DEAD_LETTER) & (F.col("op") == OP_SEND_TO_DLA),
            F.lit(journal.SEND_TO_DLA),
        )
        .when(F.col(END) == DEAD_LETTER, F.lit(journal.MAX_DELIVERY_ATTEMPTS))
    )

    def transform(rows: DataFrame) -> DataFrame:
        # one projection a layer: each column of a layer reads only the layers before it
        return (
            rows.withColumn(END, end)
            .withColumns({TARGET: target, TARGET_QUEUE: target_queue})
            .withColumns({"_end_status": status, "_journal_event": event, "_why": why})
        )

    return transform
