"""Input rows of a micro-batch: producer messages, deliveries, management rows.

Every input row ends up routed, applied or rejected (SPEC §3.5): this module splits
the rows read by :mod:`routing.io.lake_events` into the valid ones of each kind and
``rejected`` rows with a reason. A row the job wrote itself (a copy, recognised by
its id, SPEC §5.6) was routed when it was made and is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from routing.broker.config import ROUTING_TYPES
from routing.broker.ids import COPY_ID_BASE, DEAD_LETTER
from routing.broker.layout import ADDRESSES, DELIVERIES, MANAGEMENT
from routing.broker.topology import MESSAGE_RANK
from routing.plan import journal, schemas
from routing.plan._columns import (
    broadcasts_by_size,
    is_in,
    literal_map,
    local_frame,
    union_of,
)
from routing.plan.breadcrumbs import ORIG_MESSAGE_ID, ORIG_QUEUE
from routing.plan.deliveries import (
    BY_FILTER,
    DELIVERY_KIND,
    EVENT_ORDER,
    KIND,
    MANAGEMENT_KIND,
    OP_MOVE,
    OPS,
    OUTCOMES,
    TO_QUEUE,
)
from routing.plan.id_ranges import IdRanges
from routing.plan.ids import copy_id
from routing.plan.router import entering
from routing.plan.scratch import Scratch

REASON, OWN, ROW_JSON = "_reason", "_own", "_row"
CLASSIFIED = (REASON, OWN, ROW_JSON)
"""What :func:`classify` adds to every input row: why it is rejected (null: valid),
whether it is the job's own copy read back, and its JSON for ``rejected.row``."""

BROADCAST_CLASHES = 10_000
"""Most duplicate producer ids a batch broadcasts back to its rows (:func:`classify`);
more are joined once, and the rows kept again."""


@dataclass
class Inputs:
    messages: DataFrame  # message rows entering routing (+ routing.plan.router.entering)
    by_id: DataFrame  # deliveries and management rows naming a message: fold events
    # (routing.plan.deliveries.EVENT_COLUMNS)
    by_filter: DataFrame  # management rows naming a filter (op, queue, filter, at, TO_QUEUE,
    # EVENT_ORDER): expanded to fold events by engine.expand_by_filter
    refused: DataFrame  # the rows a check refused, with their REASON and ROW_JSON

    @cached_property
    def rejected(self) -> DataFrame:
        """The refused rows as ``rejected`` rows. Planned when asked: a batch that refuses
        no row never asks, and saves the analysis of a DataFrame it would not write."""
        return journal.rejected_rows(
            self.refused,
            source=F.col("source"),
            row=F.col(ROW_JSON),
            reason=F.col(REASON),
            at=F.coalesce("sent_at", "at"),
        )


def _first(*checks: tuple[Column, Column | str]) -> Column:
    """The first failing check's reason (null when every check passes)."""
    out = F.lit(None).cast("string")
    for failed, reason in reversed(checks):
        out = F.when(failed, reason if isinstance(reason, Column) else F.lit(reason)).otherwise(out)
    return out


def _null(name: str) -> tuple[Column, str]:
    return F.col(name).isNull(), f"{name} is null"


def _quoted(name: str) -> Column:
    return F.concat(F.lit("'"), F.col(name), F.lit("'"))


# Column builders without arguments are cached: a Column is an expression of the gateway's
# one JVM, not of a session or a batch, and building these again was about 300 py4j calls
# a batch (as normalise caches its projections).


@cache
def is_message_row() -> Column:
    """The input row is a message row: of an ``addresses/*`` table."""
    return F.col("source").startswith(f"{ADDRESSES}/")


@cache
def to_route() -> Column:
    """A classified row is a producer's message to route: valid, not the job's own copy."""
    return is_message_row() & F.col(REASON).isNull() & ~F.col(OWN)


@cache
def own_copy() -> Column:
    """True for a row the job wrote: its id is the copy id of the hop its breadcrumbs name,
    or, for a message send-to-dla-on-no-route sent on to its dead-letter address, the id
    of the message itself (a dead letter without ``_AMQ_ORIG_QUEUE``, SPEC §5.2 step 4)."""
    props = F.col("properties")
    parent = props.getItem(ORIG_MESSAGE_ID).try_cast("long")
    left = props.getItem(ORIG_QUEUE)
    expected = copy_id(parent, F.col("copy_reason"), left, F.col("address"), F.col("to_queue"))
    itself = (F.col("copy_reason") == DEAD_LETTER) & left.isNull() & (F.col("message_id") == parent)
    return F.coalesce(
        F.col("copy_reason").isNotNull() & ((F.col("message_id") == expected) | itself),
        F.lit(False),
    )


def order_columns() -> list[Column]:
    """An input row's position as an event's (:data:`routing.plan.deliveries.EVENT_ORDER`)."""
    position = ("source", "version", "file", "row")
    return [F.col(c).alias(o) for c, o in zip(position, EVENT_ORDER, strict=True)]


def classify(
    events: DataFrame,
    queues: Iterable[str],
    scratch: Scratch,
    taken: DataFrame | None = None,
    exists: Callable[[Column, Column, Column], Column] | None = None,
    *,
    taken_by_id: bool = False,
) -> DataFrame:
    """Every input row with :data:`CLASSIFIED`, checkpointed (and the batch's few
    duplicate ids, if any, joined on top): ``_reason`` (why it is rejected, null if valid),
    ``_own`` (the job's own copy read back) and ``_row`` (its JSON for ``rejected``).

    ``taken`` holds the producer ids earlier batches accepted (``message_id``): a row
    reusing one is a duplicate. ``taken_by_id``: ``taken`` is read from files, and
    only those that may hold the batch's ids are read (:class:`IdRanges`; one more action).
    Management filters are checked afterwards
    (:func:`split`): which ones parse is known only once the batch's filters are read.
    ``exists(name, at, rank)`` says whether a queue exists for a row at ``at`` of
    ``rank`` (deliveries, then management rows, SPEC §5.4): an auto-created queue only
    does once created (:func:`routing.plan.facts.exists_at`); without ``exists``,
    every queue of ``queues`` always does.
    """
    known = sorted(set(queues))
    if exists is None:

        def exists(name: Column, _at: Column, _rank: Column) -> Column:
            return is_in(name, known)

    is_message = is_message_row()
    classified = (
        events.withColumn(OWN, is_message & own_copy())
        .withColumn(
            REASON,
            F.when(is_message & ~F.col(OWN), _message_reason()).otherwise(_event_reason(exists)),
        )
        .withColumn(ROW_JSON, _row_json())
    )
    return _reject_duplicates(scratch.keep(classified), scratch, taken, taken_by_id)


def reclassify(
    classified: DataFrame, rows: Column, exists: Callable[[Column, Column, Column], Column]
) -> DataFrame:
    """``classified`` with its delivery and management ``rows`` checked again, ``exists``
    saying which queues exist (as :func:`classify` takes it): a plan corrects the rows that
    named a queue it took for one that exists (:mod:`routing.plan.engine`)."""
    again = rows & ~is_message_row()
    return classified.withColumn(
        REASON, F.when(again, _event_reason(exists)).otherwise(F.col(REASON))
    ).withColumn(ROW_JSON, F.when(again, _row_json()).otherwise(F.col(ROW_JSON)))


def _event_reason(exists: Callable[[Column, Column, Column], Column]) -> Column:
    """Why a delivery or management row is rejected (null: valid; a message row: null)."""
    rank = _event_rank()
    queue_known = exists(F.col("queue"), F.col("at"), rank)
    to_queue_known = exists(F.col("to_queue"), F.col("at"), rank)
    return F.when(F.col("source") == DELIVERIES, _delivery_reason(queue_known)).when(
        ~is_message_row(), _management_reason(queue_known, to_queue_known)
    )


@cache
def _row_json() -> Column:
    """A row's JSON for ``rejected.row``, once ``_reason`` is set."""
    rejected = F.col(REASON).isNotNull()
    return F.coalesce(
        F.col("raw"),
        # only a row rejected here reads its JSON (one rejected later, when it meets the
        # queue state, is written by deliveries.event_row); a management row's filter is
        # checked afterwards (split), so its JSON is always made
        F.when(is_message_row(), F.when(rejected, journal.message_json()))
        .when(F.col("source") == DELIVERIES, F.when(rejected, _json(schemas.DELIVERY)))
        .otherwise(_json(schemas.MANAGEMENT)),
    )


@cache
def _event_rank() -> Column:
    """An event's rank at its instant (SPEC §5.4): deliveries, then management rows."""
    return F.when(F.col("source") == DELIVERIES, F.lit(DELIVERY_KIND)).otherwise(
        F.lit(MANAGEMENT_KIND)
    )


def queues_seen_differently(
    before: Callable[[Column, Column, Column], Column],
    after: Callable[[Column, Column, Column], Column],
    columns: Iterable[str] = ("queue", "to_queue"),
) -> Column:
    """The event rows of :func:`classify` whose ``queue`` or ``to_queue`` (of ``columns``)
    exists under ``before`` but not under ``after``, or the other way round (``exists``
    functions as :func:`classify` takes): the rows whose check would change."""
    rank = _event_rank()
    differ = F.lit(False)
    for name in map(F.col, columns):
        differ = differ | ~before(name, F.col("at"), rank).eqNullSafe(
            after(name, F.col("at"), rank)
        )
    return ~is_message_row() & differ


def split(classified: DataFrame, bad_filters: Mapping[str, str]) -> Inputs:
    """The valid rows of each kind, and the refused ones (cheap selections; their
    ``rejected`` rows are planned when asked: :attr:`Inputs.rejected`)."""
    is_message = is_message_row()
    is_management = F.col("source") == MANAGEMENT
    bad_filter = literal_map(bad_filters)[F.col("filter")]
    reason = F.coalesce(
        F.col(REASON),
        F.when(
            is_management & bad_filter.isNotNull(),
            F.concat(F.lit("filter does not parse: "), bad_filter),
        ),
    )
    rows = classified.withColumn(REASON, reason)
    valid = F.col(REASON).isNull() & ~F.col(OWN)
    messages = rows.where(is_message & valid).select(
        *schemas.MESSAGE.names, *entering(F.col("source"), rank=F.lit(MESSAGE_RANK), producer=True)
    )
    # deliveries and management rows naming a message in one read of the kept rows, which
    # deserializes every row whatever it keeps (a delivery always names its message)
    by_id = rows.where(valid & ~is_message & F.col("message_id").isNotNull())
    return Inputs(
        messages=messages,
        by_id=_events(by_id),
        by_filter=rows.where(is_management & valid & F.col("message_id").isNull()).select(
            "op",
            "queue",
            "filter",
            F.col("to_queue").alias(TO_QUEUE),
            "at",
            *order_columns(),
        ),
        refused=rows.where(F.col(REASON).isNotNull()),
    )


def _json(schema) -> Column:
    return F.to_json(F.struct(*[F.col(c) for c in schema.names]))


@cache
def _message_reason() -> Column:
    return _first(
        (F.col("error").isNotNull(), F.col("error")),
        _null("message_id"),
        _null("address"),
        _null("sent_at"),
        (F.col("copy_reason").isNotNull(), "copy_reason is set: a producer's row leaves it null"),
        (F.col("to_queue").isNotNull(), "to_queue is set: only MOVE and RETRY copies carry it"),
        (
            (F.col("message_id") < 0) | (F.col("message_id") >= COPY_ID_BASE),
            F.concat(
                F.lit("message_id "),
                F.col("message_id").cast("string"),
                F.lit(f" is outside [0, 2^62): ids from {COPY_ID_BASE} up are the broker's copies"),
            ),
        ),
        (
            F.col("routing_type").isNotNull() & ~F.col("routing_type").isin(*ROUTING_TYPES),
            F.concat(
                F.lit("unknown routing_type "),
                _quoted("routing_type"),
                F.lit("; expected ANYCAST, MULTICAST or null"),
            ),
        ),
        (
            F.col("priority").isNotNull() & ~F.col("priority").between(0, 9),
            F.concat(F.lit("priority "), F.col("priority").cast("string"), F.lit(" is not in 0-9")),
        ),
    )


def _delivery_reason(queue_known: Column) -> Column:
    return _first(
        (F.col("error").isNotNull(), F.col("error")),
        _null("queue"),
        _null("message_id"),
        _null("outcome"),
        _null("at"),
        (
            ~F.col("outcome").isin(*OUTCOMES),
            F.concat(
                F.lit("unknown outcome "), _quoted("outcome"), F.lit("; expected ACK or ROLLBACK")
            ),
        ),
        (~queue_known, F.concat(F.lit("unknown queue "), _quoted("queue"))),
    )


def _management_reason(queue_known: Column, to_queue_known: Column) -> Column:
    return _first(
        (F.col("error").isNotNull(), F.col("error")),
        _null("op"),
        _null("queue"),
        _null("at"),
        (
            ~F.col("op").isin(*OPS),
            F.concat(
                F.lit("unknown op "), _quoted("op"), F.lit("; expected MOVE, RETRY or SEND_TO_DLA")
            ),
        ),
        (~queue_known, F.concat(F.lit("unknown queue "), _quoted("queue"))),
        ((F.col("op") == OP_MOVE) & F.col("to_queue").isNull(), "MOVE needs to_queue"),
        (
            (F.col("op") == OP_MOVE) & ~to_queue_known,
            F.concat(F.lit("to_queue "), _quoted("to_queue"), F.lit(" does not exist")),
        ),
        ((F.col("op") != OP_MOVE) & F.col("to_queue").isNotNull(), "to_queue is only for MOVE"),
        (
            F.col("message_id").isNotNull() & F.col("filter").isNotNull(),
            "give message_id or filter, not both",
        ),
    )


def _reject_duplicates(
    rows: DataFrame, scratch: Scratch, taken: DataFrame | None = None, taken_by_id: bool = False
) -> DataFrame:
    """A producer id is used once in the lake (SPEC §3.1): a row reusing an id an earlier
    batch accepted is rejected, and so are all but the first row of an id used twice in
    this batch: the earliest sent (``sent_at``; a tie goes to the table first by name,
    then the earlier input position). The input stream cuts its batches by event time,
    so that is the row an earlier batch would have accepted: the outcome is the same
    whatever the batches' sizes (SPEC §5.6).

    Found on the ids of the kept ``rows`` alone, not on a second read of the input: first
    the ids reused (:func:`_reused`, counts only, a hash aggregate), usually none, and the
    rows stay as kept. Only for ids found is their first use looked for (the least
    ``order``: a struct holding strings, which Spark aggregates by sorting). A few are
    collected and broadcast back to the rows (every later read joins them; the rows are
    never shuffled for this); more (a log appended twice) are joined once and the rows
    kept again.
    """
    order = F.struct("sent_at", "source", "version", "file", "row")
    ids = rows.where(to_route()).select("message_id", order.alias("_order"))
    if taken is not None and taken_by_id:
        named = ids.agg(*IdRanges.aggregates(F.col("message_id"), "ids")).collect()[0]
        taken = taken.where(IdRanges.of(named, "ids").holds(F.col("message_id")))
    reused = _reused(ids.select("message_id"), taken)
    few = reused.limit(BROADCAST_CLASHES + 1).collect()
    if not few:
        return rows
    many = len(few) > BROADCAST_CLASHES
    if not many:
        reused = F.broadcast(local_frame(rows.sparkSession, few, reused.schema))
    clashes = (
        ids.join(reused, "message_id")
        .groupBy("message_id")
        .agg(F.min("_order").alias("_first"), F.max("_taken").alias("_taken"))
    )
    if not many:
        clashes = F.broadcast(local_frame(rows.sparkSession, clashes.collect(), clashes.schema))
    # an id taken is rejected at every use; an id used twice here, at all but its first
    duplicate = to_route() & (F.col("_taken") | (order != F.col("_first")))
    checked = (
        rows.join(clashes, "message_id", "left")
        .withColumn("_duplicate", F.coalesce(duplicate, F.lit(False)))
        .withColumn(
            REASON,
            F.when(
                F.col("_duplicate"),
                F.concat(F.lit("duplicate message_id "), F.col("message_id").cast("string")),
            ).otherwise(F.col(REASON)),
        )
        .withColumn(ROW_JSON, F.when(F.col("_duplicate"), _row_json()).otherwise(F.col(ROW_JSON)))
        .select(*rows.columns)
    )
    return scratch.keep(checked) if many else checked


def _reused(ids: DataFrame, taken: DataFrame | None) -> DataFrame:
    """The batch's ``ids`` (``message_id``) used twice in it or ``taken`` by an earlier
    batch: ``message_id``, ``_taken``.

    The ids ``taken`` are the join's streamed side and the batch's its hashed one:
    ``taken`` grows with every batch, and hashed (a shuffled hash join, which cannot spill)
    its 9M ids of a 10M-message replay overflowed the 2 GiB heap.
    """
    found = [
        ids.groupBy("message_id")
        .agg(F.count(F.lit(1)).alias("_uses"))
        .where(F.col("_uses") > 1)
        .select("message_id", F.lit(False).alias("_taken"))
    ]
    if taken is not None:
        if not broadcasts_by_size(ids.sparkSession):
            ids = F.broadcast(ids)  # a small batch's, hashed whatever its estimate
        found.append(
            taken.select("message_id")
            .join(ids, "message_id", "left_semi")
            .distinct()
            .select("message_id", F.lit(True).alias("_taken"))
        )
    return union_of(found).groupBy("message_id").agg(F.max("_taken").alias("_taken"))


def _events(rows: DataFrame) -> DataFrame:
    """Valid delivery and management rows as fold events."""
    return rows.select(
        "queue",
        "message_id",
        "at",
        _event_rank().alias(KIND),
        "outcome",
        "op",
        F.col("to_queue").alias(TO_QUEUE),
        F.lit(False).alias(BY_FILTER),
        *order_columns(),
    )
